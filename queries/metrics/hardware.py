"""Hardware-sample and server-log metrics: per-card counter statistics, power (R14), KV capacity (R5),
seconds to ready (R8).

Why it is built this way:

* dmon counters keep their meaning (R13): ``sm`` becomes ``gpu_activity_time_pct_*`` (share of time a
  kernel ran), ``mem`` becomes ``memory_busy_pct_*`` (memory-controller busy time); nothing is
  called "utilization" or MFU.
* A per-card statistic is one card's: with several cards in scope and no ``Scope.gpu`` the value is
  n/a and ``inputs['per_card']`` lists each card's figure. Cards are never averaged together.
* Power has three separate statistics (R14): the sum of each card's window mean, the peak over
  time of the simultaneous sum (ticks aligned by timestamp when dmon printed ``-o DT``, else by
  tick index within one file; across nodes only by timestamp), and the sum of each card's own peak.
  They read one power counter (:data:`POWER_COUNTERS`: dmon ``pwr``, nvidia-smi ``power.draw``,
  ``power.draw.average``, ``power.draw.instant``, dcgmi ``POWER``): average and instantaneous power
  are different counters (R14), so a scope holding several of them is n/a, never combined.
* :data:`ACROSS_CARDS` is the one table of what a statistic across cards may be, per quantity kind,
  with its rule (R13, R14); `ledger hardware` prints it next to each counter.
* Units are as printed; ``unconfirmed`` stays ``unconfirmed`` and is never converted (R12).
* The KV capacity ratio is a capacity (kind ``capacity_ratio``), never a concurrency (R5).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.counters import DMON, POWER_COUNTERS
from bench_ledger.queries.metrics.arrays import array_rows
from bench_ledger.queries.metrics.definitions import Ctx, Metric, derived, mean, na
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.queries.values import MetricValue

HS = m.HardwareSample.__table__
LF = m.LogFact.__table__
A = m.Artefact.__table__


# What a statistic across cards may be, per quantity kind: (allowed, rule, why). The one place.
ACROSS_CARDS: dict[str, tuple[str, str, str]] = {
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
NOT_ACROSS = (
    "none (per card only)",
    "R13",
    "a counter is the card's that measured it; the ledger computes no statistic across cards for this kind",
)


def across_cards(kind: str) -> tuple[str, str, str]:
    """What a statistic across cards of a counter of ``kind`` may be: (allowed, rule, why)."""
    return ACROSS_CARDS.get(kind, NOT_ACROSS)


def card_of(artefact_id: int, node: str | None, gpu: int) -> str:
    """A card as scopes name it: 'node0:gpu3' (or 'artefact7:gpu3' for a file without a node)."""
    return f"{node}:gpu{gpu}" if node else f"artefact{artefact_id}:gpu{gpu}"


def card_name(row) -> str:
    """:func:`card_of` a sample row (or anything with its ``artefact_id``, ``node`` and ``gpu``)."""
    return card_of(row.artefact_id, row.node, row.gpu)


def _where(artefact_ids: list[int], counter: str, window: tuple[object, object] | None) -> list:
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


def _load(conn: sa.Connection, ctx: Ctx, metric: Metric, counter: str, gpu: str | None = None):
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
    where = _where(ctx.hw_artefact_ids, counter, ctx.window)
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


def _per_card(cards: dict[str, list[CardSamples]]) -> dict[str, ExactColumn]:
    """Each card's values over its files, as one exact column (a card with only '-' values is kept, empty)."""
    import numpy as np

    return {
        c: gs[0].values if len(gs) == 1 else ExactColumn(np.concatenate([g.values.array for g in gs]))
        for c, gs in cards.items()
    }


def _max(values: ExactColumn) -> Fraction:
    return Fraction(float(values.array.max()))  # a float is one rational: the largest float is the largest value


def match_cards(cards, gpu: str) -> list[str]:
    """The cards a scope's ``gpu`` names: 'node0:gpu3', 'gpu3' or '3' (the latter two may match several)."""
    return [c for c in cards if c == gpu or c.endswith(f":gpu{gpu}") or c.endswith(f":{gpu}")]


def card_stat(counter: str, stat: str) -> Callable:
    """Mean or max of one card's counter over the window; one card only (name it with Scope.gpu)."""

    def compute(conn: sa.Connection, ctx: Ctx, metric: Metric):
        bad, groups, unit = _load(conn, ctx, metric, counter, ctx.scope.gpu)  # a named card: its samples only
        if bad:
            return bad
        cards = _per_card(groups)
        per = {c: (None if not len(v) else mean(v) if stat == "mean" else _max(v)) for c, v in cards.items()}
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


def power_counters_in(conn: sa.Connection, artefact_ids: list[int]) -> list[str]:
    """The power counters (:data:`POWER_COUNTERS`) sampled in these artefacts, in that table's order."""
    if not artefact_ids:
        return []
    found = {
        r[0]
        for r in conn.execute(
            sa.select(HS.c.counter)
            .distinct()
            .where(HS.c.artefact_id.in_(artefact_ids), HS.c.counter.in_(list(POWER_COUNTERS)))
        )
    }
    return [c for c in POWER_COUNTERS if c in found]


def power(stat: str, counter: str | None = None) -> Callable:
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
        present = power_counters_in(conn, ctx.hw_artefact_ids)
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
    bad, groups, unit = _load(conn, ctx, metrics[0], chosen)
    if bad:
        return [na(mt, ctx, bad.na_reason or "", **bad.inputs) for mt in metrics]
    cards = _per_card(groups)
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
            peaks = {c: _max(v) for c, v in cards.items()}
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
        return sa.func.array_agg(aggregate_order_by(sa.cast(col, sa.Float), HS.c.tick, HS.c.line))

    key = _epoch_us(conn, HS.c.ts) if timed else HS.c.tick
    stmt = (
        sa.select(
            HS.c.artefact_id,
            HS.c.node,
            HS.c.gpu,
            agg(key).label("k"),
            agg(HS.c.tick).label("t"),
            agg(HS.c.line).label("l"),
            agg(HS.c.value).label("v"),
        )
        .where(*_where(ctx.hw_artefact_ids, counter, ctx.window), HS.c.value.is_not(None))
        .group_by(HS.c.artefact_id, HS.c.node, HS.c.gpu)
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
    return Metric(name, unit, kind, statistic, interval, (), formula, "hardware", power(stat, counter))


# --------------------------------------------------------------------------- log facts


def _facts(conn: sa.Connection, artefact_ids: list[int], kind: str) -> list:
    return list(
        conn.execute(
            sa.select(LF.c.artefact_id, LF.c.line, LF.c.process, LF.c.value, LF.c.text)
            .where(LF.c.artefact_id.in_(artefact_ids), LF.c.kind == kind)
            .order_by(LF.c.artefact_id, LF.c.line)
        )
    )


def log_artefacts(conn: sa.Connection, ctx: Ctx) -> list[int]:
    L = m.Launch.__table__
    ids: list[int] = []
    if ctx.launch_ids:
        ids = [
            r[0]
            for r in conn.execute(sa.select(L.c.log_artefact_id).where(L.c.id.in_(ctx.launch_ids)))
            if r[0] is not None
        ]
    if ctx.kind == "deployment" and ctx.deployment_id is not None:
        ids += [
            r[0]
            for r in conn.execute(
                sa.select(A.c.id)
                .where(A.c.deployment_id == ctx.deployment_id, A.c.format == "vllm-server-log")
                .order_by(A.c.id)
            )
        ]
    return sorted(set(ids))


def kv_capacity_ratio(conn: sa.Connection, ctx: Ctx, metric: Metric):
    """KV pool tokens of one engine / DP group over the window tokens: a capacity, never a concurrency (R5)."""
    logs = log_artefacts(conn, ctx)
    if not logs:
        return na(metric, ctx, "no server log linked to this launch / deployment")
    pools = _facts(conn, logs, "kv_cache_tokens")
    if not pools:
        return na(metric, ctx, "no 'GPU KV cache size' line in the server log(s)")
    distinct = sorted({Decimal(p.value) for p in pools if p.value is not None})
    if len(distinct) != 1:
        return na(
            metric,
            ctx,
            f"KV pool differs between engines / launches: {[str(d) for d in distinct]}; name one launch",
            pools=[p.text for p in pools],
        )
    windows = sorted(
        {Decimal(w.value) for w in _facts(conn, logs, "max_concurrency_window_tokens") if w.value is not None}
    )
    basis = "log: Maximum concurrency for N tokens per request"
    if len(windows) != 1:
        dep = None
        if ctx.deployment_id is not None:
            dep = conn.execute(
                sa.select(m.Deployment.__table__.c.max_model_len).where(
                    m.Deployment.__table__.c.id == ctx.deployment_id
                )
            ).scalar()
        if dep is None:
            return na(
                metric,
                ctx,
                "window tokens unknown: no 'Maximum concurrency for N tokens' line and no deployment max_model_len",
            )
        windows, basis = [Decimal(dep)], "deployment.max_model_len"
    pool, window = distinct[0], windows[0]
    return derived(
        metric,
        ctx,
        Fraction(pool) / Fraction(window),
        kv_pool_tokens=str(pool),
        window_tokens=str(window),
        window_basis=basis,
        per="one engine / DP group",
        log_artefacts=logs,
        meaning="theoretical capacity in full windows; not requests served at once (R5)",
    )


def seconds_to_ready(conn: sa.Connection, ctx: Ctx, metric: Metric):
    """Time to READY of one launch: the log's derived fact, else the declared (reported) figure."""
    L = m.Launch.__table__
    if len(ctx.launch_ids) != 1:
        return na(metric, ctx, f"per launch: {len(ctx.launch_ids)} launches in scope; name one (Scope.launch)")
    logs = log_artefacts(conn, ctx)
    facts = _facts(conn, logs, "seconds_to_ready") if logs else []
    if facts:
        f = facts[-1]
        return derived(
            metric,
            ctx,
            Fraction(Decimal(f.value)),
            log_artefact=f.artefact_id,
            line=f.line,
            basis="first log timestamp to the ready line, 1 s resolution, a lower bound",
        )
    row = conn.execute(
        sa.select(L.c.seconds_to_ready, L.c.seconds_to_ready_flag).where(L.c.id == ctx.launch_ids[0])
    ).one()
    if row.seconds_to_ready is not None and row.seconds_to_ready_flag != "n/a":
        return derived(
            metric,
            ctx,
            Fraction(Decimal(row.seconds_to_ready)),
            flag=row.seconds_to_ready_flag,
            basis="declared for the launch, not read from a log",
        )
    return na(metric, ctx, "no ready line in a linked log and no declared seconds_to_ready")


def hardware_metrics() -> list[Metric]:
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
                    card_stat(counter, stat),
                )
            )
    out += [power_metric(name) for name, _ in POWER_STATS]
    out += [
        Metric(
            "kv_capacity_ratio",
            "x",
            "capacity_ratio",
            "capacity ratio",
            "one launch's engine",
            (),
            "log kv_cache_tokens / max_concurrency_window_tokens (else deployment.max_model_len) (R5)",
            "log",
            kv_capacity_ratio,
        ),
        Metric(
            "seconds_to_ready",
            "s",
            "startup_time",
            "duration",
            "process start to READY of one launch",
            (),
            "log fact seconds_to_ready; else launch.seconds_to_ready as declared (R8)",
            "log",
            seconds_to_ready,
        ),
    ]
    return out


def parse_window(window: tuple[str, str]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(window[0]), datetime.fromisoformat(window[1])
