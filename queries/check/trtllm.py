"""trtllm-bench ``bench/dataclasses/statistics.py`` ``PercentileStats.from_iterable``: the value at
index ``int(n x q)`` of the sorted values (floor index), ``reporting.py`` for the rates (counts
over ``total_latency``, the span from the first start to the last end).
"""

from __future__ import annotations

from collections.abc import Iterator

from bench_ledger.queries.check.core import Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck, equal, ratio
from bench_ledger.queries.check.stat_definitions import FLOOR_INDEX
from bench_ledger.tools import Tool

__all__ = ["TRTLLM_BENCH"]

_TRT_BLOCKS = (
    "performance.request_latency_percentiles_ms",
    "streaming_metrics.tpot_percentiles",
    "streaming_metrics.ttft_percentiles",
    "streaming_metrics.gen_tps_percentiles",
    "dataset.isl_stats",
    "dataset.osl_stats",
    "dataset.seq_len_stats",
)


def _trtllm_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    n, lat = "request_info.num_requests", "performance.total_latency_ms"
    p = "performance."
    yield Identity(
        "request_throughput_req_s = num_requests / (total_latency_ms / 1000)",
        f"{p}request_throughput_req_s",
        (n, lat),
        lambda a, b: a * 1000 / b,
    )
    yield Identity(
        "system_output_throughput_tok_s = num_requests x avg_output_length / (total_latency_ms / 1000)",
        f"{p}system_output_throughput_tok_s",
        (n, "request_info.avg_output_length", lat),
        lambda a, b, c: a * b * 1000 / c,
    )
    yield Identity(
        "system_total_throughput_tok_s = num_requests x (avg_input_length + avg_output_length) / "
        "(total_latency_ms / 1000)",
        f"{p}system_total_throughput_tok_s",
        (n, "request_info.avg_input_length", "request_info.avg_output_length", lat),
        lambda a, b, c, d: a * (b + c) * 1000 / d,
    )
    yield ratio(
        "output_throughput_per_gpu_tok_s = system_output_throughput_tok_s / world_size",
        f"{p}output_throughput_per_gpu_tok_s",
        f"{p}system_output_throughput_tok_s",
        "world_info.world_size",
    )
    yield equal(f"{p}avg_request_latency_ms", f"{p}request_latency_percentiles_ms.average")
    s = "streaming_metrics."
    yield equal(f"{s}avg_ttft_ms", f"{s}ttft_percentiles.average")
    yield equal(f"{s}avg_tpot_ms", f"{s}tpot_percentiles.average")
    yield equal(f"{s}token_output_speed_tok_s", f"{s}gen_tps_percentiles.average")
    yield equal("dataset.num_requests", n)
    # floor index: p_q is the sorted value at int(n x q); where that is the last index it IS the maximum
    if n in values and values[n].value.denominator == 1:
        count = int(values[n].value)
        for block in _TRT_BLOCKS:
            for q in ("p50", "p90", "p95", "p99"):
                idx = _floor_index_at(count, q)
                if idx == count - 1:
                    yield Identity(
                        f"{block}.{q} = {block}.maximum (floor index int({count} x 0.{q[1:]}) = {idx}, the last)",
                        f"{block}.{q}",
                        (f"{block}.maximum",),
                        lambda a: a,
                    )
                elif idx == 0:
                    yield Identity(
                        f"{block}.{q} = {block}.minimum (floor index 0)",
                        f"{block}.{q}",
                        (f"{block}.minimum",),
                        lambda a: a,
                    )


def _floor_index_at(n: int, q: str) -> int:
    """The index trtllm-bench reads for ``q`` of ``n`` sorted values: ``int(n x 0.99)`` as a float."""
    return min(n - 1, int(n * (int(q[1:]) / 100)))


TRTLLM_BENCH = ToolCheck(
    Tool.TRTLLM_BENCH,
    FLOOR_INDEX,
    "tensorrt_llm/bench/dataclasses/statistics.py PercentileStats (sorted[int(n x q)]), "
    "reporting.py (rates over total_latency)",
    families=(_trtllm_identities,),
)
