"""Power metrics (R14): the sum of each card's window mean, the peak over time of the simultaneous sum
(ticks aligned by timestamp when dmon printed ``-o DT``, else by tick index within one file; across nodes
only by timestamp), and the sum of each card's own peak. They read one power counter
(:data:`~bench_ledger.counters.POWER_COUNTERS`: dmon ``pwr``, nvidia-smi ``power.draw``,
``power.draw.average``, ``power.draw.instant``, dcgmi ``POWER``): average and instantaneous power are
different counters (R14), so a scope holding several of them is n/a, never combined.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.counters import POWER_COUNTERS
from bench_ledger.queries.metrics.arrays import array_rows
from bench_ledger.queries.metrics.definitions import Ctx, Metric, derived, mean, na
from bench_ledger.queries.metrics.hardware import CardSamples, card_of, exact_max, load_cards, per_card, sample_filter
from bench_ledger.queries.values import MetricValue

__all__ = ["POWER_STATS", "power_metric", "power_metrics", "power_values"]

_HS = m.HardwareSample.__table__
_A = m.Artefact.__table__


def _power_counters_in(conn: sa.Connection, artefact_ids: list[int]) -> list[str]:
    """The power counters (:data:`POWER_COUNTERS`) sampled in these artefacts, in that table's order."""
    if not artefact_ids:
        return []
    found = {
        r[0]
        for r in conn.execute(
            sa.select(_HS.c.counter)
            .distinct()
            .where(_HS.c.artefact_id.in_(artefact_ids), _HS.c.counter.in_(list(POWER_COUNTERS)))
        )
    }
    return [c for c in POWER_COUNTERS if c in found]


def _power(stat: str, counter: str | None = None) -> Callable:
    """R14: sum of card means, peak of the simultaneous sum, sum of card peaks: three numbers.

    ``counter`` names the power counter; None takes the scope's only one (several: n/a, R14)."""

    def compute(conn: sa.Connection, ctx: Ctx, metric: Metric):
        return power_values(conn, ctx, [metric], counter)[0]

    return compute


def power_values(conn: sa.Connection, ctx: Ctx, metrics: list[Metric], counter: str | None) -> list[MetricValue]:
    """The power ``metrics`` (each one of :data:`POWER_STATS`) on one resolved scope, from one read of the
    counter's samples: what :func:`power` computes for each, metric by metric."""
    chosen = counter
    if chosen is None:
        present = _power_counters_in(conn, ctx.hw_artefact_ids)
        if len(present) > 1:
            return [
                na(
                    mt,
                    ctx,
                    f"several power counters in this scope ({', '.join(present)}): average and "
                    "instantaneous power are different counters, never combined (R14); `ledger hardware` "
                    "shows each",
                    counters=present,
                )
                for mt in metrics
            ]
        chosen = present[0] if present else "pwr"
    bad, groups, unit = load_cards(conn, ctx, metrics[0], chosen)
    if bad:
        return [na(mt, ctx, bad.na_reason or "", **bad.inputs) for mt in metrics]
    cards = per_card(groups)
    empty = [c for c, v in cards.items() if not len(v)]
    if empty:
        return [na(mt, ctx, f"cards with no power value: {empty}") for mt in metrics]
    base: dict[str, Any] = dict(cards=len(cards), artefacts=ctx.hw_artefact_ids, counter=chosen)  # copied per value
    stats = dict(POWER_STATS)
    out = []
    for mt in metrics:
        stat = stats[mt.name]
        if stat == "sum_of_means":
            out.append(
                derived(
                    mt,
                    ctx,
                    sum((mean(v) for v in cards.values()), Fraction(0)),
                    unit=unit,
                    per_card_mean={c: float(mean(v)) for c, v in cards.items()},
                    **base,
                )
            )
        elif stat == "sum_of_peaks":
            peaks = {c: exact_max(v) for c, v in cards.items()}
            out.append(
                derived(
                    mt,
                    ctx,
                    sum(peaks.values(), Fraction(0)),
                    unit=unit,
                    per_card_peak={c: float(v) for c, v in peaks.items()},
                    **base,
                )
            )
        else:
            out.append(_peak_of_sum(conn, ctx, mt, chosen, groups, unit, base))
    return out


def _epoch_us(conn: sa.Connection, ts: sa.ColumnElement) -> sa.ColumnElement:
    """A timestamp as microseconds since 1970 in a DOUBLE: exact (an integer below 2^53), and one array
    type for both backends' readers (:func:`array_rows`)."""
    if conn.dialect.name == "duckdb":
        return sa.cast(sa.func.epoch_us(ts), sa.Float)
    return sa.cast(sa.extract("epoch", ts) * 1_000_000, sa.Float)  # PostgreSQL: EXTRACT is numeric (exact)


def _peak_of_sum(
    conn: sa.Connection,
    ctx: Ctx,
    metric: Metric,
    counter: str,
    groups: dict[str, list[CardSamples]],
    unit: str,
    base: dict[str, Any],
) -> MetricValue:
    """The peak over aligned ticks of the sum over cards (R14). A tick is a timestamp (every row has one,
    ``-o DT``) or else a tick index within one file; a card's later row at a tick (by tick, then line)
    replaces its earlier one; only ticks at which every card printed count; of equal sums the tick that
    occurs first (rows in file, tick, card and line order) is named. Read as one array per file and card,
    the sums taken in numpy: the sums within the float sum's error bound of the largest are then summed
    exactly, and the largest exact sum is the value (the rounded sums only choose which to sum exactly)."""
    import numpy as np
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    every = [g for gs in groups.values() for g in gs]
    timed = all(g.timed for g in every)
    nodes = {g.node or f"artefact{g.artefact_id}" for g in every}
    files = {g.artefact_id for g in every}  # the files that hold this counter, not every sampled file
    if not timed and (len(nodes) > 1 or len(files) > 1):
        return na(
            metric,
            ctx,
            "samples of several nodes/files without timestamps: ticks align across nodes only by time (-o DT)",
            **base,
        )
    names = list(groups)
    index = {name: i for i, name in enumerate(names)}

    def agg(col: sa.ColumnElement) -> sa.ColumnElement:
        return sa.func.array_agg(aggregate_order_by(sa.cast(col, sa.Float), _HS.c.tick, _HS.c.line))

    key = _epoch_us(conn, _HS.c.ts) if timed else _HS.c.tick
    stmt = (
        sa.select(
            _HS.c.artefact_id,
            _HS.c.node,
            _HS.c.gpu,
            agg(key).label("k"),
            agg(_HS.c.tick).label("t"),
            agg(_HS.c.line).label("l"),
            agg(_HS.c.value).label("v"),
        )
        .where(*sample_filter(ctx.hw_artefact_ids, counter, ctx.window), _HS.c.value.is_not(None))
        .group_by(_HS.c.artefact_id, _HS.c.node, _HS.c.gpu)
    )
    rows = array_rows(conn, stmt)
    if not rows:
        return na(metric, ctx, "no tick at which every card printed its power", **base)
    col = {c: np.concatenate([r[c] for r in rows]) for c in ("k", "t", "l", "v")}
    sizes = [len(r["v"]) for r in rows]  # each group's file, card and gpu, once per row
    art = np.repeat(np.array([r["artefact_id"] for r in rows], np.int64), sizes)
    gpu = np.repeat(np.array([r["gpu"] for r in rows], np.int64), sizes)
    card = np.repeat(np.array([index[card_of(r["artefact_id"], r["node"], r["gpu"])] for r in rows], np.int64), sizes)
    order = np.lexsort((col["l"], gpu, col["t"], art))  # rows in file, tick, card and line order
    k, v, card = col["k"][order], col["v"][order], card[order]
    keys, first, kid = np.unique(k, return_index=True, return_inverse=True)
    pair = kid * len(names) + card
    _, rev = np.unique(pair[::-1], return_index=True)
    last = len(pair) - 1 - rev  # each (tick, card)'s last row
    kl, vl = kid[last], v[last]
    full = np.bincount(kl, minlength=len(keys)) == len(names)
    if not full.any():
        return na(metric, ctx, "no tick at which every card printed its power", **base)
    rounded = np.bincount(kl, weights=vl, minlength=len(keys))
    error = len(names) * 2.0**-52 * float(np.bincount(kl, weights=np.abs(vl), minlength=len(keys))[full].max())
    near = np.flatnonzero(full & (rounded >= rounded[full].max() - 2 * error))
    exact = {int(i): sum((Fraction(float(x)) for x in vl[kl == i]), Fraction(0)) for i in near[np.argsort(first[near])]}
    best = max(exact, key=lambda i: exact[i])  # of equal sums the first to occur
    at = datetime(1970, 1, 1) + timedelta(microseconds=int(keys[best])) if timed else int(keys[best])
    return derived(
        metric,
        ctx,
        exact[best],
        unit=unit,
        aligned_by="timestamp" if timed else "tick index",
        ticks=int(full.sum()),
        ticks_incomplete=int(len(keys) - full.sum()),
        at=str(at),
        **base,
    )


POWER_STATS = (
    ("power_sum_of_card_means_w", "sum_of_means"),
    ("power_peak_of_sum_w", "peak_of_sum"),
    ("power_sum_of_card_peaks_w", "sum_of_peaks"),
)


def power_metric(name: str, counter: str | None = None) -> Metric:
    """One of the three power metrics (:data:`POWER_STATS`), over one named counter or the scope's only one."""
    stat = dict(POWER_STATS)[name]
    unit, kind, statistic, interval, formula = {
        "sum_of_means": (
            "W",
            "power_card_mean_sum",
            "sum of means",
            "window",
            "SUM over cards of MEAN(power) of the card (R14)",
        ),
        "peak_of_sum": (
            "W",
            "power_peak_of_sum",
            "peak of sums",
            "window, ticks aligned",
            "MAX over aligned ticks of SUM over cards of power (R14)",
        ),
        "sum_of_peaks": (
            "W",
            "power_sum_of_peaks",
            "sum of peaks",
            "window",
            "SUM over cards of MAX(power) of the card (R14)",
        ),
    }[stat]
    formula += "; one power counter: " + (
        "the scope's only one of " + ", ".join(POWER_COUNTERS) if counter is None else repr(counter)
    )
    return Metric(name, unit, kind, statistic, interval, (), formula, "hardware", _power(stat, counter))


def power_metrics() -> list[Metric]:
    """The three power statistics (R14) over the scope's power counter."""
    return [power_metric(name) for name, _ in POWER_STATS]
