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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from bench_ledger.queries.metrics_requests import mean, percentile_linear


class NotDerivable(Exception):
    """Raised inside a recomputation: the reported value cannot be re-derived, and why."""


def _floor_index(s: Sequence[Fraction], p: Fraction) -> Fraction:
    return s[min(len(s) - 1, math.floor(p / 100 * len(s)))]


def _inverted_cdf(s: Sequence[Fraction], p: Fraction) -> Fraction:
    values, probs = _pdf(s)
    cdf, acc = [], 0.0
    for q in probs:
        acc += q
        cdf.append(acc)
    target = float(p / 100)
    i = next((k for k, c in enumerate(cdf) if c >= target), len(cdf) - 1)
    return values[i]


def _pdf(s: Sequence[Fraction]) -> tuple[list[Fraction], list[float]]:
    """guidellm's PDF of equally weighted values: distinct values, probability count/total (float)."""
    values: list[Fraction] = []
    counts: list[int] = []
    for v in s:
        if values and values[-1] == v:
            counts[-1] += 1
        else:
            values.append(v)
            counts.append(1)
    total = float(sum(counts))
    return values, [c / total for c in counts]


def _population_var(s: Sequence[Fraction]) -> Fraction:
    mu = mean(s)
    return sum(((v - mu) ** 2 for v in s), Fraction(0)) / len(s)


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
        s = sorted(values)
        if stat in ("mean", "avg"):
            return mean(s)
        if stat in ("sum", "total_sum"):
            return sum(s, Fraction(0))
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
        digits, Fraction(digits))  # fmt: skip


NUMPY_LINEAR = StatDefinition(
    "numpy-linear", percentile_linear, 0,
    "numpy defaults: linear-interpolation percentiles (type 7), population std (ddof 0)",
)  # fmt: skip
PANDAS_LINEAR = StatDefinition(
    "pandas-linear", percentile_linear, 1,
    "pandas defaults: linear-interpolation quantiles (type 7), sample std (ddof 1)",
)  # fmt: skip
GUIDELLM_INVERTED_CDF = StatDefinition(
    "guidellm-inverted-cdf", _inverted_cdf, 0,
    "guidellm DistributionSummary: inverted-CDF percentiles over merged equal values, "
    "probability-weighted mean and population variance, total_sum = mean x count",
)  # fmt: skip
FLOOR_INDEX = StatDefinition(
    "floor-index", _floor_index, 0,
    "value at index floor(p/100 x n) of the sorted values, population std",
)  # fmt: skip
DEFINITIONS = {d.name: d for d in (NUMPY_LINEAR, PANDAS_LINEAR, GUIDELLM_INVERTED_CDF, FLOOR_INDEX)}
