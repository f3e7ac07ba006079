"""The statistic definitions benchmark tools use, each computed the tool's way (R15).

Tools disagree on what "p99" and "std" mean; recomputing a tool's aggregate with the ledger's own
definition would report false disagreements (or hide real ones). Each :class:`StatDefinition` is
one tool family's rule, read from the tool's source:

* ``numpy-linear``: ``np.percentile`` default (linear interpolation between closest ranks, type 7),
  ``np.mean``, ``np.std`` with ddof 0 — vLLM ``benchmarks/serve.py``, SGLang ``bench_serving.py``,
  AIPerf (numpy over its record arrays).
* ``pandas-linear``: ``Series.quantile`` default (the same linear rule), ``Series.std`` with ddof 1
  (sample) — llmperf ``token_benchmark_ray.metrics_summary``.
* ``guidellm-inverted-cdf``: guidellm 0.4+ ``DistributionSummary.from_values``: values sorted, equal
  values merged, each with probability weight/total; percentile p = the first value whose cumulative
  probability is >= p (``np.searchsorted(cdf, p, side="left")``, float cumsum as numpy does it);
  mean and variance probability-weighted (population); median = p50; total_sum = mean x count.
* ``floor-index``: the value at index floor(p/100 x n) of the sorted values (clamped to n - 1);
  named here for the tools that use it (TensorRT-LLM's trtllm-bench percentiles).

Values are exact ``Fraction``s; only where the tool's own float arithmetic decides an index (the
guidellm CDF) is it replayed in floats.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from operator import itemgetter
from typing import NamedTuple

from bench_ledger.queries.metrics.definitions import (
    exact_sum,
    mean,
    percentile_linear,
    ratio_sum,
    sum_of_squares_about_mean,
)
from bench_ledger.queries.metrics.exact_column import ExactColumn

__all__ = [
    "DEFINITIONS",
    "FLOOR_INDEX",
    "GUIDELLM_INVERTED_CDF",
    "GUIDELLM_STATS",
    "NUMPY_LINEAR",
    "PANDAS_LINEAR",
    "GuidellmDist",
    "NotDerivable",
    "Pdf",
    "StatDefinition",
    "exact_sorted",
    "guidellm_concurrency_pairs",
    "guidellm_rate_pairs",
    "guidellm_stat",
    "percentile_level",
    "weighted_pdf",
]


class NotDerivable(Exception):
    """Raised inside a recomputation: the reported value cannot be re-derived, and why."""


def _floor_index(s: Sequence[Fraction], p: Fraction) -> Fraction:
    return s[min(len(s) - 1, math.floor(p / 100 * len(s)))]


def _inverted_cdf(s: Sequence[Fraction], p: Fraction) -> Fraction:
    values, probs = _pdf(s)
    return values[_searchsorted_left(probs, p)]


def _searchsorted_left(probs: Sequence[float], p: Fraction) -> int:
    """``np.searchsorted(np.cumsum(probs), p / 100, side="left")``: the float cumulative sum as numpy
    adds it, the first index whose cumulative probability is >= p (the last one if none is)."""
    acc, target = 0.0, float(p / 100)
    for k, q in enumerate(probs):
        acc += q
        if acc >= target:
            return k
    return len(probs) - 1


def _pdf(s: Sequence[Fraction]) -> tuple[Sequence[Fraction], list[float]]:
    """guidellm's PDF of equally weighted values: distinct values, probability count/total (float)."""
    if isinstance(s, ExactColumn):  # weighted_pdf of weights 1: each distinct value's weight is its count
        values_, counts = s.distinct()
        return values_, (counts.astype(float) / float(len(s))).tolist()  # float(w) / float(total), as numpy
    pdf = weighted_pdf([(v, Fraction(1)) for v in s])
    return pdf.values, pdf.probs


class Pdf(NamedTuple):
    """guidellm's PDF: the distinct values in order, each one's probability as numpy computes it
    (float(weight) / float(total)), its exact weight, and the exact total of the weights."""

    values: list[Fraction]
    probs: list[float]
    weights: list[Fraction]
    total: Fraction


def weighted_pdf(pairs: Sequence[tuple[Fraction, Fraction]]) -> Pdf:
    """guidellm ``DistributionSummary.from_values`` over (value, weight) pairs: values sorted, equal
    values merged with their weights summed, zero weights dropped, probability = weight / total
    (as numpy's float division; exactly, weight / total); all weights zero: uniform.

    Equal values are found by their (numerator, denominator), which is a Fraction's identity (it is
    kept in lowest terms); the values are sorted by their floats and any run of equal floats as
    Fractions (:func:`exact_sorted`'s way): the same order as sorting the Fractions."""
    merged: dict[tuple[int, int], list[Fraction]] = {}  # value's key -> [value, weight, weight, ...]
    for v, w in pairs:
        got = merged.get((v.numerator, v.denominator))
        if got is None:
            merged[(v.numerator, v.denominator)] = [v, w]
        else:
            got.append(w)
    kept: list[tuple[float, Fraction, Fraction]] = []
    for (n, d), (v, *ws) in merged.items():
        w = ws[0] if len(ws) == 1 else ratio_sum((x.numerator, x.denominator) for x in ws)
        if w.numerator > 0:
            kept.append((n / d, v, w if type(w) is Fraction else Fraction(w)))
    kept.sort(key=itemgetter(0))
    for i in range(len(kept) - 1):
        if kept[i][0] == kept[i + 1][0]:  # distinct Fractions of one float (never for values read from floats)
            kept.sort(key=itemgetter(1))
            break
    values = [v for _, v, _ in kept]
    weights = [w for _, _, w in kept]
    total = ratio_sum((w.numerator, w.denominator) for w in weights)
    if total <= Fraction(1, 10**6):
        weights = [Fraction(1)] * len(values)
        total = Fraction(len(values))
    ft = float(total)
    return Pdf(values, [w.numerator / w.denominator / ft for w in weights], weights, total)


class GuidellmDist:
    """One guidellm distribution (pairs and count), its PDF computed once for all its statistics."""

    def __init__(self, pairs: Sequence[tuple[Fraction, Fraction]], count: int | None = None) -> None:
        self.pairs, self.count = pairs, count
        self._pdf: Pdf | None = None
        self._stats: dict[str, Fraction] = {}
        self._memo: dict[str, Fraction] = {}  # count and mean, shared by the statistics that read them

    def stat(self, stat: str) -> Fraction:
        if stat not in self._stats:
            if self._pdf is None and self.pairs:
                self._pdf = weighted_pdf(self.pairs)
            self._stats[stat] = guidellm_stat(self.pairs, stat, self.count, self._pdf, self._memo)
        return self._stats[stat]


def guidellm_stat(
    pairs: Sequence[tuple[Fraction, Fraction]],
    stat: str,
    count: int | None = None,
    pdf: Pdf | None = None,
    memo: dict[str, Fraction] | None = None,
) -> Fraction:
    """``stat`` of guidellm's ``DistributionSummary.from_values(pairs)`` (schemas/statistics.py):
    probability-weighted mean and population variance, percentiles by the inverted CDF, mode the
    most probable value, count = round(sum of weights), total_sum = mean x count; no values: every
    statistic 0 (``from_pdf`` of an empty PDF). ``memo`` keeps the count and mean of ``pairs`` for
    the next statistic of the same distribution."""
    if not pairs:
        if stat == "count":
            return Fraction(count or 0)
        if stat.startswith("p") or stat in GUIDELLM_STATS:
            return Fraction(0)
        raise NotDerivable(f"statistic {stat!r} unknown")
    values, probs, weights, total = weighted_pdf(pairs) if pdf is None else pdf
    memo = {} if memo is None else memo

    def n() -> Fraction:
        if "n" not in memo:
            memo["n"] = Fraction(round(exact_sum(w for _, w in pairs)) if count is None else count)
        return memo["n"]

    def mean_() -> Fraction:
        if "mu" not in memo:
            # Σ v·w / Σ w: the probability-weighted mean, exactly (q = w / total)
            memo["mu"] = (
                ratio_sum(
                    (v.numerator * w.numerator, v.denominator * w.denominator)
                    for v, w in zip(values, weights, strict=True)
                )
                / total
            )
        return memo["mu"]

    if stat == "count":
        return n()
    if not values:  # every weight 0: the PDF keeps no value (before, a mean of 0 and no min at all)
        raise NotDerivable("every value's weight is 0: guidellm's PDF of these values is empty")
    if stat == "mean":
        return mean_()
    if stat == "total_sum":
        return mean_() * n()
    if stat == "min":
        return values[0]
    if stat == "max":
        return values[-1]
    if stat == "mode":
        return values[probs.index(max(probs))]
    if stat in ("variance", "std_dev"):
        mu = mean_()
        # Σ q·(v - mu)² = Σ q·v² - mu² (Σ q = 1, Σ q·v = mu): the same rational, one product per value
        var = (
            ratio_sum(
                (v.numerator * v.numerator * w.numerator, v.denominator * v.denominator * w.denominator)
                for v, w in zip(values, weights, strict=True)
            )
            / total
            - mu * mu
        )
        return var if stat == "variance" else Fraction(math.sqrt(var))
    if stat == "median":
        return values[_searchsorted_left(probs, Fraction(50))]
    if stat.startswith("p"):
        return values[_searchsorted_left(probs, percentile_level(stat))]
    raise NotDerivable(f"statistic {stat!r} unknown")


GUIDELLM_STATS = ("mean", "median", "mode", "variance", "std_dev", "min", "max", "count", "total_sum")
_GUIDELLM_THRESHOLD = 1e-4  # guidellm merges event times closer than 1/10 ms
_GUIDELLM_EPSILON = 1e-6


def _merge_times(events: list[tuple[float, float]], threshold: float = _GUIDELLM_THRESHOLD) -> list[list[float]]:
    """guidellm ``DistributionSummary._merge_sorted_times_with_weights``: equal times merged (weights
    summed), then every run of times each within ``threshold`` of the previous one, up to the run's
    first time + threshold, merged into its first time; repeated until nothing merges."""
    merged: dict[float, float] = {}
    for t, w in events:
        merged[t] = merged.get(t, 0.0) + w
    out = [[t, merged[t]] for t in sorted(merged)]
    while len(out) > 1:
        times = [t for t, _ in out]
        within = [b - a <= threshold for a, b in zip(times, times[1:], strict=False)]
        if not any(within):
            break
        starts = [i for i, w in enumerate(within) if w and (i == 0 or not within[i - 1])]
        ends = [bisect.bisect_right(times, times[i] + threshold) - 1 for i in starts]
        keep_s, keep_e = [starts[0]], [ends[0]]
        for st, en in zip(starts[1:], ends[1:], strict=True):
            if st > keep_e[-1]:
                keep_s.append(st)
                keep_e.append(en)
        cum = [0.0]
        for _, w in out:
            cum.append(cum[-1] + w)
        removed: set[int] = set()
        for st, en in zip(keep_s, keep_e, strict=True):
            out[st][1] = cum[en + 1] - cum[st]
            removed.update(range(st + 1, en + 1))
        out = [row for i, row in enumerate(out) if i not in removed]
    return out


def guidellm_rate_pairs(
    events: list[tuple[float, float]], start: float | None = None, end: float | None = None
) -> tuple[list[tuple[Fraction, Fraction]], int]:
    """guidellm ``DistributionSummary.rate_distribution_from_timings``: (rate, duration) pairs and
    the count. Events (time, weight) outside [start, end] are dropped and start/end added with
    weight 0; times are merged (:func:`_merge_times`); each event's rate is its weight over its
    local duration (half way to each neighbour; the last at least epsilon), weighted by that
    duration. Replayed in floats, as numpy computes it."""
    ev = list(events)
    if start is not None:
        ev = [(start, 0.0), *[e for e in ev if e[0] >= start]]
    if end is not None:
        ev = [*[e for e in ev if e[0] <= end], (end, 0.0)]
    merged = _merge_times(ev)
    if len(merged) <= 1:
        return [], len(merged)
    times = [t for t, _ in merged]
    mids = [(b + a) / 2 for a, b in zip(times, times[1:], strict=False)]
    durations = [
        mids[0] - times[0],
        *[b - a for a, b in zip(mids, mids[1:], strict=False)],
        max(times[-1] - mids[-1], _GUIDELLM_EPSILON),
    ]
    occ = [w for _, w in merged]
    count = round(sum(occ))
    return [(Fraction(o / d), Fraction(d)) for o, d in zip(occ, durations, strict=True)], count


def guidellm_concurrency_pairs(
    intervals: list[tuple[float, float, float]], start: float | None = None, end: float | None = None
) -> tuple[list[tuple[Fraction, Fraction]], int | None]:
    """guidellm ``DistributionSummary.concurrency_distribution_from_timings``: (concurrency,
    duration) pairs and the count (intervals kept). +weight at each start, -weight at each end,
    times merged; the level before ``start`` carried to it, events after ``end`` dropped; each level
    (cumulative sum, clipped at 0) weighted by the time to the next change. Count None: guidellm's
    single-level case, whose count is that of its one value."""
    iv = [i for i in intervals if start is None or i[1] >= start]
    iv = [i for i in iv if end is None or i[0] <= end]
    count = len(iv)
    merged = _merge_times([(a, w) for a, _, w in iv] + [(b, -w) for _, b, w in iv])
    if start is not None and merged:
        k = bisect.bisect_left([t for t, _ in merged], start)
        prior = 0.0
        for _, w in merged[:k]:
            prior += w
        merged = [[start, prior if k > 0 else 0.0], *merged[k:]]
    if end is not None and merged:
        k = bisect.bisect_right([t for t, _ in merged], end)
        merged = [*merged[:k], [end, 0.0]]
    levels, acc = [], 0.0
    for _, w in merged:
        acc += w
        levels.append(max(acc, 0.0))
    if len(levels) <= 1:
        return ([] if count == 0 else [(Fraction(levels[0]), Fraction(1))]), None
    durations = [max(b - a, 0.0) for (a, _), (b, _) in zip(merged, merged[1:], strict=False)]
    if not any(d > 0 for d in durations):
        return [], count
    return [(Fraction(c), Fraction(d)) for c, d in zip(levels, durations, strict=False)], count


def _population_var(s: Sequence[Fraction]) -> Fraction:
    return sum_of_squares_about_mean(s) / len(s)


def exact_sorted(values: Sequence[Fraction]) -> Sequence[Fraction]:
    """``sorted(values)``, the same list, sorted by each value's float (rounding is monotone, so only
    values whose floats are equal can be out of order) and then each run of equal floats sorted as
    Fractions (comparing Fractions costs far more than floats; values read from floats have no such run).
    An :class:`ExactColumn` is sorted as its floats (the same order: see its module)."""
    if isinstance(values, ExactColumn):
        return values.sorted()
    pairs = sorted(zip(map(float, values), values), key=itemgetter(0))
    out = [v for _, v in pairs]
    i, n = 0, len(pairs)
    while i < n - 1:
        if pairs[i][0] != pairs[i + 1][0]:
            i += 1
            continue
        j = i + 1
        while j < n and pairs[j][0] == pairs[i][0]:
            j += 1
        out[i:j] = sorted(out[i:j])
        i = j
    return out


@dataclass(frozen=True)
class StatDefinition:
    """One tool family's statistics: name (shown by ``check``), percentile rule, std's ddof."""

    name: str
    percentile: Callable[[Sequence[Fraction], Fraction], Fraction]
    ddof: int | None  # None: the tool reports no std
    describe: str

    def stat(self, values: Sequence[Fraction], stat: str) -> Fraction:
        """``stat`` (mean, median, min, max, std/stddev/std_dev, variance, sum/total_sum, count,
        mode, pNN) of ``values`` by this definition."""
        if stat == "count":
            return Fraction(len(values))
        if not values:
            raise NotDerivable("no values to recompute from")
        s = exact_sorted(values)
        if stat in ("mean", "avg"):
            return mean(s)
        if stat in ("sum", "total_sum"):
            return exact_sum(s)
        if stat == "median":
            return self.percentile(s, Fraction(50))
        if stat == "min":
            return s[0]
        if stat == "max":
            return s[-1]
        if stat == "mode":
            values_, probs = _pdf(s)
            return values_[probs.index(max(probs))]
        if stat in ("std", "stddev", "std_dev", "variance"):
            ddof = self.ddof if self.ddof is not None else 0
            if len(s) <= ddof:
                raise NotDerivable(f"{len(s)} value(s): too few for a standard deviation with ddof {ddof}")
            var = _population_var(s) * len(s) / (len(s) - ddof)
            return var if stat == "variance" else Fraction(math.sqrt(var))
        if stat.startswith("p"):
            return self.percentile(s, percentile_level(stat))
        raise NotDerivable(f"statistic {stat!r} unknown")


def percentile_level(stat: str) -> Fraction:
    """'p99' -> 99, 'p99.9' -> 99.9, guidellm's 'p999' -> 99.9 and 'p001' -> 0.1, 'p05' -> 5."""
    digits = stat[1:]
    if "." in digits or len(digits) <= 2 and not (len(digits) == 2 and digits[0] == "0"):
        return Fraction(digits)
    # guidellm writes the level without a point: p001 = 0.1, p01 = 1, p05 = 5, p999 = 99.9
    return {"001": Fraction(1, 10), "01": Fraction(1), "05": Fraction(5), "999": Fraction(999, 10)}.get(
        digits, Fraction(digits)
    )


NUMPY_LINEAR = StatDefinition(
    "numpy-linear",
    percentile_linear,
    0,
    "numpy defaults: linear-interpolation percentiles (type 7), population std (ddof 0)",
)
PANDAS_LINEAR = StatDefinition(
    "pandas-linear",
    percentile_linear,
    1,
    "pandas defaults: linear-interpolation quantiles (type 7), sample std (ddof 1)",
)
GUIDELLM_INVERTED_CDF = StatDefinition(
    "guidellm-inverted-cdf",
    _inverted_cdf,
    0,
    "guidellm DistributionSummary: inverted-CDF percentiles over merged equal values, "
    "probability-weighted mean and population variance, total_sum = mean x count",
)
FLOOR_INDEX = StatDefinition(
    "floor-index",
    _floor_index,
    0,
    "value at index floor(p/100 x n) of the sorted values, population std",
)
DEFINITIONS = {d.name: d for d in (NUMPY_LINEAR, PANDAS_LINEAR, GUIDELLM_INVERTED_CDF, FLOOR_INDEX)}
