"""Every run's request metrics at once: a handful of grouped statements instead of queries per run.

``queries.metrics.evaluate`` stays the reference definition. This module reads the same data for
*all* selected runs with a few set-based statements (GROUP BY run, window functions), then hands
each run's figures to the very same decision functions ``evaluate`` uses
(``precheck_caps``, ``count_value``, ``total_value``, ``wall_value``, ``rate_value``, ``dist_value``,
``cache_value`` in :mod:`queries.metrics_requests`), so flags, n/a reasons and inputs cannot drift.

The statements (SQLAlchemy Core; DuckDB 1.5 and PostgreSQL 15):

1. captures with records of every run, with their captured fields (one LEFT JOIN of capture and
   capture_field): the R9/R15 checks per run (no records, sampled, which captures lack a field);
2. one GROUP BY run_id over ``request``: counts by status, SUM of input/output/cached tokens over ok
   requests with how many lack them, MIN(send_ns) / MAX(end_ns), COUNT(DISTINCT clock), COUNT(send_ns).
   Sums are exact integers (DuckDB HUGEINT, PostgreSQL NUMERIC); the wall clock is converted from
   integer ns with ``Fraction(last_end - first_send, 10**9)`` exactly as ``wall_clock`` does;
3. per distribution (TTFT, e2e latency, decode rate, ...; one statement serves all its percentiles):
   ``row_number() OVER (PARTITION BY run_id ORDER BY v)`` and the run's counts, keeping only the
   order statistics numpy's linear method needs: for p, h = (n-1)·p/100 and rows floor(h) and
   floor(h)+1 (selected with integer arithmetic only: ``(rn-2)·100 <= (n-1)·p < rn·100``).
   The interpolation is then done in Python with Fractions by ``percentile_linear`` itself, so the
   value is *exactly* the one ``evaluate`` gives (not within a tolerance, as ``percentile_cont`` /
   ``quantile_cont`` in double precision would be). ``max`` is p100 (the last order statistic).

Means (which need every value for an exact Fraction sum) and hardware / log metrics are not done
here: :func:`run_metrics` computes them per run as before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from bench_ledger.queries.metrics_requests import (
    CAP,
    CF,
    OK,
    Cache,
    CaptureInfo,
    Count,
    Ctx,
    Dist,
    Groups,
    Metric,
    Plan,
    Q,
    Rate,
    Total,
    Wall,
    cache_value,
    count_value,
    dist_value,  # fmt: skip
    exact,
    precheck_caps,
    rate_value,
    record_groups,
    total_value,
    wall_value,
)
from bench_ledger.queries.values import MetricValue, Scope


@dataclass
class RunRef:
    """A current run of the selection: its id, the id its captured rows point to, batch, tool duration."""

    id: int
    origin: int
    batch: str
    duration_s: float | None


def supported(mt: Metric) -> bool:
    """Whether the batch path computes this metric (else the caller computes it per run): every
    request plan but the means of distributions (an exact mean needs every value)."""
    plan = mt.plan
    if not isinstance(plan, Plan):
        return False
    return not isinstance(plan, Dist) or plan.stat == "max" or plan.stat.startswith("p")


class _OrderStats(Sequence):
    """The few order statistics of n sorted values that a percentile reads (index -> Fraction)."""

    def __init__(self, n: int, known: dict[int, Fraction]) -> None:
        self.n, self.known = n, known

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise TypeError("order statistics are not sliceable")
        return self.known[i + self.n if i < 0 else i]


def _stat_p(stat: str) -> int:
    return 100 if stat == "max" else int(stat[1:])


def read_captures(conn: sa.Connection, runs: sa.Select) -> dict[int, list[CaptureInfo]]:
    """Captures holding records, with their fields, of all runs: one statement (ordered by capture id)."""
    out: dict[int, list[CaptureInfo]] = defaultdict(list)
    by_id: dict[int, CaptureInfo] = {}
    stmt = (sa.select(CAP.c.id, CAP.c.run_id, CAP.c.record_count, CAP.c.sampled, CAP.c.sample_note, CF.c.field)
            .select_from(CAP.outerjoin(CF, CF.c.capture_id == CAP.c.id))
            .where(CAP.c.run_id.in_(runs), CAP.c.record_count > 0).order_by(CAP.c.id))  # fmt: skip
    for r in conn.execute(stmt):
        c = by_id.get(r.id)
        if c is None:
            c = by_id[r.id] = CaptureInfo(r.id, r.run_id, r.record_count, bool(r.sampled), r.sample_note, set())
            out[r.run_id].append(c)
        if r.field is not None:
            c.fields.add(r.field)
    return out


def _ok_sum(col: sa.ColumnElement[Any]) -> sa.ColumnElement:
    return sa.func.sum(sa.case((OK, col)))


def _ok_missing(col: sa.ColumnElement[Any]) -> sa.ColumnElement:
    return sa.func.sum(sa.case((sa.and_(OK, col.is_(None)), 1), else_=0))


TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens")


def read_aggregates(conn: sa.Connection, runs: sa.Select) -> dict[int, SimpleNamespace]:
    """Counts, ok-token totals and first send / last end per run: one GROUP BY run_id."""
    cols = [Q.c.run_id, sa.func.count().label("n"),
            *(sa.func.sum(sa.case((Q.c.status == s, 1), else_=0)).label(s) for s in ("ok", "failed", "unknown")),
            sa.func.min(Q.c.send_ns).label("first_send"), sa.func.max(Q.c.end_ns).label("last_end"),
            sa.func.min(Q.c.clock).label("clock_min"), sa.func.max(Q.c.clock).label("clock_max"),
            sa.func.count(Q.c.send_ns).label("timed")]  # fmt: skip
    for c in TOKEN_COLUMNS:
        cols += [_ok_sum(Q.c[c]).label(f"{c}_total"), _ok_missing(Q.c[c]).label(f"{c}_missing")]
    stmt = sa.select(*cols).where(Q.c.run_id.in_(runs)).group_by(Q.c.run_id)
    out = {}
    for r in conn.execute(stmt):
        ns = out[r.run_id] = SimpleNamespace(**r._asdict())
        # wall_clock only asks whether the requests are on more than one clock: MIN <> MAX says it
        # without COUNT(DISTINCT), which PostgreSQL can only do by sorting
        ns.clocks = 0 if r.clock_min is None else 1 if r.clock_min == r.clock_max else 2
    return out


def _empty_aggregate() -> SimpleNamespace:
    """What the per-run statements return for a run without request rows."""
    ns = SimpleNamespace(n=0, ok=None, failed=None, unknown=None, first_send=None, last_end=None, clocks=0, timed=0)
    for c in TOKEN_COLUMNS:
        setattr(ns, f"{c}_total", None)
        setattr(ns, f"{c}_missing", None)
    return ns


def read_order_stats(conn: sa.Connection, sql, runs: sa.Select, ps: set[int]
                     ) -> dict[int, tuple[int, int, dict[int, Fraction]]]:  # fmt: skip
    """Per run: (n values, n NULL, {0-based rank: value}) for the ranks percentiles ``ps`` read."""
    out: dict[int, tuple[int, int, dict[int, Fraction]]] = {}
    base = sql(runs, by_run=True, conn=conn).subquery("vals")  # the decode rate probes for gap-only spans
    part = base.c.run_id
    w = sa.select(part.label("run_id"), base.c.v,
                  sa.func.row_number().over(partition_by=part, order_by=base.c.v).label("rn"),
                  sa.func.count().over(partition_by=part).label("n"),
                  sa.func.count(base.c.v).over(partition_by=part).label("nv")).subquery("ranked")  # fmt: skip
    conds = []
    for p in sorted(ps):
        lit: sa.ColumnClause[int] = sa.literal_column(str(int(p)))
        # rank rn-1 is floor(h) or floor(h)+1, h = (n-1)·p/100: integer arithmetic, exact on both engines.
        # (A run with a NULL value is n/a whatever its ranks: NULLs sort last on both engines.)
        conds.append(sa.and_((w.c.rn - 2) * 100 <= (w.c.n - 1) * lit, (w.c.n - 1) * lit < w.c.rn * 100))
    stmt = sa.select(w.c.run_id, w.c.rn, w.c.n, w.c.nv, w.c.v).where(sa.or_(*conds))
    for r in conn.execute(stmt):
        n, nv = int(r.n), int(r.nv)
        entry = out.setdefault(r.run_id, (n, n - nv, {}))
        if r.v is not None:
            entry[2][int(r.rn) - 1] = exact(r.v)
    return out


def batch_values(conn: sa.Connection, runs: list[RunRef], metrics: list[Metric], selection: sa.Select
                 ) -> dict[int, dict[str, MetricValue]]:  # fmt: skip
    """The metrics (all :func:`supported`) of every run, keyed by run id then metric name.

    ``selection`` is a SELECT of one column: the ids the runs' captured rows carry (``RunRef.origin``);
    the statements filter with ``run_id IN (selection)`` (a semi-join, not a list of bound ids)."""
    out: dict[int, dict[str, MetricValue]] = {r.id: {} for r in runs}
    if not runs or not metrics:
        return out
    origins = selection
    caps = read_captures(conn, origins)
    plans = [mt.plan for mt in metrics]
    need_rows = any(isinstance(p, (Count, Total, Wall, Rate, Cache)) for p in plans)
    aggs = read_aggregates(conn, origins) if need_rows else {}
    # one statement per distribution, serving every percentile of it
    dists: dict[int, tuple[object, set[int]]] = {}
    for p in plans:
        if isinstance(p, Dist):
            dists.setdefault(id(p.sql), (p.sql, set()))[1].add(_stat_p(p.stat))
    stats = {key: read_order_stats(conn, sql, origins, ps) for key, (sql, ps) in dists.items()}
    empty = _empty_aggregate()
    for r in runs:
        ctx = Ctx(scope=Scope(batch=r.batch, run=f"#{r.id}"), kind="run", run_ids=[r.origin],
                  batch_names=[r.batch], durations={r.origin: r.duration_s})  # fmt: skip
        one = _OneRun(conn, ctx, caps.get(r.origin, []), aggs.get(r.origin, empty),
                      {key: st.get(r.origin, (0, 0, {})) for key, st in stats.items()})  # fmt: skip
        for mt in metrics:
            out[r.id][mt.name] = one.value(mt)
    return out


class _OneRun:
    """One run's figures (read for all runs at once) through the decision functions evaluate uses."""

    def __init__(self, conn: sa.Connection, ctx: Ctx, caps: list[CaptureInfo], agg: SimpleNamespace,
                 stats: dict[int, tuple[int, int, dict[int, Fraction]]]) -> None:  # fmt: skip
        self.conn, self.ctx, self.caps, self.agg, self.stats = conn, ctx, caps, agg, stats
        self.done: dict[str, MetricValue] = {}

    def value(self, mt: Metric) -> MetricValue:
        v = self.done.get(mt.name)
        if v is None:
            v = self.done[mt.name] = self.compute(mt)
        return v

    def compute(self, mt: Metric) -> MetricValue:
        """The metric's plan on the figures read for all runs, through its decision function."""
        ctx, caps, agg, plan = self.ctx, self.caps, self.agg, mt.plan
        if isinstance(plan, Groups):
            return record_groups(mt, ctx)
        if isinstance(plan, Wall):
            return wall_value(mt, ctx, caps, lambda: agg)
        if isinstance(plan, Rate):
            return rate_value(mt, ctx, [self.value(t) for t in plan.tokens], self.value(plan.wall), plan.per)
        bad = precheck_caps(ctx, mt, caps)
        if isinstance(plan, Cache):
            row = SimpleNamespace(total=agg.cached_tokens_total, ok=agg.ok or 0, missing=agg.cached_tokens_missing)
            return cache_value(mt, ctx, bad, lambda: row)
        if bad:
            return bad
        if isinstance(plan, Count):
            return count_value(mt, ctx, caps, agg.n, getattr(agg, plan.status))
        if isinstance(plan, Total):
            col = plan.column
            return total_value(mt, ctx, caps, col, getattr(agg, f"{col}_total"), agg.ok or 0,
                               getattr(agg, f"{col}_missing"))  # fmt: skip
        if isinstance(plan, Dist):
            n, missing, known = self.stats[id(plan.sql)]
            return dist_value(mt, ctx, caps, plan.stat, plan.population, n, missing, lambda: _OrderStats(n, known))
        raise ValueError(f"no batch path for {mt.name}")
