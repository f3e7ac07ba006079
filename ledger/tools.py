"""The benchmark tools the ledger knows by name: one vocabulary for importers and checks.

An importer writes ``RunInfo.tool`` from here; ``queries.check.registry`` keys each tool's statistic
definitions and summary identities by the same member. Values are the strings stored in
``run.tool`` (a ``StrEnum`` compares equal to them), so adding a tool is one line here.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["PRINTED_ROUNDED", "SERVING_LATENCY_STAT", "Tool"]


class Tool(StrEnum):
    VLLM_BENCH = "vllm-bench"  # vllm bench serve / benchmark_serving.py --save-result
    VLLM_BENCHMARK_SERVING = "vllm-benchmark-serving"  # the legacy script, as the case study names it
    SGLANG_BENCH = "sglang-bench"  # python -m sglang.bench_serving
    LLMPERF = "llmperf"  # ray-project llmperf token_benchmark_ray.py
    AIPERF = "aiperf"  # NVIDIA AIPerf
    GENAI_PERF = "genai-perf"  # NVIDIA GenAI-Perf
    GUIDELLM = "guidellm"  # vllm-project guidellm
    INFERENCE_PERF = "inference-perf"  # kubernetes-sigs/inference-perf
    TRTLLM_BENCH = "trtllm-bench"  # NVIDIA TensorRT-LLM trtllm-bench --report_json
    MLPERF_LOADGEN = "mlperf-loadgen"  # MLPerf Inference loadgen logs
    GENAI_BENCH = "genai-bench"  # sgl-project/genai-bench


# Artefact formats whose numbers are text printed rounded by the tool (a console table, a log), never
# a float's ``repr``: "0.17" there is 0.17 +- 0.005, even though it reads like a JSON float.
PRINTED_ROUNDED = frozenset({"vllm-bench-console", "mlperf-summary", "mlperf-detail", "aiperf-csv"})

# The latency statistics the serving benchmarks print, ``{stat}_{series}_ms``: vLLM ``bench serve``
# writes e2el, SGLang ``bench_serving`` e2e_latency and also max_. One pattern for their importers
# (the key is a latency in ms) and for ``check`` (which series and statistic to recompute).
SERVING_LATENCY_STAT = re.compile(
    r"(?P<stat>mean|median|std|max|p\d+(?:\.\d+)?)_(?P<series>ttft|tpot|itl|e2el|e2e_latency)_ms"
)
