"""NVIDIA AIPerf ``profile_export.jsonl``: one JSON record per request, read line by line.

A record is ``{"metadata": {...}, "metrics": {name: {"value", "unit"}}, "error": {...} | null}``
(0.8.0 adds ``schema_version: "1.1"``, ``metadata.credit_issued_ns`` and ``usage_*`` metrics).
Why the choices below:

* Units are given per value and are used, never assumed: a time metric in ``ns``/``us``/``ms``/``s``
  is scaled exactly (Decimal) to seconds; an unknown unit is a ParseError, not a guess.
* Only ``benchmark_phase == "profiling"`` records are the run. Warmup records are skipped, but they
  keep their place in ``idx``/``line`` numbering and their count is stated in the run's metadata
  (``skipped_records``) and the artefact note, so nothing disappears silently.
* Failed records carry only ``error_isl``: the prompt length that was sent, so it is the input
  token count of that request; every other value of a failed request is None (not zero).
* Token counts: ``input_sequence_length``/``output_sequence_length`` are AIPerf's own tokenizer
  counts (``client_tokenizer``). When every profiling record that has an output length also has
  the server's ``usage_*`` metrics (0.8.0), the server's counts are used (``server_usage``) — one
  source per capture, never mixed row by row.
* ``request_start_ns``/``request_end_ns`` are epoch nanoseconds: kept as integers (``epoch_ns``).
  There is no first-token timestamp in the file; start + TTFT would be derived, so it is not made.
* The old schema (AIPerf ~0.1/0.2, the maintainers' example artifacts: ``metadata.credit_phase`` and
  ``timestamp_ns``, metric tags ``ttft``/``ttst``) is read too: ``credit_phase`` is the phase, ``ttft``
  the time to first token, and the per-record metrics ``min_request_timestamp`` /
  ``max_response_timestamp`` (unit ``ns``) the request's start and end.
* The run pairs with ``profile_export_aiperf.json`` of the same artifact folder (``ledger.pairing``):
  the file-name prefix before ``profile_export`` (else the folder name) and the record count, which
  the aggregate states as ``request_count`` + ``error_request_count``.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import (
    TIME_UNITS,
    TOKEN_UNITS,
    build_columns,
    has_key,
    head_text,
    integer,
    mapping,
    number,
    present_fields,
)
from bench_ledger.importers.base import ParseOptions, first_json_value, iter_json_lines
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, RequestValues, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER", "error_text", "pairing"]

PROFILING = "profiling"
SUCCESS_RULE = (
    "failed when the record's error is not null (text: 'code type: message') or "
    "metadata.was_cancelled is true; ok otherwise. Only benchmark_phase 'profiling' records count."
)
_TIME_METRICS = {
    "time_to_first_token": "ttft_s",
    "ttft": "ttft_s",  # the old schema's tag
    "request_latency": "latency_s",
    "inter_token_latency": "itl_mean_s",
}


class AiperfRecordsImporter:
    name = "aiperf-records"
    description = "NVIDIA AIPerf profile_export.jsonl (one record per request)"

    def sniff(self, head: bytes) -> str | None:
        shape, first_line = first_json_value(head)
        if shape != "object":
            return "not a JSON Lines file of objects"
        try:
            first = json.loads(first_line)
        except json.JSONDecodeError:
            # A long first record may be cut at 64 KiB: fall back to its opening keys.
            text = head_text(head)
            if text.startswith('{"metadata"') and (has_key(text, "request_start_ns") or has_key(text, "credit_phase")):
                return None
            return "first line is not a complete AIPerf record"
        if not isinstance(first, dict) or not isinstance(first.get("metadata"), dict):
            return "first record has no 'metadata' object"
        meta = first["metadata"]
        if "metrics" not in first or not ({"request_start_ns", "benchmark_phase", "credit_phase"} & meta.keys()):
            return "first record lacks AIPerf metrics / metadata.request_start_ns, benchmark_phase or credit_phase"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        rows: list[dict[str, Any]] = []
        usage_in: list[int | None] = []
        usage_out: list[int | None] = []
        skipped: Counter[str] = Counter()
        schema: str | None = None
        for idx, (line, rec) in enumerate(iter_json_lines(path)):
            where = f"line {line}"
            rec = mapping(path, where, None, rec)
            meta = mapping(path, where, "metadata", rec.get("metadata"))
            phase = meta.get("benchmark_phase", meta.get("credit_phase", PROFILING))
            if phase != PROFILING:
                skipped[str(phase)] += 1
                continue
            if schema is None and rec.get("schema_version") is not None:
                schema = str(rec["schema_version"])
            row, u_in, u_out = _row(path, where, idx, line, rec, meta)
            row["values"] = _scalar_metrics(path, where, rec)
            rows.append(row)
            usage_in.append(u_in)
            usage_out.append(u_out)

        with_osl = [i for i, r in enumerate(rows) if r.get("output_tokens") is not None]
        server = bool(with_osl) and all(usage_out[i] is not None for i in with_osl)
        if server:
            for r, u_in, u_out in zip(rows, usage_in, usage_out, strict=True):
                r["input_tokens"], r["output_tokens"] = u_in, u_out
        per_request = [r.pop("values") for r in rows]
        keys = sorted({k for vals in per_request for k in vals})
        request_values = {
            k: RequestValues(
                flag="reported" if k in REPORTED_METRICS else "measured", values=[vals.get(k) for vals in per_request]
            )
            for k in keys
        }
        columns = build_columns(rows)
        fields = present_fields(columns, always=["status", "error"])
        skipped_text = ", ".join(f"{phase}: {n}" for phase, n in sorted(skipped.items()))
        run = ParsedRun(
            info=RunInfo(
                label=f"aiperf {run_name(path, 'profile_export.jsonl')} ({len(rows)} requests)",
                tool=Tool.AIPERF,
                request_count=len(rows),
                locator=f"line {rows[0]['line']}" if rows else None,
                metadata={"skipped_records": skipped_text} if skipped else {},
                pairing=pairing(path, "profile_export.jsonl", len(rows)),
            ),
            capture=Capture(
                fields=fields,
                record_count=len(rows),
                clock="epoch_ns",
                token_source="server_usage" if server else "client_tokenizer",
                success_rule=SUCCESS_RULE,
            ),
            requests=columns,
            request_values=request_values if rows else {},
        )
        note = f"skipped non-profiling records ({skipped_text})" if skipped else None
        return ParsedArtefact(format=self.name, format_version=schema, runs=[run], note=note)


# AIPerf's per-record metrics it computes from its measurements (the others are times and counts)
REPORTED_METRICS = frozenset({"inter_token_latency", "output_token_throughput_per_user"})


def _scalar_metrics(path: Path, where: str, rec: dict) -> dict[str, float]:
    """Every per-record metric with one number, as written in its own unit (``request_value``: AIPerf's
    aggregate statistics are over these); list values (inter_chunk_latency) are the chunk gaps."""
    metrics = rec.get("metrics")
    out: dict[str, float] = {}
    for name, obj in metrics.items() if isinstance(metrics, dict) else ():
        value = obj.get("value") if isinstance(obj, dict) else None
        if value is None or isinstance(value, list):
            continue
        out[name] = float(number(path, where, f"metrics.{name}.value", value, optional=False))
    return out


def _row(
    path: Path, where: str, idx: int, line: int, rec: dict, meta: dict
) -> tuple[dict[str, Any], int | None, int | None]:
    """One request as a column row, plus its server usage counts (used only if all rows have them)."""
    metrics = mapping(path, where, "metrics", rec.get("metrics"), optional=True)
    error = mapping(path, where, "error", rec.get("error"), optional=True)
    cancelled = meta.get("was_cancelled") is True
    if error:
        text = error_text(error)
    elif cancelled:
        text = "cancelled"
    else:
        text = None
    row: dict[str, Any] = {
        "idx": idx,
        "line": line,
        "status": "failed" if text is not None else "ok",
        "error": text,
        "send_ns": integer(path, where, "metadata.request_start_ns", meta.get("request_start_ns"))
        if "request_start_ns" in meta
        else _ns(path, where, metrics, "min_request_timestamp"),
        "end_ns": integer(path, where, "metadata.request_end_ns", meta.get("request_end_ns"))
        if "request_end_ns" in meta
        else _ns(path, where, metrics, "max_response_timestamp"),
        "input_tokens": _tokens(path, where, metrics, "input_sequence_length")
        if "input_sequence_length" in metrics
        else _tokens(path, where, metrics, "error_isl"),
        "output_tokens": _tokens(path, where, metrics, "output_sequence_length"),
    }
    for name, column in _TIME_METRICS.items():  # "time_to_first_token" or the old schema's "ttft": one of them
        if name in metrics or column not in row:
            row[column] = _seconds(path, where, metrics, name)
    row["chunk_gaps_s"] = _gaps(path, where, metrics)
    usage_in = _tokens(path, where, metrics, "usage_prompt_tokens")
    return row, usage_in, _tokens(path, where, metrics, "usage_completion_tokens")


def error_text(details: dict) -> str:
    """An AIPerf error as one text, ``'<code> <type>: <message>'``: a failed record's error, and the note
    of an aggregate's ``error_summary`` entry (``check`` counts the records whose error is that text)."""
    return f"{details.get('code')} {details.get('type')}: {details.get('message')}"


def pairing(path: Path, suffix: str, requests: int | None) -> Pairing:
    """AIPerf writes ``profile_export.jsonl`` and ``profile_export_aiperf.json`` into one artifact
    folder per run: the name's prefix before ``suffix`` (copies are often renamed ``<run>__...``),
    else the folder's name, is the pairing key."""
    return Pairing(key=f"aiperf {run_name(path, suffix)}", requests=requests)


def run_name(path: Path, suffix: str) -> str:
    """What names an AIPerf run's files: the prefix of the file name before ``suffix`` (a renamed
    copy), else the artifact folder's name (AIPerf names it after the model and the load)."""
    prefix = path.name.removesuffix(suffix).rstrip("_-") if path.name.endswith(suffix) else None
    return prefix or path.resolve().parent.name


def _ns(path: Path, where: str, metrics: dict, name: str) -> int | None:
    """An old-schema per-record timestamp metric (epoch ns), or None."""
    found = _metric(path, where, metrics, name)
    if found is None:
        return None
    value, unit = found
    if unit != "ns":
        raise ParseError(path, where, f"metrics.{name}.unit", f"expected ns for an epoch timestamp, got {unit!r}")
    return integer(path, where, f"metrics.{name}.value", value)


def _metric(path: Path, where: str, metrics: dict, name: str) -> tuple[Any, str] | None:
    if metrics.get(name) is None:
        return None
    m = mapping(path, where, f"metrics.{name}", metrics[name])
    unit = m.get("unit")
    if not isinstance(unit, str):
        raise ParseError(path, where, f"metrics.{name}.unit", f"expected a unit string, got {unit!r}")
    return m.get("value"), unit


def _unit_factor(path: Path, where: str, name: str, unit: str) -> Decimal:
    if unit not in TIME_UNITS:
        raise ParseError(path, where, f"metrics.{name}.unit", f"unknown time unit {unit!r}")
    return TIME_UNITS[unit]


def _seconds(path: Path, where: str, metrics: dict, name: str) -> float | None:
    found = _metric(path, where, metrics, name)
    if found is None:
        return None
    value, unit = found
    factor = _unit_factor(path, where, name, unit)
    v = number(path, where, f"metrics.{name}.value", value)
    return None if v is None else float(Decimal(repr(v)) * factor)


def _gaps(path: Path, where: str, metrics: dict) -> list[float] | None:
    found = _metric(path, where, metrics, "inter_chunk_latency")
    if found is None:
        return None
    value, unit = found
    factor = _unit_factor(path, where, "inter_chunk_latency", unit)
    if not isinstance(value, list):
        raise ParseError(path, where, "metrics.inter_chunk_latency.value", f"expected a list, got {value!r}")
    field = "metrics.inter_chunk_latency.value"
    return [float(Decimal(repr(number(path, where, field, v, optional=False))) * factor) for v in value]


def _tokens(path: Path, where: str, metrics: dict, name: str) -> int | None:
    found = _metric(path, where, metrics, name)
    if found is None:
        return None
    value, unit = found
    if unit not in TOKEN_UNITS:
        raise ParseError(path, where, f"metrics.{name}.unit", f"expected a token unit, got {unit!r}")
    return integer(path, where, f"metrics.{name}.value", value)


IMPORTER = AiperfRecordsImporter()
