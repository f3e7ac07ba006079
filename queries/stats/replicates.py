"""Runs as replicates: a test over runs, and false-discovery control across the metrics compared.

Requests of one run share that run's conditions (its launch, its warm state, its neighbours in the
queue); a second run is what shows run-to-run variation. With repeated runs on each side (runs of one
comparability key), each run's statistic is one observation, and the sides are compared with the
Mann-Whitney U test (``scipy.stats.mannwhitneyu``, exact for small samples). One run against one run
gives no test: it is never "significant". Across the metrics compared, the p-values are adjusted by
Benjamini-Hochberg (``scipy.stats.false_discovery_control``): a metric is significant when its adjusted
value is below 1 - confidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["RunTest", "run_tests"]


@dataclass
class RunTest:
    """One metric's test over runs: ``significant`` is None where there is no test (with ``reason``)."""

    metric: str
    runs_a: int
    runs_b: int
    p_value: float | None = None
    q_value: float | None = None
    significant: bool | None = None
    reason: str | None = None
    method: str = "Mann-Whitney U over runs (scipy.stats.mannwhitneyu), Benjamini-Hochberg across metrics"

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "runs_a": self.runs_a,
            "runs_b": self.runs_b,
            "p_value": self.p_value,
            "q_value": self.q_value,
            "significant": self.significant,
            "reason": self.reason,
            "method": self.method,
        }

    def text(self) -> str:
        if self.significant is None:
            return (
                "no test: one run on a side (never significant)"
                if self.runs_a and self.runs_b
                else f"no test: {self.reason}"
            )
        word = "significant" if self.significant else "not significant"
        return f"{word} (p {self.p_value:.3g}, BH-adjusted {self.q_value:.3g}; {self.runs_a} vs {self.runs_b} runs)"


def run_tests(per_metric: Mapping[str, tuple[Sequence[float], Sequence[float]]], confidence: float) -> list[RunTest]:
    """Each metric's per-run values on side A and side B -> its test, the p-values adjusted together."""
    out: list[RunTest] = []
    for name, (a, b) in per_metric.items():
        t = RunTest(name, len(a), len(b))
        if len(a) == 0 or len(b) == 0:
            t.reason = f"no value on side {'A' if not a else 'B'} (n/a)"
        elif len(a) < 2 or len(b) < 2:
            t.reason = (
                f"{len(a)} run(s) against {len(b)}: run-to-run variation is unknown with one run on a side, "
                "so the difference is never called significant; repeat the runs"
            )
        else:
            t.p_value = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        out.append(t)
    tested = [t for t in out if t.p_value is not None]
    if tested:
        q = sps.false_discovery_control(np.array([t.p_value for t in tested]), method="bh")
        for t, qv in zip(tested, q, strict=True):
            t.q_value = float(qv)
            t.significant = bool(qv < 1 - confidence)
    return out
