"""``nvidia-smi dmon`` captures (formats.md section 7) that reproduce the report's power figures.

The report quotes three power statistics that must stay distinct (R14): the sum over the 16 cards of
each card's window-mean power (3,814 W), the peak over ticks of the simultaneous 16-card sum
(4,755 W), and the sum of each card's own peak, which is larger because cards peak at different
ticks. The series are drawn (a load shared by all cards, a per-card wander, noise), stretched so
that the busiest tick sums to 4,755 W, rounded to integers as dmon prints them, and then nudged one
watt at a time to hit the exact totals without creating a new peak.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

__all__ = ["TICKS", "dmon_mem_file", "dmon_pu_files"]

_CARDS_PER_NODE, _NODES, TICKS = 8, 2, 300
_SUM_OF_MEANS_W = 3_814  # target: sum over cards of each card's window-mean power
_PEAK_OF_SUM_W = 4_755  # target: max over ticks of the 16-card sum
_SM_MEAN, _MEM_MEAN = 90.7, 5.4  # targets: mean of `sm` and `mem` over all cards and ticks
_HEADER_EVERY = 10  # dmon repeats its two header lines periodically
_FB_MIN_MIB, _FB_MAX_MIB = 92_153, 93_702

_NAMES = ("gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk")
_UNITS = ("Idx", "W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz")


def _ar1(rng: random.Random, n: int, phi: float, sigma: float) -> list[float]:
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.gauss(0.0, sigma)
        out.append(x)
    return out


def _fit_total(
    grid: list[list[int]], total: int, lo: int, hi: int, rng: random.Random, allowed: list[int] | None = None
) -> None:
    """Add or remove 1 at random cells (only at ticks in ``allowed``) until the grid sums to total."""
    ticks = allowed if allowed is not None else list(range(len(grid[0])))
    diff = total - sum(map(sum, grid))
    step = 1 if diff > 0 else -1
    while diff:
        c, t = rng.randrange(len(grid)), rng.choice(ticks)
        if lo <= grid[c][t] + step <= hi:
            grid[c][t] += step
            diff -= step


def _power_grid(rng: random.Random) -> list[list[int]]:
    """Per-card power (W) for 16 cards x 300 ticks meeting the three power targets."""
    cards = _CARDS_PER_NODE * _NODES
    shared = _ar1(rng, TICKS, 0.93, 6.0)
    raw = []
    for _ in range(cards):
        offset = rng.uniform(-9.0, 9.0)
        own = _ar1(rng, TICKS, 0.80, 9.0)
        raw.append([offset + shared[t] + own[t] + rng.gauss(0.0, 6.0) for t in range(TICKS)])
    mean_card = _SUM_OF_MEANS_W / cards
    dev_sum = [sum(raw[c][t] for c in range(cards)) for t in range(TICKS)]
    base = sum(dev_sum) / TICKS
    k = (_PEAK_OF_SUM_W - _SUM_OF_MEANS_W) / (max(dev_sum) - base)
    grid = [[round(mean_card + k * (raw[c][t] - base / cards)) for t in range(TICKS)] for c in range(cards)]
    peak_t = max(range(TICKS), key=lambda t: dev_sum[t])
    # The busiest tick sums to exactly 4,755 W; every other tick stays below it.
    _fit_column(grid, peak_t, _PEAK_OF_SUM_W, rng)
    for t in range(TICKS):
        col = sum(grid[c][t] for c in range(cards))
        if t != peak_t and col >= _PEAK_OF_SUM_W:
            _fit_column(grid, t, _PEAK_OF_SUM_W - 1 - rng.randrange(20), rng)
    # Exact total: one watt at a time, only where the tick sum keeps a margin below the peak.
    target = _SUM_OF_MEANS_W * TICKS
    while (diff := target - sum(map(sum, grid))) != 0:
        sums = [sum(grid[c][t] for c in range(cards)) for t in range(TICKS)]
        room = [t for t in range(TICKS) if t != peak_t and sums[t] < _PEAK_OF_SUM_W - 30]
        _fit_total(grid, sum(map(sum, grid)) + max(-200, min(200, diff)), 60, 400, rng, room)
    return grid


def _fit_column(grid: list[list[int]], t: int, total: int, rng: random.Random) -> None:
    diff = total - sum(grid[c][t] for c in range(len(grid)))
    step = 1 if diff > 0 else -1
    while diff:
        c = rng.randrange(len(grid))
        grid[c][t] += step
        diff -= step


def _percent_grid(rng: random.Random, mean: float, spread: float, lo: int, hi: int, cards: int) -> list[list[int]]:
    """Integer percentages whose mean over all cells is exactly ``mean`` (to one decimal)."""
    grid = [[min(hi, max(lo, round(mean + rng.gauss(0.0, spread)))) for _ in range(TICKS)] for _ in range(cards)]
    _fit_total(grid, round(mean * cards * TICKS), lo, hi, rng)
    return grid


def _header(names: tuple[str, ...], units: tuple[str, ...] | None) -> list[str]:
    out = ["#Date".ljust(12) + "Time".ljust(8) + "".join(f"{n:>7}" for n in names) + " "]
    if units is not None:
        out.append("#YYYYMMDD".ljust(12) + "HH:MM:SS" + "".join(f"{u:>7}" for u in units) + " ")
    return out


def dmon_pu_files(rng: random.Random, start: datetime) -> list[str]:
    """Text of ``nvidia-smi dmon -s pu -o DT -d 1`` for node0 and node1 (same timestamps)."""
    cards = _CARDS_PER_NODE * _NODES
    pwr = _power_grid(rng)
    sm = _percent_grid(rng, _SM_MEAN, 4.0, 55, 100, cards)
    mem = _percent_grid(rng, _MEM_MEAN, 1.3, 1, 14, cards)
    texts = []
    for node in range(_NODES):
        lines: list[str] = []
        for t in range(TICKS):
            if t % _HEADER_EVERY == 0:
                lines += _header(_NAMES, _UNITS)
            now = start + timedelta(seconds=t)
            for gpu in range(_CARDS_PER_NODE):
                c = node * _CARDS_PER_NODE + gpu
                p = pwr[c][t]
                gtemp = 44 + (p - 180) // 9 + (gpu % 3)
                mtemp = 41 + (p - 180) // 12 + (gpu % 2)
                pclk = 1980 if p < 300 else 1980 - 15 * ((p - 285) // 10)
                cells = [
                    str(gpu),
                    str(p),
                    str(gtemp),
                    str(mtemp),
                    str(sm[c][t]),
                    str(mem[c][t]),
                    "0",
                    "0",
                    "0",
                    "0",
                    "2619",
                    str(pclk),
                ]
                lines.append(f" {now:%Y%m%d}   {now:%H:%M:%S}" + "".join(f"{x:>7}" for x in cells) + " ")
        texts.append("\n".join(lines) + "\n")
    return texts


def dmon_mem_file(rng: random.Random, start: datetime, ticks: int = 3) -> str:
    """``nvidia-smi dmon -s m -o DT`` on node0, pasted WITHOUT its units line (units unconfirmed)."""
    fb = [_FB_MAX_MIB, _FB_MIN_MIB] + [rng.randrange(_FB_MIN_MIB + 1, _FB_MAX_MIB) for _ in range(6)]
    lines = _header(("gpu", "fb", "bar1", "ccpm"), None)
    for t in range(ticks):
        now = start + timedelta(seconds=t)
        for gpu in range(_CARDS_PER_NODE):
            cells = [str(gpu), str(fb[gpu]), "7", "0"]
            lines.append(f" {now:%Y%m%d}   {now:%H:%M:%S}" + "".join(f"{x:>7}" for x in cells) + " ")
    return "\n".join(lines) + "\n"
