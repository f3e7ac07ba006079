"""Every run's request metrics at once: a handful of grouped statements instead of queries per run.

``queries.metrics.evaluate`` stays the reference definition. This module reads the same data for
*all* selected runs with a few set-based statements (GROUP BY run, or run by run on PostgreSQL), then hands
each run's figures to the very same decision functions ``evaluate`` uses
(``precheck_caps``, ``count_value``, ``total_value``, ``wall_value``, ``rate_value``, ``dist_value``,
``cache_value`` in :mod:`queries.metrics_requests`), so flags, n/a reasons and inputs cannot drift.

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

How (:func:`read_runs`): on DuckDB, 2 is one GROUP BY run_id and 3 one statement per distribution
(the run id and value of its member rows, as Arrow); numpy picks each run's order statistics (the runs
of one size as one matrix, one ``np.sort``). The runs' rows are selected by ``run_id BETWEEN`` where
their ids are a range (:func:`run_filter`), which keeps the stored order. On PostgreSQL, 2 and 3 are one statement that goes run by run (LATERAL:
the run's requests by its index, then the aggregates and each distribution's non-NULL values as one
unsorted ``array_agg``, read in binary as numpy arrays), so no sort of all runs' rows spills to disk;
the runs shared out over as many connections at once as the server lets one parallel query use, all on
one exported snapshot (:func:`pg_shares`);
numpy picks the order statistics there too. The chunk gaps (ITL) are one more statement on either backend.

Means (which need every value for an exact Fraction sum) and hardware / log metrics are not done
here: :func:`run_metrics` computes them per run as before.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger.gcpause import gc_paused
from bench_ledger.queries.metrics_requests import (
    CAP,
    CF,
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
    Rows,
    Total,
    Wall,
    cache_value,
    count_value,
    dist_value,
    exact,
    fields_used,
    precheck_caps,
    rate_value,
    record_groups,
    total_value,
    wall_value,
)
from bench_ledger.queries.values import MetricValue, Scope
from bench_ledger.store import on_one_snapshot, pg_parallel_workers


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


def read_captures(conn: sa.Connection, runs: sa.Select) -> dict[int, list[CaptureInfo]]:
    """Captures holding records, with their fields, of all runs: one statement (ordered by capture id),
    a capture's fields gathered by ``array_agg`` (one row per capture, not per field)."""
    out: dict[int, list[CaptureInfo]] = defaultdict(list)
    cols = (CAP.c.id, CAP.c.run_id, CAP.c.record_count, CAP.c.sampled, CAP.c.sample_note)
    stmt = (
        sa.select(*cols, sa.func.array_agg(CF.c.field).label("fields"))
        .select_from(CAP.outerjoin(CF, CF.c.capture_id == CAP.c.id))
        .where(CAP.c.run_id.in_(runs), CAP.c.record_count > 0)
        .group_by(*cols)
        .order_by(CAP.c.id)
    )
    for r in conn.execute(stmt):
        fields = {f for f in r.fields if f is not None}  # a capture without fields: one NULL from the outer join
        out[r.run_id].append(CaptureInfo(r.id, r.run_id, r.record_count, bool(r.sampled), r.sample_note, fields))
    return out


TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens")
AGGREGATE_INPUTS = ("status", "send_ns", "end_ns", "clock", *TOKEN_COLUMNS)  # the request columns they read


def _aggregate_columns(c: Any) -> list[sa.ColumnElement]:
    """Counts by status, ok-token totals with how many lack them, first send / last end, clocks, over
    the columns ``c`` (the request table's, or a subquery's with the same names)."""
    ok = c.status == "ok"
    cols: list[sa.ColumnElement] = [
        sa.func.count().label("n"),
        *(sa.func.sum(sa.case((c.status == s, 1), else_=0)).label(s) for s in ("ok", "failed", "unknown")),
        sa.func.min(c.send_ns).label("first_send"),
        sa.func.max(c.end_ns).label("last_end"),
        sa.func.min(c.clock).label("clock_min"),
        sa.func.max(c.clock).label("clock_max"),
        sa.func.count(c.send_ns).label("timed"),
    ]
    for col in TOKEN_COLUMNS:
        cols += [
            sa.func.sum(sa.case((ok, c[col]))).label(f"{col}_total"),
            sa.func.sum(sa.case((sa.and_(ok, c[col].is_(None)), 1), else_=0)).label(f"{col}_missing"),
        ]
    return cols


AGGREGATES = [c.name for c in _aggregate_columns(Q.c)]


def _aggregate(row: Any) -> SimpleNamespace:
    ns = SimpleNamespace(**{k: row[k] for k in AGGREGATES})
    # wall_clock only asks whether the requests are on more than one clock: MIN <> MAX says it
    # without COUNT(DISTINCT), which PostgreSQL can only do by sorting
    ns.clocks = 0 if ns.clock_min is None else 1 if ns.clock_min == ns.clock_max else 2
    return ns


def run_filter(runs: sa.Select, ids: Iterable[int] | None = None) -> sa.ColumnElement[bool]:
    """The request rows of the runs ``runs`` selects: ``run_id IN (runs)``, or, where the caller knows
    the ids it selects and they are a range without gaps (the runs of a batch imported together),
    ``run_id BETWEEN first AND last``, the same rows: DuckDB then scans the row groups whose run_id
    zone maps meet the range and keeps the stored order, where the semi-join hashed the selection,
    returned the rows out of run order (sorted again on the client) and cost ~0.02-0.03 s more per
    statement over 1M requests (profile note 29)."""
    got = sorted(set(ids)) if ids is not None else []
    if got and got[-1] - got[0] + 1 == len(got):
        return Q.c.run_id.between(got[0], got[-1])
    return Q.c.run_id.in_(runs)


def read_aggregates(
    conn: sa.Connection, runs: sa.Select, where: sa.ColumnElement[bool] | None = None
) -> dict[int, SimpleNamespace]:
    """Counts, ok-token totals and first send / last end per run: one GROUP BY run_id (``where``: the
    runs' rows, :func:`run_filter`)."""
    where = Q.c.run_id.in_(runs) if where is None else where
    stmt = sa.select(Q.c.run_id, *_aggregate_columns(Q.c)).where(where).group_by(Q.c.run_id)
    return {r.run_id: _aggregate(r._mapping) for r in conn.execute(stmt)}


def _empty_aggregate() -> SimpleNamespace:
    """What the per-run statements return for a run without request rows."""
    ns = SimpleNamespace(n=0, ok=None, failed=None, unknown=None, first_send=None, last_end=None, clocks=0, timed=0)
    for c in TOKEN_COLUMNS:
        setattr(ns, f"{c}_total", None)
        setattr(ns, f"{c}_missing", None)
    return ns


OrderStats = dict[int, tuple[int, int, dict[int, float]]]  # run -> (n values, n NULL, {0-based rank: value})
Wanted = list[tuple[Rows, set[int]]]  # a distribution's rows, the percentiles read from it


def ranks_read(n: int, ps: Iterable[int]) -> list[int]:
    """The 0-based ranks of n sorted values that :func:`percentile_linear` reads for the percentiles ``ps``:
    floor(h) and floor(h)+1 (when there is one), h = (n-1)·p/100, in integers."""
    out: set[int] = set()
    for p in ps:
        lo = (n - 1) * p // 100
        out.update(r for r in (lo, lo + 1) if r < n)
    return sorted(out)


def read_runs(
    conn: sa.Connection, runs: sa.Select, wanted: Wanted, aggregates: bool, ids: Iterable[int] | None = None
) -> tuple[dict[int, SimpleNamespace], list[OrderStats]]:
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
    out: list[OrderStats] = [{} for _ in wanted]
    pending = [0] * len(wanted)
    on_q = [i for i, (rows, _) in enumerate(wanted) if rows.source is Q]
    aggs: dict[int, SimpleNamespace] = {}
    if pg and (aggregates or on_q):
        aggs, got, pend = _read_lateral(conn, runs, [wanted[i] for i in on_q], aggregates, len(set(ids or ())))
    else:
        aggs = read_aggregates(conn, runs, where) if aggregates else {}
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


def _value_columns(wanted: Wanted) -> list[sa.ColumnElement]:
    """m{i}: the row is in distribution i; v{i}: its value there, computed only for its rows (a row of
    another distribution may divide by zero here: TPOT of a request with one output token)."""
    cols: list[sa.ColumnElement] = []
    for i, (rows, _) in enumerate(wanted):
        cols += [rows.member.label(f"m{i}"), sa.case((rows.member, rows.v)).label(f"v{i}")]
        if rows.pending is not None:
            cols.append(sa.and_(rows.member, rows.pending).label(f"p{i}"))
    return cols


def _stats_arrow(
    conn: sa.Connection, runs: sa.Select, wanted: Wanted, where: sa.ColumnElement[bool] | None = None
) -> tuple[list[OrderStats], list[int]]:
    """DuckDB: per distribution one statement, (run_id, v) of its member rows (and whether each is
    ``pending``) as Arrow; its rows grouped by run (they come in stored order, which is by run after an
    import; otherwise a stable sort by run) and each run's ranks from :func:`_order_stats`. One statement
    per distribution rather than one for all (member flags and NULL values of every distribution beside
    each other): the run and value columns come back without NULLs, read by numpy in place, with no
    filter or fill per distribution (profile note 29: ~14k page faults and 0.07 s of numpy per call)."""
    import numpy as np

    where = Q.c.run_id.in_(runs) if where is None else where
    out: list[OrderStats] = []
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
        heads = np.sort(run[starts])  # not np.unique: its first call imports numpy.ma (~20 ms of a cold call)
        if (heads[1:] == heads[:-1]).any():  # a run's rows are not together: put them together
            order = np.argsort(run, kind="stable")
            run, vals = run[order], vals[order]
            null = None if null is None else null[order]
            starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
        out.append(_order_stats(run, starts, null, vals, ps))
    return out, pending


def _order_stats(run: Any, starts: Any, null: Any | None, vals: Any, ps: set[int]) -> OrderStats:
    """Each run's (n values, n NULL, {rank: value}) of one distribution, from its rows grouped by run
    (``starts``: each run's first row). The runs of one size without a NULL (a sweep's runs have a few
    sizes) are one matrix, sorted along its rows by one ``np.sort`` (numpy's vectorised sort of doubles:
    ~4x faster per value here than ``np.partition`` at four ranks, and no call per run): the same order
    statistics as a partition per run (equal doubles, -0.0 and 0.0 too, are the same Fraction)."""
    import numpy as np

    ends = np.r_[starts[1:], len(run)]
    sizes = ends - starts
    nulls = np.zeros(len(starts), np.int64) if null is None else np.add.reduceat(null, starts)
    rids = run[starts].tolist()
    st: OrderStats = {}
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


def _stat_columns(x: Any, wanted: Wanted) -> list[sa.ColumnElement]:
    """Per distribution i over the columns m{i}, v{i} (and p{i}) of ``x``: count(*), how many pending,
    and the array of its values that are not NULL, unsorted (``array_agg``; sorting ~1,000 values per
    run and distribution was a fifth of the server's time): the order statistics are picked from it
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


def _parse_stats(row: Any, wanted: Wanted, out: list[OrderStats], pending: list[int], rid: int) -> None:
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


FLOAT8_ARRAY_OID = 1022  # PostgreSQL's double precision[] (pg_type)


def _pg_rows(conn: sa.Connection, stmt: sa.Select) -> list[dict[str, Any]]:
    """PostgreSQL: the rows of ``stmt`` (as mappings) read in binary on this connection's transaction,
    each ``double precision[]`` as a numpy array (:func:`bench_ledger.gaps.pg_doubles`), not ~1,000
    Python floats per array."""
    import psycopg
    from bench_ledger.gaps import pg_doubles

    class Doubles(psycopg.adapt.Loader):
        format = psycopg.pq.Format.BINARY

        def load(self, data):
            return pg_doubles(data)

    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    with raw.cursor(binary=True) as cur:
        cur.adapters.register_loader(FLOAT8_ARRAY_OID, Doubles)
        cur.execute(str(compiled), compiled.params)
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def pg_shares(conn: sa.Connection, runs_count: int) -> int:
    """How many connections read a run-by-run statement over ``runs_count`` runs on PostgreSQL: as many
    as one parallel query may use (:func:`bench_ledger.store.pg_parallel_workers`), at most one per run.
    PostgreSQL 15 plans no parallel LATERAL over ``array_agg`` itself (profile note 37)."""
    return 1 if runs_count < 2 else min(runs_count, pg_parallel_workers(conn))


def _pg_rows_shared(
    conn: sa.Connection, runs: sa.Select, statement: Callable[[sa.Select], sa.Select], runs_count: int
) -> list[dict[str, Any]]:
    """PostgreSQL: the rows of ``statement(runs)`` (:func:`_pg_rows`), read in :func:`pg_shares` shares
    at once, share k over the runs whose id is k modulo the shares, all on one snapshot
    (:func:`bench_ledger.store.on_one_snapshot`): the rows one statement here would read, share by
    share (the callers key them by run id)."""
    shares = pg_shares(conn, runs_count)
    key = runs.selected_columns[0]
    parts = [runs] if shares == 1 else [runs.where(key % shares == k) for k in range(shares)]
    got = on_one_snapshot(conn, [functools.partial(_pg_rows, stmt=statement(part)) for part in parts])
    return [row for part in got for row in part]


def duck_arrow(conn: sa.Connection, stmt: sa.Select) -> Any:
    """DuckDB: the result of ``stmt`` as one Arrow table, read from the DuckDB cursor behind SQLAlchemy's
    result (columns, not rows)."""
    result = conn.execute(stmt)
    try:
        return result.cursor.to_arrow_table()
    finally:
        result.close()


def tuples(conn: sa.Connection, stmt: sa.Select) -> Iterable[tuple]:
    """The rows of ``stmt`` as tuples; on DuckDB read as Arrow columns (a million rows in a fraction of a
    second, where a fetch per row through the driver took ~2 us each)."""
    if conn.dialect.name != "duckdb":
        return [tuple(r) for r in conn.execute(stmt)]
    table = duck_arrow(conn, stmt)
    return zip(*(c.to_pylist() for c in table.columns), strict=True)


def array_rows(conn: sa.Connection, stmt: sa.Select) -> list[dict[str, Any]]:
    """The rows of ``stmt`` as mappings, each column of double arrays (``array_agg`` of a DOUBLE) as a
    numpy float64 array (None where the array is NULL), on either backend: PostgreSQL in binary
    (:func:`_pg_rows`), DuckDB as one Arrow table, each array a view of its list column's values."""
    if conn.dialect.name == "postgresql":
        return _pg_rows(conn, stmt)
    import pyarrow as pa

    table = duck_arrow(conn, stmt)
    cols: dict[str, list[Any]] = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_list(col.type):
            lists = col.combine_chunks()
            offsets, values = lists.offsets.to_numpy(), lists.flatten().to_numpy(zero_copy_only=False)
            start = offsets[0]  # flatten() begins at the first list's values
            valid = lists.is_valid().to_numpy(zero_copy_only=False)
            cols[name] = [
                values[a - start : b - start] if ok else None
                for a, b, ok in zip(offsets[:-1], offsets[1:], valid, strict=True)
            ]
        else:
            cols[name] = col.to_pylist()
    return [dict(zip(cols, r, strict=True)) for r in zip(*cols.values(), strict=True)] if cols else []


def _read_lateral(
    conn: sa.Connection, runs: sa.Select, wanted: Wanted, aggregates: bool, runs_count: int
) -> tuple[dict[int, SimpleNamespace], list[OrderStats], list[int]]:
    """PostgreSQL, distributions over the request table alone: one statement, one run at a time
    (LATERAL), the aggregates (if asked) and every distribution's value array from one index scan
    of the run's requests, whose values are computed once per row (OFFSET 0 keeps PostgreSQL from
    inlining them into every aggregate); the runs shared out over connections by :func:`_pg_rows_shared`."""

    def statement(share: sa.Select) -> sa.Select:
        r = share.subquery("r")
        rid = r.c[0]
        cols = [*(Q.c[n] for n in AGGREGATE_INPUTS if aggregates), *_value_columns(wanted)]
        where = [Q.c.run_id == rid] if aggregates else [Q.c.run_id == rid, sa.or_(*(w.member for w, _ in wanted))]
        x = sa.select(*cols).where(*where).offset(0).correlate(r).lateral("x")
        inner = sa.select(*(_aggregate_columns(x.c) if aggregates else []), *_stat_columns(x, wanted)).lateral("s")
        return sa.select(rid.label("run_id"), inner).select_from(r.join(inner, sa.true()))

    aggs: dict[int, SimpleNamespace] = {}
    out: list[OrderStats] = [{} for _ in wanted]
    pending = [0] * len(wanted)
    for mp in _pg_rows_shared(conn, runs, statement, runs_count):
        if aggregates and mp["n"]:  # a run without request rows is absent from the GROUP BY's aggregates too
            aggs[mp["run_id"]] = _aggregate(mp)
        _parse_stats(mp, wanted, out, pending, mp["run_id"])
    return aggs, out, pending


def _stats_grouped(conn: sa.Connection, runs: sa.Select, wanted: Wanted) -> tuple[list[OrderStats], list[int]]:
    """PostgreSQL, a distribution over a joined source (chunk gaps, gap sums): one GROUP BY run_id."""
    rows = wanted[0][0]
    x = (
        sa.select(Q.c.run_id.label("run_id"), *_value_columns(wanted))
        .select_from(rows.source)
        .where(Q.c.run_id.in_(runs), rows.member)
        .subquery("x")
    )
    out: list[OrderStats] = [{}]
    pending = [0]
    for mp in _pg_rows(conn, sa.select(x.c.run_id, *_stat_columns(x, wanted)).group_by(x.c.run_id)):
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
            dists.setdefault(id(p.sql), (p.sql, set()))[1].add(_stat_p(p.stat))
    wanted = [(sql(origins, by_run=True), ps) for sql, ps in dists.values()]
    aggs, got = read_runs(conn, origins, wanted, need_rows, [r.origin for r in runs])
    stats = dict(zip(dists, got, strict=True))
    empty = _empty_aggregate()
    none: tuple[int, int, dict[int, float]] = (0, 0, {})
    shared = _Shared()
    with gc_paused():  # ~14 values per run, each a few dicts and Fractions, none in a cycle
        for r in runs:
            ctx = Ctx(
                scope=Scope(batch=r.batch, run=f"#{r.id}"),
                kind="run",
                run_ids=[r.origin],
                batch_names=[r.batch],
                durations={r.origin: r.duration_s},
            )
            one = _OneRun(
                conn,
                ctx,
                caps.get(r.origin, []),
                aggs.get(r.origin, empty),
                {key: st.get(r.origin, none) for key, st in stats.items()},
                shared,
            )
            for mt in metrics:
                out[r.id][mt.name] = one.value(mt)
    return out


class _Shared:
    """What the decisions of one batch_values call compute once for every run of the same captures'
    shape (which captures, sampled or not, with which fields) instead of per run and value."""

    def __init__(self) -> None:
        self.fit: dict[Any, set[Any]] = {}  # shape -> the needs for which precheck_caps passed
        self.fields: dict[Any, dict[Any, list[str]]] = {}  # shape -> needs -> fields_used


class _OneRun:
    """One run's figures (read for all runs at once) through the decision functions evaluate uses."""

    def __init__(
        self,
        conn: sa.Connection,
        ctx: Ctx,
        caps: list[CaptureInfo],
        agg: SimpleNamespace,
        stats: dict[int, tuple[int, int, dict[int, float]]],
        shared: _Shared,
    ) -> None:
        self.conn, self.ctx, self.caps, self.agg, self.stats = conn, ctx, caps, agg, stats
        self.done: dict[str, MetricValue] = {}
        # all precheck_caps's pass and fields_used depend on: the captures (all of this run's, so none
        # is missing) are there, which are samples, and which fields each has
        shape = tuple((c.sampled, frozenset(c.fields)) for c in caps)
        self.fit = shared.fit.setdefault(shape, set())
        self.fields_of = shared.fields.setdefault(shape, {})

    def value(self, mt: Metric) -> MetricValue:
        v = self.done.get(mt.name)
        if v is None:
            v = self.done[mt.name] = self.compute(mt)
        return v

    def fields(self, mt: Metric) -> list[str]:
        """:func:`fields_used` of this run's captures for ``mt``: once per shape and needs, a new list per value."""
        got = self.fields_of.get(mt.needs)
        if got is None:
            got = self.fields_of[mt.needs] = fields_used(self.caps, mt)
        return list(got)

    def compute(self, mt: Metric) -> MetricValue:
        """The metric's plan on the figures read for all runs, through its decision function."""
        ctx, caps, agg, plan = self.ctx, self.caps, self.agg, mt.plan
        kind = type(plan)
        if kind is Rate:
            return rate_value(mt, ctx, [self.value(t) for t in plan.tokens], self.value(plan.wall), plan.per)  # type: ignore[union-attr]
        if kind is Groups:
            return record_groups(mt, ctx)
        if kind is Wall:
            return wall_value(mt, ctx, caps, lambda: agg)
        # precheck_caps passes or not by the captures' shape and the metric's needs only: passed once,
        # passed for every run of that shape and metric of those needs (an n/a, which names the run's
        # counts, is built per metric and run: cache_value edits it)
        bad = None
        if mt.needs not in self.fit:
            bad = precheck_caps(ctx, mt, caps)
            if bad is None:
                self.fit.add(mt.needs)
        if kind is Cache:
            row = SimpleNamespace(total=agg.cached_tokens_total, ok=agg.ok or 0, missing=agg.cached_tokens_missing)
            return cache_value(mt, ctx, bad, lambda: row)
        if bad:
            return bad
        if kind is Dist:
            assert isinstance(plan, Dist)
            n, missing, known = self.stats[id(plan.sql)]
            return dist_value(
                mt,
                ctx,
                caps,
                plan.stat,
                plan.population,
                n,
                missing,
                lambda: _OrderStats(n, known),
                self.fields(mt) if n and not missing else None,
            )
        if kind is Count:
            assert isinstance(plan, Count)
            return count_value(mt, ctx, caps, agg.n, getattr(agg, plan.status), self.fields(mt))
        if kind is Total:
            assert isinstance(plan, Total)
            col = plan.column
            return total_value(
                mt,
                ctx,
                caps,
                col,
                getattr(agg, f"{col}_total"),
                agg.ok or 0,
                getattr(agg, f"{col}_missing"),
                self.fields(mt),
            )
        raise ValueError(f"no batch path for {mt.name}")
