"""sgl-project/genai-bench experiment folders: ``experiment_metadata.json`` + one run file per load point.

A run file (``<scenario>_<task>[_<model>]_num_concurrency_<n>_time_<secs>s.json``) holds
``aggregated_metrics`` (genai-bench's claims: reported) and ``individual_request_metrics`` (one
record per request: measured). One file is one run; its label is the experiment folder and the
file name; scenario and concurrency come from the file (``aggregated_metrics.scenario``,
``num_concurrency`` or ``batch_size`` by ``iteration_type``) and are checked against the name.

How genai-bench computes (``metrics/request_metrics_collector.py``, ``aggregated_metrics_collector.py``):
per request ``ttft = first token - start``, ``e2e_latency = end - start``, ``output_latency = e2e -
ttft``, ``tpot = output_latency / (num_output_tokens - 1)``, ``output_inference_speed = 1 / tpot``,
``output_throughput = (num_output_tokens - 1) / output_latency``, ``input_throughput =
num_input_tokens / ttft``; ``stats`` over records without ``error_code`` (numpy mean, population
``std``, linear ``percentile``, ``sum``); rates = stats sums / ``run_duration`` (the tool's own span).
The records carry **no timestamps**, so the rates are kept as reported and never re-derived here;
``tpot`` is a per-request mean and becomes ``itl_mean_s``. Times are seconds unless the file's
``_time_unit`` (or the metadata's ``metrics_time_unit``) says otherwise. Failed records carry nulls.
Dropped per record, because they are re-derivable from the same record by the definitions above:
``output_latency``, ``output_inference_speed``, ``input_throughput``, ``output_throughput``,
``total_tokens``. The metadata's ``cmd`` is not kept: it is the full command line, API keys included.

**Streaming off: TTFT is a placeholder.** Without streaming genai-bench cannot see a first token and
writes ``time_at_first_token = start_time + 0.001`` (basetenlabs/genai-bench ``user/openai_user.py``
``parse_non_streaming_chat_response``, ``baseten_user.py``: "For non-streaming, we can't measure
TTFT, so we use a small offset"), so every ``ttft`` is 0.001 s and ``tpot`` (``(e2e - ttft) /
(n - 1)``) is built on it. Where the experiment's ``experiment_metadata.json`` (written beside the
run files) says ``--disable-streaming``, or every ok record's ttft is 0.001 s, neither is a
measurement: ``ttft`` and ``tpot`` are not captured (n/a) and genai-bench's stats of them are kept as
n/a with that reason. Where it saw no first token at all it writes ``time_at_first_token =
end_time``: a record whose ttft equals its e2e_latency has neither ttft nor tpot.

The experiment metadata beside a run file also states the system under test (``model``,
``api_model_name``, ``server_engine``, ``server_version``, ``server_gpu_type``,
``server_gpu_count``): the run's factors (``RunInfo.factors``), read from there.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import (
    TIME_UNITS,
    as_dict,
    build_columns,
    has_key,
    head_text,
    integer,
    is_number,
    jpath,
    mapping,
    number,
    placeholder,
    published,
    sequence,
    stated,
    to_seconds,
)
from bench_ledger.importers.base import ParseOptions, load_json
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo, Stated
from bench_ledger.tools import Tool

__all__ = ["EVERY_TTFT", "FALLBACK", "IMPORTER", "PLACEHOLDER"]

TOOL = Tool.GENAI_BENCH
SUCCESS_RULE = "ok iff error_code is null (genai-bench's own rule: its stats use exactly these records)"
_NAME = re.compile(r"_(?P<type>num_concurrency|batch_size)_(?P<n>\d+)_time_(?P<secs>\d+)s$")
_RATES = {
    "mean_output_throughput_tokens_per_s": ("tokens/s", "aggregate_token_rate"),
    "mean_input_throughput_tokens_per_s": ("tokens/s", "aggregate_token_rate"),
    "mean_total_tokens_throughput_tokens_per_s": ("tokens/s", "aggregate_token_rate"),
    "mean_total_chars_per_hour": ("chars/h", "other"),
    "requests_per_second": ("requests/s", "request_rate"),
    "arrival_requests_per_second": ("requests/s", "request_rate"),
    "run_duration": ("s", "duration"),
    "error_rate": (None, "ratio"),
    "num_error_requests": (None, "request_count"),
    "num_completed_requests": (None, "request_count"),
    "num_requests": (None, "request_count"),
    "total_arrivals": (None, "request_count"),
}
METADATA = "experiment_metadata.json"
PLACEHOLDER = (
    "genai-bench's placeholder, not a measurement: with streaming off (--disable-streaming in "
    f"{METADATA}) it writes time_at_first_token = start + 0.001 s"
)
EVERY_TTFT = (
    "genai-bench's placeholder, not a measurement: every ttft is 0.001 s, the time_at_first_token = "
    "start + 0.001 s it writes with streaming off"
)
FALLBACK = (
    "genai-bench's fallback, not a measurement: no content chunk arrived, so it took the end time as the "
    "first token's (ttft = e2e_latency)"
)
_AT_PLACEHOLDER = 1e-6  # s: (start + 0.001) - start differs from 0.001 by float rounding of start, far less
# per-record values and stats built on the placeholder TTFT (genai-bench's definitions above)
_ON_TTFT = ("ttft", "tpot", "output_latency", "output_inference_speed", "input_throughput", "output_throughput")
# experiment metadata (ExperimentMetadata) -> the run's factors
_FACTORS = {
    "model": (("model",),),
    "served_model": (("api_model_name",),),
    "engine": (("server_engine",),),
    "engine_version": (("server_version",),),
    "hardware": (("server_gpu_type",),),
    "gpu_count": (("server_gpu_count",),),
    "dataset": (("dataset_path",),),
}
_STAT_UNITS = {
    "ttft": "time",
    "tpot": "time",
    "e2e_latency": "time",
    "output_latency": "time",
    "output_inference_speed": ("tokens/s", "per_stream_token_rate"),
    "input_throughput": ("tokens/s", "per_stream_token_rate"),
    "output_throughput": ("tokens/s", "per_stream_token_rate"),
    "num_input_tokens": ("tokens", "token_count"),
    "num_output_tokens": ("tokens", "token_count"),
    "total_tokens": ("tokens", "token_count"),
    "num_reasoning_tokens": ("tokens", "token_count"),
}


class GenaiBenchRunImporter:
    name = "genai-bench"
    description = "sgl-project/genai-bench run file (aggregated_metrics + individual_request_metrics)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not has_key(text, "aggregated_metrics"):
            return "no genai-bench aggregated_metrics"
        if not (has_key(text, "num_concurrency") or has_key(text, "iteration_type")):
            return "aggregated_metrics lack genai-bench's num_concurrency / iteration_type"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        agg = mapping(path, jpath("aggregated_metrics"), "aggregated_metrics", data.get("aggregated_metrics"))
        records = sequence(
            path,
            jpath("individual_request_metrics"),
            "individual_request_metrics",
            data.get("individual_request_metrics"),
            optional=True,
        )
        unit_text = data.get("_time_unit", "s")
        if not isinstance(unit_text, str) or unit_text not in TIME_UNITS:
            raise ParseError(path, jpath("_time_unit"), "_time_unit", f"unknown time unit {unit_text!r}")
        unit_s = TIME_UNITS[unit_text]
        factors, streaming_off = _experiment(path)
        rows = [_row(path, i, r, unit_s) for i, r in enumerate(records)]
        ttfts = [r["ttft_s"] for r in rows if r["status"] == "ok"]
        if not streaming_off and ttfts and all(t is not None and abs(t - 0.001) < _AT_PLACEHOLDER for t in ttfts):
            streaming_off = EVERY_TTFT
        fallbacks = 0
        for row in rows:
            if streaming_off or row.pop("ttft_is_end", False):
                fallbacks += not streaming_off and row["status"] == "ok"
                row["ttft_s"] = row["itl_mean_s"] = None
            row.pop("ttft_is_end", None)
        out = _aggregates(path, agg, unit_text, streaming_off)
        iteration = agg.get("iteration_type", "num_concurrency")
        level = agg.get(iteration) if iteration in ("num_concurrency", "batch_size") else agg.get("num_concurrency")
        level_n = integer(path, jpath("aggregated_metrics", str(iteration)), str(iteration), level)
        metadata = {
            k: str(agg[k])
            for k in ("scenario", "iteration_type", "batch_size", "num_concurrency")
            if agg.get(k) is not None
        }
        metadata["time_unit"] = unit_text
        if streaming_off:
            metadata["ttft"] = "n/a: " + streaming_off
        elif fallbacks:
            metadata["ttft"] = f"n/a for {fallbacks} of {len(ttfts)} ok records: {FALLBACK}"
        iteration_at = jpath("aggregated_metrics", str(iteration))
        if iteration == "num_concurrency" and level_n is not None:
            factors["concurrency"] = Stated(value=str(level_n), at=iteration_at)
        if (m := _NAME.search(path.stem)) is not None:
            metadata["name_" + m["type"]] = m["n"]
            metadata["name_time_s"] = m["secs"]
            if m["type"] == iteration and level_n is not None and int(m["n"]) != level_n:
                metadata["name_mismatch"] = f"file name says {m['type']} {m['n']}, the file says {level_n}"
        columns = build_columns(rows)
        fields = ["status", "error"] + [
            f
            for f, col in (
                ("input_tokens", "input_tokens"),
                ("output_tokens", "output_tokens"),
                ("ttft_s", "ttft_s"),
                ("latency_s", "latency_s"),
                ("itl_mean_s", "itl_mean_s"),
            )
            if any(r.get(col) is not None for r in rows)
        ]
        run = ParsedRun(
            info=RunInfo(
                label=f"{TOOL} {path.parent.name}/{path.stem}",
                tool=TOOL,
                concurrency=level_n if iteration == "num_concurrency" else None,
                request_count=integer(
                    path, jpath("aggregated_metrics", "num_requests"), "num_requests", agg.get("num_requests")
                ),
                duration_s=float(agg["run_duration"]) * float(unit_s) if is_number(agg.get("run_duration")) else None,
                locator="$",
                metadata=metadata,
                factors=factors,
            ),
            capture=Capture(
                fields=fields, record_count=len(rows), clock=None, token_source="unknown", success_rule=SUCCESS_RULE
            ),
            requests=columns,
            published=out,
        )
        note = (
            "no request timestamps: rates are genai-bench's, never re-derived; output_latency, "
            "output_inference_speed, input/output_throughput and total_tokens are re-derivable per record and not kept"
        )
        if streaming_off:
            note += f"; ttft and tpot are n/a: {streaming_off}"
        elif fallbacks:
            note += f"; ttft and tpot of {fallbacks} records are n/a: {FALLBACK}"
        return ParsedArtefact(format=self.name, format_version=None, runs=[run], note=note)


def _experiment(path: Path) -> tuple[dict[str, Stated], str | None]:
    """What the experiment's metadata beside ``path`` states: the run's factors, and whether streaming
    was off (``--disable-streaming`` in its ``cmd``, or ``disable_streaming`` true: :data:`PLACEHOLDER`,
    else None). Without the metadata file: no factors, and streaming is not known to be off."""
    meta_path = path.parent / METADATA
    if not meta_path.is_file() or meta_path.resolve() == path.resolve():
        return {}, None
    meta = as_dict(load_json(meta_path))  # a ParseError names the metadata file
    cmd = meta.get("cmd")
    off = meta.get("disable_streaming") is True or (isinstance(cmd, str) and "--disable-streaming" in cmd.split())
    return stated(
        meta_path, meta, _FACTORS, lambda parts: f"{METADATA} beside it {jpath(*parts)}"
    ), PLACEHOLDER if off else None


def _aggregates(path: Path, agg: dict, unit_text: str, streaming_off: str | None = None) -> list[Published]:
    out: list[Published] = []
    for key, value in agg.items():
        if key in _RATES:
            unit, kind = _RATES[key]
            if key == "run_duration":
                unit = unit_text
            p = published(
                f"aggregated_metrics.{key}", value, locator=jpath("aggregated_metrics", key), unit=unit, kind=kind
            )
            if p is not None:
                out.append(p)
    freq = agg.get("error_codes_frequency")
    if isinstance(freq, dict):
        for code, count in freq.items():
            p = published(
                f"aggregated_metrics.error_codes_frequency.{code}",
                count,
                locator=jpath("aggregated_metrics", "error_codes_frequency", str(code)),
                unit=None,
                kind="request_count",
            )
            if p is not None:
                out.append(p)
    stats = mapping(path, jpath("aggregated_metrics", "stats"), "stats", agg.get("stats"), optional=True)
    for metric, block in stats.items():
        block = mapping(path, jpath("aggregated_metrics", "stats", metric), metric, block)
        spec = _STAT_UNITS.get(metric)
        unit, kind = (unit_text, "latency") if spec == "time" else (spec if spec else (None, "other"))
        for stat, value in block.items():
            if value is not None and not is_number(value):
                raise ParseError(
                    path, jpath("aggregated_metrics", "stats", metric, stat), stat, f"expected a number, got {value!r}"
                )
            p = published(
                f"stats.{metric}.{stat}",
                value,
                locator=jpath("aggregated_metrics", "stats", metric, stat),
                unit=unit,
                kind=kind,
            )
            if p is not None and streaming_off and metric in _ON_TTFT:
                p = placeholder(p, streaming_off)
            if p is not None:
                out.append(p)
    return out


def _row(path: Path, i: int, rec: Any, unit_s: Decimal) -> dict[str, Any]:
    """One record's row; ``ttft_is_end``: its ttft is genai-bench's fallback (:data:`FALLBACK`)."""
    where = jpath("individual_request_metrics", i)
    rec = mapping(path, where, None, rec)
    code = rec.get("error_code")
    code = integer(path, where, "error_code", code) if code is not None else None
    ok = code is None
    msg = rec.get("error_message")
    values = {
        "ttft_s": number(path, where, "ttft", rec.get("ttft")),
        "latency_s": number(path, where, "e2e_latency", rec.get("e2e_latency")),
        "itl_mean_s": number(path, where, "tpot", rec.get("tpot")),
    }
    for key in ("output_latency", "output_inference_speed", "input_throughput", "output_throughput"):
        number(path, where, key, rec.get(key))
    integer(path, where, "total_tokens", rec.get("total_tokens"))
    row: dict[str, Any] = {
        "idx": i,
        "line": None,
        "status": "ok" if ok else "failed",
        "error": None if ok else (f"{code}: {msg}" if msg else str(code)),
        "input_tokens": integer(path, where, "num_input_tokens", rec.get("num_input_tokens")),
        "output_tokens": integer(path, where, "num_output_tokens", rec.get("num_output_tokens")) if ok else None,
    }
    if ok:
        row.update({k: to_seconds(v, unit_s) for k, v in values.items()})
        row["ttft_is_end"] = values["ttft_s"] is not None and values["ttft_s"] == values["latency_s"]
    return row


class GenaiBenchMetadataImporter:
    name = "genai-bench-metadata"
    description = "sgl-project/genai-bench experiment_metadata.json (experiment settings, no results)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not all(has_key(text, k) for k in ("benchmark_version", "api_backend", "traffic_scenario")):
            return "no genai-bench benchmark_version / api_backend / traffic_scenario"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        out: list[Published] = []
        for key, value in data.items():
            if key in ("cmd", "auth_config"):  # the command line and credentials: not kept
                continue
            text = value if isinstance(value, str) else None
            if isinstance(value, list) and all(is_number(v) or isinstance(v, str) for v in value):
                text = ", ".join(str(v) for v in value)
            if text is not None or value is None:
                out.append(
                    Published(
                        key=f"experiment.{key}",
                        text="null" if value is None else text,
                        flag="reported",
                        locator=jpath(key),
                        note="experiment setting",
                    )
                )
                continue
            p = published(
                f"experiment.{key}",
                value,
                locator=jpath(key),
                unit="s" if key.endswith("_s") else None,
                kind="duration" if key.endswith("_s") else "other",
                note="experiment setting",
            )
            if p is not None:
                out.append(p)
        version = data.get("benchmark_version")
        return ParsedArtefact(
            format=self.name,
            format_version=str(version) if version is not None else None,
            published=out,
            note="genai-bench experiment settings; cmd and auth_config are not kept (they may hold credentials)",
        )


IMPORTER = GenaiBenchRunImporter()
IMPORTERS = (IMPORTER, GenaiBenchMetadataImporter())
