"""AIPerf and its predecessor GenAI-Perf: numpy statistics per ``metric.stat`` key, and AIPerf's rate identities."""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction

from bench_ledger.queries.check.core import Records, Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck, equal, product, ratio
from bench_ledger.queries.check.stat_definitions import (
    NUMPY_LINEAR,
    NotDerivable,
)
from bench_ledger.tools import Tool

__all__ = ["AIPERF", "GENAI_PERF"]

_METRIC_STAT = re.compile(r"(?:records\.)?(?P<metric>[a-z0-9_]+)\.(?P<stat>avg|min|max|std|count|sum|p\d+(?:\.\d+)?)")
_PERF_SERIES = {  # metric tag -> (request column, scale to the tool's unit)
    "ttft": ("ttft_s", 1000),
    "time_to_first_token": ("ttft_s", 1000),
    "request_latency": ("latency_s", 1000),
    "input_sequence_length": ("input_tokens", 1),
    "output_sequence_length": ("output_tokens", 1),
}


# AIPerf's run-level metrics (BaseAggregateMetric / BaseDerivedMetric, aiperf/metrics/types/*.py): one
# value per run, which the aggregate file writes as MetricResult(avg=value, count=1)
_PERF_TOTALS = {
    "total_isl": "input_sequence_length",
    "total_osl": "output_sequence_length",
    "total_output_tokens": "output_token_count",
    "total_reasoning_tokens": "reasoning_token_count",
}
_AIPERF_RUN = (
    "request_count",
    "error_request_count",
    "min_request_timestamp",
    "max_response_timestamp",
    "benchmark_duration",
    "request_throughput",
    "output_token_throughput",
    *_PERF_TOTALS,
)
# the old schema's record tags (AIPerf ~0.1/0.2: ttft, ttst) for the metric names of its CSV export and newer files
_AIPERF_OLD_TAGS = {"time_to_second_token": "ttst"}
_ERROR_SUMMARY = re.compile(r"(?:records\.)?error_summary\.(?P<i>\d+)\.count")


def _aiperf(key: str, rec: Records) -> tuple[Fraction, str]:
    """AIPerf ``metric.stat`` by AIPerf's own definitions (aiperf/metrics/types/*.py,
    post_processors): a record metric's statistics are numpy's over the valid records that carry it
    (a record whose metric raises NoMetricValue has none); run-level metrics are counted, summed or
    taken min/max over the valid records; error counts over the error records."""
    rec.need_status()
    if _ERROR_SUMMARY.fullmatch(key):
        details = rec.notes.get(key)
        if details is None:
            raise NotDerivable("the error_summary entry's error details (code, type, message) were not kept")
        # records_manager get_error_summary: error records counted per ErrorDetails (code, type, message)
        n = sum(1 for r in rec.failed if r.get("error") == details)
        return Fraction(n), f"error records whose error is {details!r} (AIPerf groups errors by code, type and message)"
    mt = _METRIC_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, stat = mt["metric"], mt["stat"]
    if metric in _AIPERF_RUN:
        value, how = _aiperf_run(metric, rec)
        if stat == "count":
            return Fraction(1), "a run-level metric is one value: AIPerf writes MetricResult(avg=value, count=1)"
        if stat != "avg":
            raise NotDerivable(
                f"a run-level metric's result holds avg and count (MetricResult(avg=value, count=1)), no {stat}"
            )
        return value, how
    if metric == "inter_chunk_latency":  # every chunk gap of the ok records, flattened, in ms
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        return NUMPY_LINEAR.stat(rec.gaps.scaled(1000), stat), "over the ok records' chunk gaps, flattened"
    if metric in _PERF_SERIES:
        col, scale = _PERF_SERIES[metric]
        return NUMPY_LINEAR.stat(rec.column(col).scaled(scale), stat), "over ok records"
    tag = _AIPERF_OLD_TAGS.get(metric, metric) if metric not in rec.values else metric
    series, lacking = rec.present(tag)
    how = "over ok records" + (f" ({tag})" if tag != metric else "")
    if lacking:
        how = (
            f"over the {len(series)} of {len(series) + lacking} ok records that carry {tag} (AIPerf computes a "
            "record's metric only where it has one)"
        )
    return NUMPY_LINEAR.stat(series, stat), how


def _aiperf_run(metric: str, rec: Records) -> tuple[Fraction, str]:
    """One run-level AIPerf metric from the records, in the unit AIPerf reports it (s, requests/s,
    tokens/s, ns, tokens), and how."""
    if metric == "request_count":  # RequestCountMetric: 1 per valid record, summed
        return Fraction(len(rec.ok)), "valid (error-free) records, 1 each (RequestCountMetric)"
    if metric == "error_request_count":  # ErrorRequestCountMetric: 1 per error record, summed
        return Fraction(len(rec.failed)), "error records, 1 each (ErrorRequestCountMetric)"
    if metric in _PERF_TOTALS:
        series, lacking = rec.present(_PERF_TOTALS[metric])
        return sum(series, Fraction(0)), f"sum of the ok records' {_PERF_TOTALS[metric]}" + (
            f" ({len(series)} records carry it, {lacking} do not)" if lacking else ""
        )
    for name, needed in (("min_request_timestamp", "send_time"), ("max_response_timestamp", "end_time")):
        if needed not in rec.fields:
            raise NotDerivable(f"needed field {needed} not captured (AIPerf's {name} is over the records' times)")
    if not rec.ok:
        raise NotDerivable("no valid record: AIPerf has no request timestamps to span")
    if lacking := sum(r["send_ns"] is None or r["end_ns"] is None for r in rec.ok):
        raise NotDerivable(f"{lacking} of the {len(rec.ok)} valid records lack a start or end time")
    lo, hi = min(Fraction(r["send_ns"]) for r in rec.ok), max(Fraction(r["end_ns"]) for r in rec.ok)
    if metric == "min_request_timestamp":
        return lo, "earliest request start of the valid records, epoch ns (MinRequestTimestampMetric)"
    if metric == "max_response_timestamp":
        return hi, "latest last-response time of the valid records, epoch ns (MaxResponseTimestampMetric)"
    duration = (hi - lo) / 10**9
    if metric == "benchmark_duration":
        return (
            duration,
            "max_response_timestamp - min_request_timestamp of the valid records, in s (BenchmarkDurationMetric)",
        )
    if metric == "request_throughput":
        return Fraction(len(rec.ok)) / duration, "request_count / benchmark_duration, both from the records"
    # output_token_throughput: BenchmarkTokenCount (total output sequence length) / benchmark_duration
    series, _ = rec.present("output_sequence_length")
    return sum(series, Fraction(0)) / duration, "total_osl / benchmark_duration, both from the records"


_GENAI_PERF_SOURCE = (
    "genai-perf/genai_perf/profile_data_parser/llm_profile_data_parser.py _parse_requests @00168fe7 "
    "and genai_perf/metrics/statistics.py Statistics @0518df11 (triton-inference-server/perf_analyzer)"
)
_GENAI_TIMES = {"time_to_first_token": "ttft_s", "request_latency": "latency_s"}
_GENAI_TOKENS = (
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_request",
    "output_sequence_length",
    "input_sequence_length",
)


def _genai_perf(key: str, rec: Records) -> tuple[Fraction, str]:
    """GenAI-Perf ``metric.stat`` by its own definitions (:data:`GENAI_PERF_SOURCE`): per request, after
    dropping responses without content, TTFT = first response - request timestamp, latency = last
    response - request timestamp, TTST = second - first response (requests with a response only);
    request_throughput = len(requests) / ((max last response - min request timestamp) / 1e9) (every
    request of the experiment counted, also one skipped for an empty response); statistics np.mean,
    np.percentile (linear), np.min, np.max, np.std (population), times in ns scaled by 1e-6 to ms,
    the system metrics (throughputs) avg only."""
    rec.need_status()
    if rec.failed:
        raise NotDerivable(
            f"{len(rec.failed)} of the records failed: GenAI-Perf stops at an error response "
            "(GenAIPerfException), so no summary of it covers a failed request"
        )
    mt = _METRIC_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, stat = mt["metric"], mt["stat"]
    if stat in ("count", "sum"):
        raise NotDerivable(f"GenAI-Perf's Statistics writes no {stat}")
    # _parse_requests skips a request left without a response that has content (its TTFT is None here)
    answered = [r for r in rec.ok if r["ttft_s"] is not None and r["latency_s"] is not None]
    skipped = (
        f"; {len(rec.ok) - len(answered)} without content skipped, as GenAI-Perf does"
        if len(answered) < len(rec.ok)
        else ""
    )
    if metric in _GENAI_TIMES:
        if _GENAI_TIMES[metric] not in rec.fields:
            raise NotDerivable(f"needed field {_GENAI_TIMES[metric]} not captured")
        if not answered:
            raise NotDerivable("no request has a response with content")
        series = [Fraction(r[_GENAI_TIMES[metric]]) * 1000 for r in answered]
        return NUMPY_LINEAR.stat(series, stat), f"over the {len(answered)} requests with a response, in ms{skipped}"
    if metric == "time_to_second_token":
        firsts = [Fraction(g[0]) * 1000 for g in rec.record_gaps() if g]
        if not firsts:
            raise NotDerivable("no request has a second response")
        return NUMPY_LINEAR.stat(firsts, stat), "second - first response of the requests with two or more, in ms"
    if metric == "request_throughput":
        if stat != "avg":
            raise NotDerivable("a system metric: GenAI-Perf writes its avg only")
        if not {"send_time", "end_time"} <= rec.fields:
            raise NotDerivable("needed fields send_time and end_time not captured")
        if not answered:
            raise NotDerivable("no request has a response with content")
        lo, hi = min(r["send_ns"] for r in answered), max(r["end_ns"] for r in answered)
        n = len(rec.statuses)
        return Fraction(n) / (Fraction(hi - lo) / 10**9), (
            f"all {n} requests / (max last response - min request timestamp of the {len(answered)} with a response)"
        )
    if metric in _GENAI_TOKENS:
        counts = (
            "their token counts are the server's usage, not GenAI-Perf's tokenizer's"
            if "output_tokens" in rec.fields
            else "they carry no token counts"
        )
        raise NotDerivable(
            f"GenAI-Perf counts tokens with its own tokenizer over the request and response texts; {counts}"
        )
    if metric == "request_goodput":
        raise NotDerivable("needs GenAI-Perf's goodput constraints (--goodput), not in the records")
    raise NotDerivable(f"{metric!r} is not a metric of the GenAI-Perf source read (Statistics over LLMMetrics)")


def _avg_times_count(values: dict[str, Reported]) -> Iterator[Identity]:
    """AIPerf: a metric's sum is avg x count (its MetricResult); totals are sums over the records."""
    for key in values:
        if key.endswith(".avg"):
            base = key[: -len(".avg")]
            if f"{base}.sum" in values and f"{base}.count" in values:
                yield product(f"{base}.sum = {base}.avg x {base}.count", f"{base}.sum", f"{base}.avg", f"{base}.count")
    for pre in _aiperf_prefixes(values):
        for total, dist in (
            ("total_isl", "input_sequence_length"),
            ("total_osl", "output_sequence_length"),
            ("total_output_tokens", "output_token_count"),
            ("total_reasoning_tokens", "reasoning_token_count"),
        ):
            t, a, c = f"{pre}{total}.avg", f"{pre}{dist}.avg", f"{pre}{dist}.count"
            yield product(f"{t} = {a} x {c}", t, a, c)


def _aiperf_prefixes(values: dict[str, Reported]) -> list[str]:
    """Where a run's AIPerf metrics sit: ``records.`` (the old JSON export), top level (the new JSON
    export, the CSV export); a run holding both exports has both."""
    return [
        pre
        for pre, present in (
            ("records.", any(k.startswith("records.") for k in values)),
            ("", any(not k.startswith("records.") for k in values)),
        )
        if present
    ]


def _aiperf_rates(values: dict[str, Reported]) -> Iterator[Identity]:
    for pre in _aiperf_prefixes(values):
        yield from _aiperf_rates_at(pre)


def _aiperf_rates_at(pre: str) -> Iterator[Identity]:
    d = f"{pre}benchmark_duration.avg"
    yield ratio(
        f"{pre}request_throughput.avg = {pre}request_count.avg / {d}",
        f"{pre}request_throughput.avg",
        f"{pre}request_count.avg",
        d,
    )
    # BenchmarkTokenCount: the total output sequence length (output + reasoning tokens)
    yield ratio(
        f"{pre}output_token_throughput.avg = {pre}total_osl.avg / {d}",
        f"{pre}output_token_throughput.avg",
        f"{pre}total_osl.avg",
        d,
    )
    yield Identity(
        f"{d} = ({pre}max_response_timestamp.avg - {pre}min_request_timestamp.avg) / 1e9",
        d,
        (f"{pre}max_response_timestamp.avg", f"{pre}min_request_timestamp.avg"),
        lambda a, b: (a - b) / 10**9,
    )
    yield equal(f"{pre}request_count.avg", f"{pre}request_latency.count")


AIPERF = ToolCheck(
    Tool.AIPERF,
    NUMPY_LINEAR,
    "aiperf metrics (numpy percentiles over the record arrays; derived metrics "
    "aiperf/metrics/types/*_throughput_metric.py)",
    recompute=_aiperf,
    families=(_avg_times_count, _aiperf_rates),
)
GENAI_PERF = ToolCheck(Tool.GENAI_PERF, NUMPY_LINEAR, _GENAI_PERF_SOURCE, recompute=_genai_perf)
