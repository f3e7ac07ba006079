"""SGLang ``bench_serving.py``: the serving checks (numpy, as vLLM)."""

from __future__ import annotations

from bench_ledger.queries.check.identity import ToolCheck
from bench_ledger.queries.check.serving import SERVING_RATES, median_is_p50, recompute_serving
from bench_ledger.queries.check.stat_definitions import (
    NUMPY_LINEAR,
)
from bench_ledger.tools import Tool

__all__ = ["SGLANG"]

SGLANG = ToolCheck(
    Tool.SGLANG_BENCH,
    NUMPY_LINEAR,
    "sglang python/sglang/bench_serving.py calculate_metrics (numpy)",
    recompute=recompute_serving,
    fixed=SERVING_RATES,
    families=(median_is_p50,),
)
