"""Declared rows kept tamper-evident while their batch is open (issue 39, R10).

A declared row (:data:`ledger.guards.DECLARED_TABLES`) is corrected by a new revision; the ledger
changes one in place only to fill in what it did not know (an import's run learning its settings, a
launch's server log, a close). On PostgreSQL, triggers refuse any other change (migration 0018). DuckDB
1.x has none, so there the ledger keeps, at every write, the SHA-256 of each declared row it wrote
(``declared_digest``: the leaf hash of :func:`ledger.encoding.rows.row_bytes` of the row, every column), and
``ledger verify`` recomputes them: a row changed, deleted or added behind the ledger is named (table
and id), and ``ledger close`` refuses to seal such a row of its batch. A row without a digest (written
before migration 0018, or inserted behind the ledger) is said to be unchecked, never passed in silence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.guards import DECLARED_TABLES

__all__ = ["DeclaredCheck", "check", "keep", "row_digests"]

_IN_LIST = 10_000  # ids per IN list
DD = m.DeclaredDigest


def row_digests(conn: sa.Connection, table: str, ids: Iterable[int] | None = None) -> dict[int, str]:
    """id -> SHA-256 (hex) of each row of ``table`` (of ``ids``, or every row), as stored now."""
    # here, not at the top: the seal package (which this module's check serves at close) loads this one
    from bench_ledger.encoding.rows import row_bytes

    names = [c.name for c in m.Base.metadata.tables[table].columns]
    base: sa.Select = sa.select(*[sa.column(n) for n in names]).select_from(
        sa.table(table)
    )  # untyped: the stored values
    wanted = None if ids is None else sorted(set(ids))
    stmts = (
        [base]
        if wanted is None
        else [base.where(sa.column("id").in_(wanted[i : i + _IN_LIST])) for i in range(0, len(wanted), _IN_LIST)]
    )
    out: dict[int, str] = {}
    at = names.index("id")
    for stmt in stmts:
        for raw in conn.execute(stmt):
            out[int(raw[at])] = hashlib.sha256(b"\x00" + row_bytes(table, names, raw)).hexdigest()
    return out


def keep(conn: sa.Connection, written: dict[str, set[int]]) -> None:
    """Store the digests of the declared rows this transaction wrote (``written``: table -> ids), in it."""
    for table in DECLARED_TABLES:
        ids = sorted(written.get(table, ()))
        if not ids:
            continue
        now = row_digests(conn, table, ids)
        for i in range(0, len(ids), _IN_LIST):
            conn.execute(sa.delete(DD).where(DD.table_name == table, DD.row_id.in_(ids[i : i + _IN_LIST])))
        if now:
            conn.execute(
                sa.insert(DD), [{"table_name": table, "row_id": k, "sha256": v} for k, v in sorted(now.items())]
            )


@dataclass
class DeclaredCheck:
    """Declared rows against the digests the ledger kept: what differs, and what could not be checked."""

    problems: list[str] = field(default_factory=list)  # changed or deleted behind the ledger
    unchecked: list[str] = field(default_factory=list)  # rows without a digest, and why
    rows: int = 0  # rows compared

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unchecked


def _ids(ids: list[int], limit: int = 20) -> str:
    shown = ", ".join(f"id={i}" for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def check(conn: sa.Connection, only: Mapping[str, Iterable[int]] | None = None) -> DeclaredCheck:
    """Every declared row (or those of ``only``: table -> ids) against its kept digest."""
    out = DeclaredCheck()
    any_digest = conn.execute(sa.select(DD.row_id).limit(1)).first() is not None
    for table in DECLARED_TABLES:
        if only is not None and table not in only:
            continue
        wanted = None if only is None else set(only[table])
        now = row_digests(conn, table, wanted)
        stmt = sa.select(DD.row_id, DD.sha256).where(DD.table_name == table)
        kept = {int(k): v for k, v in conn.execute(stmt) if wanted is None or k in wanted}
        out.rows += len(now)
        changed = sorted(k for k in now.keys() & kept.keys() if now[k] != kept[k])
        gone = sorted(kept.keys() - now.keys())
        new = sorted(now.keys() - kept.keys())
        if changed:
            out.problems.append(
                f"table {table}: {len(changed)} row(s) changed behind the ledger since it wrote them: {_ids(changed)}"
            )
        if gone:
            out.problems.append(f"table {table}: {len(gone)} row(s) deleted behind the ledger: {_ids(gone)}")
        if new:
            why = (
                "the ledger keeps none from before migration 0018: these rows were written before it"
                if not any_digest
                else "added behind the ledger, or written before migration 0018"
            )
            out.unchecked.append(
                f"table {table}: {len(new)} row(s) have no digest ({why}), so they cannot be "
                f"compared with what the ledger wrote: {_ids(new)}"
            )
    return out
