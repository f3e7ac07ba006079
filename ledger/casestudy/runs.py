"""Per-request records of every run, built so that the report's numbers come out of them.

See ``timeline`` for the solving approach. Each run draws from its own ``random.Random`` seeded
with ``"<seed>:<label>"``, so one run's records do not change when another run is added.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

from bench_ledger.casestudy.plan import (
    DECODE_RATE,
    M17_STREAM_MEDIAN,
    M17_TTFT_MAX,
    M17_TTFT_P50,
    RunSpec,
)
from bench_ledger.casestudy.timeline import (
    Shape,
    Timeline,
    calibrated_timeline,
    chunk_gaps,
    fit_ints,
    median,
    solve_wall_clock,
    t_interval,
)

__all__ = ["RunRecords", "build_run"]

# Scheduling model per tier: per-engine prefill rate (tok/s) and per-stream decode rate (tok/s).
# Only the shape matters: the timeline is scaled to the solved wall clock afterwards.
_TIER_MODEL: dict[str, tuple[float, float]] = {
    "50k-200": (16_000.0, 30.0),
    "80k-600": (15_000.0, 26.0),
    "160k-1300": (13_000.0, 18.0),
    "32-512": (2_000.0, 110.0),
}
_LEGACY_START_OVERHEAD = 0.0035  # s between the legacy bench's clock start and its first request


@dataclass
class RunRecords:
    """One run's per-request records (times in seconds; ``starts`` relative to the first start)."""

    spec: RunSpec
    ins: list[int]
    outs: list[int]
    starts: list[float]
    ttfts: list[float]
    latencies: list[float]
    itls: list[list[float]]
    wall_clock: float  # solved T: span of the records (fx) or the legacy tool's duration (m17)


def _natural_ins(rng: random.Random, spec: RunSpec) -> list[int]:
    if spec.input_target <= 100:  # random dataset of 32 tokens: exact (+-3 % leaves no room)
        return [spec.input_target] * spec.requests
    return [round(spec.input_target * rng.uniform(0.982, 1.016)) for _ in range(spec.requests)]


def _natural_outs(rng: random.Random, spec: RunSpec, mean: float) -> list[int]:
    sigma = 0.18 if spec.input_target <= 100 else 0.45  # short tier: answers of similar length
    mu = math.log(mean) - sigma**2 / 2
    return [min(spec.output_cap, max(8, round(rng.lognormvariate(mu, sigma)))) for _ in range(spec.requests)]


def _solve_sums(rng: random.Random, spec: RunSpec) -> tuple[list[int], list[int], float]:
    """Input and output lengths whose sums meet every printed TPM, and the solved wall clock."""
    ins = _natural_ins(rng, spec)
    outs = _natural_outs(rng, spec, spec.mean_out)
    lo_in, hi_in = math.ceil(spec.input_target * 0.97), math.floor(spec.input_target * 1.03)
    sum_in, sum_out = sum(ins), sum(outs)
    if spec.sum_in is not None:
        sum_in = spec.sum_in
    if spec.sum_out is not None:
        sum_out = spec.sum_out
    if spec.total_tpm is not None and spec.output_tpm is not None:
        ratio = spec.output_tpm / (spec.total_tpm - spec.output_tpm)
        if spec.sum_out is not None and spec.sum_in is None:
            sum_in = round(spec.sum_out / ratio)
        elif spec.sum_out is None:
            sum_out = round(sum_in * ratio)
        free_in = spec.sum_in is None and spec.input_target > 100
        free_out = spec.sum_out is None
        # Nearest sums first; accept the first whose T interval keeps at least half the width of
        # the narrower printed target's own interval (a comfortable margin on both roundings).
        d_outs = sorted(range(-4, 5) if free_out else [0], key=abs)
        d_ins = sorted(range(-300, 301) if free_in else [0], key=abs)
        best: tuple[Fraction, int, int] | None = None
        for d_out, d_in in sorted(
            ((a, b) for a in d_outs for b in d_ins), key=lambda ab: (abs(ab[0]) + abs(ab[1]), abs(ab[0]))
        ):
            s_in, s_out = sum_in + d_in, sum_out + d_out
            solved = solve_wall_clock(s_in, s_out, spec.total_tpm, spec.output_tpm)
            if solved is None:
                continue
            if best is None or solved[1] > best[0]:
                best = (solved[1], s_in, s_out)
            lo_t, hi_t = t_interval(s_in + s_out, spec.total_tpm)
            lo_o, hi_o = t_interval(s_out, spec.output_tpm)
            if solved[1] >= min(hi_t - lo_t, hi_o - lo_o) / 2:
                break
        if best is None:
            raise ValueError(f"{spec.label}: no token sums meet both printed TPMs")
        _, sum_in, sum_out = best
    solved = solve_wall_clock(sum_in, sum_out, spec.total_tpm, spec.output_tpm)
    if solved is None:
        raise ValueError(f"{spec.label}: printed TPMs disagree with the token sums")
    if spec.input_target > 100:
        ins = fit_ints(ins, sum_in, lo_in, hi_in, rng)
    outs = fit_ints(outs, sum_out, 2, spec.output_cap, rng)
    return ins, outs, solved[0]


def _itls(rng: random.Random, outs: list[int], tl: Timeline) -> list[list[float]]:
    return [chunk_gaps(rng, o, lat - t) for o, lat, t in zip(outs, tl.latencies, tl.ttfts)]


def build_run(spec: RunSpec, seed: int) -> RunRecords:
    """Records of one run of the fx or m17 matrix (not the probes)."""
    rng = random.Random(f"{seed}:{spec.label}")
    if spec.tier == "decode-2k":
        return _decode_stream(rng, spec)
    if spec.label == "32-512-c64n64":
        return _short_c64(rng, spec)
    ins, outs, wall = _solve_sums(rng, spec)
    prefill, decode = _TIER_MODEL[spec.tier]
    shape = Shape.draw(rng, spec.requests)
    span = wall - _LEGACY_START_OVERHEAD if spec.legacy else wall
    tl = calibrated_timeline(ins, outs, spec.concurrency, span, prefill, decode, shape, spec.ttft_p50)
    return RunRecords(spec, ins, outs, tl.starts, tl.ttfts, tl.latencies, _itls(rng, outs, tl), wall)


def _decode_stream(rng: random.Random, spec: RunSpec) -> RunRecords:
    """decode-2k: one stream whose decode rate is 133.39 tok/s and whose total TPM is 21,170."""
    assert spec.total_tpm is not None
    out = 1997
    decode = (out - 1) / DECODE_RATE
    ttft_guess = 0.41
    sum_in = round(spec.total_tpm * (decode + ttft_guess) / 60) - out
    solved = solve_wall_clock(sum_in, out, spec.total_tpm, None)
    assert solved is not None
    wall = solved[0]
    tl = Timeline([0.0], [wall - decode], [wall])
    return RunRecords(spec, [sum_in], [out], tl.starts, tl.ttfts, tl.latencies, _itls(rng, [out], tl), wall)


def _short_c64(rng: random.Random, spec: RunSpec) -> RunRecords:
    """m17 C64N64: TTFT p50/max, the median per-stream rate and both TPMs, all at once.

    All 64 requests start together (C = N). TTFTs are drawn and mapped affinely onto p50 0.54 s and
    max 0.93 s; per-stream rates are drawn and scaled to a median of 51.03 tok/s; each stream's output
    length is then capped by what its rate can emit before the run's end, and the lengths are fitted
    to the solved output sum. Faster streams carry the longer answers, as streams that outlive the
    crowd speed up once it thins out.
    """
    ins, outs, wall = _solve_sums(rng, spec)
    n = spec.requests
    end = wall - _LEGACY_START_OVERHEAD
    starts = sorted(rng.uniform(0.0, 0.004) for _ in range(n))
    raw = [0.16 + 0.5 * rng.random() ** 1.4 for _ in range(n)]
    med, top = median(raw), max(raw)
    b = (M17_TTFT_MAX - M17_TTFT_P50) / (top - med)
    ttfts = [M17_TTFT_P50 + b * (t - med) for t in raw]
    assert min(ttfts) > 0.05
    f = [rng.lognormvariate(0.0, 0.11) for _ in range(n)]
    fm = median(f)
    rates = [M17_STREAM_MEDIAN * x / fm for x in f]
    caps = [min(spec.output_cap, math.floor(r * (end - s - t) * 0.999) + 1) for r, s, t in zip(rates, starts, ttfts)]
    natural = [round(c * rng.uniform(0.80, 1.0)) for c in caps]
    outs = fit_ints(natural, sum(outs), 2, caps, rng)
    lats = [t + (o - 1) / r for t, o, r in zip(ttfts, outs, rates)]
    tl = Timeline(starts, ttfts, lats)
    assert tl.span <= end
    return RunRecords(spec, ins, outs, starts, ttfts, lats, _itls(rng, outs, tl), wall)
