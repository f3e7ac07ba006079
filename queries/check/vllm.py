"""vLLM ``benchmarks/serve.py``: the serving checks plus the run's declared ``num_prompts``."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from bench_ledger.queries.check.core import Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck
from bench_ledger.queries.check.serving import SERVING_RATES, median_is_p50, recompute_serving
from bench_ledger.queries.check.stat_definitions import (
    NUMPY_LINEAR,
)
from bench_ledger.queries.intervals import Interval
from bench_ledger.tools import Tool

__all__ = ["VLLM"]


def _num_prompts(values: dict[str, Reported], run) -> Iterator[Identity]:
    """vLLM ``calculate_metrics``: every one of the ``num_prompts`` requests is either completed or
    failed, so completed = num_prompts - failed (num_prompts is the run's request_count setting)."""
    n = getattr(run, "request_count", None)
    if n is None or "failed" not in values:
        return
    yield Identity(
        f"completed = num_prompts - failed (completed + failed = num_prompts {n})",
        "completed",
        ("failed",),
        lambda f: Interval.point(Fraction(n)) - f,
    )


VLLM = ToolCheck(
    Tool.VLLM_BENCH,
    NUMPY_LINEAR,
    "vllm benchmarks/serve.py calculate_metrics (np.mean, np.median, np.std, np.percentile)",
    recompute=recompute_serving,
    fixed=SERVING_RATES,
    families=(median_is_p50,),
    declared=_num_prompts,
)
