"""Scheme-3 parts of the large tables hashed a slice at a time, as the rows come: at import (the
tables handed to the database, :class:`Stream`), and at close and verify (read back by ranges of rows,
:func:`artefact_digest_parts`), so no table's rows are all held at once.

Why: ``ledger verify`` of one day of ``nvidia-smi dmon`` on 16 GPUs (16.6M hardware samples, one
artefact) held every row at once when each part was read whole (:mod:`ledger.seal.scheme3`), many
gigabytes (benchmarks/seal_notes.md).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Generator, Iterator, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.encoding import chunks as dg
from bench_ledger.models import key_columns
from bench_ledger.seal import scheme3
from bench_ledger.seal.part_rows import chunk_fields
from bench_ledger.seal.scheme3 import ARTEFACT_TABLES, OPTIONAL_TABLES, HeldPart, Part, table_columns

__all__ = ["SLICE_ROWS", "STREAMED_TABLES", "Stream", "artefact_digest_parts"]

T = TypeVar("T")

# The tables an import hands over in key order (records numbered across the runs of a file, gaps and
# values in their request's order, samples line by line with each line's counters in byte order):
# hashed as they arrive (:class:`Stream`), and at close and verify read back a slice at a time.
STREAMED_TABLES = ("request", "chunk_gap", "request_value", "hardware_sample")

# Rows of a table a streamed read holds at a time (:func:`artefact_digest_parts`): on PostgreSQL a range
# of heap pages of about that many rows, on DuckDB its record batches.
SLICE_ROWS = 1 << 20


def _pg_page_ranges(conn: sa.Connection, table: str, rows_per_page: int = 64) -> Iterator[str]:
    """PostgreSQL: conditions on ``x.ctid`` that cut ``table``'s heap into ranges of pages of about
    :data:`SLICE_ROWS` rows, in page order (each a TID range scan of its pages only), the last one open-ended."""
    pages = (
        conn.exec_driver_sql(f"SELECT pg_relation_size('{table}') / current_setting('block_size')::int").scalar() or 0
    )
    step, lo = max(1, SLICE_ROWS // rows_per_page), 0
    while lo + step < pages:
        yield f"x.ctid >= '({lo},0)'::tid AND x.ctid < '({lo + step},0)'::tid"
        lo += step
    yield f"x.ctid >= '({lo},0)'::tid"


def _duck_batches(conn: sa.Connection, sql: str, rows: int) -> Iterator[pa.Table]:
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection always has its driver connection
    for batch in raw.execute(sql).to_arrow_reader(rows):  # this connection: it sees the open transaction
        yield pa.Table.from_batches([batch])


def _slices(conn: sa.Connection, backend: str, table: str, sql: str, heap: str | None = None) -> Iterator[pa.Table]:
    """The rows of ``sql`` (``table``'s columns, from ``heap`` (default ``table``) as ``x``, ``{range}`` where a
    slice's condition goes), canonical, in scan order, a slice at a time: DuckDB's record batches of its one
    result; PostgreSQL's by ranges of heap pages (:func:`_pg_page_ranges`), each read as
    :func:`dg.read_pg_columns` reads, all in the caller's transaction (verify's is REPEATABLE READ: every
    slice sees the same rows)."""
    cols = table_columns(table)
    names, tags, nullable = [c.name for c in cols], [dg.tag_of(c) for c in cols], [bool(c.nullable) for c in cols]
    if backend == "duckdb":
        for data in _duck_batches(conn, sql.format(range="TRUE"), SLICE_ROWS):
            yield dg.canonical(data, names, tags)
        return
    for cond in _pg_page_ranges(conn, heap or table):
        data = dg.read_pg_columns(conn, sql.format(range=cond), names, tags, nullable)
        if data.num_rows:
            yield data


class _NotPlain(Exception):
    """The gap arrays are not all in the plain form :func:`ledger.gaps.read` reads."""


def _gap_slices(conn: sa.Connection, backend: str, sql: str, heap: str = "request_gaps") -> Iterator[pa.Table]:
    """The ``request_gaps`` rows of ``sql`` (from ``heap`` as ``x``) as :func:`ledger.gaps.read` gives them, a
    slice at a time."""
    keys = ["artefact_id", "request_idx"]
    if backend == "duckdb":
        for t in _duck_batches(conn, sql.format(range="TRUE"), max(1, SLICE_ROWS // 8)):
            yield pa.Table.from_arrays(
                [*(t.column(k).cast(pa.int64()) for k in keys), t.column("gaps").cast(pa.list_(pa.float64()))],
                names=[*keys, "gaps"],
            )
        return
    for cond in _pg_page_ranges(conn, heap, rows_per_page=16):
        data = gp.read(conn, backend, sql.format(range=cond), keys)
        if data is None:
            raise _NotPlain
        if data.num_rows:
            yield data


def _streamed_slices(
    conn: sa.Connection, backend: str, listed: str, tables: Sequence[str], ordered: bool = False
) -> Iterator[tuple[str, pa.Table | None]]:
    """Each of ``tables`` (of the :data:`STREAMED_TABLES`) of the artefacts ``listed`` in turn, a slice at a
    time: (table, slice), in stored order, or with ``ordered`` in key order (:func:`_in_key_order`); (table,
    None) where the rows cannot be read so (gap arrays not all in their plain form; no key-ordered copy)."""
    for table in tables:
        if table == "chunk_gap":
            source, sql = (
                "request_gaps",
                f"SELECT x.artefact_id, x.request_idx, x.gaps FROM request_gaps x WHERE x.artefact_id IN ({listed})",
            )
        else:
            source = table
            sql = scheme3.select_sql(table, artefact_ids=listed).replace(
                "CAST(x.artefact_id AS BIGINT) AS _art, ", "", 1
            )
        with (
            _in_key_order(conn, backend, source, sql)
            if ordered
            else contextlib.nullcontext((source, sql + " AND {range}")) as read
        ):
            if read is None:
                yield table, None
            elif table == "chunk_gap":
                try:
                    for arrays in _gap_slices(conn, backend, read[1], read[0]):
                        yield table, arrays
                except _NotPlain:
                    yield table, None
            else:
                for data in _slices(conn, backend, table, read[1], read[0]):
                    yield table, data


@contextlib.contextmanager
def _in_key_order(conn: sa.Connection, backend: str, source: str, sql: str) -> Iterator[tuple[str, str] | None]:
    """The rows of ``sql`` (over ``source`` as ``x``) sorted by the database into ``source``'s key order, to
    be read a slice at a time: (the heap to cut into page ranges, the SQL with ``{range}``). For a table
    whose stored order is not key order (rows moved behind the ledger; on PostgreSQL an import's rows
    put into space that vacuum freed ahead of earlier artefacts' rows, after a rolled-back import), so it
    is still hashed a slice at a time rather than read whole (a day of dmon is gigabytes). DuckDB streams its
    sorted result; PostgreSQL writes it sorted into a temporary table (a new heap holds the rows in the
    order written), read by ranges of its pages and dropped after (with its savepoint where the reads stop
    early). None where PostgreSQL refuses that table (a read-only transaction, no TEMPORARY privilege): the
    caller reads the table whole."""
    order = ", ".join(
        f'x."{k}"'
        + (' COLLATE "C"' if backend == "postgresql" and dg.tag_of(m.Base.metadata.tables[source].c[k]) == "s" else "")
        for k in key_columns(source)
    )
    if backend == "duckdb":
        yield source, f"{sql} AND {{range}} ORDER BY {order}"
        return
    heap = f"_ledger_key_order_{next(_temp_names)}"
    conn.exec_driver_sql(f"SAVEPOINT {heap}")
    try:
        conn.exec_driver_sql(f"CREATE TEMPORARY TABLE {heap} AS {sql} ORDER BY {order}")
    except sa.exc.DBAPIError:
        conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {heap}")
        yield None
        return
    try:
        yield heap, f"SELECT * FROM {heap} x WHERE {{range}}"
    except BaseException:  # the reads stopped (an error, or the caller closed them): the table goes with its savepoint
        with contextlib.suppress(sa.exc.DBAPIError):  # in a failed transaction: its rollback drops the table
            conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {heap}")
        raise
    conn.exec_driver_sql(f"DROP TABLE {heap}")
    conn.exec_driver_sql(f"RELEASE SAVEPOINT {heap}")


_temp_names = itertools.count()


def _read_ahead(items: Iterator[T]) -> Generator[T, None, None]:
    """``items`` in order, the next one made in a thread while the caller works on this one (at most one
    ahead). Closed (or exhausted), it returns only once that thread has stopped."""
    from concurrent.futures import ThreadPoolExecutor

    end = object()
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        ahead = pool.submit(next, items, end)
        while (item := ahead.result()) is not end:
            ahead = pool.submit(next, items, end)
            yield item  # type: ignore[misc]


def artefact_digest_parts(
    conn: sa.Connection, backend: str, artefact_ids: list[int] | str, chunks: bool = False
) -> dict[int, list[Part | HeldPart]]:
    """What :func:`ledger.seal.scheme3.artefact_parts` gives the artefacts' digests (every part's count
    and chunk digests, of the same rows read back), without holding a large table's rows: the
    :data:`STREAMED_TABLES` are read a slice at a time (:func:`_slices`, :func:`_gap_slices`) and hashed
    as they come (:class:`_ArtefactStreams`, which checks that they come in key order, artefact by
    artefact); where they do not, that table is read whole and sorted, as ``artefact_parts`` reads it.
    A part here has no rows; :func:`ledger.seal.scheme3.full_part` reads one back where a difference is
    to be shown. With ``chunks`` each streamed part also keeps its chunks' seal_part fields (what close
    stores)."""
    ids = artefact_ids if isinstance(artefact_ids, str) else ", ".join(str(int(i)) for i in artefact_ids) or "NULL"
    known = [int(i) for (i,) in conn.exec_driver_sql(f"SELECT id FROM artefact WHERE id IN ({ids}) ORDER BY id")]
    listed = ", ".join(map(str, known)) or "NULL"
    others = tuple(t for t in ARTEFACT_TABLES if t not in STREAMED_TABLES)
    # the other tables as artefact_parts reads them; without chunks as digests only, each table's columns
    # encoded once for all the artefacts (artefact_part_digests) rather than a Part per artefact and table
    small = (
        scheme3.artefact_parts(conn, backend, known, others)
        if chunks
        else scheme3.artefact_part_digests(conn, backend, known, others)
    )
    streams = {t: _ArtefactStreams(t, chunks) for t in STREAMED_TABLES}
    # the next slice is read in a thread while this one is hashed (the drivers, hashlib and zlib release
    # the GIL); only that thread uses the connection until the reads end
    unreadable: set[str] = set()  # tables that cannot be read a slice at a time: read whole, below

    def hash_slices(tables: Sequence[str], ordered: bool) -> None:
        with contextlib.closing(_read_ahead(_streamed_slices(conn, backend, listed, tables, ordered))) as slices:
            for table, data in slices:
                st = streams[table]
                if data is None:
                    st.broken = True
                    unreadable.add(table)
                elif table == "chunk_gap":
                    for rows in gp.rows_in_slices(data):
                        st.feed(rows)
                else:
                    st.feed(data)

    hash_slices(STREAMED_TABLES, ordered=False)
    # a table not stored in key order: hashed again from the start, its rows sorted by the database
    if unordered := [t for t, st in streams.items() if st.broken and t not in unreadable]:
        streams.update({t: _ArtefactStreams(t, chunks) for t in unordered})
        hash_slices(unordered, ordered=True)
    whole = {t: scheme3.artefact_parts(conn, backend, known, (t,)) for t, st in streams.items() if st.broken}
    out: dict[int, list[Part | HeldPart]] = {a: [] for a in known}
    for table in ARTEFACT_TABLES:
        for a in known:
            if table not in STREAMED_TABLES:
                out[a] += [q for q in small[a] if q.table == table]
            elif table in whole:
                out[a] += whole[table][a]
            elif (got := streams[table].part(a)).count or table not in OPTIONAL_TABLES:
                out[a].append(got)
    return out


class _ArtefactStreams:
    """One table's rows of several artefacts, read in scan order, hashed as they come: a :class:`Stream`
    per artefact (it holds less than a chunk of rows between two slices). *Broken* where the rows are not
    in key order (an artefact's rows apart, or artefacts out of ascending order): that table is then read
    whole and sorted."""

    def __init__(self, table: str, chunks: bool = False) -> None:
        cols = table_columns(table)
        self.table, self.names, self.tags = table, [c.name for c in cols], [dg.tag_of(c) for c in cols]
        self.chunks = chunks
        self.done: dict[int, HeldPart] = {}
        self.current: tuple[int, Stream] | None = None
        self.broken = False

    def feed(self, data: pa.Table) -> None:
        if self.broken or not data.num_rows:
            return
        data = dg.canonical(data, self.names, self.tags)
        runs = pc.run_end_encode(data.column("artefact_id").combine_chunks())
        ids, ends = runs.values.to_pylist(), runs.run_ends.to_pylist()
        start = 0
        for a, end in zip(ids, ends, strict=True):
            if self.current is not None and self.current[0] != a:
                if a < self.current[0]:
                    self.broken = True
                    return
                self._finish()
            if self.current is None:
                self.current = (a, Stream(self.table, self.chunks))
            self.current[1].feed(data.slice(start, end - start))
            if self.current[1].broken:
                self.broken = True
                return
            start = end

    def _finish(self) -> None:
        assert self.current is not None
        a, stream = self.current
        part = stream.finish(a)
        assert part is not None  # not broken: checked after each feed
        self.done[a] = part
        self.current = None

    def part(self, artefact_id: int) -> HeldPart:
        if self.current is not None:
            self._finish()
        return self.done.get(artefact_id) or HeldPart(self.table, artefact_id, 0, [], [] if self.chunks else None)


class Stream:
    """The chunk digests of one table's rows, computed as the tables arrive (in key order), in the
    import's hashing thread; a table that is not in key order across the pieces is *broken* and its
    part is read back from the database instead (:func:`ledger.seal.import_digests.artefact_digest_rows`)."""

    def __init__(self, table: str, chunks: bool = False) -> None:
        cols = table_columns(table)
        self.table, self.names, self.tags = table, [c.name for c in cols], [dg.tag_of(c) for c in cols]
        self.keys = key_columns(table)
        self.digests: list[bytes] = []
        self.chunks: list[dict] | None = [] if chunks else None  # seal_part fields per chunk (close)
        self.count = 0
        self.carry: pa.Table | None = None  # the rows after the last whole chunk (< dg.CHUNK)
        self.last: tuple | None = None  # the key of the last row seen
        self.artefacts: set[int] = set()
        self.broken = False

    def feed(self, data: pa.Table) -> None:
        if self.broken or data.num_rows == 0:
            return
        data = dg.canonical(data, self.names, self.tags)
        first = tuple(data.column(k)[0].as_py() for k in self.keys)
        if not dg.in_key_order(data, self.keys) or (self.last is not None and first < self.last):
            self.broken, self.carry, self.digests = True, None, []
            return
        self.last = tuple(data.column(k)[-1].as_py() for k in self.keys)
        lo, hi = pc.min_max(data.column("artefact_id")).values()
        self.artefacts.update({lo.as_py(), hi.as_py()})
        self.count += data.num_rows
        if self.carry is not None:  # complete the chunk begun by the last table
            need = dg.CHUNK - self.carry.num_rows
            head = pa.concat_tables([self.carry, data.slice(0, need)]).combine_chunks()
            data = data.slice(need)
            self.carry = None
            if head.num_rows < dg.CHUNK:
                self.carry = head
                return
            self._hash(head)
        whole = data.num_rows - data.num_rows % dg.CHUNK
        if whole:
            self._hash(data.slice(0, whole))
        if whole < data.num_rows:
            self.carry = data.slice(whole)

    def _hash(self, data: pa.Table) -> None:
        cols, n = dg.columns(data, self.tags), data.num_rows
        digests = dg.chunk_digests(self.table, cols, n)
        if self.chunks is not None:
            self.chunks += chunk_fields(self.table, cols, n, digests, len(self.digests))
        self.digests += digests

    def finish(self, artefact_id: int) -> HeldPart | None:
        if self.broken:
            return None
        if self.carry is not None:
            self._hash(self.carry)
            self.carry = None
        if self.artefacts - {artefact_id}:
            raise ValueError(f"held {self.table} rows name artefacts {sorted(self.artefacts)}, not only {artefact_id}")
        return HeldPart(self.table, artefact_id, self.count, self.digests, self.chunks)
