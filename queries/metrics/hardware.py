"""Hardware-sample metrics: per-card counter statistics, the cards' samples as read for them (also by
:mod:`queries.metrics.power`), and the windows that cut them.

Why it is built this way:

* dmon counters keep their meaning (R13): ``sm`` becomes ``gpu_activity_time_pct_*`` (share of time a
  kernel ran), ``mem`` becomes ``memory_busy_pct_*`` (memory-controller busy time); nothing is
  called "utilization" or MFU.
* A per-card statistic is one card's: with several cards in scope and no ``Scope.gpu`` the value is
  n/a and ``inputs['per_card']`` lists each card's figure. Cards are never averaged together.
* :data:`ACROSS_CARDS` is the one table of what a statistic across cards may be, per quantity kind,
  with its rule (R13, R14); `ledger hardware` prints it next to each counter.
* Units are as printed; ``unconfirmed`` stays ``unconfirmed`` and is never converted (R12).
* Power (R14): :mod:`queries.metrics.power`; server-log metrics (R5, R8): :mod:`queries.metrics.server_log`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.counters import DMON
from bench_ledger.queries.metrics.arrays import array_rows
from bench_ledger.queries.metrics.definitions import Ctx, Metric, derived, mean, na
from bench_ledger.queries.metrics.exact_column import ExactColumn

__all__ = [
    "HS",
    "LF",
    "A",
    "CardSamples",
    "across_cards",
    "card_metrics",
    "card_name",
    "card_of",
    "exact_max",
    "load_cards",
    "match_cards",
    "parse_window",
    "per_card",
    "read_cards",
    "sample_filter",
]

HS = m.HardwareSample.__table__
LF = m.LogFact.__table__
A = m.Artefact.__table__


# What a statistic across cards may be, per quantity kind: (allowed, rule, why). The one place.
_ACROSS_CARDS: dict[str, tuple[str, str, str]] = {
    "power": (
        "sum of card means, peak of the simultaneous sum, sum of card peaks",
        "R14",
        "three different numbers, each printed with its name; a mean over cards is none of them, and "
        "average and instantaneous power are different counters, never combined",
    ),
    "activity_time_percent": (
        "none (per card only)",
        "R13",
        "one card's share of time a kernel ran; a sum or mean over cards is not a share of "
        "any card's time, nor SM occupancy or MFU",
    ),
    "memory_busy_percent": (
        "none (per card only)",
        "R13",
        "one card's memory-controller busy time; a sum or mean over cards is not a bandwidth",
    ),
    "utilization_percent": ("none (per card only)", "R13", "one card's engine busy time; not additive over cards"),
}
_NOT_ACROSS = (
    "none (per card only)",
    "R13",
    "a counter is the card's that measured it; the ledger computes no statistic across cards for this kind",
)


def across_cards(kind: str) -> tuple[str, str, str]:
    """What a statistic across cards of a counter of ``kind`` may be: (allowed, rule, why)."""
    return _ACROSS_CARDS.get(kind, _NOT_ACROSS)


def card_of(artefact_id: int, node: str | None, gpu: int) -> str:
    """A card as scopes name it: 'node0:gpu3' (or 'artefact7:gpu3' for a file without a node)."""
    return f"{node}:gpu{gpu}" if node else f"artefact{artefact_id}:gpu{gpu}"


def card_name(row) -> str:
    """:func:`card_of` a sample row (or anything with its ``artefact_id``, ``node`` and ``gpu``)."""
    return card_of(row.artefact_id, row.node, row.gpu)


def sample_filter(artefact_ids: list[int], counter: str, window: tuple[object, object] | None) -> list:
    where = [HS.c.artefact_id.in_(artefact_ids), HS.c.counter == counter]
    if window is not None:
        where += [HS.c.ts >= window[0], HS.c.ts <= window[1]]
    return where


@dataclass
class CardSamples:
    """One card's samples of one counter in one file: how many rows, their lines, whether every row has a
    timestamp, and the printed values (rows with none, '-' or [N/A], left out) as one exact column."""

    artefact_id: int
    node: str | None
    gpu: int
    counter: str
    unit: str
    samples: int
    first_line: int
    last_line: int
    timed: bool
    values: ExactColumn

    @property
    def card(self) -> str:
        return card_name(self)


def read_cards(conn: sa.Connection, where: list) -> list[CardSamples]:
    """The samples under ``where``, one :class:`CardSamples` per file, card, counter and unit: one grouped
    statement whose values come back as one numpy array per group (not a row and a Fraction per sample:
    a day of 16 cards' dmon is 16.6M rows)."""
    import numpy as np

    stmt = (
        sa.select(
            HS.c.artefact_id,
            HS.c.node,
            HS.c.gpu,
            HS.c.counter,
            HS.c.unit,
            sa.func.count().label("samples"),
            sa.func.min(HS.c.line).label("first_line"),
            sa.func.max(HS.c.line).label("last_line"),
            sa.func.bool_and(HS.c.ts.is_not(None)).label("timed"),
            sa.func.array_agg(HS.c.value).filter(HS.c.value.is_not(None)).label("vals"),
        )
        .where(*where)
        .group_by(HS.c.artefact_id, HS.c.node, HS.c.gpu, HS.c.counter, HS.c.unit)
        .order_by(HS.c.artefact_id, HS.c.counter, HS.c.node, HS.c.gpu, HS.c.unit)
    )
    empty = np.empty(0, np.float64)
    return [
        CardSamples(
            r["artefact_id"],
            r["node"],
            r["gpu"],
            r["counter"],
            r["unit"],
            r["samples"],
            r["first_line"],
            r["last_line"],
            bool(r["timed"]),
            ExactColumn(empty if r["vals"] is None else r["vals"]),
        )
        for r in array_rows(conn, stmt)
    ]


def load_cards(conn: sa.Connection, ctx: Ctx, metric: Metric, counter: str, gpu: str | None = None):
    """The counter's samples in the scope, per card (card name -> its files' :class:`CardSamples`), or an
    n/a value saying why there are none. With ``gpu`` (a scope's card) only that card is kept; the checks
    (not sampled, several units, card not found or ambiguous) see every card of the scope."""
    if not ctx.hw_artefact_ids:
        return na(metric, ctx, "no hardware samples in this scope"), None, None
    if ctx.window is None and ctx.window_note:
        return na(metric, ctx, ctx.window_note), None, None
    if ctx.window is not None:
        untimed = conn.execute(
            sa.select(sa.func.count()).where(
                HS.c.artefact_id.in_(ctx.hw_artefact_ids), HS.c.counter == counter, HS.c.ts.is_(None)
            )
        ).scalar_one()
        if untimed:
            return (
                na(metric, ctx, "samples have no timestamps (dmon without -o DT): a window cannot select them"),
                None,
                None,
            )
    where = sample_filter(ctx.hw_artefact_ids, counter, ctx.window)
    if gpu is None:
        groups = read_cards(conn, where)
        keys: list[Any] = groups
    else:  # the scope's cards and units from one DISTINCT statement; then that card's samples only
        keys = list(conn.execute(sa.select(HS.c.artefact_id, HS.c.node, HS.c.gpu, HS.c.unit).distinct().where(*where)))
    if not keys:
        return na(metric, ctx, f"counter {counter!r} not sampled in this scope"), None, None
    units = {k.unit for k in keys}
    if len(units) > 1:
        return na(metric, ctx, f"counter {counter!r} printed in several units: {sorted(units)}"), None, None
    if gpu is not None:
        names = list(dict.fromkeys(card_name(k) for k in keys))
        hits = match_cards(names, gpu)
        if len(hits) != 1:
            return (
                na(metric, ctx, f"card {gpu!r} {'ambiguous' if hits else 'not found'}; cards: {sorted(names)}"),
                None,
                None,
            )
        mine = {(k.artefact_id, k.node, k.gpu) for k in keys if card_name(k) == hits[0]}
        card = sa.or_(
            *(
                sa.and_(HS.c.artefact_id == a, HS.c.gpu == g, HS.c.node.is_(None) if n is None else HS.c.node == n)
                for a, n, g in sorted(mine, key=repr)
            )
        )
        groups = read_cards(conn, [*where, card])
    cards: dict[str, list[CardSamples]] = defaultdict(list)
    for g in sorted(groups, key=lambda g: (g.artefact_id, g.gpu)):  # each card's files in file order
        cards[g.card].append(g)
    return None, dict(cards), units.pop()


def per_card(cards: dict[str, list[CardSamples]]) -> dict[str, ExactColumn]:
    """Each card's values over its files, as one exact column (a card with only '-' values is kept, empty)."""
    import numpy as np

    return {
        c: gs[0].values if len(gs) == 1 else ExactColumn(np.concatenate([g.values.array for g in gs]))
        for c, gs in cards.items()
    }


def exact_max(values: ExactColumn) -> Fraction:
    return Fraction(float(values.array.max()))  # a float is one rational: the largest float is the largest value


def match_cards(cards, gpu: str) -> list[str]:
    """The cards a scope's ``gpu`` names: 'node0:gpu3', 'gpu3' or '3' (the latter two may match several)."""
    return [c for c in cards if c == gpu or c.endswith(f":gpu{gpu}") or c.endswith(f":{gpu}")]


def _card_stat(counter: str, stat: str) -> Callable:
    """Mean or max of one card's counter over the window; one card only (name it with Scope.gpu)."""

    def compute(conn: sa.Connection, ctx: Ctx, metric: Metric):
        bad, groups, unit = load_cards(conn, ctx, metric, counter, ctx.scope.gpu)  # a named card: its samples only
        if bad:
            return bad
        cards = per_card(groups)
        per = {c: (None if not len(v) else mean(v) if stat == "mean" else exact_max(v)) for c, v in cards.items()}
        shown = {c: (None if v is None else float(v)) for c, v in per.items()}
        if len(per) > 1:
            return na(
                metric,
                ctx,
                f"per-card statistic: {len(per)} cards in scope; name one (Scope.gpu)",
                per_card=shown,
                counter=counter,
                unit=unit,
            )
        ((card, value),) = per.items()
        if value is None:
            return na(metric, ctx, f"card {card} printed no value for {counter!r}")
        return derived(
            metric,
            ctx,
            value,
            unit=unit,
            card=card,
            counter=counter,
            samples=len(cards[card]),
            artefacts=ctx.hw_artefact_ids,
        )

    return compute


def card_metrics() -> list[Metric]:
    """The per-card statistics (mean, max) of each dmon counter the ledger offers a metric for."""
    out: list[Metric] = []
    for counter, c in DMON.items():
        if c.stem is None or c.unit is None:
            continue  # a counter the ledger keeps but offers no metric for
        stem, unit, kind = c.stem, c.unit, c.kind
        for stat in ("mean", "max"):
            out.append(
                Metric(
                    f"{stem}_{stat}",
                    unit,
                    kind,
                    f"per-card {stat}",
                    "the window's samples of one card",
                    (),
                    f"{stat.upper()}(value) of dmon column {counter!r} per card (unit as printed)",
                    "hardware",
                    _card_stat(counter, stat),
                )
            )
    return out


def parse_window(window: tuple[str, str]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(window[0]), datetime.fromisoformat(window[1])
