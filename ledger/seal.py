"""Seal schemes 1 and 2 (before migration 0011): canonical JSON rows, a Merkle root, chained (R10).

New seals use scheme 3 (:mod:`ledger.seal3`); this module verifies the older ones and keeps what
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

2. **Canonical row.** ``JCS([table, {column: value, ...}])``, every column of the table, JCS being
   RFC 8785 JSON (UTF-8, keys sorted, no whitespace). Values: NULL -> ``null``; booleans ->
   ``true``/``false``; strings as stored; exact decimals (``ExactDecimal``) as their stored text;
   integers as JSON numbers when |i| < 2**53, else as their decimal string (I-JSON cannot carry
   nanosecond epoch times as numbers); binary floats (DOUBLE) as ``repr(float)`` text (the shortest
   string that round-trips, e.g. ``"0.1"``), never their bytes; timestamps as ISO 8601 text with
   microseconds (``"2026-07-07T09:39:20.000000"``, naive UTC), dates as ``YYYY-MM-DD``.
   Because every value is then a string, a safe integer, a boolean or null and every key is
   ASCII, Python's C JSON encoder (``sort_keys``, compact, ``ensure_ascii=False``) produces exactly
   the bytes of ``rfc8785.dumps``; it is used for speed (~4x) and checked against ``rfc8785`` on
   the first row of every chunk of 4096 rows (a difference aborts the seal).

3. **Merkle tree** (RFC 9162 section 2.1.1): leaf = ``SHA-256(0x00 || row)``, node =
   ``SHA-256(0x01 || left || right)``, MTH of n > 1 leaves splits at the largest power of two
   smaller than n; the empty tree is ``SHA-256("")``. One tree over all rows of the batch in the
   order above gives ``merkle_root``; one tree per table gives the per-table roots kept in the seal
   row to find which table changed.

4. **Seal digest.** ``SHA-256(JCS(["bench-ledger-seal/2", previous, batch_name, merkle_root,
   row_count, closed_at]))`` with ``previous`` the digest of the ledger's latest seal before this
   one (64 zeros for the first), the root as lowercase hex, the count as a JSON number and
   ``closed_at`` as in 2. The chain makes rewriting an old seal visible in every later one.

Rows are streamed (a batch may hold a million requests): only per-chunk leaf hashes and keys are
kept, which is also what the ``seal_chunk`` table stores so `ledger verify` can name rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import rfc8785
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import IntegrityError
from bench_ledger.models import key_columns

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
_SAFE_INT = 2**53
_sha256 = hashlib.sha256


# --------------------------------------------------------------------------- Merkle tree (RFC 9162)


def leaf_hash(row: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + row).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class MerkleStream:
    """RFC 9162 Merkle Tree Hash computed leaf by leaf in O(log n) memory.

    Complete subtrees are kept on a stack (largest first); folding them right to left at the end
    gives exactly MTH with the largest-power-of-two split.
    """

    __slots__ = ("_stack", "count")

    def __init__(self) -> None:
        self._stack: list[bytes] = []  # roots of complete subtrees; sizes are the bits of count
        self.count = 0

    def add(self, leaf: bytes) -> None:
        n = self.count
        stack = self._stack
        h = leaf
        while n & 1:  # each trailing 1 bit of the count is a complete subtree of equal size: merge
            h = _sha256(b"\x01" + stack.pop() + h).digest()
            n >>= 1
        stack.append(h)
        self.count += 1

    def root(self) -> bytes:
        if not self._stack:
            return hashlib.sha256(b"").digest()
        acc = self._stack[-1]
        for h in reversed(self._stack[:-1]):
            acc = node_hash(h, acc)
        return acc


def merkle_root(leaves: list[bytes]) -> bytes:
    """The recursive definition of RFC 9162, for tests of :class:`MerkleStream`."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


# --------------------------------------------------------------------------- canonical rows


def _int(v: int | None) -> int | str | None:
    if v is None or -_SAFE_INT < v < _SAFE_INT:
        return v
    return str(v)


def _float(v: float | None) -> str | None:
    return None if v is None else repr(float(v))


def _stamp(v: datetime | date | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.isoformat(timespec="microseconds")
    return v.isoformat()


def _converter(col: sa.Column) -> Callable[[Any], Any] | None:
    t = col.type
    if isinstance(t, m.ExactDecimal):
        return None  # selected untyped: the stored exact text
    if isinstance(t, sa.Float):
        return _float
    if isinstance(t, sa.DateTime | sa.Date):
        return _stamp
    if isinstance(t, sa.BigInteger):
        return _int  # 32-bit integers are always inside the I-JSON range
    return None


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def row_bytes(table: str, names: list[str], stored: Sequence[Any]) -> bytes:
    """:func:`canonical` of one row of ``table`` as selected untyped (its columns ``names``, in order)."""
    t = m.Base.metadata.tables[table]
    vals = [v if (f := _converter(t.c[n])) is None else f(v) for n, v in zip(names, stored, strict=True)]
    return _ENCODER.encode([table, dict(zip(names, vals, strict=True))]).encode()


def canonical(table: str, row: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of ``[table, row]`` for rows already converted (see module docstring)."""
    return _ENCODER.encode([table, row]).encode()


def canonical_checked(table: str, row: dict[str, Any]) -> bytes:
    data = canonical(table, row)
    if data != rfc8785.dumps([table, row]):
        raise IntegrityError(f"canonical form of a {table} row differs from rfc8785: {row!r:.200}")
    return data


# --------------------------------------------------------------------------- which rows


def batch_rows(table: str, batch_id: int, backend: str, *, all_columns: bool = False) -> tuple[sa.Select, list[str]]:
    """The rows of ``table`` that belong to batch ``batch_id``, in seal order, and their column names
    (``all_columns``: the batch row with status, closed_at and seal_digest too, as an export keeps it)."""
    return _select(table, batch_id, backend, all_columns=all_columns)


def _select(table: str, batch_id: int, backend: str, *, all_columns: bool = False) -> tuple[sa.Select, list[str]]:
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
    stmt, names = _select(table, batch_id, backend)
    t = m.Base.metadata.tables[table]
    convs = [(i, f) for i, n in enumerate(names) if (f := _converter(t.c[n])) is not None]
    key_pos = [names.index(k) for k in key_columns(table)]
    sha = _sha256
    encode = _ENCODER.encode
    result = conn.execute(stmt, execution_options={"yield_per": CHUNK})  # this statement only
    n = 0
    for part in result.partitions():
        for raw in part:
            vals = list(raw)
            for i, f in convs:
                vals[i] = f(vals[i])
            row = dict(zip(names, vals))
            first = n % CHUNK == 0
            data = canonical_checked(table, row) if first else encode([table, row]).encode()
            yield [vals[i] for i in key_pos], sha(b"\x00" + data).digest(), first
            n += 1


# --------------------------------------------------------------------------- a batch's digest


@dataclass
class Chunk:
    table: str
    chunk_no: int
    keys: list[list]
    leaves: bytearray


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
    chunks: list[Chunk] = field(default_factory=list)

    def counts_json(self) -> str:
        return json.dumps({t: d.count for t, d in self.tables.items()}, sort_keys=True)

    def roots_json(self) -> str:
        return json.dumps({t: d.root for t, d in self.tables.items()}, sort_keys=True)


def compute(
    conn: sa.Connection,
    backend: str,
    batch_id: int,
    *,
    keep_chunks: bool = False,
    tables: tuple[str, ...] = TABLE_ORDER,
) -> BatchDigest:
    """Stream every row of the batch once; the whole-batch root and one root per table."""
    whole = MerkleStream()
    out = BatchDigest(root="", count=0, tables={})
    for table in tables:
        per = MerkleStream()
        chunk: Chunk | None = None
        chunk_no = 0
        for key, leaf, first in table_leaves(conn, backend, batch_id, table):
            whole.add(leaf)
            per.add(leaf)
            if keep_chunks:
                if first:
                    chunk = Chunk(table, chunk_no, [], bytearray())
                    out.chunks.append(chunk)
                    chunk_no += 1
                assert chunk is not None
                chunk.keys.append(key)
                chunk.leaves += leaf
        out.tables[table] = TableDigest(table, per.count, per.root().hex())
    out.root, out.count = whole.root().hex(), whole.count
    return out


def seal_digest(
    previous: str, batch_name: str, root: str, count: int, closed_at: datetime, scheme: str = SCHEME
) -> str:
    """Step 4 of the module docstring."""
    data = rfc8785.dumps([scheme, previous, batch_name, root, count, _stamp(closed_at)])
    return hashlib.sha256(data).hexdigest()
