"""Change points of a series of one comparability key's runs, ordered in time (ledger trend).

Detection is ``ruptures``' PELT (Killick, Fearnhead and Eckley, "Optimal detection of changepoints
with a linear computational cost", JASA 107(500), 2012) with the least-squares cost (a change in
mean). Its penalty per change point is 3 * sigma^2 * ln(n), the per-change term of the modified BIC
(Zhang and Siegmund, Biometrics 63(1), 2007, the default of R's ``changepoint`` package), where sigma
is the noise level estimated robustly from the first differences (MAD / 0.6745 / sqrt 2), so the steps
themselves do not inflate it. Each change's size is the difference of the means of the segments on
either side, with Welch's t interval (``scipy.stats.ttest_ind(equal_var=False).confidence_interval``);
a change whose interval includes 0 is dropped (within sampling error).

Below :data:`MIN_POINTS` points the verdict is *insufficient data*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["MIN_POINTS", "ChangePoint", "change_points"]

MIN_POINTS = 8  # points of a series below which no change point is looked for
_PENALTY_FACTOR = 3.0  # the modified BIC's per-change term, in units of sigma^2 ln n


@dataclass
class ChangePoint:
    """The series changes from point ``index`` on (0-based: the first point of the new segment)."""

    index: int
    before: float  # mean of the segment before
    after: float  # mean of the segment from index on
    low: float  # interval of after - before
    high: float
    confidence: float

    @property
    def size(self) -> float:
        return self.after - self.before

    @property
    def relative(self) -> float | None:
        return None if self.before == 0 else self.size / self.before

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "before": self.before,
            "after": self.after,
            "size": self.size,
            "relative": self.relative,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
        }


def change_points(values: Sequence[float], confidence: float = 0.95) -> list[ChangePoint] | None:
    """The change points of ``values`` (in time order); None below :data:`MIN_POINTS` points."""
    import ruptures as rpt

    y = np.asarray(values, dtype=np.float64)
    n = len(y)
    if n < MIN_POINTS:
        return None
    d = np.diff(y)
    sigma = float(np.median(np.abs(d - np.median(d)))) / 0.6745 / np.sqrt(2)
    if sigma == 0:
        sigma = float(np.std(d)) / np.sqrt(2)
    if sigma == 0:  # a constant series
        return []
    ends = rpt.Pelt(model="l2", min_size=2, jump=1).fit(y).predict(pen=_PENALTY_FACTOR * sigma**2 * np.log(n))
    edges = [0, *ends]
    out = []
    for i in range(1, len(edges) - 1):
        a, b = y[edges[i - 1] : edges[i]], y[edges[i] : edges[i + 1]]
        ci = sps.ttest_ind(b, a, equal_var=False).confidence_interval(confidence)
        if not (ci.low <= 0 <= ci.high):
            out.append(
                ChangePoint(edges[i], float(a.mean()), float(b.mean()), float(ci.low), float(ci.high), confidence)
            )
    return out
