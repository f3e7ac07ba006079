"""Each benchmark tool's statistic definitions and summary identities: one registry (R15).

:data:`REGISTRY` maps a :class:`bench_ledger.tools.Tool` to its :class:`~queries.check.identity.ToolCheck`,
one module per tool. Adding a format's checks is one module and one entry here (and a line in
docs/formats.md): :mod:`queries.check.checker` loads the records and the reported values, compares by
intervals and renders both sections.
"""

from __future__ import annotations

from bench_ledger.queries.check.aiperf import AIPERF, GENAI_PERF
from bench_ledger.queries.check.genai_bench import GENAI_BENCH
from bench_ledger.queries.check.guidellm import GUIDELLM
from bench_ledger.queries.check.identity import ToolCheck
from bench_ledger.queries.check.inference_perf import INFERENCE_PERF
from bench_ledger.queries.check.llmperf import LLMPERF
from bench_ledger.queries.check.mlperf import MLPERF_LOADGEN
from bench_ledger.queries.check.sglang import SGLANG
from bench_ledger.queries.check.trtllm import TRTLLM_BENCH
from bench_ledger.queries.check.vllm import VLLM
from bench_ledger.tools import Tool

__all__ = ["tool_check"]

_REGISTRY: dict[str, ToolCheck] = {
    tc.tool: tc
    for tc in (
        VLLM,
        SGLANG,
        LLMPERF,
        AIPERF,
        GENAI_PERF,
        GUIDELLM,
        INFERENCE_PERF,
        TRTLLM_BENCH,
        MLPERF_LOADGEN,
        GENAI_BENCH,
    )
}
_REGISTRY[Tool.VLLM_BENCHMARK_SERVING] = VLLM


def tool_check(tool: str | None) -> ToolCheck | None:
    """The registry entry of ``tool`` (a ``run.tool`` string), or None when the ledger has none."""
    return _REGISTRY.get(tool or "")
