"""Hand an Arrow table to the database's own bulk path.

DuckDB scans the Arrow table's batches in place (``INSERT ... SELECT`` from a registered stream of
them, which holds nothing once read); PostgreSQL
receives it through ``COPY ... FROM STDIN``, in COPY's binary form where every column's Arrow type is
its column's binary form (:func:`pg_binary_rows`: the bulk tables' rows), else as CSV written by Arrow's
C++ writer. Both run on the connection of the current transaction, so a failure later in the import
rolls the rows back.
"""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.guards import DECLARED_TABLES, declared_written

__all__ = ["arrow_of", "bulk_insert", "next_ids", "pg_binary_encodable", "pg_binary_rows"]

_names = itertools.count()
DUCKDB_BATCH_ROWS = 122_880  # DuckDB's row-group size
PG_COPY_ROWS = 65_536  # rows per slice of a COPY
_CSV = pacsv.WriteOptions(include_header=False, quoting_style="all_valid", batch_size=65536)


def bulk_insert(conn: sa.Connection, backend: str, table: str, data: pa.Table, held=None) -> None:
    """Insert ``data`` into ``table``; ``held`` (a :class:`ledger.seal.PooledRows`) hashes the Arrow
    table for the import's artefact digest."""
    if data.num_rows == 0:
        return
    if held is not None:
        held.add(table, data)
    if table in DECLARED_TABLES:  # their digests are written at the commit (ledger.declared)
        declared_written(conn, table, data.column("id").to_pylist())
    cols = ", ".join(f'"{c}"' for c in data.column_names)
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    if backend == "duckdb":
        # batches of one row group each (zero-copy slices), handed over as a stream: a view of the table
        # itself, registered and dropped inside the import's transaction, kept the table alive until the
        # commit (DuckDB keeps the dropped catalog entry until then), so an import held every row it wrote
        # (a day of dmon: 1.1 GB of Arrow); a stream is consumed by the INSERT and holds nothing after it
        view = f"_ledger_bulk_{next(_names)}"
        raw.register(
            view, pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=DUCKDB_BATCH_ROWS))
        )
        try:
            raw.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}")
        finally:
            raw.unregister(view)
    else:
        from psycopg.copy import QueuedLibpqWriter

        # a slice at a time, handed to a writer thread (psycopg's queued writer): the server reads one
        # slice while Arrow encodes the next, and the rows of a million requests are never encoded whole
        binary = pg_binary_encodable(table, data.schema)
        encode = pg_binary_rows if binary else _csv_rows
        if binary:  # the columns of one layout on every row first: pg_binary_rows writes them as one block
            data = data.select(_same_layout_first(data))
            cols = ", ".join(f'"{c}"' for c in data.column_names)
        with (
            raw.cursor() as cur,
            cur.copy(
                f"COPY {table} ({cols}) FROM STDIN (FORMAT {'binary' if binary else 'csv'})",
                writer=QueuedLibpqWriter(cur),
            ) as copy,
        ):
            if binary:
                copy.write(PG_BINARY_HEADER)
            for start in range(0, data.num_rows, PG_COPY_ROWS):
                copy.write(encode(data.slice(start, PG_COPY_ROWS)))
            if binary:
                copy.write(PG_BINARY_TRAILER)


def next_ids(conn: sa.Connection, backend: str, table: str, n: int) -> list[int]:
    """``n`` fresh ids from the sequence behind ``table.id`` (DuckDB: ``<table>_id_seq``; PostgreSQL:
    the SERIAL's sequence), in one statement, so rows can be bulk-inserted with their ids."""
    if n == 0:
        return []
    if backend == "duckdb":
        sql = f"SELECT nextval('{table}_id_seq') FROM range({int(n)})"
    else:
        sql = f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, {int(n)})"
    return sorted(r[0] for r in conn.exec_driver_sql(sql))


def arrow_of(table: sa.FromClause, rows: list[dict], dialect: sa.Dialect) -> pa.Table:
    """Rows (dicts with the same keys) as an Arrow table typed after ``table``'s columns; bind
    processors (ExactDecimal -> text) are applied as an ORM insert would."""
    names = list(rows[0])
    data = {}
    for name in names:
        col = table.c[name]
        values = [r[name] for r in rows]
        ctype = col.type
        if isinstance(ctype, m.ExactDecimal):
            values = [ctype.process_bind_param(v, dialect) for v in values]
            atype = pa.string()
        elif isinstance(ctype, sa.Boolean):
            atype = pa.bool_()
        elif isinstance(ctype, sa.Integer):
            atype = pa.int64() if isinstance(ctype, sa.BigInteger) else pa.int32()
        elif isinstance(ctype, sa.Float):
            atype = pa.float64()
        elif isinstance(ctype, sa.DateTime):
            atype = pa.timestamp("us")
        else:
            atype = pa.string()
        data[name] = pa.array(values, atype)
    return pa.table(data)


def _csv_rows(data: pa.Table) -> memoryview:
    buf = io.BytesIO()
    pacsv.write_csv(data, buf, _CSV)
    return buf.getbuffer()


# PostgreSQL's binary COPY (the COPY page of its manual): a header, then per row an int16 field count
# and per field an int32 byte length (-1: NULL) and the value in the type's binary form, then -1.
PG_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags 0, no header extension
PG_BINARY_TRAILER = b"\xff\xff"
_PG_FLOAT8_OID = 701
_BIG_ENDIAN = {pa.int32(): ">i4", pa.int64(): ">i8", pa.float64(): ">f8"}  # int4, int8, float8
_EMPTY = pa.scalar(b"", pa.large_binary())
_NULL = pa.scalar(b"\xff\xff\xff\xff", pa.large_binary())
_PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01, where PostgreSQL's timestamps count from, in Unix microseconds


def pg_binary_encodable(table: str, schema: pa.Schema) -> bool:
    """Whether every column of ``schema`` is in the binary form of ``table``'s column of that name
    (binary COPY converts nothing: int32 to an ``integer``, int64 to a ``bigint``, float64 to a ``double
    precision``, text to a ``varchar``, a timestamp without zone to the microsecond at most to a
    ``timestamp``, a list of float64 to a ``double precision[]``); a table or column the model does not
    know, or any other pairing, goes as CSV (the server converts it)."""
    known = m.Base.metadata.tables.get(table)
    return known is not None and all(
        f.name in known.c and _pg_binary_type(known.c[f.name].type) == f.type for f in schema
    )


def _pg_binary_type(ctype: sa.types.TypeEngine) -> pa.DataType | None:
    """The Arrow type whose binary encoding is the column type's binary form (None: no such). Exact
    types only (a ``Float(precision=10)`` is a ``real``, a subclass may map to anything): CSV otherwise."""
    if type(ctype) is sa.ARRAY:
        item = ctype.item_type
        return pa.list_(pa.float64()) if type(item) is sa.Float and item.precision is None else None
    return {
        sa.Integer: pa.int32(),
        sa.BigInteger: pa.int64(),
        sa.String: pa.string(),
        sa.Text: pa.string(),
        sa.Float: pa.float64() if getattr(ctype, "precision", None) is None else None,
        sa.DateTime: None if getattr(ctype, "timezone", False) else pa.timestamp("us"),
    }.get(type(ctype))


def pg_binary_rows(data: pa.Table) -> memoryview:
    """The rows of ``data`` in PostgreSQL's binary COPY form (without header and trailer), built with
    numpy and Arrow's kernels, no Python loop per row. The leading columns of one layout on every row
    (:func:`_same_layout`) are one fixed-width numpy record per row, the row's field count included;
    each other column becomes one length-prefixed field per row (:data:`_ENCODERS`), and a row's parts
    are joined. Why binary: the server reads a double's 8 bytes instead of parsing its text (exact by
    construction), and an array without parsing it (the gaps as CSV array literals cost more than the
    4M gap rows' CSV they replaced); a request's COPY took less server time than as CSV (profile
    note 35). Why the block: joining a field array per column was much of the encoding (profile note
    44)."""
    n = data.num_rows
    if not n:
        return memoryview(b"")
    lead = 0
    while lead < data.num_columns and _same_layout(data.column(lead)):
        lead += 1
    block = _record_block(data, lead)
    records = block.view(np.uint8).reshape(-1)
    if lead == data.num_columns:
        return records.data
    fields = [_binary(block.dtype.itemsize, n, records)]
    for col, f in zip(data.columns[lead:], list(data.schema)[lead:], strict=True):
        arr = col.combine_chunks()
        enc = _ENCODERS[f.type](arr)
        fields.append(pc.if_else(arr.is_valid(), enc, _NULL) if arr.null_count else enc)
    rows = pc.binary_join_element_wise(*fields, _EMPTY)
    size = int(np.frombuffer(rows.buffers()[1], np.int64)[n])  # the last offset: the bytes of all rows
    return memoryview(rows.buffers()[2])[:size]


def _same_layout(col: pa.ChunkedArray) -> bool:
    """A fixed-width column whose field has the same size on every row: no NULL, or only NULLs."""
    return col.type in _BIG_ENDIAN and col.null_count in (0, len(col))


def _same_layout_first(data: pa.Table) -> list[str]:
    """The column names of ``data``, those of one layout on every row (:func:`_same_layout`) first, each
    group in its order: the order a binary COPY names them in, so that :func:`pg_binary_rows` writes
    them as one block (a slice of such a column is such a column too)."""
    same = [name for name, col in zip(data.column_names, data.columns, strict=True) if _same_layout(col)]
    return same + [name for name in data.column_names if name not in same]


def _record_block(data: pa.Table, lead: int) -> np.ndarray:
    """Per row of ``data``: the int16 field count, then each of the first ``lead`` columns (of one layout,
    :func:`_same_layout`) as its field: the int32 length and the big-endian value, or -1 for NULL."""
    parts: list[tuple[str, str]] = [("count", ">i2")]
    for i, col in enumerate(data.columns[:lead]):
        parts.append((f"length{i}", ">i4"))
        if not col.null_count:
            parts.append((f"value{i}", _BIG_ENDIAN[col.type]))
    block = np.empty(data.num_rows, np.dtype(parts))  # packed: no padding between fields
    block["count"] = data.num_columns
    for i, col in enumerate(data.columns[:lead]):
        if col.null_count:
            block[f"length{i}"] = -1
        else:
            block[f"length{i}"] = np.dtype(_BIG_ENDIAN[col.type]).itemsize
            block[f"value{i}"] = col.to_numpy()  # numpy converts to the field's byte order
    return block


def _binary(width: int, n: int, data: np.ndarray) -> pa.Array:
    """``n`` values of ``width`` bytes each (``data``, row-major) as an Arrow large_binary array."""
    return pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int64) * width), pa.py_buffer(data)]
    )


def _prefixed(values: np.ndarray) -> pa.Array:
    """Fixed-width values (a big-endian numpy array) each behind its int32 length."""
    n, width = len(values), values.dtype.itemsize
    out = np.empty((n, 4 + width), np.uint8)
    out[:, :4] = np.array([width], ">i4").view(np.uint8)
    out[:, 4:] = values.view(np.uint8).reshape(n, width)
    return _binary(4 + width, n, out)


def _fixed_field(arr: pa.Array) -> pa.Array:
    return _prefixed(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype(_BIG_ENDIAN[arr.type]))


def _timestamp_field(arr: pa.Array) -> pa.Array:
    us = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False) - _PG_EPOCH_US
    return _prefixed(us.astype(">i8"))


def _text_field(arr: pa.Array) -> pa.Array:
    n = len(arr)
    lens = pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False).astype(">i4")
    return pc.binary_join_element_wise(_binary(4, n, lens), pc.fill_null(arr, "").cast(pa.large_binary()), _EMPTY)


def _float8_array_field(arr: pa.Array) -> pa.Array:
    """A one-dimensional ``double precision[]`` per row: the array header (ndim 1, no NULLs, element
    type float8, length, lower bound 1), then per element its length 8 and its 8 bytes; a list with a
    NULL element is refused (the gaps have none)."""
    n = len(arr)
    values = pc.list_flatten(arr)
    if values.null_count:
        raise ValueError("binary COPY: a list holds NULLs")
    lens = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    head = np.empty((n, 6), ">i4")
    head[:] = np.array([0, 1, 0, _PG_FLOAT8_OID, 0, 1])
    head[:, 0] = 20 + 12 * lens  # the field's length: the header's 20 bytes and 12 per element
    head[:, 4] = lens
    elems = np.empty((len(values), 3), np.uint32)  # per element: int32 length 8, the float8 big-endian
    elems[:, 0] = np.array([8], ">i4").view(np.uint32)[0]
    elems[:, 1:] = values.to_numpy(zero_copy_only=False).astype(">f8").view(np.uint32).reshape(-1, 2)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens * 12, out=offsets[1:])
    bodies = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(elems)])
    return pc.binary_join_element_wise(_binary(24, n, head), bodies, _EMPTY)


# the encoder of each Arrow type _pg_binary_type gives (a field per row, NULLs still to be marked)
_ENCODERS = {
    pa.int32(): _fixed_field,
    pa.int64(): _fixed_field,
    pa.float64(): _fixed_field,
    pa.string(): _text_field,
    pa.timestamp("us"): _timestamp_field,
    pa.list_(pa.float64()): _float8_array_field,
}
