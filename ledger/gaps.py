"""Chunk gaps: stored as one array per request (``request_gaps``), read as rows (``chunk_gap``).

The one home of the mapping between the two shapes (migration 0014, ``models.RequestGaps`` and
``models.ChunkGap``): a request's gaps ``[g0, g1, ...]`` are the rows (request_idx, seq = 0, g0),
(request_idx, 1, g1), ... The database view ``chunk_gap`` (``models.VIEWS``) spells the same in SQL;
here it is in Arrow, for what an import or a loaded export holds in memory:

* :func:`arrays` builds the ``request_gaps`` rows every importer's gaps go through (the one write
  path: ``ingest.artefacts_request_tables``), straight from a per-request list column (the vLLM and ledger
  format fast paths' Arrow lists, or a Python importer's lists); a request without gaps (no list, or
  an empty one) gets no row, as it got no ``chunk_gap`` row before;
* :func:`rows_of` gives the ``chunk_gap`` rows of such a table in key order: the seal hashes them
  (``ledger.seal.PooledRows``, scheme 3's encoding of gap rows unchanged);
* :func:`arrays_of` goes back from rows (``ledger import-export``: an export keeps the rows' shape);
* :func:`read` reads the arrays back from the database as such a table (the seal's close and
  verify, ``ledger check``'s gap series), where the view's ``seq`` would cost more than the read;
* :func:`pg_doubles` reads one PostgreSQL ``double precision[]`` in binary form (the element format
  :func:`read` cuts), for the metrics' per-run value arrays (``queries.metrics.grouped``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["arrays", "arrays_of", "count", "pg_doubles", "read", "rows_in_slices", "rows_of"]

if TYPE_CHECKING:
    import sqlalchemy as sa

SCHEMA = pa.schema([("artefact_id", pa.int32()), ("request_idx", pa.int32()), ("gaps", pa.list_(pa.float64()))])
# the rows as the seal hashes them (ledger.encoding.chunks' canonical types: every integer as int64)
ROW_SCHEMA = pa.schema(
    [("artefact_id", pa.int64()), ("request_idx", pa.int64()), ("seq", pa.int64()), ("gap_s", pa.float64())]
)


def arrays(artefact_id: int | pa.Array, request_idx: pa.Array, lists: pa.Array) -> pa.Table:
    """The ``request_gaps`` rows of requests ``request_idx`` whose gaps are ``lists`` (a list array,
    null where a record had none): one row per request with at least one gap, in the given order.
    ``artefact_id``: one artefact's id, or each request's (an int32 array: the files of a group)."""
    if isinstance(artefact_id, pa.ChunkedArray):
        artefact_id = artefact_id.combine_chunks()
    if isinstance(request_idx, pa.ChunkedArray):
        request_idx = request_idx.combine_chunks()
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    if lists.type != pa.list_(pa.float64()):
        lists = lists.cast(pa.list_(pa.float64()))
    lens = pc.list_value_length(lists)
    keep = pc.fill_null(pc.greater(lens, 0), False)
    if not pc.all(keep).as_py():
        request_idx, lists = request_idx.filter(keep), lists.filter(keep)
        if isinstance(artefact_id, pa.Array):
            artefact_id = artefact_id.filter(keep)
    n = len(lists)
    arts = (
        artefact_id.cast(pa.int32())
        if isinstance(artefact_id, pa.Array)
        else pa.repeat(pa.scalar(artefact_id, pa.int32()), n)
    )
    return pa.Table.from_arrays([arts, request_idx.cast(pa.int32()), lists], schema=SCHEMA)


def count(table: pa.Table) -> int:
    """The number of gaps (``chunk_gap`` rows) a ``request_gaps`` table holds."""
    if table.num_rows == 0:
        return 0
    return int(pc.sum(pc.list_value_length(table.column("gaps"))).as_py() or 0)


def rows_of(table: pa.Table) -> pa.Table:
    """The ``chunk_gap`` rows (artefact_id, request_idx, seq, gap_s) of a ``request_gaps`` table, in
    its row order and then ``seq`` (key order when the table is, as an import writes it), in the
    seal's canonical column types (:data:`ROW_SCHEMA`)."""
    lists = table.column("gaps").combine_chunks()
    lens = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists)
    offsets = np.asarray(lists.offsets)
    first = np.repeat(offsets[:-1] - offsets[0], lens)  # where each value's list begins among the values
    seq = np.arange(len(values), dtype=np.int64) - first
    return pa.Table.from_arrays(
        [
            pa.array(np.repeat(table.column("artefact_id").to_numpy().astype(np.int64), lens)),
            pa.array(np.repeat(table.column("request_idx").to_numpy().astype(np.int64), lens)),
            pa.array(seq),
            values.cast(pa.float64()),
        ],
        schema=ROW_SCHEMA,
    )


def rows_in_slices(table: pa.Table, gaps: int = 1 << 20) -> Iterator[pa.Table]:
    """:func:`rows_of` of ``table`` in order, a slice of its arrays of at most ``gaps`` gaps (or one
    array) at a time: the rows of a whole import chunk at once held four 8-byte columns per gap in
    memory (benchmarks/profile_notes.md, "Figures moved out of code comments")."""
    if table.num_rows == 0:
        return
    lens = pc.fill_null(pc.list_value_length(table.column("gaps")), 0).to_numpy(zero_copy_only=False)
    ends = np.cumsum(lens)
    start = 0
    while start < table.num_rows:
        before = int(ends[start - 1]) if start else 0
        stop = max(int(np.searchsorted(ends, before + gaps, side="right")), start + 1)
        yield rows_of(table.slice(start, stop - start))
        start = stop


def arrays_of(rows: pa.Table) -> pa.Table:
    """The ``request_gaps`` rows of ``chunk_gap`` rows in key order (artefact_id, request_idx, seq),
    each request's ``seq`` 0, 1, ... without a hole (what :func:`rows_of` gives); ValueError names
    the first request where that does not hold (such rows have no array form)."""
    if rows.num_rows == 0:
        return SCHEMA.empty_table()
    art = rows.column("artefact_id").to_numpy().astype(np.int64)
    req = rows.column("request_idx").to_numpy().astype(np.int64)
    seq = rows.column("seq").to_numpy().astype(np.int64)
    new = np.ones(len(req), bool)
    new[1:] = (art[1:] != art[:-1]) | (req[1:] != req[:-1])
    starts = np.flatnonzero(new)
    expected = np.arange(len(req)) - np.repeat(starts, np.diff(np.append(starts, len(req))))
    if (bad := np.flatnonzero(seq != expected)).size:
        i = int(bad[0])
        raise ValueError(
            f"chunk gaps of artefact {art[i]} request {req[i]}: seq {seq[i]} where {expected[i]} was due "
            "(the gaps of a request are numbered 0, 1, ... in key order)"
        )
    offsets = pa.array(np.append(starts, len(req)).astype(np.int32), pa.int32())
    lists = pa.ListArray.from_arrays(offsets, rows.column("gap_s").combine_chunks().cast(pa.float64()))
    return pa.Table.from_arrays(
        [pa.array(art[starts], pa.int32()), pa.array(req[starts], pa.int32()), lists], schema=SCHEMA
    )


# PostgreSQL's binary form of a one-dimensional double precision[] without NULLs (array_send): a
# 20-byte header (ndims, has-null flag, element type, length, lower bound), then per element its
# length (int32, 8) and the big-endian double.
_PG_ARRAY_HEADER = 20
_PG_ELEMENT = np.dtype([("len", ">i4"), ("value", ">f8")])
_PG_FLOAT8 = 701  # the element type's oid


def pg_doubles(data: bytes | memoryview) -> np.ndarray:
    """The values of one PostgreSQL ``double precision[]`` in its binary form (a result column read in
    binary), exactly: a float64 array, the elements in order. A form other than one dimension of
    double precision without NULLs (an empty array has no dimension) is refused with ValueError."""
    buf = memoryview(data)
    ndim, has_null, oid = np.frombuffer(buf, ">i4", 3)
    if ndim == 0 and len(buf) == 12:
        return np.zeros(0, np.float64)
    n = int(np.frombuffer(buf, ">i4", 1, 12)[0]) if ndim == 1 else -1
    if ndim != 1 or has_null or oid != _PG_FLOAT8 or len(buf) != _PG_ARRAY_HEADER + n * _PG_ELEMENT.itemsize:
        raise ValueError(
            f"not a one-dimensional double precision[] without NULLs ({ndim} dimensions, "
            f"NULLs {bool(has_null)}, element type {oid})"
        )
    elements = np.frombuffer(buf, _PG_ELEMENT, n, _PG_ARRAY_HEADER)
    if not (elements["len"] == 8).all():
        raise ValueError("an element of the double precision[] is not 8 bytes")
    return elements["value"].astype(np.float64)


def read(conn: sa.Connection, backend: str, sql: str, keys: list[str]) -> pa.Table | None:
    """The rows of ``sql`` — integer columns ``keys`` and the ``gaps`` array of ``request_gaps`` — as
    an Arrow table (``keys`` as int64, ``gaps`` as list<double>), in the order the scan gives them;
    the caller sorts. The values are the view ``chunk_gap``'s, exactly (each array's elements in
    stored order).

    Why: reading through the view costs its ``seq`` (DuckDB: a second unnest; PostgreSQL: a lateral
    ``unnest WITH ORDINALITY``, one row per gap on the server), more than the read itself
    (docs/decisions/0009-chunk-gaps-as-arrays.md). DuckDB hands the list column to Arrow.
    PostgreSQL aggregates the scan into two bytea values in one pass (as ``seal.chunks.read_pg_columns``):
    per row its keys and its array's cardinality, and the arrays' element records (``array_send``
    without the header), cut with numpy. None when that form does not hold (an array of another
    dimension or with a NULL element, written behind the ledger; or over 1 GB): the caller reads the
    view instead, which gives such rows as they are."""
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    if backend == "duckdb":
        table = raw.execute(sql).to_arrow_table()
        return pa.Table.from_arrays(
            [*(table.column(k).cast(pa.int64()) for k in keys), table.column("gaps").cast(pa.list_(pa.float64()))],
            names=[*keys, "gaps"],
        )
    import psycopg
    from bench_ledger.encoding import chunks as dg

    record = " || ".join(
        [
            *(f"int8send(CAST(q.{k} AS BIGINT))" for k in keys),
            "int4send(COALESCE(cardinality(q.gaps), 0))",
            "int4send(COALESCE(array_ndims(q.gaps), 1))",
        ]
    )
    query = (
        f"SELECT count(*), string_agg({record}, ''::bytea), "
        f"string_agg(substring(array_send(q.gaps) FROM {_PG_ARRAY_HEADER + 1}), ''::bytea) FROM ({sql}) q"
    )
    try:
        n, fields = dg.pg_aggregated_fields(memoryview(dg.pg_copy(raw, query)), 3)
    except psycopg.errors.ProgramLimitExceeded:
        return None
    record_type = np.dtype([*((k, ">i8") for k in keys), ("n", ">i4"), ("dims", ">i4")])
    if len(fields[1]) != n * record_type.itemsize:
        raise ValueError(f"{len(fields[1])} bytes of row records for {n} rows of {record_type.itemsize} bytes")
    rec = np.frombuffer(fields[1], record_type)
    lens = rec["n"].astype(np.int64)
    if not (rec["dims"] == 1).all():
        return None  # an array of another dimension: its header is longer
    if len(fields[2]) != _PG_ELEMENT.itemsize * int(lens.sum()):
        return None  # a NULL element (no value bytes): not this form
    elements = np.frombuffer(fields[2], _PG_ELEMENT)
    if not (elements["len"] == 8).all():
        return None
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(elements["value"].astype("<f8")))
    return pa.Table.from_arrays([*(pa.array(rec[k].astype("<i8")) for k in keys), lists], names=[*keys, "gaps"])
