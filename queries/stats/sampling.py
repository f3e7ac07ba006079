"""Sampling intervals of one run's statistics, from its per-request values in request order.

Not to be confused with :mod:`queries.intervals`, the rounding intervals of printed numbers (R11):
a *sampling* interval says how far a statistic of this sample may be from the statistic of the
process that produced it.

* A percentile gets a distribution-free interval between two order statistics: for n independent
  draws, the number of values below the true p-quantile is Binomial(n, p), so ``[x_(l), x_(u)]``
  with binomial tail probabilities alpha/2 on each side covers it with probability >= 1 - alpha
  (the interval of ``scipy.stats.quantile_test(...).confidence_interval``, whose indices
  :func:`percentile_ranks` reproduces, vectorised; tests check they agree).
* Dependence: the binomial is taken over the *effective* sample size of the indicator series
  ``1{x_t <= estimate}`` (:mod:`queries.stats.dependence`), and its ranks scaled back to n.
* A percentile the effective sample cannot bracket on both sides is **insufficient sample**: for a
  two-sided 95% interval of p99, 0.99^n must be below 0.025, i.e. n >= 368 independent requests.
* A mean gets Student's t interval with the effective sample size of the values, and is insufficient
  below :data:`MIN_MEAN_EFFECTIVE` effective requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from bench_ledger.queries.stats.dependence import effective_size
from scipy import stats as sps

__all__ = [
    "DEFAULT_CONFIDENCE",
    "MIN_MEAN_EFFECTIVE",
    "SamplingInterval",
    "Status",
    "mean_bounds",
    "needed_for_percentile",
    "not_sampled",
    "percentile_bounds",
    "percentile_ranks",
    "sampling_interval",
]

DEFAULT_CONFIDENCE = 0.95
MIN_MEAN_EFFECTIVE = 30  # effective requests below which a mean's t interval is not offered
Status = Literal["interval", "insufficient sample", "n/a"]


@dataclass
class SamplingInterval:
    """A statistic's sampling interval, or why there is none."""

    statistic: str  # p50, p99, mean, ...
    status: Status
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    n: int = 0
    n_effective: float | None = None
    method: str | None = None
    reason: str | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "statistic": self.statistic,
            "status": self.status,
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "n": self.n,
            "n_effective": None if self.n_effective is None else round(self.n_effective, 1),
            "method": self.method,
            "reason": self.reason,
        }

    def text(self, fmt: str = ".4g") -> str:
        if self.status == "interval":
            return f"[{self.low:{fmt}}, {self.high:{fmt}}]"
        return f"{self.status}: {self.reason}"


def not_sampled(statistic: str, reason: str, confidence: float = DEFAULT_CONFIDENCE) -> SamplingInterval:
    """n/a: the statistic has no sampling interval here, with the reason."""
    return SamplingInterval(statistic, "n/a", confidence=confidence, reason=reason)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not between 0 and 1 (e.g. 0.95)")


def percentile_ranks(n: int, n_eff: np.ndarray | float, p: float, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """0-based indices (low, high) into n sorted values of the order-statistic interval of the p-quantile,
    for effective sizes ``n_eff``; -1 where the effective sample cannot bracket the quantile.

    For n_eff = n these are ``scipy.stats.quantile_test``'s indices: low = binom.ppf(alpha/2) - 1,
    high = binom.isf(alpha/2). For n_eff < n the binomial is Binomial(floor(n_eff), p) and its ranks
    are scaled by n / floor(n_eff) (outward: low rounded down, high up)."""
    _check_confidence(confidence)
    m = np.maximum(np.floor(np.minimum(np.asarray(n_eff, dtype=np.float64), n)), 1).astype(np.int64)
    tail = (1 - confidence) / 2
    lo_m = sps.binom.ppf(tail, m, p).astype(np.int64) - 1
    hi_m = sps.binom.isf(tail, m, p).astype(np.int64)
    ok = (lo_m >= 0) & (hi_m < m)
    lo = np.floor((lo_m + 1) * n / m).astype(np.int64) - 1
    hi = np.ceil((hi_m + 1) * n / m).astype(np.int64) - 1
    lo = np.clip(lo, 0, n - 1)
    hi = np.clip(hi, 0, n - 1)
    return np.where(ok, lo, -1), np.where(ok, hi, -1)


def percentile_bounds(
    series: np.ndarray, p: float, confidence: float = DEFAULT_CONFIDENCE, ordered: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high, sufficient, n_eff) of the p-quantile of each row of ``series`` (values in request
    order); the estimate is numpy's linear percentile, as the metrics compute it; low/high NaN where
    insufficient. ``ordered``: the rows already sorted (several percentiles of one matrix sort it once)."""
    x = np.atleast_2d(np.asarray(series, dtype=np.float64))
    n = x.shape[1]
    ordered = np.sort(x, axis=1) if ordered is None else np.atleast_2d(ordered)
    h = (n - 1) * p  # numpy's linear (type 7) percentile on the sorted rows
    f = int(np.floor(h))
    est = ordered[:, f] + (h - f) * (ordered[:, min(f + 1, n - 1)] - ordered[:, f])
    n_eff = effective_size(x <= est[:, None])
    lo, hi = percentile_ranks(n, n_eff, p, confidence)
    ok = lo >= 0
    rows = np.arange(x.shape[0])
    low = np.where(ok, ordered[rows, np.maximum(lo, 0)], np.nan)
    high = np.where(ok, ordered[rows, np.maximum(hi, 0)], np.nan)
    return est, low, high, ok, n_eff


def mean_bounds(
    series: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high, sufficient, n_eff) of each row: Student's t with the effective sample size."""
    _check_confidence(confidence)
    x = np.atleast_2d(np.asarray(series, dtype=np.float64))
    n_eff = effective_size(x)
    mu = x.mean(axis=1)
    sd = x.std(axis=1, ddof=1) if x.shape[1] > 1 else np.zeros(x.shape[0])
    ok = n_eff >= MIN_MEAN_EFFECTIVE
    t = sps.t.ppf(1 - (1 - confidence) / 2, np.maximum(n_eff - 1, 1))
    half = t * sd / np.sqrt(n_eff)
    return mu, np.where(ok, mu - half, np.nan), np.where(ok, mu + half, np.nan), ok, n_eff


def sampling_interval(
    statistic: str, values_in_order: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> SamplingInterval:
    """The sampling interval of ``statistic`` (``p50``, ``p90``, ``p99``..., ``mean``; ``max`` has none) of one
    run's per-request values, in the order the requests were sent."""
    _check_confidence(confidence)
    x = np.asarray(values_in_order, dtype=np.float64)
    n = len(x)
    if statistic == "max":
        return not_sampled(
            statistic,
            "a maximum is the sample's extreme, not an estimate: it has no distribution-free interval",
            confidence,
        )
    if n == 0:
        return not_sampled(statistic, "no values", confidence)
    if statistic == "mean":
        est, low, high, ok, n_eff = mean_bounds(x, confidence)
        method = "Student's t over the effective sample size (Geyer's initial positive sequence)"
        short = f"{n_eff[0]:.0f} effective of {n} requests; a mean's interval needs {MIN_MEAN_EFFECTIVE}"
    elif statistic.startswith("p") and statistic[1:].isdigit() and 0 < int(statistic[1:]) < 100:
        p = int(statistic[1:]) / 100
        est, low, high, ok, n_eff = percentile_bounds(x, p, confidence)
        method = (
            "order statistics, binomial over the effective sample size of the indicator series "
            "(scipy.stats.binom; Geyer's initial positive sequence)"
        )
        need = needed_for_percentile(p, confidence)
        short = (
            f"{n_eff[0]:.0f} effective of {n} requests; a two-sided {confidence:.0%} interval of "
            f"{statistic} needs at least {need} independent requests"
        )
    else:
        return not_sampled(statistic, f"no sampling interval is defined for the statistic {statistic!r}", confidence)
    common = dict(estimate=float(est[0]), confidence=confidence, n=n, n_effective=float(n_eff[0]), method=method)
    if not ok[0]:
        return SamplingInterval(statistic, "insufficient sample", reason=short, **common)  # type: ignore[arg-type]
    return SamplingInterval(statistic, "interval", low=float(low[0]), high=float(high[0]), **common)  # type: ignore[arg-type]


def needed_for_percentile(p: float, confidence: float) -> int:
    """The fewest independent values whose order statistics bracket the p-quantile two-sidedly."""
    tail = (1 - confidence) / 2
    # both tails: P(B <= n-1) >= ... needs p^n <= tail (upper end) and (1-p)^n <= tail (lower end)
    return int(np.ceil(np.log(tail) / np.log(max(p, 1 - p))))
