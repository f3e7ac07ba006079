"""Canonical row bytes and the RFC 9162 Merkle tree of seal schemes 1 and 2 (and of the declared
rows' digests, :mod:`ledger.declared`).

A canonical row is ``JCS([table, {column: value, ...}])``, every column of the table, JCS being
RFC 8785 JSON (UTF-8, keys sorted, no whitespace). Values: NULL -> ``null``; booleans ->
``true``/``false``; strings as stored; exact decimals (``ExactDecimal``) as their stored text;
integers as JSON numbers when |i| < 2**53, else as their decimal string (I-JSON cannot carry
nanosecond epoch times as numbers); binary floats (DOUBLE) as ``repr(float)`` text (the shortest
string that round-trips, e.g. ``"0.1"``), never their bytes; timestamps as ISO 8601 text with
microseconds (``"2026-07-07T09:39:20.000000"``, naive UTC), dates as ``YYYY-MM-DD``.
Because every value is then a string, a safe integer, a boolean or null and every key is
ASCII, Python's C JSON encoder (``sort_keys``, compact, ``ensure_ascii=False``) produces exactly
the bytes of ``rfc8785.dumps``; it is used for speed and checked against ``rfc8785`` on the first
row of every chunk (:func:`canonical_checked`; a difference aborts the seal).

Merkle tree (RFC 9162 section 2.1.1): leaf = ``SHA-256(0x00 || row)``, node =
``SHA-256(0x01 || left || right)``, MTH of n > 1 leaves splits at the largest power of two
smaller than n; the empty tree is ``SHA-256("")``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

import rfc8785
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import IntegrityError

__all__ = [
    "ENCODER",
    "MerkleStream",
    "canonical",
    "canonical_checked",
    "converter",
    "node_hash",
    "row_bytes",
    "stamp",
]

_SAFE_INT = 2**53
_sha256 = hashlib.sha256


# --------------------------------------------------------------------------- Merkle tree (RFC 9162)


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


# --------------------------------------------------------------------------- canonical rows


def _int(v: int | None) -> int | str | None:
    if v is None or -_SAFE_INT < v < _SAFE_INT:
        return v
    return str(v)


def _float(v: float | None) -> str | None:
    return None if v is None else repr(float(v))


def stamp(v: datetime | date | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.isoformat(timespec="microseconds")
    return v.isoformat()


def converter(col: sa.Column) -> Callable[[Any], Any] | None:
    t = col.type
    if isinstance(t, m.ExactDecimal):
        return None  # selected untyped: the stored exact text
    if isinstance(t, sa.Float):
        return _float
    if isinstance(t, sa.DateTime | sa.Date):
        return stamp
    if isinstance(t, sa.BigInteger):
        return _int  # 32-bit integers are always inside the I-JSON range
    return None


ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def row_bytes(table: str, names: list[str], stored: Sequence[Any]) -> bytes:
    """:func:`canonical` of one row of ``table`` as selected untyped (its columns ``names``, in order)."""
    t = m.Base.metadata.tables[table]
    vals = [v if (f := converter(t.c[n])) is None else f(v) for n, v in zip(names, stored, strict=True)]
    return ENCODER.encode([table, dict(zip(names, vals, strict=True))]).encode()


def canonical(table: str, row: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of ``[table, row]`` for rows already converted (see the module docstring)."""
    return ENCODER.encode([table, row]).encode()


def canonical_checked(table: str, row: dict[str, Any]) -> bytes:
    data = canonical(table, row)
    if data != rfc8785.dumps([table, row]):
        raise IntegrityError(f"canonical form of a {table} row differs from rfc8785: {row!r:.200}")
    return data
