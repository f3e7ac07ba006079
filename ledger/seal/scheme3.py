"""Seal scheme ``bench-ledger-seal/3``: artefact digests at import, a batch seal over them.

Why: a seal that costs many times the import does not get made (issue 11; benchmarks/seal_notes.md).
Here rows are hashed column-wise (:mod:`ledger.encoding.chunks`), and the unit is the *part*: one table's
rows of one artefact, or one declared table's rows of a batch.

* **At import** every artefact stores its digest (``artefact_digest``: per captured table the row
  count, the root and the chunk digests), computed from the rows as the database holds them, in the
  import's own transaction (:mod:`ledger.seal.import_digests`). ``ledger verify`` recomputes it for
  the artefacts of open batches too, so a raw-SQL change there is found (table and the range of rows)
  even where no trigger refuses.
* **At close** the batch's declared parts (``batch`` identity, ``deployment``, ``run``,
  ``published_value``) and every artefact part are recomputed; an artefact whose rows no longer
  match its import digest is refused (R10: the batch was changed behind the ledger before close).
  ``merkle_root`` = SHA-256 of the RFC 8785 JSON of ``[[table, count, root] for the declared
  tables] + [["artefact", id, artefact digest] for its artefacts, by id]``. Per chunk, keys and
  64-bit row fingerprints go to ``seal_part`` (:mod:`ledger.seal.part_rows`) so verify names the rows
  that changed.
* The seal digest, chain and seal file are those of earlier schemes
  (:func:`ledger.seal.scheme2.seal_digest`).

An artefact digest = SHA-256 of the RFC 8785 JSON of ``[[table, count, root]]`` over
:data:`ARTEFACT_TABLES` in that order (a table of :data:`OPTIONAL_TABLES` only when the artefact has
rows in it). docs/seals.md gives the whole construction.

This module reads parts whole (a table's rows of the artefacts at once); :mod:`ledger.seal.streams`
reads the large tables a slice at a time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import rfc8785
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.encoding import chunks as dg
from bench_ledger.models import key_columns
from bench_ledger.seal.scheme2 import BATCH_IDENTITY

__all__ = [
    "ARTEFACT_TABLES",
    "DECLARED_TABLES",
    "OPTIONAL_TABLES",
    "SCHEME",
    "HeldPart",
    "Part",
    "artefact_digest",
    "artefact_part_digests",
    "artefact_parts",
    "batch_root",
    "counts_json",
    "declared_parts",
    "full_part",
    "part_key",
    "part_of",
    "select_sql",
    "span_parts",
    "spans_of",
    "table_columns",
]

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


def table_columns(table: str) -> list[sa.Column]:
    t = m.Base.metadata.tables[table]
    return [t.c[n] for n in BATCH_IDENTITY] if table == "batch" else list(t.columns)


def select_sql(table: str, *, batch_id: int | None = None, artefact_ids: str | None = None) -> str:
    """SQL of the rows of one table: of a batch (declared tables) or of artefacts (``artefact_ids``
    is a SQL list; artefact parts come with ``_art`` first). Not ordered: :func:`_read` checks the
    order (:func:`_sort_keys`) and sorts only when the scan did not give it. Why: the rows come back
    in stored order, which after an import is key order, and sorting millions of rows on the server
    cost more than the rest of reading them (PostgreSQL: an external merge sort on disk)."""
    names = ", ".join(
        f'CAST(x."{c.name}" AS BIGINT) AS "{c.name}"' if dg.tag_of(c) == "i" else f'x."{c.name}"'
        for c in table_columns(table)
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
            f"SELECT CAST(c.artefact_id AS BIGINT) AS _art, {names} FROM capture_field x "
            f"JOIN capture c ON c.id = x.capture_id "
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


@dataclass
class HeldPart:
    """An artefact part hashed from the held rows: what its digest needs (no rows kept)."""

    table: str
    artefact_id: int
    count: int
    digests: list[bytes]
    # per chunk its seal_part fields but the seal's id (part_rows.seal_part_rows), when the stream kept them
    chunks: list[dict] | None = None

    @property
    def root(self) -> str:
        return dg.root_of(self.digests)


def part_of(table: str, artefact_id: int | None, data: pa.Table) -> Part:
    tags = [dg.tag_of(c) for c in table_columns(table)]
    cols = dg.columns(data, tags)
    return Part(table, artefact_id, data, cols, dg.chunk_digests(table, cols, data.num_rows))


def _read(conn: sa.Connection, backend: str, table: str, sql: str, with_art: bool) -> pa.Table:
    cols = table_columns(table)
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
    second unnest; PostgreSQL: a lateral unnest, one row per gap on the server). Arrays not in the
    plain form (written behind the ledger) are read through the view, which gives their rows as they are."""
    arrays = gp.read(
        conn,
        backend,
        f"SELECT artefact_id, request_idx, gaps FROM request_gaps WHERE artefact_id IN ({artefact_ids})",
        ["artefact_id", "request_idx"],
    )
    if arrays is None:
        return _read(conn, backend, "chunk_gap", select_sql("chunk_gap", artefact_ids=artefact_ids), True)
    rows = gp.rows_of(arrays)
    data = rows.add_column(0, "_art", rows.column("artefact_id"))
    return dg.sorted_by_key(data, _sort_keys("chunk_gap", True))


def declared_parts(conn: sa.Connection, backend: str, batch_id: int) -> list[Part]:
    return [part_of(t, None, _read(conn, backend, t, select_sql(t, batch_id=batch_id), False)) for t in DECLARED_TABLES]


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
            data = _read(conn, backend, table, select_sql(table, artefact_ids=listed), True)
        body = data.drop_columns(["_art"])
        spans = spans_of(data.column("_art"))
        for a in known:
            lo, n = spans.get(a, (0, 0))
            if n or table not in OPTIONAL_TABLES:
                out[a].append(part_of(table, a, body.slice(lo, n)))
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


def span_parts(table: str, data: pa.Table, spans: dict[int, tuple[int, int]], ids) -> dict[int, HeldPart]:
    """The part of ``table`` of each artefact of ``ids`` (count and chunk digests) from ``data``, its
    rows of all of them in artefact and key order (canonical columns), encoded once (a part per
    artefact paid the per-column work once per artefact)."""
    cols = dg.columns(data, [dg.tag_of(c) for c in table_columns(table)])
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
        data = _read(conn, backend, table, select_sql(table, artefact_ids=listed), True)
        spans = spans_of(data.column("_art"))
        with_rows = [a for a in known if a in spans or table not in OPTIONAL_TABLES]
        for a, part in span_parts(table, data.drop_columns(["_art"]), spans, with_rows).items():
            out[a].append(part)
    return out


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


def counts_json(declared: list[Part], artefacts: Mapping[int, Sequence[Part | HeldPart]]) -> str:
    counts: dict[str, int] = {t: 0 for t in (*DECLARED_TABLES, *ARTEFACT_TABLES) if t not in OPTIONAL_TABLES}
    for p in [*declared, *(p for ps in artefacts.values() for p in ps)]:
        counts[p.table] = counts.get(p.table, 0) + p.count
    return json.dumps(counts, sort_keys=True)


def part_key(p: Part | HeldPart) -> str:
    """The part's key in the seal row's per-part roots: ``table`` (declared) or ``table@artefact``."""
    return p.table if p.artefact_id is None else f"{p.table}@{p.artefact_id}"
