"""NVIDIA AIPerf ``profile_export_aiperf.json``: per-metric statistics and the run configuration.

Shape: top-level metric objects ``{"unit", "avg", "min", "max", "p1".."p99", "std"}`` (some carry
only ``avg``), the summary metrics in the same shape (``benchmark_duration``, ``request_count``,
``total_isl``...), ``was_cancelled``, ``start_time``/``end_time`` (ISO, no zone), ``error_summary``,
optional ``telemetry_data`` (per-GPU metric objects, nested), and ``input_config``.

Every statistic is AIPerf's own claim (R15): ``reported``, text as printed, unit as the metric
states, key ``metric.stat`` (dotted path for nested telemetry). ``input_config`` is configuration,
read into RunInfo only; AIPerf documents it as unstable across versions, so every lookup in it is
optional. The file has no request records: the capture has no fields and ``record_count`` 0; it
pairs with the ``profile_export.jsonl`` of the same artifact folder (:func:`importers.aiperf.pairing`)
by ``request_count`` + ``error_request_count`` (0 when absent), the number of profiling records.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import (
    AIPERF_MARKERS,
    TIME_UNITS,
    as_dict,
    has_key,
    head_text,
    is_number,
    jpath,
    published,
    stated,
    to_seconds,
    walk_metric_objects,
    whole,
)
from bench_ledger.importers.aiperf import error_text, pairing
from bench_ledger.importers.base import ParseOptions, first_json_value, load_json, setting_text
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

SUCCESS_RULE = "no request records in this file; AIPerf counts a request as failed when it has an error"


class AiperfAggregateImporter:
    name = "aiperf-aggregate"
    description = "NVIDIA AIPerf profile_export_aiperf.json (aggregate statistics)"

    def sniff(self, head: bytes) -> str | None:
        shape, first_line = first_json_value(head)
        text = head_text(head)
        if shape != "object":
            return "not a JSON object"
        if first_line.startswith('{"metadata"'):
            return "a JSON Lines request record, not an aggregate"
        if not (has_key(text, "unit") and has_key(text, "avg")):
            return "no metric objects with unit/avg"
        if not any(has_key(text, k) for k in AIPERF_MARKERS):
            return "no AIPerf-only keys (benchmark_duration, error_summary, loadgen, ...)"
        if has_key(text, "experiments") or has_key(text, "benchmarks"):
            return "has experiments/benchmarks: not an AIPerf aggregate"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = load_json(path)
        if not isinstance(data, dict):
            raise ParseError(path, "$", None, "expected a JSON object (AIPerf aggregate)")
        found: list[Published] = []
        for key, value in data.items():
            if key == "input_config":
                continue
            if key == "error_summary" and isinstance(value, list):
                found.extend(_error_counts(path, value))
            elif isinstance(value, dict):
                found.extend(walk_metric_objects(path, value, [key]))
        run = ParsedRun(
            info=_info(path, data),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=found,
        )
        version = data.get("schema_version")
        return ParsedArtefact(format=self.name, format_version=None if version is None else str(version), runs=[run])


def _error_counts(path: Path, summary: list) -> list[Published]:
    out = []
    for i, entry in enumerate(summary):
        if not isinstance(entry, dict):
            raise ParseError(path, jpath("error_summary", i), None, "expected an object")
        details = entry.get("error_details") or {}
        note = error_text(details if isinstance(details, dict) else {})
        p = published(
            f"error_summary.{i}.count",
            entry.get("count"),
            locator=jpath("error_summary", i, "count"),
            unit=None,
            kind="request_count",
            note=note,
        )
        if p is not None:
            out.append(p)
    return out


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _when(path: Path, data: dict, key: str) -> datetime | None:
    raw = data.get(key)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(str(raw))
    except ValueError:
        raise ParseError(path, jpath(key), key, f"expected an ISO 8601 time, got {raw!r}") from None


def _count(data: dict, name: str) -> int | None:
    """``name``'s avg as a whole number (old schema: under ``records``), else None."""
    obj = data.get(name) if isinstance(data.get(name), dict) else _get(data, "records", name)
    return whole(obj.get("avg")) if isinstance(obj, dict) else None


def _records_count(data: dict) -> int | None:
    ok = _count(data, "request_count")
    return None if ok is None else ok + (_count(data, "error_request_count") or 0)


def _factors(path: Path, data: dict) -> dict:
    """What ``input_config`` states of the system under test and the load: the older layout
    (``endpoint.model_names``, ``loadgen``, ``input``) or the newer one (``models.items``,
    ``datasets``, ``phases``: of these, the ``profiling`` phase)."""
    phases = _get(data, "input_config", "phases")
    phases = phases if isinstance(phases, list) else []
    profiling = [i for i, p in enumerate(phases) if isinstance(p, dict) and p.get("name") == "profiling"]
    phase: tuple = ("input_config", "phases", profiling[0]) if len(profiling) == 1 else ()
    c = ("input_config",)
    items = _get(data, "input_config", "models", "items")
    one_model = ((*c, "models", "items", 0, "name"),) if isinstance(items, list) and len(items) == 1 else ()
    return stated(
        path,
        data,
        {
            "model": ((*c, "endpoint", "model_names"), *one_model),
            "dataset": ((*c, "input", "file"), (*c, "datasets", 0, "path")),
            "input_len": ((*c, "input", "prompt", "input_tokens", "mean"),),
            "output_len": ((*c, "input", "prompt", "output_tokens", "mean"),),
            "concurrency": ((*c, "loadgen", "concurrency"), *(((*phase, "concurrency"),) if phase else ())),
            "request_rate": ((*c, "loadgen", "request_rate"),),
            "prompt_count": ((*c, "loadgen", "request_count"), *(((*phase, "requests"),) if phase else ())),
        },
    )


def _info(path: Path, data: dict) -> RunInfo:
    config = as_dict(data.get("input_config"))
    models = _get(config, "endpoint", "model_names")
    model = models[0] if isinstance(models, list) and models else None
    concurrency = whole(_get(config, "loadgen", "concurrency"))
    rate = setting_text(_get(config, "loadgen", "request_rate"), path, "$.input_config.loadgen", "request_rate")
    duration = data.get("benchmark_duration")
    duration_s = None
    if isinstance(duration, dict) and duration.get("unit") in TIME_UNITS and is_number(duration.get("avg")):
        duration_s = to_seconds(duration["avg"], TIME_UNITS[duration["unit"]])
    parts = [
        "aiperf",
        model,
        f"c{concurrency}" if concurrency is not None else None,
        f"rate {rate}" if rate is not None else None,
    ]
    metadata = {
        k: str(v)
        for k, v in {
            "cli_command": config.get("cli_command"),
            "endpoint_type": _get(config, "endpoint", "type"),
            "streaming": _get(config, "endpoint", "streaming"),
            "request_rate_mode": _get(config, "loadgen", "request_rate_mode"),
            "was_cancelled": data.get("was_cancelled"),
            "time_zone": "start_time/end_time are written without a zone" if data.get("start_time") else None,
        }.items()
        if v is not None
    }
    return RunInfo(
        label=" ".join(str(p) for p in parts if p is not None),
        tool=Tool.AIPERF,
        tool_version=str(data["aiperf_version"]) if data.get("aiperf_version") is not None else None,
        input_target_tokens=whole(_get(config, "input", "prompt", "input_tokens", "mean")),
        output_cap_tokens=whole(_get(config, "input", "prompt", "output_tokens", "mean")),
        concurrency=concurrency,
        request_count=whole(_get(config, "loadgen", "request_count")),
        request_rate=rate,
        seed=whole(_get(config, "input", "random_seed")),
        dataset=_get(config, "input", "file") if isinstance(_get(config, "input", "file"), str) else None,
        started_at=_when(path, data, "start_time"),
        ended_at=_when(path, data, "end_time"),
        duration_s=duration_s,
        locator="$",
        metadata=metadata,
        pairing=pairing(path, "profile_export_aiperf.json", _records_count(data)),
        factors=_factors(path, data),
    )


IMPORTER = AiperfAggregateImporter()
