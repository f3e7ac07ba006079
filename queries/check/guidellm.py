"""guidellm: its inverted-CDF distribution summaries (event times merged, weighted pdfs) and identities."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from fractions import Fraction

from bench_ledger.queries.check.core import Records, Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck, equal, product, sum_of
from bench_ledger.queries.check.stat_definitions import (
    GUIDELLM_INVERTED_CDF,
    GuidellmDist,
    NotDerivable,
    guidellm_concurrency_pairs,
    guidellm_rate_pairs,
)
from bench_ledger.tools import Tool

__all__ = ["GUIDELLM"]

_GUIDELLM_STAT = re.compile(
    r"metrics\.(?P<metric>[a-z_]+(?:\.[a-z_]+)*?)\.(?P<group>successful|errored|incomplete|total)\."
    r"(?P<stat>mean|median|mode|variance|std_dev|min|max|count|total_sum|percentiles\.p\d+)"
)
_GUIDELLM_COUNT = re.compile(
    r"(?:metrics\.request_totals|request_totals|scheduler_metrics\.requests_made)\."
    r"(?P<group>successful|errored|incomplete|total)"
)
# guidellm's groups (GenerativeMetrics.compile) and the statuses its importer gives their records
_GUIDELLM_GROUPS = {
    "successful": ("ok",),
    "incomplete": ("unknown",),
    "errored": ("failed",),
    "total": ("ok", "unknown", "failed"),
}
# from_values_function over one request column: guidellm's ``req.<field> or 0.0`` (x scale to the unit)
_GUIDELLM_SERIES = {
    "request_latency": ("latency_s", 1),
    "time_to_first_token_ms": ("ttft_s", 1000),
    "prompt_token_count": ("input_tokens", 1),
    "output_token_count": ("output_tokens", 1),
}
_GUIDELLM_TOKEN_TIMINGS = (
    "prompt_tokens_per_second",
    "output_tokens_per_second",
    "tokens_per_second",
    "output_tokens_per_iteration",
    "iter_tokens_per_iteration",
)


def _guidellm_group(rec: Records, group: str) -> list[dict]:
    if "status" not in rec.fields:
        raise NotDerivable("request success not captured")
    statuses = _GUIDELLM_GROUPS[group]
    return [
        r
        for st, rows in (("ok", rec.ok), ("unknown", rec.unknown), ("failed", rec.failed))
        if st in statuses
        for r in rows
    ]


def _guidellm(key: str, rec: Records) -> tuple[Fraction, str]:
    """guidellm ``GenerativeMetrics.compile``: each metric a ``StatusDistributionSummary`` over the
    records of each group (benchmark/schemas/generative/metrics.py), statistics by
    ``DistributionSummary`` (schemas/statistics.py, :func:`queries.check.stat_definitions.guidellm_stat`)."""
    if key == "duration":
        try:
            lo, hi = (float(rec.metadata[k]) for k in ("measure_start_time", "measure_end_time"))
        except KeyError:
            raise NotDerivable(
                "guidellm's measurement window (the benchmark's end_time - start_time, scheduler "
                "times that no record holds)"
            ) from None
        return Fraction(
            hi - lo
        ), "measure_end_time - measure_start_time (scheduler_metrics: the window its metrics cover)"
    if mc := _GUIDELLM_COUNT.fullmatch(key):
        rows = _guidellm_group(rec, mc["group"])
        return Fraction(len(rows)), f"records in the file's requests.{mc['group']}" if mc[
            "group"
        ] != "total" else "records in requests.successful, incomplete and errored"
    mt = _GUIDELLM_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, group, stat = mt["metric"], mt["group"], mt["stat"].removeprefix("percentiles.")
    cached = rec.cache.get(("guidellm", metric, group))
    if cached is None:
        try:
            dist, how = _guidellm_dist(metric, group, rec)
        except NotDerivable as exc:
            rec.cache[("guidellm", metric, group)] = exc
            raise
        rec.cache[("guidellm", metric, group)] = cached = (dist, how)
    if isinstance(cached, NotDerivable):
        raise NotDerivable(str(cached))
    dist, how = cached
    return dist.stat(stat), how


def _guidellm_dist(metric: str, group: str, rec: Records) -> tuple[GuidellmDist, str]:
    """The distribution guidellm summarised as ``metrics.<metric>.<group>``, and how it was built."""
    rows = _guidellm_group(rec, group)
    if not rows:
        # every distribution of no values (plain, rate or concurrency) is DistributionSummary.from_pdf
        # of an empty PDF: all statistics 0.0, count 0
        return GuidellmDist([]), f"no {group} records: guidellm's summary of no values is 0"
    if metric in _GUIDELLM_TOKEN_TIMINGS:
        return _guidellm_token_timings(metric, group, rows)
    if metric in ("requests_per_second", "request_concurrency") or metric.endswith(("_per_second", "_concurrency")):
        return _guidellm_timed(metric, group, rows, rec)
    if metric in _GUIDELLM_SERIES:
        col, scale = _GUIDELLM_SERIES[metric]
        if col not in rec.fields:
            raise NotDerivable(f"needed field {col} not captured")
        pairs = [(Fraction(r[col] or 0) * scale, Fraction(1)) for r in rows]
        return GuidellmDist(pairs), f"over the {group} records"
    if metric in _GUIDELLM_VALUES:
        key, weight, how = _GUIDELLM_VALUES[metric]
        _need_values(rows, key)
        pairs = [(Fraction(r["values"].get(key) or 0), weight(r)) for r in rows]
        return GuidellmDist(pairs), f"over the {group} records' {key}{how}"
    if mt2 := _GUIDELLM_TEXT.fullmatch(metric):
        what, side = mt2["what"], mt2["side"]
        sides = ("input", "output") if side == "total" else (side,)
        keys = [f"{s}_metrics.text_{what}" for s in sides]
        # extract_property_metrics_for_summary: records with a start and end time and a value; total =
        # the input values followed by the output values (one list, not their sums)
        timed = [r for r in rows if r["values"].get("request_start_time") and r["values"].get("request_end_time")]
        pairs = [(Fraction(r["values"][k]), Fraction(1)) for k in keys for r in timed if r["values"].get(k) is not None]
        if not pairs and any(r["values"] for r in rows):
            raise NotDerivable(f"the records carry no per-request {' or '.join(keys)}")
        return GuidellmDist(pairs), f"over the {group} records' {' and '.join(keys)}"
    raise NotDerivable(f"the records carry no per-request {metric}")


def _guidellm_timed(metric: str, group: str, rows: list[dict], rec: Records) -> tuple[GuidellmDist, str]:
    """guidellm's time-weighted distributions (schemas/statistics.py): requests_per_second over each
    request's end time and request_concurrency over its (start, end), both within the benchmark's
    measurement window; text.*_per_second / _concurrency over the timed values, no window."""
    _need_values(rows, "request_end_time")
    start_end = [(r["values"].get("request_start_time"), r["values"].get("request_end_time")) for r in rows]
    if metric in ("requests_per_second", "request_concurrency"):
        try:
            lo, hi = (float(rec.metadata[k]) for k in ("measure_start_time", "measure_end_time"))
        except KeyError:
            raise NotDerivable(
                "the file does not give guidellm's measurement window "
                "(scheduler_metrics.measure_start_time / measure_end_time)"
            ) from None
        count: int | None
        if metric == "requests_per_second":
            pairs, count = guidellm_rate_pairs([(e, 1.0) for _, e in start_end if e is not None], lo, hi)
            how = "each request's end time, rate_distribution_from_timings over the measurement window"
        else:
            pairs, cnt = guidellm_concurrency_pairs(
                [(a, e, 1.0) for a, e in start_end if a is not None and e is not None], lo, hi
            )
            count, how = cnt, "each request's (start, end), concurrency_distribution_from_timings over the window"
        return GuidellmDist(pairs, count), f"over the {group} records: {how}"
    mt = _GUIDELLM_TEXT.fullmatch(
        metric.rsplit("_", 2)[0] if metric.endswith("_per_second") else metric.removesuffix("_concurrency")
    )
    if mt is None:
        raise NotDerivable(f"the records carry no per-request {metric}")
    what, side = mt["what"], mt["side"]
    keys = [f"{s}_metrics.text_{what}" for s in (("input", "output") if side == "total" else (side,))]
    both = [f"{s}_metrics.text_{what}" for s in ("input", "output")]
    timed = [
        r
        for r in rows
        if r["values"].get("request_start_time")
        and r["values"].get("request_end_time")
        and any(r["values"].get(k) is not None for k in both)
    ]
    if metric.endswith("_per_second"):
        pairs, count = guidellm_rate_pairs(
            [(r["values"]["request_end_time"], float(r["values"].get(k) or 0.0)) for k in keys for r in timed]
        )
        how = "rate_distribution_from_timings at each request's end time"
    else:
        pairs, cnt = guidellm_concurrency_pairs(
            [
                (r["values"]["request_start_time"], r["values"]["request_end_time"], float(r["values"].get(k) or 0.0))
                for k in keys
                for r in timed
            ]
        )
        count, how = cnt, "concurrency_distribution_from_timings over each request's (start, end)"
    return GuidellmDist(pairs, count), f"over the {group} records' {' and '.join(keys)}: {how}"


def _token_timings(r: dict) -> tuple[tuple[float, float], list[tuple[float, float]], list[tuple[float, float]]]:
    """guidellm ``GenerativeRequestStats`` (schemas/request_stats.py): the prompt's (time, tokens), the
    output's (time, tokens) list and the iterations after the first token, evenly spaced between the
    first and last token iteration (``np.linspace``, replayed in floats) since the file has no
    per-iteration times."""
    v = r["values"]
    first, last = v.get("info.timings.first_token_iteration"), v.get("info.timings.last_token_iteration")
    n = int(v.get("info.timings.token_iterations") or 0)
    out_tokens, end = r["output_tokens"], v.get("request_end_time")
    prompt = (first if first is not None else end, float(r["input_tokens"] or 0.0))
    per_iter = None if out_tokens is None or out_tokens <= 1 or n <= 1 else (out_tokens - 1.0) / (n - 1.0)
    iters: list[tuple[float, float]] = []
    if first is not None and last is not None and per_iter is not None and n > 1:
        step = (last - first) / (n - 1)
        times = [i * step + first for i in range(n)]
        times[-1] = last
        iters = [(t, per_iter) for t in times[1:]]
    if first is None or last is None or n <= 1:
        output = [(last if last is not None else end, float(out_tokens or 0.0))]
    else:
        output = [(first, 1.0 * bool(out_tokens)), *iters]
    return prompt, output, iters


def _guidellm_token_timings(metric: str, group: str, rows: list[dict]) -> tuple[GuidellmDist, str]:
    """prompt/output/total tokens per second: rate_distribution_from_timings over the token timings
    (no window); output/iter tokens per iteration: the token counts of those timings, unweighted."""
    for key in ("request_end_time", "info.timings.token_iterations"):
        _need_values(rows, key)
    timings = [_token_timings(r) for r in rows]
    how = "guidellm's token timings (iterations evenly spaced between first and last token)"
    if metric.endswith("_per_iteration"):
        counts = [tok for p, o, it in timings for _, tok in (o if metric == "output_tokens_per_iteration" else it)]
        return GuidellmDist([(Fraction(c), Fraction(1)) for c in counts]), f"over the {group} records: {how}"
    events = {
        "prompt_tokens_per_second": lambda p, o: [p],
        "output_tokens_per_second": lambda p, o: o,
        "tokens_per_second": lambda p, o: [p, *o],
    }[metric]
    flat = [e for p, o, _ in timings for e in events(p, o) if e[0] is not None]
    pairs, count = guidellm_rate_pairs(flat)
    return GuidellmDist(pairs, count), f"over the {group} records: rate_distribution_from_timings of {how}"


def _need_values(rows: list[dict], key: str) -> None:
    if not any(key in r["values"] for r in rows):
        raise NotDerivable(f"the records carry no per-request {key}")


def _output_tokens(r: dict) -> Fraction:
    return Fraction(r["output_tokens"] or 0)


# from_values_function over a per-request value the file keeps (request_value), with guidellm's weight
_GUIDELLM_VALUES: dict[str, tuple[str, Callable[[dict], Fraction], str]] = {
    "request_streaming_iterations_count": ("info.timings.request_iterations", lambda r: Fraction(1), ""),
    "total_token_count": ("total_tokens", lambda r: Fraction(1), ""),
    "time_per_output_token_ms": ("time_per_output_token_ms", _output_tokens, ", weighted by output_tokens"),
    "inter_token_latency_ms": (
        "inter_token_latency_ms",
        lambda r: Fraction(r["output_tokens"] or 1) - 1,
        ", weighted by output_tokens - 1",
    ),
}
_GUIDELLM_TEXT = re.compile(r"text\.(?P<what>tokens|words|characters)\.(?P<side>input|output|total)")


def _guidellm_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    for key in values:
        if not key.endswith(".mean") or not key.startswith("metrics."):
            continue
        base = key[: -len(".mean")]
        yield product(f"{base}.total_sum = {base}.mean x {base}.count", f"{base}.total_sum", key, f"{base}.count")
        yield equal(f"{base}.median", f"{base}.percentiles.p50")
        yield Identity(f"{base}.variance = {base}.std_dev^2", f"{base}.variance", (f"{base}.std_dev",), lambda s: s * s)
        parts = tuple(f"{base.rsplit('.', 1)[0]}.{g}.count" for g in ("successful", "errored", "incomplete"))
        if base.endswith(".total"):
            yield sum_of(f"{base}.count = successful + errored + incomplete counts", f"{base}.count", parts)
    for prefix in ("request_totals", "scheduler_metrics.requests_made"):
        yield sum_of(
            f"{prefix}.total = successful + errored + incomplete",
            f"{prefix}.total",
            tuple(f"{prefix}.{g}" for g in ("successful", "errored", "incomplete")),
        )


GUIDELLM = ToolCheck(
    Tool.GUIDELLM,
    GUIDELLM_INVERTED_CDF,
    "guidellm src/guidellm/schemas/statistics.py DistributionSummary",
    recompute=_guidellm,
    families=(_guidellm_identities,),
)
