"""Every run's request metrics at once: a handful of grouped statements instead of queries per run.

A run is one scope: this module reads the figures :class:`queries.metrics.execute.Execution` asks for
(the aggregate columns and distributions of :mod:`queries.metrics.requests`) for *all* selected runs with
a few set-based statements (GROUP BY run, or run by run on PostgreSQL), then runs each run's metrics
through that same executor as ``evaluate`` does for one scope, so flags, n/a reasons and inputs cannot
drift.

The statements (SQLAlchemy Core; DuckDB 1.5 and PostgreSQL 15):

1. captures with records of every run, with their captured fields (one LEFT JOIN of capture and
   capture_field): the R9/R15 checks per run (no records, sampled, which captures lack a field);
2. per run: counts by status, SUM of input/output/cached tokens over ok requests with how many lack
   them, MIN(send_ns) / MAX(end_ns), MIN/MAX(clock), COUNT(send_ns). Sums are exact integers (DuckDB
   HUGEINT, PostgreSQL NUMERIC); the wall clock is converted from integer ns with
   ``Fraction(last_end - first_send, 10**9)`` exactly as ``wall_clock`` does;
3. per distribution (TTFT, e2e latency, decode rate, ...; all its percentiles at once) and run: n, how
   many values are NULL, and only the order statistics numpy's linear method reads: for p,
   h = (n-1)·p/100, ranks floor(h) and floor(h)+1 (integer arithmetic). The interpolation is then done
   in Python with Fractions by ``percentile_linear`` itself, so the value is *exactly* the one
   ``evaluate`` gives (not within a tolerance, as ``percentile_cont`` / ``quantile_cont`` in double
   precision would be). ``max`` is p100 (the last order statistic).

How (:func:`_read_runs`): on DuckDB, 2 is one GROUP BY run_id and 3 one statement per distribution
(the run id and value of its member rows, as Arrow); numpy picks each run's order statistics (the runs
of one size as one matrix, one ``np.sort``). The runs' rows are selected by ``run_id BETWEEN`` where
their ids are a range (:func:`run_filter`), which keeps the stored order. On PostgreSQL, 2 and 3 are one statement that goes run by run (LATERAL:
the run's requests by its index, then the aggregates and each distribution's non-NULL values as one
unsorted ``array_agg``, read in binary as numpy arrays), so no sort of all runs' rows spills to disk;
the runs shared out over as many connections at once as the server lets one parallel query use, all on
one exported snapshot (:func:`pg_shares`);
numpy picks the order statistics there too. The chunk gaps (ITL) are one more statement on either backend.

Means (which need every value for an exact Fraction sum) and hardware / log metrics are not done
here: :func:`queries.metrics.table.run_metrics` computes them per run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger.gcpause import gc_paused
from bench_ledger.queries.metrics.arrays import duck_arrow, pg_rows, pg_rows_shared
from bench_ledger.queries.metrics.definitions import (
    Cache,
    Count,
    Ctx,
    Dist,
    Metric,
    Plan,
    Rate,
    Rows,
    Total,
    Wall,
    exact,
)
from bench_ledger.queries.metrics.execute import Distribution, Execution, Shared
from bench_ledger.queries.metrics.requests import (
    AGGREGATE_INPUTS,
    Q,
    aggregate_columns,
    aggregate_row,
    empty_aggregate,
    read_captures,
)
from bench_ledger.queries.values import MetricValue, Scope

__all__ = ["RunRef", "batch_values", "ranks_read", "run_filter", "supported"]


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
    return not isinstance(plan, Dist) or plan.stat == "max" or plan.stat[1:].isdigit()


class _OrderStats(Sequence):
    """The few order statistics of n sorted values that a percentile reads (index -> Fraction: the stored
    double, converted where the percentile reads it; p50 of an odd count reads one of the two ranks kept)."""

    def __init__(self, n: int, known: dict[int, float]) -> None:
        self.n, self.known = n, known

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise TypeError("order statistics are not sliceable")
        return exact(self.known[i + self.n if i < 0 else i])


def _stat_p(stat: str) -> int:
    return 100 if stat == "max" else int(stat[1:])


def run_filter(runs: sa.Select, ids: Iterable[int] | None = None) -> sa.ColumnElement[bool]:
    """The request rows of the runs ``runs`` selects: ``run_id IN (runs)``, or, where the caller knows
    the ids it selects and they are a range without gaps (the runs of a batch imported together),
    ``run_id BETWEEN first AND last``, the same rows: DuckDB then scans the row groups whose run_id
    zone maps meet the range and keeps the stored order, where the semi-join hashed the selection,
    returned the rows out of run order (sorted again on the client) and cost more per statement
    (profile note 29)."""
    got = sorted(set(ids)) if ids is not None else []
    if got and got[-1] - got[0] + 1 == len(got):
        return Q.c.run_id.between(got[0], got[-1])
    return Q.c.run_id.in_(runs)


def _read_aggregates(
    conn: sa.Connection, runs: sa.Select, where: sa.ColumnElement[bool] | None = None
) -> dict[int, SimpleNamespace]:
    """Counts, ok-token totals and first send / last end per run: one GROUP BY run_id (``where``: the
    runs' rows, :func:`run_filter`)."""
    where = Q.c.run_id.in_(runs) if where is None else where
    stmt = sa.select(Q.c.run_id, *aggregate_columns(Q.c)).where(where).group_by(Q.c.run_id)
    return {r.run_id: aggregate_row(r._mapping) for r in conn.execute(stmt)}


_RunOrderStats = dict[int, tuple[int, int, dict[int, float]]]  # run -> (n values, n NULL, {0-based rank: value})
_Wanted = list[tuple[Rows, set[int]]]  # a distribution's rows, the percentiles read from it


def ranks_read(n: int, ps: Iterable[int]) -> list[int]:
    """The 0-based ranks of n sorted values that :func:`percentile_linear` reads for the percentiles ``ps``:
    floor(h) and floor(h)+1 (when there is one), h = (n-1)·p/100, in integers."""
    out: set[int] = set()
    for p in ps:
        lo = (n - 1) * p // 100
        out.update(r for r in (lo, lo + 1) if r < n)
    return sorted(out)


def _read_runs(
    conn: sa.Connection, runs: sa.Select, wanted: _Wanted, aggregates: bool, ids: Iterable[int] | None = None
) -> tuple[dict[int, SimpleNamespace], list[_RunOrderStats]]:
    """The aggregates of every run (if asked) and, per distribution of ``wanted`` and per run, (n values,
    n NULL, {rank: value}) for the ranks :func:`ranks_read` names (none when a value is NULL: the metric
    is n/a then).

    DuckDB: the aggregates by one GROUP BY; the values of each distribution over the request table by
    one statement, handed over as Arrow, each run's order statistics by :func:`_order_stats`.
    PostgreSQL: one statement, run by run (LATERAL: an index scan instead of one sort of every run's
    rows): the aggregates and, per distribution, its count and its non-NULL values as one unsorted array
    (read in binary: numpy arrays of the stored doubles), the ranks picked by ``np.partition``. Either way a value is a stored double, converted to a Fraction only where a
    percentile reads it: equal to evaluate()'s, exactly. A distribution over another source (the chunk
    gaps) is one more statement; one whose rows are ``pending`` is read again from its ``full()`` rows.
    ``ids``: the run ids ``runs`` selects, if the caller knows them (DuckDB: :func:`run_filter`;
    PostgreSQL: how many, for :func:`pg_shares`)."""
    pg = conn.dialect.name != "duckdb"
    where = None if pg else run_filter(runs, ids)
    out: list[_RunOrderStats] = [{} for _ in wanted]
    pending = [0] * len(wanted)
    on_q = [i for i, (rows, _) in enumerate(wanted) if rows.source is Q]
    aggs: dict[int, SimpleNamespace] = {}
    if pg and (aggregates or on_q):
        aggs, got, pend = _read_lateral(conn, runs, [wanted[i] for i in on_q], aggregates, len(set(ids or ())))
    else:
        aggs = _read_aggregates(conn, runs, where) if aggregates else {}
        got, pend = _stats_arrow(conn, runs, [wanted[i] for i in on_q], where) if on_q else ([], [])
    for i, st, pc_ in zip(on_q, got, pend, strict=True):
        out[i], pending[i] = st, pc_
    for i, (rows, ps) in enumerate(wanted):
        if rows.source is not Q or pending[i]:
            one = rows.full() if pending[i] and rows.full is not None else rows
            got, pend = _stats_grouped(conn, runs, [(one, ps)]) if pg else _stats_arrow(conn, runs, [(one, ps)], where)
            if pend[0]:
                raise ValueError(f"{pend[0]} values left pending by their full form")
            out[i] = got[0]
    return aggs, out


def _value_columns(wanted: _Wanted) -> list[sa.ColumnElement]:
    """m{i}: the row is in distribution i; v{i}: its value there, computed only for its rows (a row of
    another distribution may divide by zero here: TPOT of a request with one output token)."""
    cols: list[sa.ColumnElement] = []
    for i, (rows, _) in enumerate(wanted):
        cols += [rows.member.label(f"m{i}"), sa.case((rows.member, rows.v)).label(f"v{i}")]
        if rows.pending is not None:
            cols.append(sa.and_(rows.member, rows.pending).label(f"p{i}"))
    return cols


def _stats_arrow(
    conn: sa.Connection, runs: sa.Select, wanted: _Wanted, where: sa.ColumnElement[bool] | None = None
) -> tuple[list[_RunOrderStats], list[int]]:
    """DuckDB: per distribution one statement, (run_id, v) of its member rows (and whether each is
    ``pending``) as Arrow; its rows grouped by run (they come in stored order, which is by run after an
    import; otherwise a stable sort by run) and each run's ranks from :func:`_order_stats`. One statement
    per distribution rather than one for all (member flags and NULL values of every distribution beside
    each other): the run and value columns come back without NULLs, read by numpy in place, with no
    filter or fill per distribution (profile note 29)."""
    import numpy as np

    where = Q.c.run_id.in_(runs) if where is None else where
    out: list[_RunOrderStats] = []
    pending: list[int] = []
    for rows, ps in wanted:
        cols = [Q.c.run_id.label("run_id"), rows.v.label("v")]
        if rows.pending is not None:
            cols.append(sa.and_(rows.member, rows.pending).label("p"))
        table = duck_arrow(conn, sa.select(*cols).select_from(rows.source).where(where, rows.member))
        pending.append((pc.sum(table.column("p")).as_py() or 0) if rows.pending is not None else 0)
        if not table.num_rows:  # no run has a value here
            out.append({})
            continue
        run = table.column("run_id").to_numpy()
        col = table.column("v")
        null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
        vals = (pc.fill_null(col, 0.0) if col.null_count else col).to_numpy()
        starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
        heads = np.sort(run[starts])  # not np.unique: its first call imports numpy.ma
        if (heads[1:] == heads[:-1]).any():  # a run's rows are not together: put them together
            order = np.argsort(run, kind="stable")
            run, vals = run[order], vals[order]
            null = None if null is None else null[order]
            starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
        out.append(_order_stats(run, starts, null, vals, ps))
    return out, pending


def _order_stats(run: Any, starts: Any, null: Any | None, vals: Any, ps: set[int]) -> _RunOrderStats:
    """Each run's (n values, n NULL, {rank: value}) of one distribution, from its rows grouped by run
    (``starts``: each run's first row). The runs of one size without a NULL (a sweep's runs have a few
    sizes) are one matrix, sorted along its rows by one ``np.sort`` (numpy's vectorised sort of doubles,
    no call per run): the same order
    statistics as a partition per run (equal doubles, -0.0 and 0.0 too, are the same Fraction)."""
    import numpy as np

    ends = np.r_[starts[1:], len(run)]
    sizes = ends - starts
    nulls = np.zeros(len(starts), np.int64) if null is None else np.add.reduceat(null, starts)
    rids = run[starts].tolist()
    st: _RunOrderStats = {}
    for rid, n, nn in zip(rids, sizes.tolist(), nulls.tolist(), strict=True):
        st[rid] = (n, nn, {})
    clean = nulls == 0
    for n in sorted(set(sizes[clean].tolist())):  # one size per sweep point, a few
        which = np.flatnonzero(clean & (sizes == n))
        ranks = ranks_read(n, ps)
        rows = vals[starts[which, None] + np.arange(n)]  # one run per row
        picked = np.sort(rows, axis=1)[:, ranks].tolist()
        for k, got in zip(which.tolist(), picked, strict=True):
            st[rids[k]] = (n, 0, dict(zip(ranks, got, strict=True)))
    return st


def _stat_columns(x: Any, wanted: _Wanted) -> list[sa.ColumnElement]:
    """Per distribution i over the columns m{i}, v{i} (and p{i}) of ``x``: count(*), how many pending,
    and the array of its values that are not NULL, unsorted (``array_agg``; the server does not
    sort them): the order statistics are picked from it
    on the client (:func:`_parse_stats`), and count(*) - cardinality is how many are NULL."""
    cols: list[sa.ColumnElement] = []
    for i, (rows, _) in enumerate(wanted):
        m, v = x.c[f"m{i}"], x.c[f"v{i}"]
        cols += [
            sa.func.count().filter(m).label(f"n{i}"),
            sa.func.array_agg(v).filter(sa.and_(m, v.is_not(None))).label(f"a{i}"),
        ]
        if rows.pending is not None:
            cols.append(sa.func.count().filter(x.c[f"p{i}"]).label(f"p{i}"))
    return cols


def _parse_stats(row: Any, wanted: _Wanted, out: list[_RunOrderStats], pending: list[int], rid: int) -> None:
    """One run's order statistics from its value arrays (numpy, from PostgreSQL's binary form: the
    stored doubles): the ranks :func:`ranks_read` names, by ``np.partition``."""
    import numpy as np

    for i, (rows, ps) in enumerate(wanted):
        n = int(row[f"n{i}"])
        vals = row[f"a{i}"]
        nv = 0 if vals is None else len(vals)
        if rows.pending is not None:
            pending[i] += int(row[f"p{i}"])
        known: dict[int, float] = {}
        if n and n == nv:
            ranks = ranks_read(n, ps)
            known = dict(zip(ranks, np.partition(vals, ranks)[ranks].tolist(), strict=True))
        out[i][rid] = (n, n - nv, known)


def _read_lateral(
    conn: sa.Connection, runs: sa.Select, wanted: _Wanted, aggregates: bool, runs_count: int
) -> tuple[dict[int, SimpleNamespace], list[_RunOrderStats], list[int]]:
    """PostgreSQL, distributions over the request table alone: one statement, one run at a time
    (LATERAL), the aggregates (if asked) and every distribution's value array from one index scan
    of the run's requests, whose values are computed once per row (OFFSET 0 keeps PostgreSQL from
    inlining them into every aggregate); the runs shared out over connections by :func:`pg_rows_shared`."""

    def statement(share: sa.Select) -> sa.Select:
        r = share.subquery("r")
        rid = r.c[0]
        cols = [*(Q.c[n] for n in AGGREGATE_INPUTS if aggregates), *_value_columns(wanted)]
        where = [Q.c.run_id == rid] if aggregates else [Q.c.run_id == rid, sa.or_(*(w.member for w, _ in wanted))]
        x = sa.select(*cols).where(*where).offset(0).correlate(r).lateral("x")
        inner = sa.select(*(aggregate_columns(x.c) if aggregates else []), *_stat_columns(x, wanted)).lateral("s")
        return sa.select(rid.label("run_id"), inner).select_from(r.join(inner, sa.true()))

    aggs: dict[int, SimpleNamespace] = {}
    out: list[_RunOrderStats] = [{} for _ in wanted]
    pending = [0] * len(wanted)
    for mp in pg_rows_shared(conn, runs, statement, runs_count):
        if aggregates and mp["n"]:  # a run without request rows is absent from the GROUP BY's aggregates too
            aggs[mp["run_id"]] = aggregate_row(mp)
        _parse_stats(mp, wanted, out, pending, mp["run_id"])
    return aggs, out, pending


def _stats_grouped(conn: sa.Connection, runs: sa.Select, wanted: _Wanted) -> tuple[list[_RunOrderStats], list[int]]:
    """PostgreSQL, a distribution over a joined source (chunk gaps, gap sums): one GROUP BY run_id."""
    rows = wanted[0][0]
    x = (
        sa.select(Q.c.run_id.label("run_id"), *_value_columns(wanted))
        .select_from(rows.source)
        .where(Q.c.run_id.in_(runs), rows.member)
        .subquery("x")
    )
    out: list[_RunOrderStats] = [{}]
    pending = [0]
    for mp in pg_rows(conn, sa.select(x.c.run_id, *_stat_columns(x, wanted)).group_by(x.c.run_id)):
        _parse_stats(mp, wanted, out, pending, mp["run_id"])
    return out, pending


def batch_values(
    conn: sa.Connection, runs: list[RunRef], metrics: list[Metric], selection: sa.Select
) -> dict[int, dict[str, MetricValue]]:
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
    # each distribution read once for all its percentiles
    dists: dict[int, tuple[Any, set[int]]] = {}
    for p in plans:
        if isinstance(p, Dist):
            dists.setdefault(id(p.rows), (p.rows, set()))[1].add(_stat_p(p.stat))
    wanted = [(rows(origins), ps) for rows, ps in dists.values()]
    aggs, got = _read_runs(conn, origins, wanted, need_rows, [r.origin for r in runs])
    stats = dict(zip(dists, got, strict=True))
    empty = empty_aggregate()
    shared = Shared()
    with gc_paused():  # ~14 values per run, each a few dicts and Fractions, none in a cycle
        for r in runs:
            ctx = Ctx(
                scope=Scope(batch=r.batch, run=f"#{r.id}"),
                kind="run",
                run_ids=[r.origin],
                batch_names=[r.batch],
                durations={r.origin: r.duration_s},
            )
            agg = aggs.get(r.origin, empty)
            one = Execution(
                ctx,
                caps.get(r.origin, []),
                _given(agg),
                functools.partial(_distribution, stats, r.origin),
                shared,
            )
            for mt in metrics:
                out[r.id][mt.name] = one.value(mt)
    return out


_NONE: tuple[int, int, dict[int, float]] = (0, 0, {})


def _given(agg: SimpleNamespace) -> Callable[[], SimpleNamespace]:
    """A run's aggregate row, read for all runs at once, as the executor asks for it."""
    return lambda: agg


def _distribution(stats: dict[int, _RunOrderStats], origin: int, plan: Dist) -> Distribution:
    """A run's distribution from the order statistics read for all runs (no values: none read)."""
    n, missing, known = stats[id(plan.rows)].get(origin, _NONE)
    return n, missing, lambda: _OrderStats(n, known)
