"""ray-project llmperf ``*_summary.json``: one flat JSON object of settings and ``results_*`` aggregates.

Every ``results_*`` number is llmperf's own claim (R15) and is kept as ``reported`` with the exact
text it printed. The file is written with ``json.dump(..., default=str)``, so some integers arrive
as strings (``"results_number_input_tokens_min": "550"``): they keep their text ``"550"`` and the
value ``Decimal("550")``. Units come from the key names llmperf chose (``_s``, ``_token_per_s``,
``_per_min``, ``number_*_tokens``); counts and rates without a unit in their name get none.

The file has no per-request records: its run's capture has no fields and ``record_count`` 0; the
individual-responses file is a separate artefact (:mod:`importers.llmperf`), paired with this one by
the file prefix they share and ``results_num_requests_started`` (``ledger.pairing``).
"""

from __future__ import annotations

import re
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import has_key, head_text, integer, jpath, published, stated, whole
from bench_ledger.importers.base import ParseOptions, load_json
from bench_ledger.importers.llmperf import pairing
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

# What the summary states of the system under test and the load (token_benchmark_ray.py's
# metadata): mean input and output tokens are the requested lengths, not actual ones (R3).
FACTORS = {
    "model": (("model",),),
    "input_len": (("mean_input_tokens",),),
    "output_len": (("mean_output_tokens",),),
    "concurrency": (("num_concurrent_requests",),),
}

# Per-request metrics llmperf summarises: name -> (unit stated by the name, quantity kind).
_METRICS: dict[str, tuple[str | None, str]] = {
    "ttft_s": ("s", "latency"),
    "inter_token_latency_s": ("s", "latency"),
    "end_to_end_latency_s": ("s", "latency"),
    "request_output_throughput_token_per_s": ("tokens/s", "per_stream_token_rate"),
    "number_input_tokens": ("tokens", "token_count"),
    "number_output_tokens": ("tokens", "token_count"),
    "number_total_tokens": ("tokens", "token_count"),
}
# Run-level results: key -> (unit, kind); None kind = not a number (error_code_frequency).
_RUN_RESULTS: dict[str, tuple[str | None, str | None]] = {
    "results_num_requests_started": (None, "request_count"),
    "results_num_completed_requests": (None, "request_count"),
    "results_number_errors": (None, "request_count"),
    "results_error_rate": (None, "ratio"),
    "results_error_code_frequency": (None, None),
    "results_mean_output_throughput_token_per_s": ("tokens/s", "aggregate_token_rate"),
    "results_num_completed_requests_per_min": ("requests/min", "request_rate"),
}
_STAT = re.compile(r"^results_(?P<metric>.+?)_(?P<stat>quantiles_p\d+|mean|min|max|stddev)$")

SUCCESS_RULE = "no request records in this file; llmperf counts a request as failed when error_code is set"


class LlmperfSummaryImporter:
    name = "llmperf-summary"
    description = "ray-project llmperf *_summary.json (results_* aggregates)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if re.search(r'"results_[a-z0-9_]+"\s*:', text) is None:
            return "no llmperf results_* keys"
        if has_key(text, "benchmarks") or has_key(text, "experiments"):
            return "has benchmarks/experiments: not an llmperf summary"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = load_json(path)
        if not isinstance(data, dict):
            raise ParseError(path, "$", None, "expected a JSON object (llmperf summary)")
        published = [p for key, raw in data.items() if key.startswith("results_") for p in _published(key, raw)]
        version = data.get("version")
        model = data.get("model")
        concurrency = data.get("num_concurrent_requests")
        in_target = data.get("mean_input_tokens")
        out_cap = data.get("mean_output_tokens")
        name = data.get("name")
        label = (
            f"llmperf {name}"
            if isinstance(name, str) and name
            else (f"llmperf {model} {in_target}/{out_cap} c{concurrency}")
        )
        metadata = {
            k: str(data[k])
            for k in ("name", "model", "framework", "stddev_input_tokens", "stddev_output_tokens", "timestamp")
            if data.get(k) is not None
        }
        run = ParsedRun(
            info=RunInfo(
                label=label,
                tool=Tool.LLMPERF,
                # mean_input_tokens / mean_output_tokens are workload settings (R3), not actual lengths.
                input_target_tokens=integer(path, jpath("mean_input_tokens"), "mean_input_tokens", in_target),
                output_cap_tokens=integer(path, jpath("mean_output_tokens"), "mean_output_tokens", out_cap),
                concurrency=integer(path, jpath("num_concurrent_requests"), "num_concurrent_requests", concurrency),
                request_count=None,
                locator="$",
                factors=stated(path, data, FACTORS),
                metadata=metadata,
                pairing=pairing(path, ("_summary", "summary_"), whole_text(data.get("results_num_requests_started"))),
            ),
            capture=Capture(fields=[], record_count=0, token_source="client_tokenizer", success_rule=SUCCESS_RULE),
            published=published,
        )
        return ParsedArtefact(
            format=self.name, format_version=str(version) if version is not None else None, runs=[run]
        )


def whole_text(value: object) -> int | None:
    """A count llmperf wrote as a number or (``default=str``) as its text; None when it is neither."""
    if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()):
        return int(value)
    return whole(value)


def _published(key: str, raw: object) -> list[Published]:
    if key in _RUN_RESULTS:
        unit, kind = _RUN_RESULTS[key]
        if kind is None:  # a printed string such as "{}": kept as text, no number
            return [Published(key=key, text=str(raw), unit=None, locator=jpath(key))]
    elif (m := _STAT.match(key)) and m["metric"] in _METRICS:
        unit, kind = _METRICS[m["metric"]]
    else:
        unit, kind = None, "other"
    p = published(key, raw, locator=jpath(key), unit=unit, kind=kind)
    return [p] if p is not None else []


IMPORTER = LlmperfSummaryImporter()
