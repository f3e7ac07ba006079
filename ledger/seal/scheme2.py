"""Seal schemes 1 and 2 (before migration 0011): every row of a batch as canonical JSON, one
Merkle root, chained (R10).

New seals use scheme 3 (:mod:`ledger.seal.scheme3`); this module verifies the older ones and keeps what
every scheme shares: the seal digest (:func:`seal_digest`) and the chain's zero digest.

Why: a closed batch must stay exactly as it was closed, and *anyone* must be able to check that,
including where the database cannot refuse a change (DuckDB 1.x has no triggers). A digest kept
outside the database (the seal file) is what makes a change by someone with write access visible.

The construction (scheme ``bench-ledger-seal/2``; docs/seals.md says the same, with examples):

1. **Rows.** The rows that belong to batch B, table by table in this fixed order
   (:data:`TABLE_ORDER`), each table ordered by its primary key (strings in byte order, ``COLLATE
   "C"`` on PostgreSQL):

   ``batch`` (its identity fields only: id, name, description, deployment_id, created_at; status,
   closed_at and seal_digest are what closing changes), ``deployment`` (the system under test: every
   deployment the batch, its runs or its artefacts name), ``run`` (batch_id = B, every revision),
   ``capture`` (of those runs), ``capture_field`` (of those captures), ``artefact`` (batch_id = B),
   ``request``, ``chunk_gap``, ``hardware_sample``, ``log_fact`` (artefact in B),
   ``published_value`` (batch_id = B or run in B).

2. **Canonical row**, as :mod:`ledger.encoding.rows` gives it, checked against ``rfc8785`` on the
   first row of every chunk of 4096 rows.

3. **Merkle tree** (:class:`ledger.encoding.rows.MerkleStream`): one tree over all rows of the batch
   in the order above gives ``merkle_root``; one tree per table gives the per-table roots kept in the
   seal row to find which table changed.

4. **Seal digest.** ``SHA-256(JCS(["bench-ledger-seal/2", previous, batch_name, merkle_root,
   row_count, closed_at]))`` with ``previous`` the digest of the ledger's latest seal before this
   one (64 zeros for the first), the root as lowercase hex, the count as a JSON number and
   ``closed_at`` as in 2. The chain makes rewriting an old seal visible in every later one.

Rows are streamed (a batch may hold a million requests): only per-chunk leaf hashes and keys are
kept, which is also what the ``seal_chunk`` table stores so `ledger verify` can name rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.encoding import rows as enc
from bench_ledger.models import key_columns

__all__ = [
    "BATCH_IDENTITY",
    "SCHEME",
    "TABLES_OF_SCHEME",
    "TABLE_ORDER",
    "ZERO_DIGEST",
    "BatchDigest",
    "batch_rows",
    "compute",
    "seal_digest",
    "table_leaves",
]

SCHEME = "bench-ledger-seal/2"
ZERO_DIGEST = "0" * 64
CHUNK = 4096
TABLE_ORDER = (
    "batch",
    "deployment",
    "run",
    "capture",
    "capture_field",
    "artefact",
    "request",
    "chunk_gap",
    "hardware_sample",
    "log_fact",
    "published_value",
)
# Scheme 1 (seals made before the deployment was covered) had the same rows without ``deployment``.
TABLES_OF_SCHEME = {"bench-ledger-seal/1": tuple(t for t in TABLE_ORDER if t != "deployment"), SCHEME: TABLE_ORDER}
BATCH_IDENTITY = ("id", "name", "description", "deployment_id", "created_at")


# --------------------------------------------------------------------------- which rows


def batch_rows(table: str, batch_id: int, backend: str, *, all_columns: bool = False) -> tuple[sa.Select, list[str]]:
    """The rows of ``table`` that belong to batch ``batch_id``, in seal order, and their column names
    (``all_columns``: the batch row with status, closed_at and seal_digest too, as an export keeps it)."""
    t = m.Base.metadata.tables[table]
    names = list(BATCH_IDENTITY) if table == "batch" and not all_columns else [c.name for c in t.columns]
    col = sa.column
    runs: sa.Select[Any] = sa.select(col("id")).select_from(sa.table("run")).where(col("batch_id") == batch_id)
    arts: sa.Select[Any] = sa.select(col("id")).select_from(sa.table("artefact")).where(col("batch_id") == batch_id)
    caps: sa.Select[Any] = sa.select(col("id")).select_from(sa.table("capture")).where(col("run_id").in_(runs))
    where = {
        "batch": col("id") == batch_id,
        "run": col("batch_id") == batch_id,
        "capture": col("run_id").in_(runs),
        "capture_field": col("capture_id").in_(caps),
        "artefact": col("batch_id") == batch_id,
        "deployment": sa.or_(
            col("id").in_(sa.select(col("deployment_id")).select_from(sa.table("batch")).where(col("id") == batch_id)),
            col("id").in_(
                sa.select(col("deployment_id")).select_from(sa.table("run")).where(col("batch_id") == batch_id)
            ),
            col("id").in_(
                sa.select(col("deployment_id")).select_from(sa.table("artefact")).where(col("batch_id") == batch_id)
            ),
        ),
        "published_value": sa.or_(col("batch_id") == batch_id, col("run_id").in_(runs)),
    }.get(table, col("artefact_id").in_(arts))
    order = []
    for c in t.primary_key.columns:
        expr: sa.ColumnElement[Any] = sa.column(c.name)
        if backend == "postgresql" and isinstance(c.type, sa.String):
            expr = sa.collate(expr, "C")
        order.append(expr)
    stmt: sa.Select[*tuple[Any, ...]] = (
        sa.select(*[sa.column(n) for n in names]).select_from(sa.table(table)).where(where).order_by(*order)
    )
    return stmt, names


def table_leaves(conn: sa.Connection, backend: str, batch_id: int, table: str) -> Iterator[tuple[list, bytes, bool]]:
    """(primary key, leaf hash, first of a chunk) of every row of ``table`` in batch order."""
    stmt, names = batch_rows(table, batch_id, backend)
    t = m.Base.metadata.tables[table]
    convs = [(i, f) for i, n in enumerate(names) if (f := enc.converter(t.c[n])) is not None]
    key_pos = [names.index(k) for k in key_columns(table)]
    sha = hashlib.sha256
    encode = enc.ENCODER.encode
    result = conn.execute(stmt, execution_options={"yield_per": CHUNK})  # this statement only
    n = 0
    for part in result.partitions():
        for raw in part:
            vals = list(raw)
            for i, f in convs:
                vals[i] = f(vals[i])
            row = dict(zip(names, vals))
            first = n % CHUNK == 0
            data = enc.canonical_checked(table, row) if first else encode([table, row]).encode()
            yield [vals[i] for i in key_pos], sha(b"\x00" + data).digest(), first
            n += 1


@dataclass
class TableDigest:
    table: str
    count: int
    root: str


@dataclass
class BatchDigest:
    root: str
    count: int
    tables: dict[str, TableDigest]


def compute(conn: sa.Connection, backend: str, batch_id: int, *, tables: tuple[str, ...] = TABLE_ORDER) -> BatchDigest:
    """Stream every row of the batch once; the whole-batch root and one root per table."""
    whole = enc.MerkleStream()
    out = BatchDigest(root="", count=0, tables={})
    for table in tables:
        per = enc.MerkleStream()
        for _key, leaf, _first in table_leaves(conn, backend, batch_id, table):
            whole.add(leaf)
            per.add(leaf)
        out.tables[table] = TableDigest(table, per.count, per.root().hex())
    out.root, out.count = whole.root().hex(), whole.count
    return out


def seal_digest(
    previous: str, batch_name: str, root: str, count: int, closed_at: datetime, scheme: str = SCHEME
) -> str:
    """Step 4 of the module docstring (every scheme's seal digest; scheme 3 passes its own name)."""
    data = rfc8785.dumps([scheme, previous, batch_name, root, count, enc.stamp(closed_at)])
    return hashlib.sha256(data).hexdigest()
