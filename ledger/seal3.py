"""Seal scheme ``bench-ledger-seal/3``: artefact digests at import, a batch seal over them.

Why: a seal that costs ten times the import does not get made (issue 11: 3.4M rows imported in
2.9 s, sealed in 28.8 s at 1.7 GB). Here rows are hashed column-wise (:mod:`ledger.digest`), and
the unit is the *part*: one table's rows of one artefact, or one declared table's rows of a batch.

* **At import** every artefact stores its digest (``artefact_digest``: per captured table the row
  count, the root and the chunk digests), computed from the rows as the database holds them, in the
  import's own transaction. ``ledger verify`` recomputes it for the artefacts of open batches too,
  so a raw-SQL change there is found (table and the range of rows) even where no trigger refuses.
* **At close** the batch's declared parts (``batch`` identity, ``deployment``, ``run``,
  ``published_value``) and every artefact part are recomputed; an artefact whose rows no longer
  match its import digest is refused (R10: the batch was changed behind the ledger before close).
  ``merkle_root`` = SHA-256 of the RFC 8785 JSON of ``[[table, count, root] for the declared
  tables] + [["artefact", id, artefact digest] for its artefacts, by id]``. Per chunk, keys and
  64-bit row fingerprints go to ``seal_part`` so verify names the rows that changed.
* The seal digest, chain and seal file are those of earlier schemes (:func:`ledger.seal.seal_digest`).

An artefact digest = SHA-256 of the RFC 8785 JSON of ``[[table, count, root]]`` over
:data:`ARTEFACT_TABLES` in that order (a table of :data:`OPTIONAL_TABLES` only when the artefact has
rows in it). docs/seals.md gives the whole construction.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import weakref
import zlib
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import rfc8785
import sqlalchemy as sa
from bench_ledger import digest as dg
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.models import key_columns

T = TypeVar("T")
SCHEME = "bench-ledger-seal/3"
DECLARED_TABLES = ("batch", "deployment", "run", "published_value")
ARTEFACT_TABLES = (
    "artefact",
    "capture",
    "capture_field",
    "request",
    "chunk_gap",
    "hardware_sample",
    "log_fact",
    "request_value",
)
# Tables added after scheme 3 was defined (migration 0013): an artefact's part of such a table exists
# (in its digest, the seal's parts and seal_part) only when the artefact has rows there, so every
# digest and seal made before the table existed verifies unchanged.
OPTIONAL_TABLES = ("request_value",)
BATCH_IDENTITY = ("id", "name", "description", "deployment_id", "created_at")


def _cols(table: str) -> list[sa.Column]:
    t = m.Base.metadata.tables[table]
    return [t.c[n] for n in BATCH_IDENTITY] if table == "batch" else list(t.columns)


def _select_sql(table: str, *, batch_id: int | None = None, artefact_ids: str | None = None) -> str:
    """SQL of the rows of one table: of a batch (declared tables) or of artefacts (``artefact_ids``
    is a SQL list; artefact parts come with ``_art`` first). Not ordered: :func:`_read` checks the
    order (:func:`_sort_keys`) and sorts only when the scan did not give it. Why: the rows come back
    in stored order, which after an import is key order, and sorting 3.2M rows on the server cost
    more than the rest of reading them (DuckDB 0.5-0.6 s against 0.13-0.18 s unordered for 1.6M
    chunk gaps; PostgreSQL an external merge sort on disk)."""
    names = ", ".join(
        f'CAST(x."{c.name}" AS BIGINT) AS "{c.name}"' if dg.tag_of(c) == "i" else f'x."{c.name}"' for c in _cols(table)
    )
    b = int(batch_id) if batch_id is not None else None
    if table in DECLARED_TABLES:
        where = {
            "batch": f"x.id = {b}",
            "run": f"x.batch_id = {b}",
            "published_value": f"x.batch_id = {b} OR x.run_id IN (SELECT id FROM run WHERE batch_id = {b})",
            "deployment": (
                f"x.id IN (SELECT deployment_id FROM batch WHERE id = {b}) "
                f"OR x.id IN (SELECT deployment_id FROM run WHERE batch_id = {b}) "
                f"OR x.id IN (SELECT deployment_id FROM artefact WHERE batch_id = {b})"
            ),
        }[table]
        return f"SELECT {names} FROM {table} x WHERE {where}"
    if table == "artefact":
        return f"SELECT CAST(x.id AS BIGINT) AS _art, {names} FROM artefact x WHERE x.id IN ({artefact_ids})"
    if table == "capture_field":
        return (
            f"SELECT CAST(c.artefact_id AS BIGINT) AS _art, {names} FROM capture_field x JOIN capture c ON c.id = x.capture_id "
            f"WHERE c.artefact_id IN ({artefact_ids})"
        )
    return (
        f"SELECT CAST(x.artefact_id AS BIGINT) AS _art, {names} FROM {table} x WHERE x.artefact_id IN ({artefact_ids})"
    )


def _sort_keys(table: str, with_art: bool) -> list[str]:
    """The order of a part's rows: by artefact, then primary key (strings byte-wise, as Arrow and
    COLLATE "C" compare them)."""
    return ["_art", *key_columns(table)] if with_art else key_columns(table)


@dataclass
class Part:
    """One table's rows of one artefact (``artefact_id``) or of the batch's declared rows (None)."""

    table: str
    artefact_id: int | None
    data: pa.Table
    cols: list
    digests: list[bytes]

    @property
    def count(self) -> int:
        return self.data.num_rows

    @property
    def root(self) -> str:
        return dg.root_of(self.digests)


def _part(table: str, artefact_id: int | None, data: pa.Table) -> Part:
    tags = [dg.tag_of(c) for c in _cols(table)]
    cols = dg.columns(data, tags)
    return Part(table, artefact_id, data, cols, dg.chunk_digests(table, cols, data.num_rows))


def _read(conn: sa.Connection, backend: str, table: str, sql: str, with_art: bool) -> pa.Table:
    cols = _cols(table)
    names = [c.name for c in cols]
    tags = [dg.tag_of(c) for c in cols]
    nullable = [bool(c.nullable) for c in cols]
    if with_art:
        names, tags, nullable = ["_art", *names], ["i", *tags], [False, *nullable]
    if backend == "postgresql":
        data = dg.read_pg_columns(conn, sql, names, tags, nullable)
    else:
        data = dg.read_rows(conn, backend, sql, names, tags)
    return dg.sorted_by_key(data, _sort_keys(table, with_art))


def _read_gap_arrays(conn: sa.Connection, backend: str, artefact_ids: str) -> pa.Table:
    """The ``chunk_gap`` rows of the artefacts (a SQL list), as :func:`_read` gives them, made from the
    ``request_gaps`` arrays in Arrow (:func:`ledger.gaps.read`, then :func:`ledger.gaps.rows_of`: the
    view's rows). Why: through the view, the rows' ``seq`` cost more than reading them (DuckDB: a
    second unnest, 3-4x slower than the table it replaced; PostgreSQL: a lateral unnest, one row per
    gap on the server). Arrays not in the plain form (written behind the ledger) are read through the
    view, which gives their rows as they are."""
    arrays = gp.read(
        conn,
        backend,
        f"SELECT artefact_id, request_idx, gaps FROM request_gaps WHERE artefact_id IN ({artefact_ids})",
        ["artefact_id", "request_idx"],
    )
    if arrays is None:
        return _read(conn, backend, "chunk_gap", _select_sql("chunk_gap", artefact_ids=artefact_ids), True)
    rows = gp.rows_of(arrays)
    data = rows.add_column(0, "_art", rows.column("artefact_id"))
    return dg.sorted_by_key(data, _sort_keys("chunk_gap", True))


def declared_parts(conn: sa.Connection, backend: str, batch_id: int) -> list[Part]:
    return [_part(t, None, _read(conn, backend, t, _select_sql(t, batch_id=batch_id), False)) for t in DECLARED_TABLES]


def artefact_parts(
    conn: sa.Connection, backend: str, artefact_ids: list[int] | str, tables: tuple[str, ...] = ARTEFACT_TABLES
) -> dict[int, list[Part]]:
    """The artefact parts (of ``tables``) of the given artefacts (a list of ids, or a SQL subquery
    of them), read back from the database."""
    ids = artefact_ids if isinstance(artefact_ids, str) else ", ".join(str(int(i)) for i in artefact_ids) or "NULL"
    known = [int(i) for (i,) in conn.exec_driver_sql(f"SELECT id FROM artefact WHERE id IN ({ids}) ORDER BY id")]
    listed = ", ".join(map(str, known)) or "NULL"  # a literal list: a plain filtered scan keeps the stored order
    out: dict[int, list[Part]] = {a: [] for a in known}
    for table in tables:
        if table == "chunk_gap":
            data = _read_gap_arrays(conn, backend, listed)
        else:
            data = _read(conn, backend, table, _select_sql(table, artefact_ids=listed), True)
        body = data.drop_columns(["_art"])
        spans = spans_of(data.column("_art"))
        for a in known:
            lo, n = spans.get(a, (0, 0))
            if n or table not in OPTIONAL_TABLES:
                out[a].append(_part(table, a, body.slice(lo, n)))
    return out


def spans_of(art: pa.ChunkedArray | pa.Array) -> dict[int, tuple[int, int]]:
    """(first row, rows) of each artefact id in a column of ids sorted by artefact."""
    spans: dict[int, tuple[int, int]] = {}
    if len(art):
        runs = pc.run_end_encode(art.combine_chunks() if isinstance(art, pa.ChunkedArray) else art)
        start = 0
        for a, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
            spans[a] = (start, end - start)
            start = end
    return spans


def _span_parts(table: str, data: pa.Table, spans: dict[int, tuple[int, int]], ids) -> dict[int, HeldPart]:
    """The part of ``table`` of each artefact of ``ids`` (count and chunk digests) from ``data``, its
    rows of all of them in artefact and key order (canonical columns), encoded once: a part per
    artefact cost ~1 ms of per-column work each (3,000 parts of the benchmark's 1,000 files)."""
    cols = dg.columns(data, [dg.tag_of(c) for c in _cols(table)])
    out = {}
    for a in ids:
        lo, n = spans.get(a, (0, 0))
        out[a] = HeldPart(table, a, n, dg.chunk_digests(table, cols, n, lo))
    return out


def artefact_part_digests(
    conn: sa.Connection, backend: str, artefact_ids: list[int], tables: tuple[str, ...]
) -> dict[int, list[HeldPart]]:
    """What :func:`artefact_parts` gives an artefact digest (each part's count and chunk digests, the
    rows read back the same way), without a :class:`Part` per artefact and table."""
    known = sorted(int(i) for i in artefact_ids)
    listed = ", ".join(map(str, known)) or "NULL"
    out: dict[int, list[HeldPart]] = {a: [] for a in known}
    for table in tables:
        data = _read(conn, backend, table, _select_sql(table, artefact_ids=listed), True)
        spans = spans_of(data.column("_art"))
        with_rows = [a for a in known if a in spans or table not in OPTIONAL_TABLES]
        for a, part in _span_parts(table, data.drop_columns(["_art"]), spans, with_rows).items():
            out[a].append(part)
    return out


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
    cols = _cols(table)
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
            sql = _select_sql(table, artefact_ids=listed).replace("CAST(x.artefact_id AS BIGINT) AS _art, ", "", 1)
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
    is still hashed a slice at a time rather than read whole (a day of dmon: ~4 GB). DuckDB streams its
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
    """What :func:`artefact_parts` gives the artefacts' digests (every part's count and chunk digests,
    of the same rows read back), without holding a large table's rows: the :data:`STREAMED_TABLES` are
    read a slice at a time (:func:`_slices`, :func:`_gap_slices`) and hashed as they come
    (:class:`_ArtefactStreams`, which checks that they come in key order, artefact by artefact); where
    they do not, that table is read whole and sorted, as :func:`artefact_parts` reads it. Why: ``ledger verify`` of one day of ``nvidia-smi dmon``
    on 16 GPUs (16.6M hardware samples, one artefact) held every row at once: 4.5 GB (DuckDB). A part
    here has no rows; :func:`full_part` reads one back where a difference is to be shown. With
    ``chunks`` each streamed part also keeps its chunks' seal_part fields (what close stores)."""
    ids = artefact_ids if isinstance(artefact_ids, str) else ", ".join(str(int(i)) for i in artefact_ids) or "NULL"
    known = [int(i) for (i,) in conn.exec_driver_sql(f"SELECT id FROM artefact WHERE id IN ({ids}) ORDER BY id")]
    listed = ", ".join(map(str, known)) or "NULL"
    others = tuple(t for t in ARTEFACT_TABLES if t not in STREAMED_TABLES)
    # the other tables as artefact_parts reads them; without chunks as digests only, each table's columns
    # encoded once for all the artefacts (artefact_part_digests) rather than a Part per artefact and table
    small = (
        artefact_parts(conn, backend, known, others) if chunks else artefact_part_digests(conn, backend, known, others)
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
    whole = {t: artefact_parts(conn, backend, known, (t,)) for t, st in streams.items() if st.broken}
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
    """One table's rows of several artefacts, read in scan order, hashed as they come: a :class:`_Stream`
    per artefact (it holds less than a chunk of rows between two slices). *Broken* where the rows are not
    in key order (an artefact's rows apart, or artefacts out of ascending order): that table is then read
    whole and sorted."""

    def __init__(self, table: str, chunks: bool = False) -> None:
        cols = _cols(table)
        self.table, self.names, self.tags = table, [c.name for c in cols], [dg.tag_of(c) for c in cols]
        self.chunks = chunks
        self.done: dict[int, HeldPart] = {}
        self.current: tuple[int, _Stream] | None = None
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
                self.current = (a, _Stream(self.table, self.chunks))
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


def full_part(conn: sa.Connection, backend: str, part: Part | HeldPart) -> Part:
    """``part`` with its rows: read back whole (to name the rows that differ)."""
    if isinstance(part, Part):
        return part
    assert part.artefact_id is not None
    return artefact_parts(conn, backend, [part.artefact_id], (part.table,))[part.artefact_id][0]


def artefact_digest(parts: Sequence[Part | HeldPart]) -> str:
    items: list[Any] = [[p.table, p.count, p.root] for p in parts]
    return hashlib.sha256(rfc8785.dumps(items)).hexdigest()


def batch_root(declared: list[Part], artefacts: Mapping[int, Sequence[Part | HeldPart]]) -> str:
    items: list[Any] = [[p.table, p.count, p.root] for p in declared]
    items += [["artefact", a, artefact_digest(ps)] for a, ps in sorted(artefacts.items())]
    return hashlib.sha256(rfc8785.dumps(items)).hexdigest()


# --------------------------------------------------------------------------- stored forms


# Tables whose rows an import writes only through the bulk path (:func:`ledger.bulk.bulk_insert`),
# all in the import's own transaction: their part of the import digest is hashed from the Arrow
# tables handed to the database (:class:`HeldRows`) instead of being selected back. chunk_gap is a
# view (migration 0014): its rows are those of the request_gaps arrays handed over (ledger.gaps.rows_of).
HELD_TABLES = ("request", "chunk_gap", "hardware_sample", "request_value")

# Of those, the tables an import hands over in key order (records numbered across the runs of a file,
# gaps and values in their request's order, samples line by line with each line's counters in byte
# order): hashed as they arrive (:class:`_Stream`).
STREAMED_TABLES = ("request", "chunk_gap", "request_value", "hardware_sample")


def _feed_gap_rows(feed, arrays: pa.Table) -> None:
    """Hand the ``chunk_gap`` rows of ``request_gaps`` arrays to ``feed`` in order, a slice at a time
    (:func:`ledger.gaps.rows_in_slices`: memory)."""
    for rows in gp.rows_in_slices(arrays):
        feed(rows)


@dataclass
class HeldPart:
    """An artefact part hashed from the held rows: what its digest needs (no rows kept)."""

    table: str
    artefact_id: int
    count: int
    digests: list[bytes]
    # per chunk its seal_part fields but the seal's id (:func:`seal_part_rows`), when the stream kept them
    chunks: list[dict] | None = None

    @property
    def root(self) -> str:
        return dg.root_of(self.digests)


class _Stream:
    """The chunk digests of one table's rows, computed as the tables arrive (in key order), in the
    import's hashing thread; a table that is not in key order across the pieces is *broken* and its
    part is read back from the database instead (:func:`store_artefact_digest`)."""

    def __init__(self, table: str, chunks: bool = False) -> None:
        cols = _cols(table)
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
            self.chunks += _chunk_fields(self.table, cols, n, digests, len(self.digests))
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


class HeldRows:
    """The Arrow tables one import hands to the bulk path for :data:`HELD_TABLES`, for its artefact
    digest. Why: selecting 3.2M rows back cost PostgreSQL 68-152% of the import (COPY TO CSV and
    parsing it); hashing what is already in memory costs the same on both backends.

    The :data:`STREAMED_TABLES` are hashed as they arrive, by one thread of this import, while the
    database writes them (both drivers release the GIL, and so do Arrow's kernels and hashlib): a
    profile of the 1M-request vLLM import showed the digest of the held rows as its largest step
    (a quarter of the import on DuckDB), all of it after the last insert, with every row held until
    then. Other tables (hardware samples, unpivoted out of key order) are kept and sorted at the end.

    The digest must be of the rows as stored: every value goes in unchanged (same column types;
    DuckDB scans these Arrow columns, PostgreSQL receives their binary COPY, a float's own 8 bytes, or
    Arrow's CSV, whose floats round-trip), and
    ``ledger verify`` recomputes the digest from the database, so a difference would show there."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.tables: dict[str, list[pa.Table]] = {t: [] for t in HELD_TABLES if t not in STREAMED_TABLES}
        self.streams = {t: _Stream(t) for t in STREAMED_TABLES}
        self.rows = dict.fromkeys(HELD_TABLES, 0)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ledger-digest")
        self._work: list = []
        # an import that fails drops its HeldRows: the rows still queued are not hashed
        weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)

    def add(self, table: str, data: pa.Table) -> None:
        if table == "request_gaps":  # hashed as the chunk_gap rows its arrays are (ledger.gaps.rows_of), in the thread
            if data.num_rows:
                self.rows["chunk_gap"] += gp.count(data)
                self.rows["request_gaps"] = self.rows.get("request_gaps", 0) + data.num_rows  # the table written
                self._work.append(self._pool.submit(_feed_gap_rows, self.streams["chunk_gap"].feed, data))
            return
        if table not in self.rows or not data.num_rows:
            return
        self.rows[table] += data.num_rows
        if table in self.streams:
            self._work.append(self._pool.submit(self.streams[table].feed, data))
        else:
            self.tables[table].append(data)

    def close(self) -> None:
        """Stop hashing (the import failed, or its digest is stored)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def part(self, table: str, artefact_id: int) -> Part | HeldPart | None:
        """The part of ``table`` from the held rows (canonical columns, in key order), or None where
        the rows did not arrive in key order (then the database's rows are read)."""
        if table in self.streams:
            for done in self._work:
                done.result()  # the hashing thread's errors surface here
            self._work.clear()
            return self._pool.submit(self.streams[table].finish, artefact_id).result()
        if not self.tables[table]:  # no rows: the empty part (0.6 ms per artefact through the general path)
            return HeldPart(table, artefact_id, 0, [])
        cols = _cols(table)
        names, tags = [c.name for c in cols], [dg.tag_of(c) for c in cols]
        held = [dg.canonical(t, names, tags) for t in self.tables[table]]
        data = pa.concat_tables(held).combine_chunks() if held else dg.schema_of(names, tags).empty_table()
        ids = pc.unique(data.column("artefact_id")).to_pylist()
        if ids not in ([], [artefact_id]):
            raise ValueError(f"held {table} rows name artefacts {ids}, not only {artefact_id}")
        return _part(table, artefact_id, dg.sorted_by_key(data, key_columns(table)))


class PooledRows:
    """The :data:`STREAMED_TABLES` rows of the artefacts of one group write (several files in one
    transaction, :func:`ledger.ingest.write_artefacts`), as the pooled tables handed to the database,
    hashed per pooled table rather than per artefact: one canonical cast, one key-order check and one
    encoding of the columns, then each artefact's chunks (a span of the rows). Why: a
    :class:`HeldRows` per artefact paid its per-column work per file (3.8 s of a 25 s import of the
    benchmark's 1,000 files, profile note 17). Like HeldRows, the hashing runs in one thread of the
    import while the database writes the rows. The rows arrive in artefact order (files in order, ids
    ascending), so only the last artefact of a pooled table can go on in the next one: its rows are
    carried over. Where the rows are not in key order, every artefact's part of that table is read
    back instead (:func:`store_artefact_digests`)."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.done: dict[str, dict[int, HeldPart]] = {t: {} for t in STREAMED_TABLES}
        self.counts: dict[str, dict[int, int]] = {t: {} for t in STREAMED_TABLES}
        self.carry: dict[str, pa.Table | None] = dict.fromkeys(STREAMED_TABLES)
        self.broken: set[str] = set()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ledger-digest")
        self._work: list = []
        weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)

    def add(self, table: str, data: pa.Table) -> None:
        if not data.num_rows:
            return
        if table == "request_gaps":  # hashed as the chunk_gap rows its arrays are (ledger.gaps.rows_of), in the thread
            self._work.append(self._pool.submit(_feed_gap_rows, lambda rows: self._feed("chunk_gap", rows), data))
        else:
            self._work.append(self._pool.submit(self._feed, table, data))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _feed(self, table: str, data: pa.Table) -> None:
        cols = _cols(table)
        data = dg.canonical(data, [c.name for c in cols], [dg.tag_of(c) for c in cols])
        vc = pc.value_counts(data.column("artefact_id"))
        for a, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True):
            self.counts[table][a] = self.counts[table].get(a, 0) + n
        if table in self.broken:
            return
        if (carry := self.carry[table]) is not None:
            data = pa.concat_tables([carry, data]).combine_chunks()
        if not dg.in_key_order(data, key_columns(table)):
            self.broken.add(table)
            self.carry[table], self.done[table] = None, {}
            return
        spans = spans_of(data.column("artefact_id"))
        last = data.column("artefact_id")[-1].as_py()  # may go on in the next pooled table
        self.carry[table] = data.slice(spans[last][0])
        self.done[table].update(_span_parts(table, data, spans, [a for a in spans if a != last]))

    def parts(self, ids: list[int]) -> tuple[dict[str, dict[int, HeldPart] | None], dict[str, dict[int, int]]]:
        """Per table, the part of each of ``ids`` (None for a table whose rows were out of key order),
        and the rows of each artefact that has any."""
        for work in self._work:
            work.result()  # the hashing thread's errors surface here
        self._work.clear()
        out: dict[str, dict[int, HeldPart] | None] = {}
        for table in STREAMED_TABLES:
            if set(self.counts[table]) - set(ids):
                raise ValueError(
                    f"pooled {table} rows name artefacts {sorted(set(self.counts[table]) - set(ids))}, "
                    "not of this write"
                )
            if table in self.broken:
                out[table] = None
                continue
            if (carry := self.carry[table]) is not None:
                self.done[table].update(
                    _span_parts(
                        table, carry, spans_of(carry.column("artefact_id")), [carry.column("artefact_id")[0].as_py()]
                    )
                )
                self.carry[table] = None
            out[table] = {a: self.done[table].get(a) or HeldPart(table, a, 0, []) for a in ids}
        self.close()
        return out, self.counts


def store_artefact_digest(conn: sa.Connection, backend: str, artefact_id: int, held: HeldRows | None = None) -> str:
    """Compute and store the digest of one artefact's rows (in the import's transaction): the
    :data:`HELD_TABLES` from ``held`` when given, every other table read back (and a held table whose
    rows did not arrive in key order)."""
    if held is None:
        parts: list[Part | HeldPart] = list(artefact_parts(conn, backend, [artefact_id])[artefact_id])
        _insert_digest_rows(conn, {artefact_id: parts})
        return artefact_digest(parts)
    return store_artefact_digests(conn, backend, {artefact_id: held})[artefact_id]


def store_artefact_digests(
    conn: sa.Connection, backend: str, held: dict[int, HeldRows], pooled: PooledRows | None = None
) -> dict[int, str]:
    """:func:`store_artefact_digest` of several artefacts written in one transaction (a group of
    imported files): the tables that are not held (or whose held rows did not arrive in key order)
    are read back for all of them at once (:func:`artefact_part_digests`), and the digest rows go in
    with one statement. ``pooled``: the streamed tables' rows of all of them (:class:`PooledRows`),
    which then never went to ``held``."""
    ids = sorted(held)
    tables: dict[int, list[str]] = {}
    from_held: dict[int, dict[str, Part | HeldPart | None]] = {}
    try:
        group, pooled_counts = pooled.parts(ids) if pooled is not None else ({}, {})
        for a in ids:
            rows = held[a]
            count = {t: pooled_counts[t].get(a, 0) if t in group else rows.rows.get(t) for t in OPTIONAL_TABLES}
            tables[a] = [
                t for t in ARTEFACT_TABLES if t not in OPTIONAL_TABLES or count[t]
            ]  # an optional part only with rows
            from_held[a] = {
                t: (None if group[t] is None else group[t][a]) if t in group else rows.part(t, a)  # type: ignore[index]
                for t in tables[a]
                if t in HELD_TABLES
            }
    finally:
        for rows in held.values():
            rows.close()
        if pooled is not None:
            pooled.close()
    back = tuple(t for t in ARTEFACT_TABLES if any(t in tables[a] and from_held[a].get(t) is None for a in ids))
    read = artefact_part_digests(conn, backend, ids, back)
    parts: dict[int, list[Part | HeldPart]] = {}
    for a in ids:
        got = {p.table: p for p in read.get(a, [])}
        parts[a] = [p if (p := from_held[a].get(t)) is not None else got[t] for t in tables[a]]
    _insert_digest_rows(conn, parts, backend)
    return {a: artefact_digest(ps) for a, ps in parts.items()}


def _insert_digest_rows(conn: sa.Connection, parts: dict[int, list[Part | HeldPart]], backend: str = "") -> None:
    rows = [
        {"artefact_id": a, "table_name": p.table, "row_count": p.count, "root": p.root, "chunks": b"".join(p.digests)}
        for a, ps in parts.items()
        for p in ps
    ]
    if backend == "duckdb":  # one scan of an Arrow table: an executemany cost ~2 ms per artefact (7 rows)
        from bench_ledger.bulk import bulk_insert

        bulk_insert(
            conn,
            backend,
            "artefact_digest",
            pa.table(
                {
                    "artefact_id": pa.array([r["artefact_id"] for r in rows], pa.int32()),
                    "table_name": pa.array([r["table_name"] for r in rows], pa.string()),
                    "row_count": pa.array([r["row_count"] for r in rows], pa.int64()),
                    "root": pa.array([r["root"] for r in rows], pa.string()),
                    "chunks": pa.array([r["chunks"] for r in rows], pa.binary()),
                }
            ),
        )
        return
    conn.execute(sa.insert(m.ArtefactDigest), rows)


def _keys_blob(table: str, cols: list, lo: int, hi: int) -> bytes:
    """The chunk's primary keys: per key column its canonical values (digest encoding), zlib'd."""
    chunks = []
    for k in key_columns(table):
        c = next(c for c in cols if c.name.split(b"\x00")[0] == k.encode())
        if c.tag == "s":
            chunks.append(bytes(c.lengths[4 * lo : 4 * hi]) + bytes(c.data[c.offsets[lo] : c.offsets[hi]]))
        else:
            chunks.append(bytes(c.values[8 * lo : 8 * hi]))
    return zlib.compress(b"".join(chunks), 1)


def _chunk_fields(table: str, cols: list, n: int, digests: list[bytes], first: int = 0) -> list[dict]:
    """The seal_part fields (all but the seal and the part's names) of the chunks of ``n`` rows of
    ``cols``, numbered from ``first``: rows, digest, keys and 64-bit row fingerprints."""
    fps = memoryview(dg.fingerprints(cols, n).buffers()[1]) if n else memoryview(b"")
    out = []
    for i, d in enumerate(digests):
        lo, hi = i * dg.CHUNK, min((i + 1) * dg.CHUNK, n)
        out.append(
            {
                "chunk_no": first + i,
                "row_count": hi - lo,
                "digest": d.hex(),
                "keys": _keys_blob(table, cols, lo, hi),
                "fingerprints": bytes(fps[8 * lo : 8 * hi]),
            }
        )
    return out


def decode_keys(table: str, blob: bytes, n: int) -> list[tuple]:
    raw = zlib.decompress(blob)
    cols: list[list[Any]] = []
    pos = 0
    t = m.Base.metadata.tables[table]
    for k in key_columns(table):
        tag = dg.tag_of(t.c[k])
        if tag == "s":
            lengths = memoryview(raw)[pos : pos + 4 * n].cast("I")
            pos += 4 * n
            vals = []
            for ln in lengths:
                vals.append(raw[pos : pos + ln].decode())
                pos += ln
            cols.append(vals)
        else:
            cols.append(list(memoryview(raw)[pos : pos + 8 * n].cast("q")))
            pos += 8 * n
    return list(zip(*cols, strict=True))


@dataclass
class PartRow:
    """A stored chunk of a sealed part (``seal_part`` row)."""

    chunk_no: int
    row_count: int
    digest: bytes
    keys: bytes
    fingerprints: bytes


def seal_part_rows(seal_id: int, part: Part | HeldPart) -> list[dict]:
    """The ``seal_part`` rows of ``part``: one per chunk (a part streamed by close keeps its chunks'
    fields, :func:`artefact_digest_parts`), or one row of no chunk for an empty part."""
    if isinstance(part, Part):
        chunks = _chunk_fields(part.table, part.cols, part.count, part.digests)
    elif part.chunks is not None:
        chunks = part.chunks
    else:
        raise ValueError(f"the {part.table} part of artefact {part.artefact_id} was hashed without its seal_part rows")
    names = {"seal_id": seal_id, "table_name": part.table, "artefact_id": part.artefact_id or 0}
    rows = [{**names, **c} for c in chunks]
    if not part.digests:
        rows.append(
            {**names, "chunk_no": -1, "row_count": 0, "digest": dg.EMPTY_ROOT, "keys": b"", "fingerprints": b""}
        )
    return rows


@dataclass
class PartDiff:
    table: str
    artefact_id: int | None
    changed: list[tuple] = field(default_factory=list)
    missing: list[tuple] = field(default_factory=list)
    added: list[tuple] = field(default_factory=list)


def diff_part(part: Part, stored: list[PartRow]) -> PartDiff:
    """Name the rows of ``part`` that differ from a sealed one: by key, comparing fingerprints."""
    old: dict[tuple, int] = {}
    for r in stored:
        if r.row_count:
            fps = memoryview(r.fingerprints).cast("Q")
            for k, f in zip(decode_keys(part.table, r.keys, r.row_count), fps, strict=True):
                old[k] = int(f)
    now = dg.fingerprints(part.cols, part.count).to_pylist()
    keys = list(dg.key_tuples(part.data, key_columns(part.table)))
    d = PartDiff(part.table, part.artefact_id)
    for k, f in zip(keys, now, strict=True):
        was = old.pop(k, None)
        if was is None:
            d.added.append(k)
        elif was != f:
            d.changed.append(k)
    d.missing = list(old)
    return d


def counts_json(declared: list[Part], artefacts: Mapping[int, Sequence[Part | HeldPart]]) -> str:
    counts: dict[str, int] = {t: 0 for t in (*DECLARED_TABLES, *ARTEFACT_TABLES) if t not in OPTIONAL_TABLES}
    for p in [*declared, *(p for ps in artefacts.values() for p in ps)]:
        counts[p.table] = counts.get(p.table, 0) + p.count
    return json.dumps(counts, sort_keys=True)
