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

from decimal import Decimal
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.books import current
from bench_ledger.queries.values import MetricValue
from bench_ledger.tools import Tool

PV = m.PublishedValue.__table__

_SERVING = {  # vLLM benchmarks/serve.py and SGLang bench_serving.py calculate_metrics
    "requests_ok": ("completed", Fraction(1), "completed (successful requests)"),
    "requests_failed": ("failed", Fraction(1), "failed"),
    "total_tpm": ("total_token_throughput", Fraction(60), "total_token_throughput (tok/s) x 60"),
    "output_tpm": ("output_throughput", Fraction(60), "output_throughput (tok/s) x 60"),
    "output_tokens_per_s": ("output_throughput", Fraction(1), "output_throughput (tok/s)"),
    "ttft_p50": ("median_ttft_ms", Fraction(1, 1000), "median_ttft_ms / 1000 (np.median over successful requests)"),
}
# metric -> (reported key, scale, how): the tool's definition equals the ledger's metric
EQUIVALENTS: dict[str, dict[str, tuple[str, Fraction, str]]] = {
    Tool.VLLM_BENCH: _SERVING,
    Tool.VLLM_BENCHMARK_SERVING: _SERVING,
    Tool.SGLANG_BENCH: _SERVING,
    Tool.LLMPERF: {  # token_benchmark_ray.py metrics_summary
        "requests_ok": ("results_num_completed_requests", Fraction(1), "results_num_completed_requests"),
        "requests_failed": ("results_number_errors", Fraction(1), "results_number_errors"),
        "output_tpm": ("results_mean_output_throughput_token_per_s", Fraction(60),
                       "results_mean_output_throughput_token_per_s (tok/s) x 60"),
        "output_tokens_per_s": ("results_mean_output_throughput_token_per_s", Fraction(1),
                                "results_mean_output_throughput_token_per_s (tok/s)"),
        "ttft_p50": ("results_ttft_s_quantiles_p50", Fraction(1), "results_ttft_s_quantiles_p50 (pandas linear)"),
    },
    Tool.TRTLLM_BENCH: {  # reporting.py: totals over total_latency
        "total_tpm": ("performance.system_total_throughput_tok_s", Fraction(60),
                      "performance.system_total_throughput_tok_s x 60"),
        "output_tpm": ("performance.system_output_throughput_tok_s", Fraction(60),
                       "performance.system_output_throughput_tok_s x 60"),
        "output_tokens_per_s": ("performance.system_output_throughput_tok_s", Fraction(1),
                                "performance.system_output_throughput_tok_s"),
    },
    Tool.INFERENCE_PERF: {  # reportgen/base.py summarize_requests
        "requests_ok": ("successes.count", Fraction(1), "successes.count"),
        "requests_failed": ("failures.count", Fraction(1), "failures.count"),
        "total_tpm": ("successes.throughput.total_tokens_per_sec", Fraction(60),
                      "successes.throughput.total_tokens_per_sec x 60"),
        "output_tpm": ("successes.throughput.output_tokens_per_sec", Fraction(60),
                       "successes.throughput.output_tokens_per_sec x 60"),
        "output_tokens_per_s": ("successes.throughput.output_tokens_per_sec", Fraction(1),
                                "successes.throughput.output_tokens_per_sec"),
        "ttft_p50": ("successes.latency.time_to_first_token.median", Fraction(1),
                     "successes.latency.time_to_first_token.median (np.median)"),
    },
}  # fmt: skip


def fill_reported(conn: sa.Connection, rows: list) -> None:
    """Replace each n/a value of ``rows`` (RunMetrics) by the tool's reported equivalent, if the
    run's artefacts report that key as a number: flag ``reported``, the key and scale in its inputs."""
    wanted: dict[int, dict[str, tuple[str, Fraction, str]]] = {}
    for rm in rows:
        eq = EQUIVALENTS.get(rm.tool or "", {})
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
        sa.select(R.c.id, PV.c.key, PV.c.value, PV.c.text, PV.c.artefact_id)
        .join(PV, PV.c.run_id == origin)
        .where(R.c.id.in_(list(wanted)), PV.c.key.in_(keys), PV.c.flag == "reported", current(PV))
        .order_by(PV.c.id)
    ):  # fmt: skip
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
                name, old.scope, Fraction(Decimal(value)) * scale, old.unit, old.quantity_kind, "reported", None,
                {"basis": f"the tool's own {how}: reported, not derived here ({old.metric}: {old.na_reason})",
                 "reported_key": key, "reported_text": text, "artefact": art},
                list(old.run_ids) or [rm.run_id],
            )  # fmt: skip


def markdown() -> str:
    """The table docs/formats.md shows (kept current by a test): tool, metric, reported key and scale."""
    lines = ["| tool | metric | the tool's figure |", "|---|---|---|"]
    for tool, eq in EQUIVALENTS.items():
        for metric, (_, _, how) in eq.items():
            lines.append(f"| {tool} | {metric} | {how} |")
    return "\n".join(lines) + "\n"
