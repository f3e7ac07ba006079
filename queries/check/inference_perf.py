"""inference-perf ``reportgen/base.py`` ``summarize_requests``: numpy (``np.mean``, ``np.percentile``
linear) over the successes' per-request values; ``send_duration`` = last start - first start,
``achieved_rate`` = count / send_duration; throughputs = sums / (last end - first start).
Prometheus values (``prometheus.*``) are server counters: never recomputed from the client's
records, never combined with them (R6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from fractions import Fraction

from bench_ledger.queries.check.core import NS, Records, Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck, ratio, sum_of
from bench_ledger.queries.check.stat_definitions import NUMPY_LINEAR, NotDerivable
from bench_ledger.tools import Tool

__all__ = ["INFERENCE_PERF"]

_IP_STAT = re.compile(r"(?P<base>.+)\.(?P<stat>mean|min|max|median|p\d+(?:\.\d+)?)")
_IP_SERIES = {  # lifecycle distribution -> (request column, over ok or failed records)
    "successes.latency.request_latency": ("latency_s", "ok"),
    "successes.latency.time_to_first_token": ("ttft_s", "ok"),
    "successes.prompt_len": ("input_tokens", "ok"),
    "successes.output_len": ("output_tokens", "ok"),
    "failures.request_latency": ("latency_s", "failed"),
    "failures.prompt_len": ("input_tokens", "failed"),
}
_IP_NOT = {
    "load_summary.schedule_delay": "needs each request's scheduled time, which the per-request file does not keep",
    "successes.latency.time_per_output_token": "needs each request's last token time; the records keep its end time",
    "successes.latency.normalized_time_per_output_token": "inference-perf divides by its own (possibly server-side) "
    "output token count, which the records do not say",
}


def _span(rec: Records, start: str, end: str) -> Fraction:
    rows = rec.ok + rec.failed
    if any(r.get(start) is None or r.get(end) is None for r in rows) or not rows:
        raise NotDerivable(f"needed fields {start} / {end} not captured for every record")
    return Fraction(max(r[end] for r in rows) - min(r[start] for r in rows), NS)


def _inference_perf(key: str, rec: Records) -> tuple[Fraction, str]:
    if key.startswith("prometheus."):
        raise NotDerivable(
            "a server-side Prometheus counter over the scrape window: not recomputed from the "
            "client's records, never combined with them (R6)"
        )
    rec.need_status()
    if key == "successes.count":
        return Fraction(rec.statuses.count("ok")), "records without an error"
    if key == "failures.count":
        return Fraction(rec.statuses.count("failed")), "records with an error"
    if key == "load_summary.count":
        return Fraction(len(rec.statuses)), "all records"
    if key == "load_summary.send_duration":
        return _span(rec, "send_ns", "send_ns"), "last start - first start"
    if key == "load_summary.achieved_rate":
        return Fraction(len(rec.statuses)) / _span(rec, "send_ns", "send_ns"), "count / (last start - first start)"
    if key.startswith("successes.throughput."):
        span = _span(rec, "send_ns", "end_ns")
        what = key.rsplit(".", 1)[1]
        num = {
            "requests_per_sec": lambda: Fraction(rec.statuses.count("ok")),
            "input_tokens_per_sec": lambda: sum(rec.column("input_tokens"), Fraction(0)),
            "output_tokens_per_sec": lambda: sum(rec.column("output_tokens"), Fraction(0)),
            "total_tokens_per_sec": lambda: sum(rec.column("input_tokens") + rec.column("output_tokens"), Fraction(0)),
        }.get(what)
        if num is None:
            raise NotDerivable(f"key {key!r} not known to the check")
        return num() / span, "over successes / (last end - first start)"
    mt = _IP_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    base, stat = mt["base"], mt["stat"]
    if base in _IP_NOT:
        raise NotDerivable(_IP_NOT[base])
    if base == "successes.latency.inter_token_latency":
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needs every token time; the records keep gaps only where no two tokens share a chunk")
        return NUMPY_LINEAR.stat(rec.gaps, stat), "over the flattened token gaps of successes"
    if base not in _IP_SERIES:
        raise NotDerivable(f"key {key!r} not known to the check")
    col, group = _IP_SERIES[base]
    series: Sequence[Fraction]
    if group == "ok":
        series = rec.column(col)
    else:
        if col not in rec.fields:
            raise NotDerivable(f"needed field {col} not captured")
        series = [Fraction(r[col]) for r in rec.failed if r.get(col) is not None]
    return NUMPY_LINEAR.stat(series, stat), f"over the {'successes' if group == 'ok' else 'failures'}"


def _inference_perf_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    yield ratio(
        "achieved_rate = count / send_duration",
        "load_summary.achieved_rate",
        "load_summary.count",
        "load_summary.send_duration",
    )
    yield sum_of(
        "load_summary.count = successes.count + failures.count",
        "load_summary.count",
        ("successes.count", "failures.count"),
    )
    # the throughputs share one divisor (last end - first start) with requests_per_sec
    t = "successes.throughput."
    for rate, dist in (
        ("output_tokens_per_sec", "successes.output_len.mean"),
        ("input_tokens_per_sec", "successes.prompt_len.mean"),
    ):
        yield Identity(
            f"{rate} = {dist} x requests_per_sec", f"{t}{rate}", (dist, f"{t}requests_per_sec"), lambda a, b: a * b
        )
    yield sum_of(
        "total_tokens_per_sec = input_tokens_per_sec + output_tokens_per_sec",
        f"{t}total_tokens_per_sec",
        (f"{t}input_tokens_per_sec", f"{t}output_tokens_per_sec"),
    )


INFERENCE_PERF = ToolCheck(
    Tool.INFERENCE_PERF,
    NUMPY_LINEAR,
    "inference-perf reportgen/base.py summarize_requests (np.mean, np.percentile)",
    recompute=_inference_perf,
    families=(_inference_perf_identities,),
)
