"""Sampling statistics without a database (queries/stats): coverage of the intervals on synthetic data of
known distribution, independent and queue-correlated; insufficient samples; change verdicts; tests over
runs; change points. Simulations are vectorised with fixed seeds (docs/statistics.md)."""

from __future__ import annotations

import numpy as np
import pytest
from bench_ledger.queries.stats.change import change_verdict
from bench_ledger.queries.stats.changepoints import MIN_POINTS, change_points
from bench_ledger.queries.stats.dependence import effective_size
from bench_ledger.queries.stats.planning import min_runs_per_side, plan_requests
from bench_ledger.queries.stats.replicates import run_tests
from bench_ledger.queries.stats.sampling import (
    mean_bounds,
    percentile_bounds,
    percentile_ranks,
    sampling_interval,
)
from scipy import stats as sps

RUNS = 1000
PS = (0.5, 0.9, 0.99)


def _coverage(x: np.ndarray, truth) -> dict[float, float]:  # noqa: ANN001
    """Per percentile, the share of runs whose interval covers the true value; a run whose sample is
    insufficient (no interval, at most 1% of them) counts as not covering."""
    ordered = np.sort(x, axis=1)  # sorted once for the three percentiles
    out = {}
    for p in PS:
        _, low, high, ok, _ = percentile_bounds(x, p, ordered=ordered)
        assert np.mean(ok) >= 0.99, f"p{p}: {np.sum(~ok)} runs without an interval"
        out[p] = float(np.mean(ok & (low <= truth(p)) & (truth(p) <= high)))
    return out


def mm1_sojourn(rng: np.random.Generator, runs: int, n: int, rho: float) -> np.ndarray:
    """Sojourn times (wait + service) of n consecutive customers of a stationary M/M/1 FIFO queue (service
    rate 1, load rho), by Lindley's recursion; each is Exponential(1 - rho), neighbours are correlated."""
    w = np.where(rng.random(runs) < rho, rng.exponential(1 / (1 - rho), runs), 0.0)  # stationary start
    s, a = rng.exponential(1.0, (runs, n)), rng.exponential(1 / rho, (runs, n))
    out = np.empty((runs, n))
    for i in range(n):
        out[:, i] = w + s[:, i]
        w = np.maximum(0.0, out[:, i] - a[:, i])
    return out


def test_independent_intervals_cover_p50_p90_p99_95_percent() -> None:
    x = np.random.default_rng(20261207).lognormal(0.0, 0.5, (RUNS, 2000))
    cov = _coverage(x, lambda p: np.exp(0.5 * sps.norm.ppf(p)))
    assert all(0.93 <= c <= 0.97 for c in cov.values()), cov


def test_queue_correlated_intervals_cover_p50_p90_p99_95_percent() -> None:
    rho = 0.3
    x = mm1_sojourn(np.random.default_rng(11), RUNS, 4000, rho)
    cov = _coverage(x, lambda p: -np.log(1 - p) / (1 - rho))
    assert all(0.93 <= c <= 0.97 for c in cov.values()), cov


def test_queue_correlated_intervals_need_the_effective_sample_size() -> None:
    """The same queue series with its requests taken as independent: the median's intervals are too narrow."""
    rho = 0.3
    x = mm1_sojourn(np.random.default_rng(11), RUNS, 4000, rho)
    ordered = np.sort(x, axis=1)
    lo, hi = percentile_ranks(4000, 4000, 0.5, 0.95)
    truth = -np.log(0.5) / (1 - rho)
    naive = float(np.mean((ordered[:, lo[()]] <= truth) & (truth <= ordered[:, hi[()]])))
    assert naive < 0.90, naive


def test_queue_correlated_mean_interval_covers() -> None:
    rho = 0.3
    x = mm1_sojourn(np.random.default_rng(5), RUNS, 4000, rho)
    _, low, high, ok, _ = mean_bounds(x)
    truth = 1 / (1 - rho)
    assert ok.all() and 0.93 <= float(np.mean((low <= truth) & (truth <= high))) <= 0.97


@pytest.mark.parametrize("n", [6, 40, 368, 1000, 2500])
@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
def test_independent_ranks_are_scipys_quantile_test(n: int, p: float) -> None:
    x = np.arange(n, dtype=float)
    ci = sps.quantile_test(x, q=0, p=p).confidence_interval(0.95)
    lo, hi = percentile_ranks(n, n, p, 0.95)
    if np.isnan(ci.low) or np.isnan(ci.high):
        assert lo[()] == -1 and hi[()] == -1
    else:
        assert (lo[()], hi[()]) == (ci.low, ci.high)


def test_p99_of_150_requests_is_insufficient_sample() -> None:
    si = sampling_interval("p99", np.random.default_rng(1).lognormal(0, 0.5, 150))
    assert si.status == "insufficient sample" and si.low is None and si.estimate is not None
    assert si.reason == (
        "150 effective of 150 requests; a two-sided 95% interval of p99 needs at least 368 independent requests"
    )
    assert sampling_interval("p99", np.random.default_rng(1).lognormal(0, 0.5, 400)).status == "interval"


def test_max_and_unknown_statistics_have_no_interval() -> None:
    si = sampling_interval("max", np.arange(1000.0))
    assert si.status == "n/a" and si.reason.startswith("a maximum is the sample's extreme")
    with pytest.raises(ValueError, match="confidence 1.5 is not between 0 and 1"):
        sampling_interval("p50", np.arange(10.0), 1.5)


def test_effective_size_of_an_ar1_series() -> None:
    """AR(1) with coefficient phi: tau = (1 + phi) / (1 - phi), so n_eff = n / 3 for phi = 0.5."""
    rng = np.random.default_rng(3)
    e = rng.standard_normal((200, 4000))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / np.sqrt(1 - 0.25)
    for i in range(1, 4000):
        x[:, i] = 0.5 * x[:, i - 1] + e[:, i]
    assert abs(float(np.median(effective_size(x))) / (4000 / 3) - 1) < 0.1
    assert float(np.median(effective_size(e))) > 3800  # independent: about n, never above
    assert effective_size(np.ones(50))[0] == 50


def test_change_verdicts() -> None:
    rng = np.random.default_rng(8)
    a = sampling_interval("p50", rng.lognormal(0, 0.5, 2000))
    same = sampling_interval("p50", rng.lognormal(0, 0.5, 2000))
    shifted = sampling_interval("p50", 1.1 * rng.lognormal(0, 0.5, 2000))
    assert change_verdict(a, same).verdict == "within sampling error"
    up = change_verdict(a, shifted)
    assert up.verdict == "differs" and up.low is not None and up.low > 0 and 5 < up.estimate < 15
    short = sampling_interval("p99", rng.lognormal(0, 0.5, 150))
    assert change_verdict(a, short, labels=("A", "B")).verdict == "insufficient sample"
    unknown = change_verdict(None, a, labels=("quoted-old", "new"))
    assert unknown.verdict == "unknown sampling error" and unknown.reason.startswith("quoted-old has no per-request")


def test_one_run_against_one_is_never_significant_and_repeats_are_tested() -> None:
    one = run_tests({"ttft_p50": ([1.0], [2.0])}, 0.95)[0]
    assert one.significant is None and one.reason.startswith("1 run(s) against 1: run-to-run variation is unknown")
    rng = np.random.default_rng(2)
    a, b, c = rng.normal(1.0, 0.01, 6), rng.normal(1.1, 0.01, 6), rng.normal(1.0, 0.01, 6)
    tests = {t.metric: t for t in run_tests({"shifted": (a, b), "same": (a, c)}, 0.95)}
    assert tests["shifted"].significant is True and tests["same"].significant is False
    # Benjamini-Hochberg: the adjusted value of the smallest of two p-values is twice it
    assert tests["shifted"].q_value == pytest.approx(2 * tests["shifted"].p_value)


def _series(step_at: int | None, seed: int) -> np.ndarray:
    y = 100 * (1 + 0.02 * np.random.default_rng(seed).standard_normal(20))
    if step_at is not None:
        y[step_at - 1 :] *= 1.10  # batch numbers from 1
    return y


def test_a_ten_percent_step_at_batch_11_is_one_change_point() -> None:
    cps = change_points(_series(11, 4))
    assert cps is not None and len(cps) == 1 and abs(cps[0].index + 1 - 11) <= 1
    assert 0.07 < cps[0].relative < 0.13 and cps[0].low > 0


def test_a_flat_series_has_no_change_point_and_a_short_one_is_insufficient() -> None:
    assert change_points(_series(None, 4)) == []
    assert change_points(_series(None, 4)[: MIN_POINTS - 1]) is None


def test_plan_scales_the_pilot_interval() -> None:
    pilot = sampling_interval("p50", np.random.default_rng(9).lognormal(0, 0.5, 500))
    plan = plan_requests("ttft_p50", pilot, 0.05)
    half = plan_requests("ttft_p50", pilot, 0.10)
    assert plan.requests is not None and half.requests is not None
    assert 3.5 < plan.requests / half.requests < 4.5  # n ~ 1 / ln(1 + d)^2
    assert min_runs_per_side(0.95) == 4  # 3 vs 3: the smallest exact two-sided p is 0.1
