"""Per-request timelines that reproduce a run's printed totals exactly.

Why a model and not just random numbers: the records must survive every cross-check the ledger
makes (at most C requests in flight, TTFT < latency, ITL gaps that add up to the decode time,
chunks that carry several tokens under speculative decoding), and the report's figures must come
out of them when recomputed with the report's definitions. The solving approach:

1. Token sums first: the report's printed TPMs fix the wall clock T only up to rounding, so each
   target becomes an interval of T (exact, with fractions); the sums are chosen so that all the
   intervals meet, and T is the middle of their intersection.
2. A small scheduling model gives the shape: a C-slot client (a request starts when a slot frees),
   two DP engines that prefill first-come-first-served, and per-stream decode rates.
3. The whole timeline is scaled by one factor so that max(end) - min(start) is exactly T; scaling
   keeps every ordering and the concurrency bound.
4. A median TTFT target is met by bisection on the decode rate before scaling (when all requests
   start at once the median/T ratio is monotone in it), then holds exactly after scaling.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Shape",
    "Timeline",
    "calibrated_timeline",
    "chunk_gaps",
    "fit_ints",
    "median",
    "solve_wall_clock",
    "t_interval",
]

# Speculative decoding ("dspark", 3 speculative tokens): one streamed chunk carries 1..4 tokens.
_CHUNK_SIZES = (1, 2, 3, 4)
_CHUNK_WEIGHTS = (0.22, 0.30, 0.28, 0.20)


def t_interval(tokens: int, printed: int) -> tuple[Fraction, Fraction]:
    """Wall clocks T (s) for which 60 x tokens / T rounds half-up to ``printed``: (lo, hi]."""
    k = Fraction(60 * tokens)
    return k / (Fraction(printed) + Fraction(1, 2)), k / (Fraction(printed) - Fraction(1, 2))


def solve_wall_clock(
    sum_in: int, sum_out: int, total_tpm: int | None, output_tpm: int | None
) -> tuple[float, Fraction] | None:
    """Middle of the T interval meeting every printed TPM, and the interval's width; None if empty."""
    lo, hi = Fraction(0), Fraction(10**9)
    if total_tpm is not None:
        a, b = t_interval(sum_in + sum_out, total_tpm)
        lo, hi = max(lo, a), min(hi, b)
    if output_tpm is not None:
        a, b = t_interval(sum_out, output_tpm)
        lo, hi = max(lo, a), min(hi, b)
    if hi <= lo:
        return None
    return float((lo + hi) / 2), hi - lo


def fit_ints(values: list[int], total: int, lo: int, hi: int | list[int], rng: random.Random) -> list[int]:
    """Nudge integers by one at a time (random positions) until they sum to ``total``.

    Each value stays in [lo, hi] (``hi`` may be one bound per value).
    """
    his = hi if isinstance(hi, list) else [hi] * len(values)
    out = [min(h, max(lo, v)) for v, h in zip(values, his)]
    if not len(out) * lo <= total <= sum(his):
        raise ValueError(f"cannot fit {len(out)} values in [{lo}, {hi}] to sum {total}")
    diff = total - sum(out)
    step = 1 if diff > 0 else -1
    while diff:
        i = rng.randrange(len(out))
        if lo <= out[i] + step <= his[i]:
            out[i] += step
            diff -= step
    return out


@dataclass
class Timeline:
    """Relative times of one run (seconds, first start = 0)."""

    starts: list[float]
    ttfts: list[float]
    latencies: list[float]

    @property
    def span(self) -> float:
        return max(s + lat for s, lat in zip(self.starts, self.latencies)) - min(self.starts)

    def scaled(self, factor: float) -> Timeline:
        return Timeline(
            [s * factor for s in self.starts],
            [t * factor for t in self.ttfts],
            [lat * factor for lat in self.latencies],
        )


@dataclass(frozen=True)
class Shape:
    """Per-run randomness drawn once, so that re-simulating with another rate is deterministic."""

    gaps: tuple[float, ...]  # client dispatch delay after a slot frees (s)
    prefill_jitter: tuple[float, ...]
    decode_jitter: tuple[float, ...]

    @classmethod
    def draw(cls, rng: random.Random, n: int) -> Shape:
        return cls(
            tuple(rng.uniform(0.0004, 0.0030) for _ in range(n)),
            tuple(rng.uniform(0.93, 1.07) for _ in range(n)),
            tuple(rng.uniform(0.85, 1.15) for _ in range(n)),
        )


def _simulate(
    ins: list[int],
    outs: list[int],
    concurrency: int,
    prefill_rate: float,
    decode_rate: float,
    shape: Shape,
    engines: int = 2,
    overhead: float = 0.06,
) -> Timeline:
    """C-slot client against ``engines`` DP engines that prefill FCFS, each stream decoding alone.

    Start times never decrease with the request index and a request only starts when one of the C
    slots is free, so at most C requests are ever in flight.
    """
    slots = [0.0] * concurrency
    heapq.heapify(slots)
    engine_free = [0.0] * engines
    starts, ttfts, lats = [], [], []
    for i, (n_in, n_out) in enumerate(zip(ins, outs)):
        start = heapq.heappop(slots) + (shape.gaps[i] if i >= concurrency else shape.gaps[i] / 4)
        e = min(range(engines), key=lambda k: engine_free[k])
        first_token = max(start, engine_free[e]) + n_in / prefill_rate * shape.prefill_jitter[i] + overhead
        engine_free[e] = first_token
        decode = (n_out - 1) / (decode_rate * shape.decode_jitter[i])
        starts.append(start)
        ttfts.append(first_token - start)
        lats.append(first_token - start + decode)
        heapq.heappush(slots, start + lats[-1])
    return Timeline(starts, ttfts, lats)


def median(xs: list[float]) -> float:
    """numpy.median: the mean of the two middle values for an even count."""
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def calibrated_timeline(
    ins: list[int],
    outs: list[int],
    concurrency: int,
    wall_clock: float,
    prefill_rate: float,
    decode_rate: float,
    shape: Shape,
    ttft_p50: float | None = None,
) -> Timeline:
    """Simulate, solve the decode rate for a median-TTFT target, and scale to the wall clock."""
    if ttft_p50 is not None:
        if concurrency < len(ins):
            raise ValueError("a median TTFT target is only solved when all requests start at once")
        want = ttft_p50 / wall_clock
        lo, hi = math.log(decode_rate) - 6, math.log(decode_rate) + 6

        def ratio(log_rate: float) -> float:
            tl = _simulate(ins, outs, concurrency, prefill_rate, math.exp(log_rate), shape)
            return median(tl.ttfts) / tl.span

        if not ratio(lo) <= want <= ratio(hi):
            raise ValueError(f"median TTFT {ttft_p50} s out of reach for T = {wall_clock} s")
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ratio(mid) < want else (lo, mid)
        decode_rate = math.exp((lo + hi) / 2)
    tl = _simulate(ins, outs, concurrency, prefill_rate, decode_rate, shape)
    return tl.scaled(wall_clock / tl.span)


def chunk_gaps(rng: random.Random, n_out: int, decode_time: float) -> list[float]:
    """Split a stream's decode time into gaps between streamed chunks (several tokens per chunk).

    The first token arrives with the TTFT chunk; the remaining ``n_out - 1`` tokens come in chunks of
    1..4 tokens. Gaps are positive and add up to ``decode_time`` (the last gap absorbs rounding).
    """
    remaining, sizes = n_out - 1, []
    while remaining > 0:
        size = min(remaining, rng.choices(_CHUNK_SIZES, _CHUNK_WEIGHTS)[0])
        sizes.append(size)
        remaining -= size
    if not sizes:
        return []
    weights = [size**0.35 * rng.lognormvariate(0.0, 0.22) for size in sizes]
    total = math.fsum(weights)
    gaps = [decode_time * w / total for w in weights]
    gaps[-1] = decode_time - math.fsum(gaps[:-1])
    if gaps[-1] <= 0:
        raise ValueError("non-positive last chunk gap")
    return gaps
