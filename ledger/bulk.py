"""Hand an Arrow table to the database's own bulk path.

DuckDB scans the Arrow table in place (``INSERT ... SELECT`` from a registered view); PostgreSQL
receives it through ``COPY ... FROM STDIN`` as CSV written by Arrow's C++ writer, or a table with a list
column (the chunk gaps' arrays, ``request_gaps``) as binary COPY (:func:`pg_binary`). Both run on the
connection of the current transaction, so a failure later in the import rolls the rows back.
"""

from __future__ import annotations

import io
import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa

_names = itertools.count()
DUCKDB_BATCH_ROWS = 122_880  # DuckDB's row-group size
PG_COPY_ROWS = 65_536  # rows per CSV slice of a COPY
_CSV = pacsv.WriteOptions(include_header=False, quoting_style="all_valid", batch_size=65536)


def bulk_insert(conn: sa.Connection, backend: str, table: str, data: pa.Table, held=None) -> None:
    """Insert ``data`` into ``table``; ``held`` (a :class:`ledger.seal3.HeldRows`) keeps the Arrow
    table for the import's artefact digest."""
    if data.num_rows == 0:
        return
    if held is not None:
        held.add(table, data)
    cols = ", ".join(f'"{c}"' for c in data.column_names)
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    if backend == "duckdb":
        view = f"_ledger_bulk_{next(_names)}"
        # batches of one row group each (zero-copy slices): DuckDB scans them in parallel, while one
        # batch of 500k rows is scanned by one thread (request and chunk-gap inserts measured ~1.6x
        # and ~2x faster on the benchmark's rows, 2 cores); insertion order is kept all the same
        data = pa.Table.from_batches(data.to_batches(max_chunksize=DUCKDB_BATCH_ROWS), data.schema)
        raw.register(view, data)
        try:
            raw.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}")
        finally:
            raw.unregister(view)
    elif any(pa.types.is_list(f.type) for f in data.schema):  # the chunk gaps' arrays: binary COPY
        with raw.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT binary)") as copy:
            for part in pg_binary(data):
                copy.write(part)
    else:
        from psycopg.copy import QueuedLibpqWriter

        # CSV a slice at a time, handed to a writer thread (psycopg's queued writer): the server
        # parses one slice while Arrow writes the next, and the CSV of a million rows (140 MB of
        # requests) is never held whole
        with raw.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT csv)",
                                           writer=QueuedLibpqWriter(cur)) as copy:  # fmt: skip
            for start in range(0, data.num_rows, PG_COPY_ROWS):
                buf = io.BytesIO()
                pacsv.write_csv(data.slice(start, PG_COPY_ROWS), buf, _CSV)
                copy.write(buf.getbuffer())


_PG_FLOAT8_OID = 701


def pg_binary(data: pa.Table) -> list:
    """``data`` as PostgreSQL's binary COPY stream (a list of buffers, in order), built with numpy
    and Arrow (no Python loop per row): int32 columns, then one column of lists of float64 (what
    ``request_gaps`` holds: two keys and the gaps array), no NULLs. Why binary: a double goes over as
    its 8 bytes (exact by construction) and PostgreSQL reads an array without parsing text; the
    array literals as CSV text cost more than the 4M gap rows' CSV they replaced (float -> text for
    every gap)."""
    import numpy as np

    n, names = data.num_rows, data.schema.names
    if [f.type for f in data.schema] != [*([pa.int32()] * (len(names) - 1)), pa.list_(pa.float64())]:
        raise TypeError(f"binary COPY writes int32 columns and a last list<double> column, not {data.schema}")
    cols = [data.column(i).combine_chunks() for i in range(len(names))]
    if any(c.null_count for c in cols):
        raise ValueError("binary COPY: a column has NULLs")
    gaps = cols[-1]
    lens = pc.list_value_length(gaps).to_numpy(zero_copy_only=False).astype(np.int64)
    # per row: int16 field count, then (int32 length, int32 value) per key, then the array's length and
    # header (ndim 1, flags 0, element type float8, dimension, lower bound 1); written as int32 words
    words = np.empty((n, 2 * (len(cols) - 1) + 6), ">i4")
    for k, c in enumerate(cols[:-1]):
        words[:, 2 * k] = 4
        words[:, 2 * k + 1] = c.to_numpy()
    words[:, -6:] = np.array([0, 1, 0, _PG_FLOAT8_OID, 0, 1])
    words[:, -6] = 20 + 12 * lens
    words[:, -2] = lens
    head = np.empty((n, 1 + 2 * words.shape[1]), np.uint16)
    head[:, 0] = np.array([len(cols)], ">u2").view(np.uint16)[0]
    head[:, 1:] = words.view(np.uint16)
    values = pc.list_flatten(gaps).to_numpy(zero_copy_only=False)
    elems = np.empty((len(values), 3), np.uint32)  # per element: int32 length 8, the float8 big-endian
    elems[:, 0] = np.array([8], ">i4").view(np.uint32)[0]
    elems[:, 1:] = values.astype(">f8").view(np.uint32).reshape(-1, 2)
    width = head.itemsize * head.shape[1]
    heads = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int64) * width),
                                                         pa.py_buffer(head)])  # fmt: skip
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens * 12, out=offsets[1:])
    bodies = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(elems)])
    rows = pc.binary_join_element_wise(heads, bodies, pa.scalar(b"", pa.large_binary()))
    size = int(np.frombuffer(rows.buffers()[1], np.int64)[n]) if n else 0
    return [b"PGCOPY\n\xff\r\n\x00" + bytes(8), memoryview(rows.buffers()[2])[:size] if n else b"", b"\xff\xff"]
