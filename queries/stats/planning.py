"""How many requests (and runs) a relative change in a statistic needs to be resolved (ledger plan).

From a pilot run's interval of the statistic (:mod:`queries.stats.sampling`, with its effective sample
size): on the log scale its standard error is se = ln(high / low) / (2 z), and it shrinks as
1 / sqrt(n) for a run of n requests with the same dependence. Two runs of n requests each give the
change B/A a standard error sqrt(2) * se_pilot * sqrt(n_pilot / n); a change of d is resolved with the
usual power (80%) when (z_(1-alpha/2) + z_(power)) * that <= ln(1 + d), the standard sample-size formula
for a two-sample comparison (e.g. Chow, Shao and Wang, "Sample Size Calculations in Clinical Research",
ch. 3) applied to the log statistic.

Runs: a test over runs (:mod:`queries.stats.replicates`) needs at least the number of runs per side
whose smallest exact Mann-Whitney p-value is below alpha; how many more depends on run-to-run variation,
which a single pilot run cannot show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from bench_ledger.queries.stats.sampling import MIN_MEAN_EFFECTIVE, SamplingInterval, needed_for_percentile
from scipy import stats as sps

__all__ = ["POWER", "Plan", "min_runs_per_side", "plan_requests"]

POWER = 0.8


@dataclass
class Plan:
    metric: str
    detect: float  # relative change, 0.05 for 5%
    pilot: SamplingInterval
    requests: int | None  # per run, per side
    runs_per_side: int
    reason: str | None = None

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "detect": self.detect,
            "requests_per_run": self.requests,
            "runs_per_side": self.runs_per_side,
            "power": POWER,
            "pilot": self.pilot.as_dict(),
            "reason": self.reason,
        }


def min_runs_per_side(confidence: float) -> int:
    """The fewest runs per side for which a Mann-Whitney test over runs can reach 1 - confidence at all."""
    k = 2
    while (
        sps.mannwhitneyu(np.arange(k), np.arange(k) + k, alternative="two-sided", method="exact").pvalue
        >= 1 - confidence
    ):
        k += 1
    return k


def plan_requests(metric: str, pilot: SamplingInterval, detect: float) -> Plan:
    """Requests per run for two runs to resolve a relative change ``detect`` in the statistic."""
    runs = min_runs_per_side(pilot.confidence)
    if pilot.status != "interval" or pilot.low is None or pilot.high is None:
        why = pilot.reason or "no interval"
        return Plan(metric, detect, pilot, None, runs, f"the pilot gives no interval of {pilot.statistic}: {why}")
    if pilot.low <= 0:
        return Plan(metric, detect, pilot, None, runs, "the pilot's interval reaches 0: a relative change is undefined")
    z = sps.norm.ppf(1 - (1 - pilot.confidence) / 2)
    se = math.log(pilot.high / pilot.low) / (2 * z)
    if se == 0:
        return Plan(metric, detect, pilot, None, runs, "the pilot's interval has no width: its values do not vary")
    need = 2 * pilot.n * se**2 * (z + sps.norm.ppf(POWER)) ** 2 / math.log1p(detect) ** 2
    # and at least enough requests for the statistic itself to have an interval at this dependence
    stat = pilot.statistic
    floor = MIN_MEAN_EFFECTIVE if stat == "mean" else needed_for_percentile(int(stat[1:]) / 100, pilot.confidence)
    per_effective = pilot.n / (pilot.n_effective or pilot.n)
    return Plan(metric, detect, pilot, max(math.ceil(need), math.ceil(floor * per_effective)), runs)
