"""Column-wise digests of table rows (seal scheme ``bench-ledger-seal/3``): fast, and recomputable
from any export that keeps the values (a Parquet file read with pyarrow, for instance).

Why columns and not one JSON line per row: a canonical text per row costs as much per row in
Python as in SQL, and more than the import of the same rows (benchmarks/seal_notes.md, "Seal code").
The database hands its rows over as Arrow columns (DuckDB natively; PostgreSQL as aggregated binary
COPY, :func:`read_pg_columns`), and each chunk of 4096 rows is hashed as a few contiguous byte strings.

The encoding (docs/seals.md "Scheme 3" says the same, with a worked example):

* rows of one table in primary-key order (strings in byte order), cut into chunks of
  :data:`CHUNK` rows (the last one shorter);
* for one chunk of n rows, the bytes ``b"bench-ledger-chunk/3\\0" + table + b"\\0" + u32(n)``, then
  for every column in the table's column order: ``name + b"\\0" + tag + validity + values``,
  where ``validity`` is n bytes (1 = a value, 0 = NULL) and ``values`` by ``tag``:
  ``i`` 64-bit integers, ``b`` booleans as 0/1, ``t`` timestamps as microseconds since
  1970-01-01 (naive UTC), ``d`` dates as days since 1970-01-01 — each as n signed int64
  little-endian; ``f`` binary floats as n IEEE-754 binary64 little-endian; ``s`` text (exact
  decimals too, as their stored text) as n uint32 little-endian UTF-8 byte lengths followed by
  the n UTF-8 strings; a NULL is 0 / 0.0 / an empty string in the values;
* chunk digest = SHA-256 of those bytes; table root = SHA-256 of the concatenated 32-byte chunk
  digests (SHA-256 of nothing for an empty table).

Per-row *fingerprints* (64 bits, :func:`fingerprints`) are kept beside the seal only to name the
rows that differ; they are locators, not evidence: the chunk digests and roots are the seal.
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa
from bench_ledger import models as m

__all__ = [
    "CHUNK",
    "EMPTY_ROOT",
    "canonical",
    "chunk_digests",
    "columns",
    "fingerprints",
    "in_key_order",
    "key_tuples",
    "pg_aggregated_fields",
    "pg_copy",
    "read_pg_columns",
    "read_rows",
    "root_of",
    "schema_of",
    "sorted_by_key",
    "tag_of",
]

CHUNK = 4096
_MAGIC = b"bench-ledger-chunk/3\x00"
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()


def tag_of(col: sa.Column) -> str:
    t = col.type
    if isinstance(t, m.ExactDecimal | sa.String):
        return "s"
    if isinstance(t, sa.Boolean):
        return "b"
    if isinstance(t, sa.Float):
        return "f"
    if isinstance(t, sa.DateTime):
        return "t"
    if isinstance(t, sa.Date):
        return "d"
    if isinstance(t, sa.Integer):
        return "i"
    if isinstance(t, sa.LargeBinary):
        raise TypeError(f"column {col.name}: binary columns are not sealed")
    raise TypeError(f"column {col.name}: no seal encoding for {t!r}")


# --------------------------------------------------------------------------- reading rows


_ARROW = {
    "i": pa.int64(),
    "b": pa.bool_(),
    "f": pa.float64(),
    "t": pa.timestamp("us"),
    "d": pa.date32(),
    "s": pa.large_string(),
}


def schema_of(names: list[str], tags: list[str]) -> pa.Schema:
    """The canonical Arrow schema of columns ``names`` with seal tags ``tags``."""
    return pa.schema([(n, _ARROW[t]) for n, t in zip(names, tags, strict=True)])


def read_rows(conn: sa.Connection, backend: str, sql: str, names: list[str], tags: list[str]) -> pa.Table:
    """The rows of ``sql``, in the order the database returns them, as an Arrow table with one
    canonical type per tag."""
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    schema = schema_of(names, tags)
    if backend == "duckdb":
        data = raw.execute(sql).to_arrow_table()  # this connection: it sees the open transaction
    else:  # the general path (ordered SQL, any size); the seal reads use read_pg_columns
        buf = io.BytesIO()
        with raw.cursor() as cur:
            # exact float text and ISO timestamps, whatever the server's or the role's defaults
            cur.execute("SET LOCAL extra_float_digits = 3")
            cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
            with cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv)") as copy:
                for part in copy:
                    buf.write(part)
        if buf.tell() == 0:
            return schema.empty_table()
        buf.seek(0)
        data = pacsv.read_csv(
            buf,
            read_options=pacsv.ReadOptions(column_names=names),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            # NULL is COPY's unquoted empty field and nothing else: pyarrow's default null spellings
            # ("n/a", "null", "NA", ...) would hash a stored text "n/a" as NULL
            convert_options=pacsv.ConvertOptions(
                column_types=schema,
                strings_can_be_null=True,
                null_values=[""],
                quoted_strings_can_be_null=False,
                true_values=["t"],
                false_values=["f"],
            ),
        )
    return canonical(data, names, tags)


_PGCOPY = b"PGCOPY\n\xff\r\n\x00"  # binary COPY signature; then int32 flags and int32 header extension length
_BIG_ENDIAN = {"i": ">i8", "b": ">i8", "t": ">i8", "d": ">i8", "f": ">f8"}


def _pg_encoded(col: str, tag: str) -> str:
    """SQL of one column's values as the digest's 8-byte big-endian form (NULL as 0), or its text as UTF-8 bytes."""
    x = f'q."{col}"'
    return {
        "i": f"int8send(COALESCE(CAST({x} AS BIGINT), 0))",
        "b": f"int8send(CASE WHEN {x} THEN 1::BIGINT ELSE 0::BIGINT END)",
        "t": f"int8send(COALESCE(CAST(EXTRACT(EPOCH FROM {x}) * 1000000 AS BIGINT), 0))",
        "d": f"int8send(COALESCE(CAST({x} - DATE '1970-01-01' AS BIGINT), 0))",
        "f": f"float8send(COALESCE({x}, 0))",
        "s": f"convert_to(COALESCE(CAST({x} AS TEXT), ''), 'UTF8')",
    }[tag]


def read_pg_columns(conn: sa.Connection, sql: str, names: list[str], tags: list[str], nullable: list[bool]) -> pa.Table:
    """The rows of ``sql`` (PostgreSQL; order not needed) as an Arrow table in the rows' scan order.

    Why: PostgreSQL sends a result or a COPY one message per row, and reading chunk gaps row by row
    (plus sorting them on the server) took longer than their whole import. Here the server
    aggregates the scan into a few bytea values (``string_agg``; every aggregate of one pass sees
    the rows in the same order): one of fixed-width row records (per column a validity byte if it
    is nullable, then the 8-byte big-endian value with NULL as 0, or a text's 4-byte UTF-8 length)
    and one per text column (its UTF-8 bytes). One aggregate for all fixed-width columns rather than
    one per column: each aggregate costs the server a call per row. No GROUP BY: PostgreSQL may sort
    the rows for one (not stably; it did for request), while a plain aggregate keeps the scan order.
    Over PostgreSQL's 1 GB per value (about 30M chunk-gap records) the rows are read as CSV instead.
    The caller puts the rows in key order (they are in it after an import, so that is a check)."""
    import numpy as np

    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    pieces, fields, texts = [], [], []
    for c, (n, t, null) in enumerate(zip(names, tags, nullable, strict=True)):
        if null:
            pieces.append(f"CASE WHEN q.\"{n}\" IS NULL THEN '\\x00'::bytea ELSE '\\x01'::bytea END")
            fields.append((f"v{c}", "u1"))
        if t == "s":
            texts.append(_pg_encoded(n, t))
            pieces.append(f"int4send(octet_length({texts[-1]}))")
            fields.append((f"c{c}", ">u4"))
        else:
            pieces.append(_pg_encoded(n, t))
            fields.append((f"c{c}", _BIG_ENDIAN[t]))
    aggs = [f"string_agg({' || '.join(pieces)}, ''::bytea)", *(f"string_agg({x}, ''::bytea)" for x in texts)]
    query = f"SELECT count(*), {', '.join(aggs)} FROM ({sql}) q"
    import psycopg

    try:
        data = pg_copy(raw, query)
    except psycopg.errors.ProgramLimitExceeded:
        return read_rows(conn, "postgresql", sql, names, tags)
    return _pg_aggregated_table(memoryview(data), names, tags, nullable, np.dtype(fields))


def pg_copy(raw, query: str) -> bytes:
    """The binary COPY of ``query``'s rows (one aggregated row here), read in a plain scan in stored order."""
    with raw.transaction(), raw.cursor() as cur:  # a savepoint: a value over 1 GB fails alone
        # one plain scan from the first page: the rows in stored order (= key order after an import),
        # no parallel workers interleaving them (each would then need a sort on the client)
        cur.execute("SET LOCAL synchronize_seqscans = off")
        cur.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        with cur.copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
            return b"".join(bytes(part) for part in copy)


def pg_aggregated_fields(buf: memoryview, k: int) -> tuple[int, list[memoryview]]:
    """The row count and the ``k`` fields (count first; a NULL aggregate as no bytes) of the one row of
    ``SELECT count(*), string_agg(...), ...`` in a binary COPY stream (:func:`pg_copy`)."""
    if bytes(buf[: len(_PGCOPY)]) != _PGCOPY:
        raise ValueError("not a PostgreSQL binary COPY stream")
    pos = len(_PGCOPY) + 8 + struct.unpack_from(">i", buf, len(_PGCOPY) + 4)[0]
    fields: list[memoryview] = []
    (got,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    for _ in range(got):
        (ln,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        fields.append(buf[pos : pos + max(ln, 0)])  # -1: NULL (no rows)
        pos += max(ln, 0)
    if got != k or struct.unpack_from(">h", buf, pos)[0] != -1 or len(fields[0]) != 8:
        raise ValueError("the aggregated COPY row does not have the expected fields")
    return struct.unpack_from(">q", fields[0])[0], fields


def _pg_aggregated_table(buf: memoryview, names: list[str], tags: list[str], nullable: list[bool], record) -> pa.Table:
    """Arrow columns from the binary COPY of :func:`read_pg_columns`' one row of aggregates."""
    import numpy as np

    n, fields = pg_aggregated_fields(buf, 2 + sum(t == "s" for t in tags))
    if len(fields[1]) != n * record.itemsize:
        raise ValueError(f"{len(fields[1])} bytes of row records for {n} rows of {record.itemsize} bytes")
    rec = np.frombuffer(fields[1], record)
    text = iter(fields[2:])
    cols = []
    for c, (t, null) in enumerate(zip(tags, nullable, strict=True)):
        valid = rec[f"v{c}"] if null else None
        bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
        if t == "s":
            data = next(text)
            offsets = np.zeros(n + 1, np.int64)
            np.cumsum(rec[f"c{c}"], out=offsets[1:])
            if offsets[-1] != len(data):
                raise ValueError(f"column {names[c]}: lengths do not match the text bytes")
            arr = pa.Array.from_buffers(
                pa.large_string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(bytes(data))]
            )
        else:
            vals = rec[f"c{c}"].astype("<f8" if t == "f" else "<i8")
            if t in "bd":  # carried as int64; their canonical Arrow types are bool and date32
                arr = pa.array(vals, pa.int64()).cast(pa.int32() if t == "d" else pa.bool_())
                arr = pa.Array.from_buffers(arr.type, n, [bitmap, arr.buffers()[1]]) if bitmap is not None else arr
                arr = arr.view(pa.date32()) if t == "d" else arr
            else:
                arr = pa.Array.from_buffers(_ARROW[t], n, [bitmap, pa.py_buffer(vals)])
        cols.append(arr)
    return pa.table(cols, schema=schema_of(names, tags))


def canonical(data: pa.Table, names: list[str], tags: list[str]) -> pa.Table:
    """The columns ``names`` of ``data`` (by name if it has them all, else by position), one
    contiguous chunk each, cast to the canonical Arrow type of their tag."""
    schema = schema_of(names, tags)
    by_name = set(names) <= set(data.column_names)
    cols = []
    for i, f in enumerate(schema):
        col = data.column(f.name if by_name else i)
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        cols.append(col if col.type == f.type else col.cast(f.type))
    return pa.table(cols, schema=schema)


def in_key_order(data: pa.Table, keys: list[str]) -> bool:
    """Whether the rows are already in ascending order of ``keys`` (ties allowed), vectorised."""
    n = data.num_rows
    if n < 2:
        return True
    less, equal = None, None
    for k in keys:
        col = data.column(k)
        a, b = col.slice(0, n - 1), col.slice(1, n - 1)
        lt, eq = pc.less(a, b), pc.equal(a, b)
        less = lt if less is None else pc.or_(less, pc.and_(equal, lt))
        equal = eq if equal is None else pc.and_(equal, eq)
    return pc.all(pc.or_(less, equal), skip_nulls=False).as_py() is True  # a NULL key: not shown sorted


def sorted_by_key(data: pa.Table, keys: list[str]) -> pa.Table:
    """``data`` in ascending key order (strings in byte order, as Arrow compares them); no copy
    when it already is."""
    if in_key_order(data, keys):
        return data
    return data.take(pc.sort_indices(data, [(k, "ascending") for k in keys]))


# --------------------------------------------------------------------------- encoding


def _fixed(arr: pa.Array, width: int) -> memoryview:
    """The value buffer of a fixed-width array (no nulls), exactly its rows (Arrow is little-endian here)."""
    buf = arr.buffers()[1]
    return memoryview(buf)[width * arr.offset : width * (arr.offset + len(arr))]


@dataclass
class _Col:
    name: bytes  # column name + NUL + tag, as hashed
    tag: str
    valid: memoryview  # n bytes, 1 = a value
    values: memoryview = memoryview(b"")  # 8 bytes per row (int64 or float64 LE)
    lengths: memoryview = memoryview(b"")  # text: uint32 LE per row
    offsets: memoryview = memoryview(b"")  # text: n + 1 int64 offsets (cast 'q') into ``data``
    data: memoryview = memoryview(b"")  # text: the Arrow data buffer (UTF-8)
    arrow: pa.Array = None  # the Arrow values (fingerprints read them), always set by _column


def _column(name: str, tag: str, arr: pa.ChunkedArray | pa.Array) -> _Col:
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    valid = _fixed(pc.cast(arr.is_valid(), pa.uint8()), 1) if arr.null_count else memoryview(b"\x01" * len(arr))
    col = _Col(name.encode() + b"\x00" + tag.encode(), tag, valid, arrow=arr)
    if tag == "s":
        arr = pc.fill_null(arr, "") if arr.null_count else arr
        col.arrow = arr
        lengths = pc.cast(pc.binary_length(arr), pa.uint32())
        col.lengths = _fixed(lengths, 4)
        col.offsets = memoryview(arr.buffers()[1]).cast("q")[arr.offset : arr.offset + len(arr) + 1]
        data_buf = arr.buffers()[2]
        col.data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
        return col
    if tag == "f":
        vals = pc.fill_null(arr, 0.0) if arr.null_count else arr
    elif tag == "d":
        vals = pc.cast(pc.fill_null(pc.cast(arr, pa.int32()), 0), pa.int64())
    else:  # i, b, t
        vals = arr if arr.type == pa.int64() else pc.cast(arr, pa.int64())
        vals = pc.fill_null(vals, 0) if vals.null_count else vals
    col.values = _fixed(vals, 8)
    col.arrow = vals
    return col


def columns(data: pa.Table, tags: list[str]) -> list[_Col]:
    return [_column(n, t, data.column(n)) for n, t in zip(data.column_names, tags, strict=True)]


def chunk_digests(table: str, cols: list[_Col], n: int, start: int = 0) -> list[bytes]:
    """SHA-256 of each chunk of :data:`CHUNK` rows (module docstring) of the ``n`` rows from row
    ``start`` of ``cols`` (a part that is a span of a larger table, e.g. one artefact of a group's
    rows: the columns are encoded once for all of them)."""
    out = []
    head = _MAGIC + table.encode() + b"\x00"
    for lo in range(start, start + n, CHUNK):
        hi = min(lo + CHUNK, start + n)
        h = hashlib.sha256(head + struct.pack("<I", hi - lo))
        for c in cols:
            h.update(c.name)
            h.update(c.valid[lo:hi])
            if c.tag == "s":
                h.update(c.lengths[4 * lo : 4 * hi])
                h.update(c.data[c.offsets[lo] : c.offsets[hi]])
            else:
                h.update(c.values[8 * lo : 8 * hi])
        out.append(h.digest())
    return out


def root_of(digests: list[bytes]) -> str:
    return hashlib.sha256(b"".join(digests)).hexdigest()


# --------------------------------------------------------------------------- fingerprints (locators)

_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_NULL = 0x6E756C6C6E756C6C
_SEED = 0x9E3779B97F4A7C15


def _mix(x):
    """splitmix64's finaliser, in place on a numpy uint64 array (unsigned arithmetic wraps)."""
    import numpy as np

    x ^= x >> np.uint64(30)
    x *= np.uint64(_M1)
    x ^= x >> np.uint64(27)
    x *= np.uint64(_M2)
    x ^= x >> np.uint64(31)
    return x


def fingerprints(cols: list[_Col], n: int) -> pa.Array:
    """A 64-bit fingerprint of every row (uint64 array): only to find which rows differ.

    h = SEED; per column h = mix(h ^ mix(v + len(name))), v the value's 8 bytes as uint64 (an
    integer's two's complement, a float's bits), BLAKE2b-64 (little-endian) of a text's UTF-8, or
    NULL_WORD for a NULL. Computed in place with numpy (Arrow's kernels allocate per step)."""
    import numpy as np

    h = np.full(n, _SEED, np.uint64)
    for c in cols:
        if c.tag == "s":
            enc = c.arrow.dictionary_encode()
            words = np.array(
                [
                    int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                    for w in enc.dictionary.to_pylist()
                ],
                np.uint64,
            )
            idx = enc.indices.to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
            vals = words[idx] if n else np.zeros(0, np.uint64)
        else:
            vals = np.frombuffer(c.values, "<u8").copy() if n else np.zeros(0, np.uint64)
        if n and (valid := np.frombuffer(c.valid, np.uint8)).min() == 0:
            vals[valid == 0] = np.uint64(_NULL)
        vals += np.uint64(len(c.name))
        h ^= _mix(vals)
        _mix(h)
    return pa.array(h, pa.uint64())


def key_tuples(data: pa.Table, keys: list[str]) -> Iterator[tuple]:
    cols = [data.column(k).to_pylist() for k in keys]
    return zip(*cols, strict=True)
