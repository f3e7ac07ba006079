"""The small, documented word lists the claims drafter uses (docs/claims-draft.md), both languages.

Nothing here is about one report: the lists name units as benchmark write-ups print them, the words
that say what a number measures (TTFT, 输出, 并发, power, 功耗...), the parallel-layout prefixes of
LLM serving (TP8, EP16), and the statistic words (p50, 中位, max). A guess made from them is marked
for review in the draft with the cue that produced it; none is a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CHANGE_WORDS",
    "CLASSIFIERS",
    "CONCURRENCY_HEADER",
    "CONCURRENCY_NAME",
    "COUNT_NOUNS",
    "CUES",
    "EN_WORDS",
    "LABEL_WORDS",
    "NEGATIVE_WORDS",
    "SCOPE_LABEL",
    "SETTING_PREFIXES",
    "STATS",
    "UNITS",
    "UNIT_ALTERNATION",
    "Cue",
    "cjk_value",
]

# ----------------------------------------------------------------------------- units

# printed unit -> the unit the claims file uses. Longest first when matched.
UNITS: dict[str, str] = {
    "tokens/s": "tokens/s",
    "token/s": "tokens/s",
    "tok/s": "tokens/s",
    "tokens/sec": "tokens/s",
    "tokens/min": "tokens/min",
    "token/min": "tokens/min",
    "tok/min": "tokens/min",
    "req/s": "requests/s",
    "requests/s": "requests/s",
    "req/min": "requests/min",
    "Gb/s": "Gb/s",
    "GB/s": "GB/s",
    "MB/s": "MB/s",
    "Gbps": "Gb/s",
    "GiB": "GiB",
    "MiB": "MiB",
    "KiB": "KiB",
    "TB": "TB",
    "GB": "GB",
    "MB": "MB",
    "ms": "ms",
    "μs": "us",
    "us": "us",
    "ns": "ns",
    "s": "s",
    "sec": "s",
    "min": "min",
    "毫秒": "ms",
    "秒": "s",
    "分钟": "min",
    "小时": "h",
    "kW": "kW",
    "W": "W",
    "瓦": "W",
    "MHz": "MHz",
    "GHz": "GHz",
    "°C": "C",
    "℃": "C",
    "%": "%",
    "pp": "pp",
    "个百分点": "pp",
    "percentage points": "pp",
    "x": "x",
    "×": "x",
    "倍": "x",
    "tokens": "tokens",
    "token": "tokens",
    "tok": "tokens",
    "requests": "requests",
    "request": "requests",
    "GPUs": "GPUs",
    "GPU": "GPUs",
    "cards": "GPUs",
    "nodes": "nodes",
    "node": "nodes",
    "users": "users",
    "streams": "streams",
    "runs": "runs",
    "launches": "launches",
    "卡": "GPUs",
    "台": "nodes",
    "人": "users",
    "层": "layers",
    "轮": "rounds",
}
UNIT_ALTERNATION = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))

# A Chinese classifier (个, 次, 组, 条...) or an English count word after a number: the noun that
# follows names the unit ("48 个权重分片" -> shards). Words only, no report-specific phrases.
COUNT_NOUNS: dict[str, str] = {
    "专家": "experts",
    "experts": "experts",
    "调度槽": "slots",
    "槽": "slots",
    "slots": "slots",
    "分片": "shards",
    "shards": "shards",
    "端口": "ports",
    "ports": "ports",
    "请求": "requests",
    "窗口": "windows",
    "windows": "windows",
    "记录": "runs",
    "层": "layers",
    "layers": "layers",
    "token": "tokens",
    "tokens": "tokens",
    "卡": "GPUs",
    "GPU": "GPUs",
}
CLASSIFIERS = "次个台组卡份种条轮档倍人项批篇段张路位层"

# ----------------------------------------------------------------------------- number words

CJK_DIGITS = {"两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
# "one" / "一" are left out on purpose: they are mostly determiners ("one of", 一侧, 同一).
EN_WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}


def cjk_value(word: str) -> int | None:
    """二..九十九 as an integer (两 = 2); None for anything else."""
    if not word or any(ch not in CJK_DIGITS and ch != "十" for ch in word):
        return None
    if "十" not in word:
        return CJK_DIGITS[word] if len(word) == 1 else None
    tens, _, ones = word.partition("十")
    if "十" in ones or len(tens) > 1 or len(ones) > 1:
        return None
    t = CJK_DIGITS[tens] if tens else 1
    o = CJK_DIGITS[ones] if ones else 0
    return 10 * t + o


# ----------------------------------------------------------------------------- glued names

# Parallel-layout and configuration prefixes whose digits are a number the report states:
# TP8 (tensor parallel over 8 GPUs), DP2, EP16, PP2, NV18 (NVLink count), top-6 (experts per token).
SETTING_PREFIXES: dict[str, tuple[str, str]] = {
    "TP": ("GPUs", "count"),
    "DP": ("groups", "count"),
    "EP": ("GPUs", "count"),
    "PP": ("stages", "count"),
    "NV": ("links", "count"),
    "top-": ("experts", "count"),
}
# Scope labels: C = concurrency, N = number of requests (C4N8, C64, N16). They name a run; the
# drafter reads them as context and does not list them as claims.
SCOPE_LABEL = re.compile(r"^(?:C(?P<c>\d+))?(?:N(?P<n>\d+))?$")
# A header cell, row cell or heading word that names the load point (a concurrency) rather than what is
# measured: "1 并发", "c2", "c=8", "concurrency 16"; and a first column of concurrencies: "并发数", "Concurrency".
CONCURRENCY_NAME = re.compile(
    r"(?<![A-Za-z0-9_])(?:(?P<a>\d+)\s*(?:并发|concurrent|users)|c=?(?P<b>\d+)|"
    r"concurrency\s*=?\s*(?P<c>\d+))(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
CONCURRENCY_HEADER = re.compile(r"^\s*(?:并发数?|concurrency|max[ _-]?concurrency|conc\.?|c)\s*$", re.IGNORECASE)

# ----------------------------------------------------------------------------- what a number measures

# Cue words (case-insensitive for Latin) -> (quantity kind, unit when none is printed, metric stem).
# The nearest cue before the number wins; the column header and row label are read after the clause.


@dataclass(frozen=True)
class Cue:
    words: tuple[str, ...]
    kind: str
    unit: str | None = None
    metric: str | None = None  # a stem of queries.metrics names (ttft -> ttft_p50, ttft_max...)


CUES: tuple[Cue, ...] = (
    Cue(("总 TPM", "total TPM", "总TPM"), "aggregate_token_rate", "tokens/min", "total_tpm"),
    Cue(("输出 TPM", "output TPM", "输出TPM"), "aggregate_token_rate", "tokens/min", "output_tpm"),
    Cue(("TPM",), "aggregate_token_rate", "tokens/min", None),
    Cue(("TTFT", "首字", "time to first token"), "latency", "s", "ttft"),
    Cue(("TPOT", "time per output token"), "latency", "ms", "tpot"),
    Cue(("ITL", "inter-token latency"), "latency", "ms", "itl"),
    Cue(("E2E", "端到端", "end-to-end latency", "e2e latency", "request latency"), "latency", "s", "e2e_latency"),
    Cue(
        (
            "per-request output throughput",
            "request output throughput",
            "request_output_throughput",
            "output throughput per request",
            "单请求输出吞吐",
            "每请求输出吞吐",
        ),
        "per_stream_token_rate",
        "tokens/s",
        "output_tps",
    ),
    Cue(
        ("单流", "per-stream", "per stream", "single-stream", "single stream", "decode speed", "生成阶段速度"),
        "per_stream_token_rate",
        "tokens/s",
        "per_stream_decode_rate_median",
    ),
    Cue(
        (
            "聚合输出",
            "aggregate output",
            "output throughput",
            "输出吞吐",
            "输出 token 吞吐",
            "输出token吞吐",
            "output token throughput",
        ),
        "aggregate_token_rate",
        "tokens/s",
        "output_tokens_per_s",
    ),
    Cue(
        ("总 token 吞吐", "总token吞吐", "total token throughput", "total throughput"),
        "aggregate_token_rate",
        "tokens/s",
        "total_tokens_per_s",
    ),
    Cue(("throughput", "吞吐"), "aggregate_token_rate", "tokens/s", None),
    Cue(("请求吞吐", "request throughput", "QPS"), "request_rate", "requests/s", "request_throughput"),
    Cue(("ISL", "input sequence length"), "token_count", "tokens", "isl"),
    Cue(("OSL", "output sequence length"), "token_count", "tokens", "osl"),
    Cue(("总输入",), "token_count", "tokens", "input_tokens"),
    Cue(("总生成", "generated tokens"), "token_count", "tokens", "output_tokens"),
    Cue(("持续时间", "benchmark duration", "duration"), "duration", "s", "wall_clock_s"),
    Cue(("输入速度", "输入速率", "input rate", "input throughput"), "aggregate_token_rate", "tokens/s", None),
    Cue(("实际输入", "input tokens", "输入共"), "token_count", "tokens", "input_tokens"),
    Cue(("输出共", "output tokens", "实际输出", "输出分别"), "token_count", "tokens", "output_tokens"),
    Cue(("失败", "失败请求", "failed", "errors", "rejected", "拒绝"), "request_count", "requests", "requests_failed"),
    Cue(
        ("峰值输出", "峰值输出 token 吞吐", "峰值输出token吞吐", "peak output", "peak output token throughput"),
        "aggregate_token_rate",
        "tokens/s",
        "peak_output_tokens_per_s",
    ),
    Cue(("峰值并发", "峰值并发请求", "peak concurrent"), "concurrency", None, "peak_concurrent_requests"),
    Cue(("unknown",), "request_count", "requests", "requests_unknown"),
    Cue(("API 请求", "requests", "请求", "completed"), "request_count", "requests", "requests_ok"),
    Cue(("组记录", "record groups", "runs"), "record_count", "runs", "record_groups"),
    Cue(
        ("同窗均值功耗合计", "均值功耗合计", "sum of card means", "sum of the cards' mean"),
        "power_card_mean_sum",
        "W",
        "power_sum_of_card_means_w",
    ),
    Cue(("峰值合计", "peak of the sum", "peak total power"), "power_peak_of_sum", "W", "power_peak_of_sum_w"),
    Cue(("summed over the", "sum over the cards"), "power_card_mean_sum", "W", "power_sum_of_card_means_w"),
    Cue(("功耗", "power"), "power", "W", "power_w"),
    Cue(("sm 列", "sm column", " sm "), "activity_time_percent", "%", "gpu_activity_time_pct"),
    Cue(("mem 列", "mem column", " mem "), "memory_busy_percent", "%", "memory_busy_pct"),
    Cue(("KV 池", "KV pool", "KV cache size", "KV cache"), "kv_pool_tokens", "tokens", None),
    Cue(("容量比", "capacity ratio", "maximum concurrency"), "capacity_ratio", "x", "kv_capacity_ratio"),
    Cue(("就绪", "READY", "ready", "startup", "启动"), "startup_time", "s", "seconds_to_ready"),
    Cue(("权重", "weights", "目录"), "weights_file_size", "GB", None),
    Cue(("分配", "allocation"), "model_allocation", "GiB", None),
    Cue(("显存", "GPU memory", "memory"), "device_memory", "MiB", None),
    Cue(("并发", "concurrency", "max-num-seqs", "调度槽", "slots"), "concurrency", None, None),
    Cue(
        (
            "窗口",
            "上下文",
            "context",
            "max-model-len",
            "分块",
            "chunk",
            "输入目标",
            "输出上限",
            "input target",
            "output cap",
        ),
        "token_setting",
        "tokens",
        None,
    ),
)

# Statistic words -> the metric suffix (ttft + p50 -> ttft_p50).
STATS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("p50", "中位", "median"), "p50"),
    (("p25",), "p25"),
    (("p75",), "p75"),
    (("p90",), "p90"),
    (("p95",), "p95"),
    (("p99",), "p99"),
    (("p99.9",), "p99_9"),
    (("min", "最小"), "min"),
    (("std", "标准差", "stddev"), "std"),
    (("max", "最大", "峰值", "peak"), "max"),
    (("mean", "均值", "平均", "average", "avg"), "mean"),
)

# Words that make a % or x a change (percent_change / ratio) rather than a level.
CHANGE_WORDS = (
    "增",
    "降",
    "回落",
    "快",
    "慢",
    "高",
    "低",
    "提升",
    "下降",
    "改善",
    "faster",
    "slower",
    "higher",
    "lower",
    "increase",
    "decrease",
    "drop",
    "gain",
    "improv",
    "change",
    "fell",
    "rose",
    "up",
    "down",
)
NEGATIVE_WORDS = ("降", "回落", "慢", "低", "下降", "减", "slower", "lower", "decrease", "drop", "fell", "down")
# Cold / warm words for naming probe runs (a label token "cold" or "warm").
LABEL_WORDS: dict[str, str] = {"冷": "cold", "暖": "warm", "热": "warm", "cold": "cold", "warm": "warm"}
