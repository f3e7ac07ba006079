"""Artefact digests (seal scheme 3): stored at import, in the import's own transaction, and compared
with the rows at ``ledger close`` and ``ledger verify``.

The tables an import writes through the bulk path are hashed from the Arrow tables it hands to the
database (:class:`PooledRows`, one file's or a group's) instead of being selected back; every other
table is read back (:mod:`ledger.seal.scheme3`).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.encoding import chunks as dg
from bench_ledger.models import key_columns
from bench_ledger.seal.scheme3 import (
    ARTEFACT_TABLES,
    OPTIONAL_TABLES,
    HeldPart,
    Part,
    artefact_part_digests,
    full_part,
    spans_of,
    table_columns,
)
from bench_ledger.seal.streams import STREAMED_TABLES
from sqlalchemy.orm import Session

__all__ = [
    "HELD_TABLES",
    "PooledRows",
    "artefact_digest_rows",
    "import_digest_problems",
    "stored_digests",
]

# Tables whose rows an import writes only through the bulk path (:func:`ledger.ingest.bulk.bulk_insert`),
# all in the import's own transaction: their part of the import digest is hashed from the Arrow
# tables handed to the database (:class:`PooledRows`) instead of being selected back. chunk_gap is a
# view (migration 0014): its rows are those of the request_gaps arrays handed over (ledger.gaps.rows_of).
HELD_TABLES = ("request", "chunk_gap", "hardware_sample", "request_value")


def _feed_gap_rows(feed, arrays: pa.Table) -> None:
    """Hand the ``chunk_gap`` rows of ``request_gaps`` arrays to ``feed`` in order, a slice at a time
    (:func:`ledger.gaps.rows_in_slices`: memory)."""
    for rows in gp.rows_in_slices(arrays):
        feed(rows)


@dataclass
class _Open:
    """The artefact whose rows of a table may go on in the next table handed over: its rows and chunk digests
    so far, and the rows after its last whole chunk (fewer than :data:`ledger.seal.chunks.CHUNK`)."""

    artefact_id: int
    count: int = 0
    digests: list[bytes] = field(default_factory=list)
    carry: pa.Table | None = None


class PooledRows:
    """The :data:`HELD_TABLES` rows one import write hands to the bulk path (one file, or a group of files in one
    transaction, :func:`ledger.ingest.writer.write_artefacts`), hashed for each artefact's digest as they arrive.
    Why: selecting the rows back cost PostgreSQL about as much as the import itself (COPY TO CSV and parsing it);
    hashing what is already in memory costs the same on both backends.

    Each table handed over is hashed once for all the artefacts it holds: one canonical cast, one key-order check
    and one encoding of the columns, then each artefact's chunks (a span of the rows): a part per artefact paid
    its per-column work per file (benchmarks/profile_notes.md, note 17). The hashing runs in one thread of the
    import while the database writes the rows (both drivers release the GIL, and so do Arrow's kernels and
    hashlib), so no table's rows wait for the end of the import. The rows arrive in artefact order (files in
    order, ids ascending), so only the last artefact of a table can go on in the next one: its rows after its
    last whole chunk are carried over. Where a table's rows are not in key order, every artefact's part of that
    table is read back instead (:func:`artefact_digest_rows`).

    The digest must be of the rows as stored: every value goes in unchanged (same column types; DuckDB scans
    these Arrow columns, PostgreSQL receives their binary COPY, a float's own 8 bytes, or Arrow's CSV, whose
    floats round-trip), and ``ledger verify`` recomputes the digest from the database, so a difference would
    show there."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.done: dict[str, dict[int, HeldPart]] = {t: {} for t in STREAMED_TABLES}
        self.counts: dict[str, dict[int, int]] = {t: {} for t in STREAMED_TABLES}
        self.written: set[str] = set()  # the tables handed over with rows, by the name written (request_gaps)
        self.open: dict[str, _Open | None] = dict.fromkeys(STREAMED_TABLES)
        self.last: dict[str, tuple | None] = dict.fromkeys(STREAMED_TABLES)  # the key of the last row seen
        self.broken: set[str] = set()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ledger-digest")
        self._work: list = []
        # an import that fails drops its PooledRows: the rows still queued are not hashed
        weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)

    def add(self, table: str, data: pa.Table) -> None:
        if not data.num_rows:
            return
        if table == "request_gaps":  # hashed as the chunk_gap rows its arrays are (ledger.gaps.rows_of), in the thread
            self.written.add(table)
            self._work.append(self._pool.submit(_feed_gap_rows, lambda rows: self._feed("chunk_gap", rows), data))
        elif table in self.counts:
            self.written.add(table)
            self._work.append(self._pool.submit(self._feed, table, data))

    def close(self) -> None:
        """Stop hashing (the import failed, or its digest is stored)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _feed(self, table: str, data: pa.Table) -> None:
        cols = table_columns(table)
        tags = [dg.tag_of(c) for c in cols]
        data = dg.canonical(data, [c.name for c in cols], tags)
        counts = self.counts[table]
        keys = key_columns(table)  # artefact_id first: rows in key order are in artefact spans
        if table not in self.broken:
            first = tuple(data.column(k)[0].as_py() for k in keys)
            last = self.last[table]
            if not dg.in_key_order(data, keys) or (last is not None and first < last):
                self.broken.add(table)
                self.open[table], self.done[table] = None, {}
        if table in self.broken:  # the rows of each artefact, counted (its part is read back)
            vc = pc.value_counts(data.column("artefact_id"))
            for a, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True):
                counts[a] = counts.get(a, 0) + n
            return
        self.last[table] = tuple(data.column(k)[-1].as_py() for k in keys)
        spans = spans_of(data.column("artefact_id"))
        for a, (_, n) in spans.items():
            counts[a] = counts.get(a, 0) + n
        encoded = dg.columns(data, tags)
        ids = list(spans)
        for i, a in enumerate(ids):
            lo, n = spans[a]
            ends = i < len(ids) - 1  # another artefact follows: this one's rows end here
            op = self.open[table]
            if op is not None and op.artefact_id != a:
                self._finish(table, tags)
                op = None
            if op is None:
                op = self.open[table] = _Open(a)
            op.count += n
            if op.carry is not None:  # complete the chunk begun by the last table
                take = min(dg.CHUNK - op.carry.num_rows, n)
                head = pa.concat_tables([op.carry, data.slice(lo, take)]).combine_chunks()
                op.carry, lo, n = None, lo + take, n - take
                if head.num_rows < dg.CHUNK and not ends:
                    op.carry = head
                    continue
                op.digests += dg.chunk_digests(table, dg.columns(head, tags), head.num_rows)
            whole = n if ends else n - n % dg.CHUNK
            if whole:
                op.digests += dg.chunk_digests(table, encoded, whole, lo)
            if whole < n:
                op.carry = data.slice(lo + whole, n - whole)
            if ends:
                self._finish(table, tags)

    def _finish(self, table: str, tags: list[str]) -> None:
        """The part of the open artefact of ``table``: its rows end."""
        op = self.open[table]
        if op is None:
            return
        if op.carry is not None:
            op.digests += dg.chunk_digests(table, dg.columns(op.carry, tags), op.carry.num_rows)
        self.done[table][op.artefact_id] = HeldPart(table, op.artefact_id, op.count, op.digests)
        self.open[table] = None

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
            self._finish(table, [dg.tag_of(c) for c in table_columns(table)])
            out[table] = {a: self.done[table].get(a) or HeldPart(table, a, 0, []) for a in ids}
        self.close()
        return out, self.counts


def artefact_digest_rows(conn: sa.Connection, backend: str, ids: list[int], pooled: PooledRows) -> list[dict]:
    """The ``artefact_digest`` rows of each artefact ``ids`` written in this transaction (one imported file, or a
    group of them), which the import stores in it (:mod:`ledger.ingest.writer`, one statement): the
    :data:`HELD_TABLES` from ``pooled`` (the rows handed to the bulk path); the other tables, and a held table
    whose rows did not arrive in key order, are read back for all of them at once
    (:func:`ledger.seal.scheme3.artefact_part_digests`)."""
    ids = sorted(ids)
    tables: dict[int, list[str]] = {}
    from_held: dict[int, dict[str, Part | HeldPart | None]] = {}
    try:
        group, counts = pooled.parts(ids)
        for a in ids:
            count = {t: counts[t].get(a, 0) for t in OPTIONAL_TABLES}
            tables[a] = [
                t for t in ARTEFACT_TABLES if t not in OPTIONAL_TABLES or count[t]
            ]  # an optional part only with rows
            from_held[a] = {t: None if (held := group[t]) is None else held[a] for t in tables[a] if t in HELD_TABLES}
    finally:
        pooled.close()
    back = tuple(t for t in ARTEFACT_TABLES if any(t in tables[a] and from_held[a].get(t) is None for a in ids))
    read = artefact_part_digests(conn, backend, ids, back)
    parts: dict[int, list[Part | HeldPart]] = {}
    for a in ids:
        got = {p.table: p for p in read.get(a, [])}
        parts[a] = [p if (p := from_held[a].get(t)) is not None else got[t] for t in tables[a]]
    return [
        {"artefact_id": a, "table_name": p.table, "row_count": p.count, "root": p.root, "chunks": b"".join(p.digests)}
        for a, ps in parts.items()
        for p in ps
    ]


# --------------------------------------------------------------------------- compared at close and verify


def stored_digests(s: Session, artefact_ids: list[int]) -> dict[tuple[int, str], m.ArtefactDigest]:
    if not artefact_ids:
        return {}
    rows = s.scalars(sa.select(m.ArtefactDigest).where(m.ArtefactDigest.artefact_id.in_(artefact_ids)))
    return {(r.artefact_id, r.table_name): r for r in rows}


def import_digest_problems(
    s: Session,
    conn: sa.Connection,
    backend: str,
    arts: Mapping[int, Sequence[Part | HeldPart]],
    unchecked: list[str] | None = None,
) -> list[str]:
    """Each artefact part against the digest its import stored: what differs (table, rows: a part that
    differs is read back whole to name them, :func:`ledger.seal.scheme3.full_part`).

    An artefact with no stored digest at all cannot be compared: it goes to ``unchecked`` (with
    why) when given, else it is a problem too -- never skipped in silence (fail closed)."""
    stored = stored_digests(s, list(arts))
    out: list[str] = []
    for a, parts in arts.items():
        if not any((a, p.table) in stored for p in parts):
            (out if unchecked is None else unchecked).append(_no_digest(s, a))
            continue
        for p in parts:
            st = stored.get((a, p.table))
            if st is None:
                out.append(f"artefact {a}: no import digest for table {p.table}")
            elif (st.row_count, st.root) != (p.count, p.root):
                out.append(f"artefact {a}, table {p.table}: " + _chunk_ranges(full_part(conn, backend, p), st))
    return out


def _no_digest(s: Session, artefact_id: int) -> str:
    art = s.get(m.Artefact, artefact_id)
    what = (
        f"artefact {artefact_id}"
        if art is None
        else f"artefact {artefact_id} ({art.file_name}, imported {art.imported_at:%Y-%m-%d %H:%M:%S} UTC)"
    )
    return (
        f"{what}: no import digest is stored for it (artefacts imported before migration 0011 have none; "
        "otherwise its artefact_digest rows were deleted), so its rows cannot be compared with what was imported"
    )


def _chunk_ranges(p: Part, st: m.ArtefactDigest) -> str:
    """Which rows differ from the import digest, as ranges of rows in key order (chunks of 4096)."""
    old = [st.chunks[i : i + 32] for i in range(0, len(st.chunks), 32)]
    bad = [
        i
        for i in range(max(len(old), len(p.digests)))
        if i >= len(old) or i >= len(p.digests) or old[i] != p.digests[i]
    ]
    keys = key_columns(p.table)
    shown = []
    for i in bad[:3]:
        lo, hi = i * dg.CHUNK, min((i + 1) * dg.CHUNK, p.count) - 1
        if lo > hi:
            shown.append(f"rows from {lo} on (gone)")
            continue
        first = [p.data.column(k)[lo].as_py() for k in keys]
        last = [p.data.column(k)[hi].as_py() for k in keys]
        fmt = lambda v: "(" + ", ".join(f"{c}={x}" for c, x in zip(keys, v, strict=True)) + ")"  # noqa: E731
        shown.append(f"rows {fmt(first)} … {fmt(last)}")
    counts = "" if st.row_count == p.count else f"{st.row_count:,} rows at import, {p.count:,} now; "
    return f"{counts}{len(bad)} chunk(s) of {dg.CHUNK} rows differ from the import digest: " + ", ".join(shown)
