"""NVIDIA GenAI-Perf ``*_genai_perf.json``: metric name -> ``{unit, avg, p1..p99, min, max, std}``.

Every statistic is GenAI-Perf's claim (R15): ``reported``, text as printed, unit as the metric
object states (times in ms), key ``metric.stat``. ``input_config`` is configuration and goes to
RunInfo only; its layout changed between GenAI-Perf versions (flat CLI args, later nested config
sections), so both are read, every lookup optional. No request records: fields [] and 0 records.
It pairs with the ``<stem>.json`` export of its folder (``importers.genai_perf.pairing``) by the
configured request count and load level.

The sniff relies on the absence of AIPerf's own keys: AIPerf's aggregate has the same metric-object
shape, and its importer (``importers.aiperf_aggregate``) takes the files with those keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import AIPERF_MARKERS, has_key, head_text, stated, walk_metric_objects, whole
from bench_ledger.importers.base import ParseOptions, first_json_value, load_json, setting_text
from bench_ledger.importers.genai_perf import pairing
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

SUCCESS_RULE = "no request records in this file; GenAI-Perf writes no per-request status"
_GENAI_METRICS = ("time_to_first_token", "request_latency", "request_throughput", "output_token_throughput")


class GenaiPerfSummaryImporter:
    name = "genai-perf-summary"
    description = "NVIDIA GenAI-Perf *_genai_perf.json (aggregate statistics)"

    def sniff(self, head: bytes) -> str | None:
        shape, first_line = first_json_value(head)
        text = head_text(head)
        if shape != "object":
            return "not a JSON object"
        if first_line.startswith('{"metadata"'):
            return "a JSON Lines request record, not a summary"
        if not (has_key(text, "unit") and has_key(text, "avg")):
            return "no metric objects with unit/avg"
        if not any(has_key(text, m) for m in _GENAI_METRICS):
            return "no GenAI-Perf metric names (time_to_first_token, request_latency, ...)"
        if any(has_key(text, k) for k in AIPERF_MARKERS):
            return "has AIPerf-only keys: an AIPerf aggregate"
        if has_key(text, "experiments") or has_key(text, "benchmarks"):
            return "has experiments/benchmarks: not a GenAI-Perf summary"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = load_json(path)
        if not isinstance(data, dict):
            raise ParseError(path, "$", None, "expected a JSON object (GenAI-Perf summary)")
        found: list[Published] = []
        for key, value in data.items():
            if key != "input_config" and isinstance(value, dict):
                found.extend(walk_metric_objects(path, value, [key]))
        info = _info(path, data.get("input_config"))
        info = info.model_copy(update={"factors": stated(path, data, FACTORS)})
        load = (
            f"concurrency={info.concurrency}"
            if info.concurrency is not None
            else f"request_rate={info.request_rate}"
            if info.request_rate is not None
            else None
        )
        if path.name.endswith("_genai_perf.json"):
            info = info.model_copy(update={"pairing": pairing(path, "_genai_perf.json", info.request_count, load)})
        run = ParsedRun(
            info=info,
            capture=Capture(fields=[], record_count=0, token_source="client_tokenizer", success_rule=SUCCESS_RULE),
            published=found,
        )
        return ParsedArtefact(format=self.name, format_version=None, runs=[run])


# What ``input_config`` states of the system under test and the load, flat (older) or nested layout
_C = ("input_config",)
FACTORS = {
    "model": ((*_C, "model"), (*_C, "model_names"), (*_C, "endpoint", "model_names")),
    "dataset": ((*_C, "input_file"), (*_C, "input", "file")),
    "input_len": ((*_C, "synthetic_input_tokens_mean"), (*_C, "input", "synthetic_tokens", "mean")),
    "output_len": ((*_C, "output_tokens_mean"), (*_C, "input", "output_tokens", "mean")),
    "concurrency": ((*_C, "concurrency"), (*_C, "perf_analyzer", "stimulus", "concurrency")),
    "request_rate": ((*_C, "request_rate"), (*_C, "perf_analyzer", "stimulus", "request_rate")),
    "prompt_count": ((*_C, "request_count"), (*_C, "perf_analyzer", "stimulus", "request_count")),
}


def _first(config: dict, *paths: tuple[str, ...]) -> Any:
    """The first non-null value among several key paths (flat and nested config layouts)."""
    for keys in paths:
        obj: Any = config
        for key in keys:
            obj = obj.get(key) if isinstance(obj, dict) else None
        if obj is not None:
            return obj
    return None


def _info(path: Path, config: Any) -> RunInfo:
    config = config if isinstance(config, dict) else {}
    models = _first(config, ("model",), ("model_names",), ("endpoint", "model_names"))
    model = models[0] if isinstance(models, list) and models else models if isinstance(models, str) else None
    concurrency = whole(_first(config, ("concurrency",), ("perf_analyzer", "stimulus", "concurrency")))
    rate = setting_text(
        _first(config, ("request_rate",), ("perf_analyzer", "stimulus", "request_rate")),
        path,
        "$.input_config",
        "request_rate",
    )
    parts = [
        "genai-perf",
        model,
        f"concurrency={concurrency}" if concurrency is not None else None,
        f"request_rate={rate}" if rate is not None else None,
    ]
    metadata = {
        k: str(v)
        for k, v in {
            "service_kind": _first(config, ("service_kind",), ("endpoint", "service_kind")),
            "endpoint_type": _first(config, ("endpoint_type",), ("endpoint", "type")),
            "streaming": _first(config, ("streaming",), ("endpoint", "streaming")),
        }.items()
        if v is not None
    }
    return RunInfo(
        label=" ".join(str(p) for p in parts if p is not None),
        tool=Tool.GENAI_PERF,
        input_target_tokens=whole(
            _first(config, ("synthetic_input_tokens_mean",), ("input", "synthetic_tokens", "mean"))
        ),
        output_cap_tokens=whole(_first(config, ("output_tokens_mean",), ("input", "output_tokens", "mean"))),
        concurrency=concurrency,
        request_rate=rate,
        request_count=whole(_first(config, ("request_count",), ("perf_analyzer", "stimulus", "request_count"))),
        seed=whole(_first(config, ("random_seed",), ("input", "random_seed"))),
        locator="$",
        metadata=metadata,
    )


IMPORTER = GenaiPerfSummaryImporter()
