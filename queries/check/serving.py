"""What vLLM's and SGLang's ``calculate_metrics`` share: the recomputation of their serving keys from
per-request records (including the peak output second) and their fixed identities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from bench_ledger.queries.check.core import NS, Records, Reported
from bench_ledger.queries.check.identity import Identity, equal, ratio, total_ratio
from bench_ledger.queries.check.stat_definitions import (
    NUMPY_LINEAR,
    NotDerivable,
)
from bench_ledger.queries.metrics.definitions import exact_sum
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.tools import SERVING_LATENCY_STAT

__all__ = ["BOUNDARY", "SERVING_RATES", "median_is_p50", "peak_inputs", "recompute_serving"]


def _serving_series(rec: Records, name: str) -> Sequence[Fraction]:
    """vLLM / SGLang per-request series over successful requests, in seconds."""
    rec.need_status()
    if name == "ttft":
        return rec.column("ttft_s")
    if name in ("e2el", "e2e_latency"):
        return rec.column("latency_s")
    if name == "itl":
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        return rec.gaps
    if name == "tpot":
        out = rec.column("output_tokens").array
        ttft, lat = rec.column("ttft_s").array, rec.column("latency_s").array
        # the tool divides in floats, (latency - ttft) / (output_tokens - 1) for output_tokens > 1: the same
        # IEEE operations elementwise (numpy's int64 -> float64 rounds as Python's int / float), then exactly
        many = out > 1
        return ExactColumn((lat[many] - ttft[many]) / (out[many] - 1))
    raise NotDerivable(f"series {name!r} unknown")


_SERVING_OWN = {
    "duration": "the tool's own perf_counter span of the whole run: the base of its rates, not in the records",
    "total_output_tokens_retokenized": "needs the generated texts and the tool's tokenizer",
    "rtfx": "the inverse real-time factor of audio requests: needs their audio durations, which the records do not carry",
}
_SERVING_SETTINGS = ("request_goodput", "request_goodput:", "accept_length")
BOUNDARY = Fraction(1, 10**6)  # a token this close to a second boundary cannot be placed from ns-truncated starts


_EPS = 2.0**-50  # a generous bound of float64's relative rounding per operation (2**-53), times 8


def _exact_second(t: Fraction, lo: Fraction, idx: Callable[[], int]) -> int:
    """The whole second of ``t`` since ``lo``, refused within :data:`BOUNDARY` of a second boundary."""
    second, into = divmod(t - lo, 1)
    if into < BOUNDARY or 1 - into < BOUNDARY:
        raise NotDerivable(
            f"request {idx()} has a time within 1 us of a second boundary ({float(t - lo):.9f} "
            "s): the start times, kept to the ns, cannot place it"
        )
    return int(second)


def _near(t: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Where a float time ``t`` (its exact value within ``err``) may lie within BOUNDARY of a whole
    second: only there does the exact value decide; elsewhere floor(t) is the exact value's second."""
    into = t - np.floor(t)  # exact in float64 (the fraction bits of t)
    margin = float(BOUNDARY) + err + 1e-12
    return (into < margin) | (1.0 - into < margin)


def _tally(counts: dict, seconds: np.ndarray) -> None:
    """Add one to each of ``seconds`` (int64) in the per-second tally ``counts`` {"base", "n"}."""
    if not len(seconds):
        return
    lo, hi = int(seconds.min()), int(seconds.max())
    base, n = counts["base"], counts["n"]
    if lo < base or hi >= base + len(n):
        new_base = min(base, lo)
        grown = np.zeros(max(base + len(n), hi + 1) - new_base, dtype=np.int64)
        grown[base - new_base : base - new_base + len(n)] = n
        counts["base"], counts["n"] = new_base, grown
    counts["n"] += np.bincount(seconds - counts["base"], minlength=len(counts["n"]))


def peak_inputs(key: str, rec: Records) -> None:
    """NotDerivable unless the records carry what vLLM's peak second ``key`` reads (statuses, starts,
    ttfts; latencies for max_concurrent_requests)."""
    rec.need_status()
    if key == "max_concurrent_requests" and "latency_s" not in rec.fields:
        raise NotDerivable(
            "vLLM counts a request in each second from its start to start + latency; the records carry no latencies"
        )
    for f in ("send_time", "ttft_s"):
        if f not in rec.fields:
            raise NotDerivable(f"needed field {f} not captured (token times are start + ttft + the itls)")


def _peak_second(key: str, rec: Records) -> tuple[Fraction, str]:
    """vLLM ``calculate_metrics`` (benchmarks/serve.py): each successful request's token times start +
    ttft, then + each itl, counted per whole second since the earliest start; max_output_tokens_per_s
    is the fullest second. max_concurrent_requests counts a request in every second from its start to
    start + latency, so it needs the latencies.

    Exact: each time is start (ns) + ttft + the itls as rationals, refused within BOUNDARY of a second.
    Computed over the columns: numpy replays each request's times in float64 in vLLM's order (start -
    earliest start, + ttft, += each itl, one itl position at a time over the requests that have it),
    with a bound on the rounding; only a time whose float lies within BOUNDARY + that bound of a
    boundary is placed from its exact rational (tests/queries/check/test_peak_second.py: equal to the row-by-row
    rational replay)."""
    peak_inputs(key, rec)
    send = rec.column("send_ns", "send_time").array
    if not len(send):
        return Fraction(0), "no successful request"
    lo_ns = int(send.min())
    lo = Fraction(lo_ns, NS)
    rel_ns = send - lo_ns  # exact (int64)
    rel = rel_ns / NS  # float64, within |rel| * 2**-53
    idx = lambda i: lambda: int(rec.source.ok_column("idx").to_numpy()[i])  # noqa: E731 (read on an error only)
    counts: dict = {"base": 0, "n": np.zeros(0, dtype=np.int64)}

    if key == "max_concurrent_requests":
        lat = rec.column("latency_s").array
        sec0, into0 = np.divmod(rel_ns, NS)
        bound_ns = NS // 10**6  # BOUNDARY in ns: the start is exact in ns
        bad0 = (rel_ns != 0) & ((into0 < bound_ns) | (NS - into0 < bound_ns))
        end = rel + lat
        near = _near(end, (np.abs(rel) + np.abs(lat)) * _EPS)
        sec1 = np.floor(end).astype(np.int64)
        for i in np.flatnonzero(near | bad0):  # in record order, the start before the end, as vLLM walks them
            start = Fraction(int(send[i]), NS)
            if bad0[i]:
                _exact_second(start, lo, idx(i))
            sec1[i] = _exact_second(start + Fraction(float(lat[i])), lo, idx(i))
        span = sec1 - sec0 + 1
        keep = span > 0
        first, span = sec0[keep], span[keep]
        # each request's seconds sec0 .. sec1: repeat each first second, plus 0, 1, ... within its span
        within = np.arange(int(span.sum()), dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
        _tally(counts, np.repeat(first, span) + within)
        what = "spans (start to start + latency)"
    else:
        ttft = rec.column("ttft_s").array
        if "chunk_gaps" in rec.fields:
            cc = rec.source.ok_column("chunk_count").to_numpy(zero_copy_only=False)
            ngap = np.maximum(np.nan_to_num(cc.astype(np.float64), nan=0.0).astype(np.int64) - 1, 0)
            gaps = rec.gaps.array
            if int(ngap.sum()) != len(gaps):
                raise NotDerivable(
                    f"the ok records' chunk counts imply {int(ngap.sum())} chunk gaps; the ledger holds {len(gaps)}"
                )
        else:
            rec.record_gaps()  # raises NotDerivable (chunk_gaps not captured), as the row walk did
            raise AssertionError("unreachable")
        offs = np.cumsum(ngap) - ngap
        # the rounding bound of each request's times: every partial sum is at most this in magnitude
        size = np.abs(rel) + np.abs(ttft)
        if len(gaps):
            absg = gaps if gaps.min() >= 0 else np.abs(gaps)
            size += np.add.reduceat(absg, np.minimum(offs, len(gaps) - 1)) * (ngap > 0)
        err = size * (ngap + 2) * _EPS
        t = rel + ttft
        order = np.argsort(-ngap, kind="stable")  # requests with more itls first: position j's are a prefix
        # have[j]: how many requests have a j-th itl (the first have[j] of order)
        have = np.searchsorted(-ngap[order], -np.arange(int(ngap.max(initial=0)) + 1), side="right")
        near_at: list[tuple[np.ndarray, Any]] = []  # (requests, positions) of times the float cannot place

        def place(who: np.ndarray, tj: np.ndarray, j: Any) -> None:
            near = _near(tj, err[who])
            _tally(counts, np.floor(tj[~near]).astype(np.int64))
            if near.any():
                near_at.append((who[near], j if np.isscalar(j) else j[near]))

        place(np.arange(len(t)), t, 0)
        # one step per itl position while at least as many requests have it as positions are left ...
        j, npos = 1, len(have)
        while j < npos and have[j] >= npos - j:
            who = order[: have[j]]
            t[who] += gaps[offs[who] + j - 1]
            place(who, t[who], j)
            j += 1
        if j < npos:  # ... then the few requests with more: each one's remaining itls in one accumulate
            who = order[: have[j]]  # (np.add.accumulate adds in order, t += itl after itl: the same floats)
            times = [
                np.add.accumulate(np.concatenate((t[r : r + 1], gaps[offs[r] + j - 1 : offs[r] + ngap[r]])))[1:]
                for r in who.tolist()
            ]
            n_each = ngap[who] - j + 1
            place(
                np.repeat(who, n_each),
                np.concatenate(times),
                np.arange(int(n_each.sum())) - np.repeat(np.cumsum(n_each) - n_each, n_each) + j,
            )
        if near_at:  # the exact times of the few near a boundary, in record order then token order
            pairs = sorted(
                (int(r), int(k))
                for who, ks in near_at
                for r, k in zip(who.tolist(), np.broadcast_to(ks, who.shape).tolist(), strict=True)
            )
            exact: dict[int, list[Fraction]] = {}
            seconds = []
            for r, k in pairs:
                if r not in exact:
                    ts = [Fraction(int(send[r]), NS) + Fraction(float(ttft[r]))]
                    for g in gaps[offs[r] : offs[r] + ngap[r]].tolist():
                        ts.append(ts[-1] + Fraction(g))
                    exact[r] = ts
                seconds.append(_exact_second(exact[r][k], lo, idx(r)))
            _tally(counts, np.array(seconds, dtype=np.int64))
        what = "token times (start + ttft + itls)"
    n = counts["n"]
    if not n.any():
        raise NotDerivable(f"no second holds a successful request's {what.split(' (')[0]}")
    return Fraction(
        int(n.max())
    ), f"the fullest whole second of the successful requests' {what}, of {int(np.count_nonzero(n))} seconds"


def recompute_serving(key: str, rec: Records) -> tuple[Fraction, str]:
    """vLLM ``bench serve`` and SGLang ``bench_serving`` aggregates (docs/formats.md)."""
    if mt := SERVING_LATENCY_STAT.fullmatch(key):
        stat = "mean" if mt["stat"] == "mean" else mt["stat"]
        return 1000 * NUMPY_LINEAR.stat(_serving_series(rec, mt["series"]), stat), "over ok requests, x1000 (ms)"
    if key in ("completed", "failed"):
        rec.need_status()
        return Fraction(rec.statuses.count("ok" if key == "completed" else "failed")), "count of records by status"
    if key == "total_input_tokens":
        rec.need_status()
        return exact_sum(rec.column("input_tokens")), "sum over ok requests"
    if key == "total_output_tokens":
        rec.need_status()
        return exact_sum(rec.column("output_tokens")), "sum over ok requests"
    if key in _SERVING_OWN:
        raise NotDerivable(_SERVING_OWN[key])
    if key in ("max_output_tokens_per_s", "max_concurrent_requests"):
        return _peak_second(key, rec)
    if key in _SERVING_SETTINGS:
        raise NotDerivable("needs the tool's own settings (SLOs, speculative accounting) not in the records")
    if key in ("request_throughput", "output_throughput", "total_token_throughput", "input_throughput", "concurrency"):
        if rec.duration is None:
            raise NotDerivable("the tool's duration was not reported for this run")
        rec.need_status()
        num = {
            "request_throughput": lambda: Fraction(rec.statuses.count("ok")),
            "output_throughput": lambda: exact_sum(rec.column("output_tokens")),
            "input_throughput": lambda: exact_sum(rec.column("input_tokens")),
            "total_token_throughput": lambda: exact_sum(rec.column("input_tokens") + rec.column("output_tokens")),
            "concurrency": lambda: exact_sum(rec.column("latency_s")),
        }[key]()
        return num / rec.duration, "over the tool's own duration"
    raise NotDerivable(f"key {key!r} not known to the check")


def median_is_p50(values: dict[str, Reported]) -> Iterator[Identity]:
    for key in values:
        if key.startswith("median_") and f"p50_{key[len('median_') :]}" in values:
            yield equal(key, f"p50_{key[len('median_') :]}")


SERVING_RATES = (
    ratio("request_throughput = completed / duration", "request_throughput", "completed", "duration"),
    ratio("output_throughput = total_output_tokens / duration", "output_throughput", "total_output_tokens", "duration"),
    ratio("input_throughput = total_input_tokens / duration", "input_throughput", "total_input_tokens", "duration"),
    total_ratio(
        "total_token_throughput = (total_input_tokens + total_output_tokens) / duration",
        "total_token_throughput",
        ("total_input_tokens", "total_output_tokens"),
        "duration",
    ),
)
