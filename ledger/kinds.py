"""Quantity kinds: what a number *is*, independent of its unit.

Two values may be compared, converted or combined only within one kind (R1, R4, R5, R13, R14).
Units convert exactly within a kind (``ledger.units``); a kind never converts into another one.
"""

from __future__ import annotations

__all__ = [
    "CACHE_KINDS",
    "COUNTER_KINDS",
    "COUNT_KINDS",
    "INTEGER_KINDS",
    "KINDS",
    "LOAD_KINDS",
    "MEMORY_KINDS",
    "POWER_KINDS",
    "SCALAR_KINDS",
    "SUB_KINDS",
    "TIME_KINDS",
    "check_kind",
]

KINDS: dict[str, str] = {
    # counts
    "token_count": "a number of tokens (actual, measured or reported)",
    "cache_hit_tokens": "prompt tokens served from the prefix cache, as a response's cached-tokens field reports "
    "them: only ever from a captured cache field, never estimated from TTFT (R9)",
    "token_setting": "a workload setting in tokens (input target, output cap): not an actual length (R3)",
    "request_count": "a number of API requests",
    "record_count": "a number of record groups or files: never a request count (R2)",
    "concurrency": "requests in flight (configured or observed)",
    # time
    "duration": "a span of wall-clock or monotonic time",
    "latency": "a per-request time: TTFT, TPOT, inter-chunk gap, end-to-end latency",
    "startup_time": "seconds from process start to ready, of one launch stage (R8)",
    # rates
    "aggregate_token_rate": "tokens per unit time over a run's common wall clock (R3)",
    "per_stream_token_rate": "tokens per unit time within one stream (R4)",
    "request_rate": "requests per unit time",
    "power_normalized_rate": "a token rate divided by a power figure",
    # money (R9: a cache cost needs captured cache-hit tokens)
    "price_per_token": "a price per token (input miss, input hit or output)",
    "cost": "an amount of money for tokens at their prices",
    "cache_cost": "the cost of a run's prompt tokens split into cache hits and misses at their prices (R9)",
    # ratios
    "ratio": "a dimensionless ratio of two values of one kind",
    "percent_change": "a relative change in percent",
    "capacity_ratio": "KV pool tokens / window tokens: a theoretical capacity, never a concurrency (R5)",
    # memory (R1: three numbers, three kinds)
    "weights_file_size": "size of the model weights on disk",
    "model_allocation": "per-rank model memory allocation reported by the engine log",
    "device_memory": "GPU memory in use or visible, as reported by the driver",
    "kv_cache_memory": "memory available to the KV cache",
    "kv_pool_tokens": "KV cache capacity in tokens",
    # hardware counters (R13, R14)
    "power_card_mean_sum": "sum over cards of each card's window mean power (R14)",
    "power_peak_of_sum": "peak over time of the instantaneous sum of card power (R14)",
    "power_sum_of_peaks": "sum over cards of each card's own peak power (R14)",
    "power": "power of one card at one time or its statistic",
    "activity_time_percent": "dmon sm: share of time a kernel ran; not SM occupancy nor MFU (R13)",
    "memory_busy_percent": "dmon mem: share of time the memory controller was busy (R13)",
    "utilization_percent": "another dmon utilisation counter (enc, dec, jpg, ofa)",
    # what people claim a counter is (R13): nameable so that the claim can be written, then refused
    "sm_active_percent": "share of SM cycles with at least one warp resident (a profiler counter, not dmon sm) (R13)",
    "tensor_active_percent": "share of cycles the tensor cores were busy (a profiler counter) (R13)",
    "mfu": "model FLOPs utilisation: achieved model FLOP/s over the hardware's peak (needs a FLOP model) (R13)",
    "memory_bandwidth_utilization": "achieved memory bandwidth over the peak (a profiler counter, not dmon mem) (R13)",
    "temperature": "a temperature",
    "clock_frequency": "a clock frequency",
    "bandwidth": "a data rate (PCIe throughput)",
    "count": "a dimensionless count of events",
    "constant": "a dimensionless exact constant (60 s/min, 8 GPUs): an exact literal needs no kind",
    "other": "a number whose kind the ledger does not classify",
}


# Families of kinds, for the rules that treat a family alike (one home: the audit, its type rules,
# check and the claims drafter all read them here).
MEMORY_KINDS = frozenset({"weights_file_size", "model_allocation", "device_memory", "kv_cache_memory"})
POWER_KINDS = frozenset({"power_card_mean_sum", "power_peak_of_sum", "power_sum_of_peaks", "power"})
# dmon counters and what people claim they are (R13)
COUNTER_KINDS = frozenset({"activity_time_percent", "memory_busy_percent", "utilization_percent"})
CLAIMED_COUNTER_KINDS = frozenset({"sm_active_percent", "tensor_active_percent", "mfu", "memory_bandwidth_utilization"})
RATE_KINDS = frozenset({"aggregate_token_rate", "per_stream_token_rate"})
COUNT_KINDS = frozenset({"token_count", "request_count", "record_count", "count", "cache_hit_tokens"})
# kinds that only a captured cache field gives (R9)
CACHE_KINDS = frozenset({"cache_hit_tokens", "cache_cost"})
# kinds that scale another value without changing what it is
SCALAR_KINDS = frozenset({"count", "ratio", "constant"})
LOAD_KINDS = frozenset({"concurrency", "request_count", "request_rate"})
# kinds whose values are integers: a printed "2" is exactly 2 (R11 with GRIM's premise)
INTEGER_KINDS = frozenset(
    {"count", "token_count", "request_count", "record_count", "concurrency", "token_setting", "kv_pool_tokens"}
)
# a sub-kind is its kind too: captured cache-hit tokens are a number of tokens (a `cache_hit_tokens`
# metric backs a `token_count` claim; never the reverse, R9)
SUB_KINDS: dict[str, str] = {"cache_hit_tokens": "token_count"}
# kinds of a time span: a value of one of them divides a count into a rate (R3)
TIME_KINDS = frozenset({"latency", "duration", "startup_time"})


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown quantity kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    return kind
