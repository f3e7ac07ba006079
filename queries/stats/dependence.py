"""Effective sample size of a serially dependent series (the requests of one run are not independent).

Requests of one run share a queue: a request that waits makes its neighbours wait too, so n requests
carry less information than n independent draws. The effective sample size n_eff = n / tau, where
tau = 1 + 2 * sum of the lag-k autocorrelations, is how many independent draws the series is worth.
The autocorrelations are estimated with the FFT and summed with Geyer's *initial positive sequence*
estimator (Geyer 1992, "Practical Markov Chain Monte Carlo", Statistical Science 7(4), sec. 3.3): the
sums of adjacent pairs rho(2k) + rho(2k+1) are added while they stay positive, which truncates the
noisy tail of the estimate without a tuning constant. tau is never taken below 1: a series is never
credited with more information than its count (fail closed).

Vectorised over rows (a matrix of series of equal length, one per row), so a simulation of a
thousand runs costs one FFT.
"""

from __future__ import annotations

import numpy as np
from scipy import fft as spfft

__all__ = ["effective_size"]


def _integrated_time(series: np.ndarray) -> np.ndarray:
    """tau (>= 1) of each row of ``series`` (1-D: one series; 2-D: one per row); a constant row gives 1."""
    x = np.atleast_2d(np.asarray(series))
    x = x.astype(np.float32 if x.dtype == np.bool_ else np.float64)  # an indicator is exact in float32
    n = x.shape[1]
    if n < 4:
        return np.ones(x.shape[0])
    x = x - x.mean(axis=1, keepdims=True)
    size = spfft.next_fast_len(2 * n - 1, real=True)
    f = spfft.rfft(x, size, axis=1)
    acov = spfft.irfft(f.real**2 + f.imag**2, size, axis=1)[:, :n]
    var = acov[:, :1]
    flat = var[:, 0] <= 0
    rho = np.divide(acov, var, out=np.zeros_like(acov), where=var > 0)
    pairs = rho[:, 0 : n - 1 : 2][:, : (n - 1) // 2] + rho[:, 1:n:2][:, : (n - 1) // 2]
    # the initial positive sequence: pairs up to (not including) the first non-positive one
    keep = np.cumprod(pairs > 0, axis=1).astype(bool)
    tau = -1.0 + 2.0 * np.where(keep, pairs, 0.0).sum(axis=1)
    tau[flat] = 1.0
    return np.maximum(tau, 1.0)


def effective_size(series: np.ndarray) -> np.ndarray:
    """n / tau of each row (never above n)."""
    x = np.atleast_2d(np.asarray(series, dtype=np.float64))
    return x.shape[1] / _integrated_time(x)
