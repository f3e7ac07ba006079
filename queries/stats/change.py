"""The sampling verdict of a comparison of two statistics (a ratio, a percent change, a difference).

Each side brings its own sampling interval (:mod:`queries.stats.sampling`); the two samples are
independent (different runs). The interval of the change combines the two standard errors that the
sides' intervals imply, as Price and Bonett do for medians ("Distribution-free confidence intervals
for difference and ratio of medians", J. Statist. Comput. Simul. 72(2), 2002, 119-124): a side's
standard error is its interval's width / (2 z), on the log scale for a ratio or percent change, and
the change's interval is estimate +- z * sqrt(se_a^2 + se_b^2).

Verdicts (hand-written categories, the only part here that is not a library's):

* ``differs``: the interval of the change excludes no change (0, or a ratio of 1);
* ``within sampling error``: it includes it;
* ``insufficient sample``: a side's statistic is not supported by its sample;
* ``unknown sampling error``: a side has no per-request records here (a quoted or aggregate-only
  figure), or a statistic without a sampling interval: its error is unknown, never taken as zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from bench_ledger.queries.stats.sampling import DEFAULT_CONFIDENCE, SamplingInterval
from scipy import stats as sps

__all__ = ["Change", "ChangeVerdict", "Op", "change_verdict"]

ChangeVerdict = Literal["differs", "within sampling error", "insufficient sample", "unknown sampling error"]
Op = Literal["ratio", "percent_change", "difference"]


@dataclass
class Change:
    """B against A: the change's estimate and interval (``op`` units: a ratio, percent, or A's unit)."""

    op: str
    verdict: ChangeVerdict
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    reason: str | None = None
    method: str = "Price-Bonett: standard errors from each side's interval, combined (independent samples)"

    def as_dict(self) -> dict:
        return {
            "op": self.op,
            "verdict": self.verdict,
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "reason": self.reason,
            "method": self.method,
        }

    def text(self) -> str:
        if self.low is None or self.high is None or self.estimate is None:
            return f"{self.verdict}: {self.reason}"
        if self.op == "ratio":
            shown = [f"{x:.4g}" for x in (self.estimate, self.low, self.high)]
        else:
            unit = "%" if self.op == "percent_change" else ""
            shown = [f"{x:+.3g}{unit}" for x in (self.estimate, self.low, self.high)]
        return f"{self.verdict}: {shown[0]}, {self.confidence:.0%} interval [{shown[1]}, {shown[2]}]"


def change_verdict(
    a: SamplingInterval | None,
    b: SamplingInterval | None,
    op: Op = "percent_change",
    labels: tuple[str, str] = ("A", "B"),
    confidence: float | None = None,
) -> Change:
    """The sampling verdict of B against A; ``None`` for a side with no per-request records in the ledger."""
    conf = confidence or (a.confidence if a else b.confidence if b else DEFAULT_CONFIDENCE)
    for side, label in ((a, labels[0]), (b, labels[1])):
        if side is None:
            return Change(
                op,
                "unknown sampling error",
                confidence=conf,
                reason=f"{label} has no per-request records here (a quoted or aggregate-only figure): "
                "its sampling error is unknown, not zero",
            )
    assert a is not None and b is not None
    for side, label in ((a, labels[0]), (b, labels[1])):
        if side.status == "insufficient sample":
            return Change(op, "insufficient sample", confidence=conf, reason=f"{label}: {side.reason}")
    for side, label in ((a, labels[0]), (b, labels[1])):
        if side.status != "interval":
            return Change(op, "unknown sampling error", confidence=conf, reason=f"{label}: {side.reason}")
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    assert a.estimate is not None and b.estimate is not None
    z_a = sps.norm.ppf(1 - (1 - a.confidence) / 2)
    z_b = sps.norm.ppf(1 - (1 - b.confidence) / 2)
    z = sps.norm.ppf(1 - (1 - conf) / 2)
    if op == "difference":
        se = math.hypot((a.high - a.low) / (2 * z_a), (b.high - b.low) / (2 * z_b))
        est = b.estimate - a.estimate
        lo, hi, null = est - z * se, est + z * se, 0.0
    else:
        if min(a.low, b.low, a.estimate, b.estimate) <= 0:
            return Change(
                op,
                "unknown sampling error",
                confidence=conf,
                reason="a ratio's interval is taken on the log scale, which needs positive values",
            )
        se = math.hypot(math.log(a.high / a.low) / (2 * z_a), math.log(b.high / b.low) / (2 * z_b))
        log_est = math.log(b.estimate / a.estimate)
        lo, hi = math.exp(log_est - z * se), math.exp(log_est + z * se)
        est, null = b.estimate / a.estimate, 1.0
        if op == "percent_change":
            est, lo, hi, null = 100 * (est - 1), 100 * (lo - 1), 100 * (hi - 1), 0.0
    verdict: ChangeVerdict = "differs" if lo > null or hi < null else "within sampling error"
    return Change(op, verdict, est, lo, hi, conf)
