"""A run's metric from the tool's own reported figure, where the ledger cannot derive it (issue 14).

An aggregate-only file (vLLM's result JSON without ``--save-detailed``, SGLang's JSON Lines, an
llmperf summary, a trtllm-bench report) has no per-request records, so every request metric of
`ledger metrics` is n/a. The tool printed equivalents, though: vLLM's ``total_token_throughput``
(tok/s) x 60 is a total TPM over the same tokens and the tool's own duration. :data:`EQUIVALENTS`
names, per tool, the reported key whose definition is the metric's (read from the tool's source,
docs/formats.md) and the exact scale; such a value is flagged ``reported`` (marker "r"): it was not
derived here, and it is never preferred to a value the records give.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.values import MetricValue
from bench_ledger.revisions import current
from bench_ledger.tools import PRINTED_ROUNDED, Tool

__all__ = ["Reported", "fill_reported", "markdown", "tool_keys"]

_PV = m.PublishedValue.__table__

_SERVING = {  # vLLM benchmarks/serve.py and SGLang bench_serving.py calculate_metrics
    "requests_ok": ("completed", Fraction(1), "completed (successful requests)"),
    "requests_failed": ("failed", Fraction(1), "failed"),
    "total_tpm": ("total_token_throughput", Fraction(60), "total_token_throughput (tok/s) x 60"),
    "output_tpm": ("output_throughput", Fraction(60), "output_throughput (tok/s) x 60"),
    "output_tokens_per_s": ("output_throughput", Fraction(1), "output_throughput (tok/s)"),
    "ttft_p50": ("median_ttft_ms", Fraction(1, 1000), "median_ttft_ms / 1000 (np.median over successful requests)"),
}
# metric -> (reported key, scale, how): the tool's definition equals the ledger's metric
_EQUIVALENTS: dict[str, dict[str, tuple[str, Fraction, str]]] = {
    Tool.VLLM_BENCH: _SERVING,
    Tool.VLLM_BENCHMARK_SERVING: _SERVING,
    Tool.SGLANG_BENCH: _SERVING,
    Tool.LLMPERF: {  # token_benchmark_ray.py metrics_summary
        "requests_ok": ("results_num_completed_requests", Fraction(1), "results_num_completed_requests"),
        "requests_failed": ("results_number_errors", Fraction(1), "results_number_errors"),
        "output_tpm": (
            "results_mean_output_throughput_token_per_s",
            Fraction(60),
            "results_mean_output_throughput_token_per_s (tok/s) x 60",
        ),
        "output_tokens_per_s": (
            "results_mean_output_throughput_token_per_s",
            Fraction(1),
            "results_mean_output_throughput_token_per_s (tok/s)",
        ),
        "ttft_p50": ("results_ttft_s_quantiles_p50", Fraction(1), "results_ttft_s_quantiles_p50 (pandas linear)"),
    },
    Tool.TRTLLM_BENCH: {  # reporting.py: totals over total_latency
        "total_tpm": (
            "performance.system_total_throughput_tok_s",
            Fraction(60),
            "performance.system_total_throughput_tok_s x 60",
        ),
        "output_tpm": (
            "performance.system_output_throughput_tok_s",
            Fraction(60),
            "performance.system_output_throughput_tok_s x 60",
        ),
        "output_tokens_per_s": (
            "performance.system_output_throughput_tok_s",
            Fraction(1),
            "performance.system_output_throughput_tok_s",
        ),
    },
    Tool.INFERENCE_PERF: {  # reportgen/base.py summarize_requests
        "requests_ok": ("successes.count", Fraction(1), "successes.count"),
        "requests_failed": ("failures.count", Fraction(1), "failures.count"),
        "total_tpm": (
            "successes.throughput.total_tokens_per_sec",
            Fraction(60),
            "successes.throughput.total_tokens_per_sec x 60",
        ),
        "output_tpm": (
            "successes.throughput.output_tokens_per_sec",
            Fraction(60),
            "successes.throughput.output_tokens_per_sec x 60",
        ),
        "output_tokens_per_s": (
            "successes.throughput.output_tokens_per_sec",
            Fraction(1),
            "successes.throughput.output_tokens_per_sec",
        ),
        "ttft_p50": (
            "successes.latency.time_to_first_token.median",
            Fraction(1),
            "successes.latency.time_to_first_token.median (np.median)",
        ),
    },
}


_MS = Fraction(1, 1000)
# vLLM bench serve / SGLang bench_serving: {stat}_{series}_ms (tools.SERVING_LATENCY_STAT); AIPerf: {series}.{stat}
_SERVING_SERIES = {"ttft": ("ttft",), "tpot": ("tpot",), "itl": ("itl",), "e2e_latency": ("e2el", "e2e_latency")}
_SERVING_TOTALS = {  # metric -> keys (vLLM's first, then SGLang's), scale
    "requests_ok": (("completed",), Fraction(1)),
    "requests_failed": (("failed",), Fraction(1)),
    "input_tokens": (("total_input_tokens",), Fraction(1)),
    "output_tokens": (("total_output_tokens",), Fraction(1)),
    "wall_clock_s": (("duration",), Fraction(1)),
    "request_throughput": (("request_throughput",), Fraction(1)),
    "output_tokens_per_s": (("output_throughput",), Fraction(1)),
    "total_tokens_per_s": (("total_token_throughput", "total_throughput"), Fraction(1)),
    "total_tpm": (("total_token_throughput", "total_throughput"), Fraction(60)),
    "output_tpm": (("output_throughput",), Fraction(60)),
    "peak_output_tokens_per_s": (("max_output_tokens_per_s",), Fraction(1)),
    "peak_concurrent_requests": (("max_concurrent_requests",), Fraction(1)),
}
# AIPerf: its inter_token_latency is (request_latency - TTFT) / (OSL - 1) per request, the ledger's TPOT;
# its inter_chunk_latency the gaps between chunks, the ledger's ITL (aiperf metrics/types)
_AIPERF_SERIES = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",
    "itl": "inter_chunk_latency",
    "e2e_latency": "request_latency",
    "isl": "input_sequence_length",
    "osl": "output_sequence_length",
}
_AIPERF_TOTALS = {
    "requests_ok": ("request_count.avg", Fraction(1)),
    "requests_failed": ("error_request_count.avg", Fraction(1)),
    "input_tokens": ("total_isl.avg", Fraction(1)),
    "output_tokens": ("total_osl.avg", Fraction(1)),
    "wall_clock_s": ("benchmark_duration.avg", Fraction(1)),
    "request_throughput": ("request_throughput.avg", Fraction(1)),
    "output_tokens_per_s": ("output_token_throughput.avg", Fraction(1)),
    "total_tokens_per_s": ("total_token_throughput.avg", Fraction(1)),
}
_SERVING_TOOLS = (Tool.VLLM_BENCH, Tool.VLLM_BENCHMARK_SERVING, Tool.SGLANG_BENCH)


def tool_keys(tool: str | None, metric: str) -> tuple[tuple[str, ...], Fraction]:
    """The keys (in order of preference) under which ``tool`` publishes ``metric`` by the same definition,
    and the scale to the metric's unit; ``((), 1)`` when it publishes none."""
    if tool in _EQUIVALENTS and metric in _EQUIVALENTS[tool]:
        key, scale, _ = _EQUIVALENTS[tool][metric]
        return (key,), scale
    hit = re.fullmatch(r"(?P<base>.+?)_(?P<stat>mean|min|max|std|p\d+(?:_\d+)?)", metric)
    base, stat = (hit["base"], hit["stat"].replace("_", ".")) if hit else (metric, "")
    if tool in _SERVING_TOOLS:
        if metric in _SERVING_TOTALS:
            return _SERVING_TOTALS[metric]
        if base in _SERVING_SERIES:
            word = {"mean": "mean", "p50": "median", "std": "std", "max": "max"}.get(stat, stat)
            return tuple(f"{word}_{series}_ms" for series in _SERVING_SERIES[base]), _MS
    if tool == Tool.LLMPERF and base == "output_tps" and stat != "std":  # its stddev is a sample one
        word = stat if stat in ("mean", "min", "max") else f"quantiles_{stat}"
        return (f"results_request_output_throughput_token_per_s_{word}",), Fraction(1)
    if tool == Tool.AIPERF:
        if metric in _AIPERF_TOTALS:
            key, scale = _AIPERF_TOTALS[metric]
            return (key,), scale
        if base in _AIPERF_SERIES:
            word = {"mean": "avg"}.get(stat, stat)
            return (f"{_AIPERF_SERIES[base]}.{word}",), (Fraction(1) if base in ("isl", "osl") else _MS)
    return (), Fraction(1)


class Reported:
    """The tool's own published figure for a metric over one run (R15: ``reported``, never derived here):
    each run's published values read once. A new instance per audit or draft."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str | None, str | None], int | None] = {}
        self._values: dict[int, tuple[str | None, dict[str, tuple[str, str, str, str]]]] = {}

    def __call__(self, ledger: Any, metric: MetricValue) -> MetricValue | None:
        """The figure the run's tool published for ``metric`` (a value the ledger evaluated over a run
        scope: its name, unit and kind), or None when it published none."""
        scope = metric.scope
        if scope.run is None or any(getattr(scope, k, None) is not None for k in ("deployment", "launch", "gpu")):
            return None
        at = (scope.batch, scope.run)
        if at not in self._runs or self._runs[at] not in self._values:  # read once per run
            with ledger.connection() as conn:
                rid = self._run_id(conn, scope)
                if rid is not None:
                    self._published(conn, rid)
        rid = self._runs[at]
        if rid is None:
            return None
        tool, values = self._values[rid]
        keys, scale = tool_keys(tool, metric.metric)
        for key in keys:
            if key in values:
                value, text, file_name, fmt = values[key]
                return MetricValue(
                    metric.metric,
                    scope,
                    Fraction(Decimal(value)) * scale,
                    metric.unit,
                    metric.quantity_kind,
                    "reported",
                    None,
                    {
                        "basis": f"reported by {tool} in {file_name}",
                        "reported_key": key,
                        "reported_text": text,
                        "file": file_name,
                        "scale": str(scale),
                        "printed_rounded": fmt in PRINTED_ROUNDED,
                    },
                    [rid],
                )
        return None

    def _run_id(self, conn: sa.Connection, scope: Any) -> int | None:
        key = (scope.batch, scope.run)
        if key not in self._runs:
            if scope.run.startswith("#"):
                self._runs[key] = int(scope.run[1:])
            else:
                B = m.Batch.__table__
                R = m.Run.__table__
                self._runs[key] = conn.execute(
                    sa.select(R.c.id)
                    .join(B, B.c.id == R.c.batch_id)
                    .where(R.c.label == scope.run, B.c.name == scope.batch, current(R))
                ).scalar()
        return self._runs[key]

    def _published(self, conn: sa.Connection, rid: int) -> tuple[str | None, dict[str, tuple[str, str, str, str]]]:
        if rid not in self._values:
            R, A = m.Run.__table__, m.Artefact.__table__
            row = conn.execute(
                sa.select(R.c.tool, sa.func.coalesce(R.c.origin_id, R.c.id)).where(R.c.id == rid)
            ).first()
            values: dict[str, tuple[str, str, str, str]] = {}
            if row is not None:
                for key, value, text, name, fmt in conn.execute(
                    sa.select(_PV.c.key, _PV.c.value, _PV.c.text, A.c.file_name, A.c.format)
                    .join(A, A.c.id == _PV.c.artefact_id)
                    .where(_PV.c.run_id == row[1], _PV.c.flag == "reported", current(_PV), _PV.c.value.is_not(None))
                    .order_by(_PV.c.id)
                ):
                    values.setdefault(key, (str(value), text, name, fmt))
            self._values[rid] = (row[0] if row else None, values)
        return self._values[rid]


def fill_reported(conn: sa.Connection, rows: list) -> None:
    """Replace each n/a value of ``rows`` (RunMetrics) by the tool's reported equivalent, if the
    run's artefacts report that key as a number: flag ``reported``, the key and scale in its inputs."""
    wanted: dict[int, dict[str, tuple[str, Fraction, str]]] = {}
    for rm in rows:
        eq = _EQUIVALENTS.get(rm.tool or "", {})
        todo = {n: eq[n] for n, v in rm.values.items() if v.value is None and n in eq}
        if todo:
            wanted[rm.run_id] = todo
    if not wanted:
        return
    origin = sa.func.coalesce(m.Run.__table__.c.origin_id, m.Run.__table__.c.id)
    keys = sorted({k for todo in wanted.values() for k, _, _ in todo.values()})
    R = m.Run.__table__
    found: dict[tuple[int, str], tuple[str, str, int | None]] = {}
    for rid, key, value, text, art in conn.execute(
        sa.select(R.c.id, _PV.c.key, _PV.c.value, _PV.c.text, _PV.c.artefact_id)
        .join(_PV, _PV.c.run_id == origin)
        .where(R.c.id.in_(list(wanted)), _PV.c.key.in_(keys), _PV.c.flag == "reported", current(_PV))
        .order_by(_PV.c.id)
    ):
        if value is not None:
            found.setdefault((rid, key), (value, text, art))
    for rm in rows:
        for name, (key, scale, how) in wanted.get(rm.run_id, {}).items():
            hit = found.get((rm.run_id, key))
            if hit is None:
                continue
            value, text, art = hit
            old = rm.values[name]
            rm.values[name] = MetricValue(
                name,
                old.scope,
                Fraction(Decimal(value)) * scale,
                old.unit,
                old.quantity_kind,
                "reported",
                None,
                {
                    "basis": f"the tool's own {how}: reported, not derived here ({old.metric}: {old.na_reason})",
                    "reported_key": key,
                    "reported_text": text,
                    "artefact": art,
                },
                list(old.run_ids) or [rm.run_id],
            )


def markdown() -> str:
    """The table docs/formats.md shows (kept current by a test): tool, metric, reported key and scale."""
    lines = ["| tool | metric | the tool's figure |", "|---|---|---|"]
    for tool, eq in _EQUIVALENTS.items():
        for metric, (_, _, how) in eq.items():
            lines.append(f"| {tool} | {metric} | {how} |")
    return "\n".join(lines) + "\n"
