"""Result sets read as columns and arrays, on either backend: DuckDB's Arrow result, PostgreSQL's binary
form (each double precision[] as a numpy array), a run-by-run statement shared over connections of
one snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from bench_ledger.store import on_one_snapshot, pg_parallel_workers

__all__ = ["array_rows", "duck_arrow", "pg_rows", "pg_rows_shared", "pg_shares"]

_FLOAT8_ARRAY_OID = 1022  # PostgreSQL's double precision[] (pg_type)


def pg_rows(conn: sa.Connection, stmt: sa.Select) -> list[dict[str, Any]]:
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
        cur.adapters.register_loader(_FLOAT8_ARRAY_OID, Doubles)
        cur.execute(str(compiled), compiled.params)
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def pg_shares(conn: sa.Connection, runs_count: int) -> int:
    """How many connections read a run-by-run statement over ``runs_count`` runs on PostgreSQL: as many
    as one parallel query may use (:func:`bench_ledger.store.pg_parallel_workers`), at most one per run.
    PostgreSQL 15 plans no parallel LATERAL over ``array_agg`` itself (profile note 37)."""
    return 1 if runs_count < 2 else min(runs_count, pg_parallel_workers(conn))


def pg_rows_shared(
    conn: sa.Connection, runs: sa.Select, statement: Callable[[sa.Select], sa.Select], runs_count: int
) -> list[dict[str, Any]]:
    """PostgreSQL: the rows of ``statement(runs)`` (:func:`pg_rows`), read in :func:`pg_shares` shares
    at once, share k over the runs whose id is k modulo the shares, all on one snapshot
    (:func:`bench_ledger.store.on_one_snapshot`): the rows one statement here would read, share by
    share (the callers key them by run id)."""
    shares = pg_shares(conn, runs_count)
    key = runs.selected_columns[0]
    parts = [runs] if shares == 1 else [runs.where(key % shares == k) for k in range(shares)]
    got = on_one_snapshot(conn, [functools.partial(pg_rows, stmt=statement(part)) for part in parts])
    return [row for part in got for row in part]


def duck_arrow(conn: sa.Connection, stmt: sa.Select) -> Any:
    """DuckDB: the result of ``stmt`` as one Arrow table, read from the DuckDB cursor behind SQLAlchemy's
    result (columns, not rows)."""
    result = conn.execute(stmt)
    try:
        return result.cursor.to_arrow_table()
    finally:
        result.close()


def array_rows(conn: sa.Connection, stmt: sa.Select) -> list[dict[str, Any]]:
    """The rows of ``stmt`` as mappings, each column of double arrays (``array_agg`` of a DOUBLE) as a
    numpy float64 array (None where the array is NULL), on either backend: PostgreSQL in binary
    (:func:`pg_rows`), DuckDB as one Arrow table, each array a view of its list column's values."""
    if conn.dialect.name == "postgresql":
        return pg_rows(conn, stmt)
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
