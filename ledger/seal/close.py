"""Closing a batch (R10): lock it, compare its artefacts with their import digests, seal it (scheme 3),
chain the seal and write the seal file, in one transaction.

Why: closing is the only write that touches the rows of a batch after they were recorded: a closed
batch stays exactly as it was sealed (:mod:`ledger.seal.scheme3` says how the seal is built).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.declared import check as check_declared
from bench_ledger.errors import Refused
from bench_ledger.seal import part_rows, scheme2, scheme3, sealfile, streams
from bench_ledger.seal.import_digests import import_digest_problems
from bench_ledger.store import Ledger, now
from sqlalchemy.orm import Session

__all__ = ["SealResult", "batch_parts", "close_batch"]


@dataclass
class SealResult:
    batch: str
    digest: str
    merkle_root: str
    row_count: int
    previous_digest: str
    closed_at: datetime
    tables: dict[str, int]
    scheme: str
    seal_file: Path | None = None
    # artefacts sealed as found: no import digest to compare their rows with first (and why)
    unchecked: list[str] = field(default_factory=list)

    def as_line(self) -> dict[str, Any]:
        """The JSON object appended to a seal file (one line per closed batch)."""
        return {
            "scheme": self.scheme,
            "batch": self.batch,
            "digest": self.digest,
            "merkle_root": self.merkle_root,
            "row_count": self.row_count,
            "previous_digest": self.previous_digest,
            "closed_at": self.closed_at.isoformat(timespec="microseconds"),
            "tables": self.tables,
        }


_CHAIN_LOCK = 0x6C6564676572  # PostgreSQL advisory lock key of the seal chain head ("ledger")


def _lock_for_close(s: Session, backend: str, name: str) -> m.Batch:
    """The batch row, locked against imports and corrections, and the seal chain head locked against
    other closes, until this transaction ends (PostgreSQL: advisory + row lock; DuckDB: one writer
    per file, so a second process cannot even open the ledger while this one writes)."""
    if backend == "postgresql":
        s.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _CHAIN_LOCK})
    return Ledger.get_batch(s, name, lock="update")


def close_batch(ledger: Ledger, name: str, seal_file: Path | None = None) -> SealResult:
    """Seal and close a batch in one transaction.

    The batch and the seal chain are locked first (:func:`_lock_for_close`), so no import commits
    into the batch while its seal is computed and no other close forks the chain. With
    ``seal_file``, the seal line is written (temporary file, fsync, rename) *before* the commit:
    if it cannot be written nothing is closed, and if the commit fails the file is put back.
    """
    if seal_file is not None:
        sealfile.check_writable(seal_file)
    written: bytes | None | bool = False
    try:
        with ledger.session() as s:
            batch = _lock_for_close(s, ledger.backend, name)
            if batch.status == "closed":
                raise Refused(
                    "R10",
                    f"close batch {name!r} again",
                    f"it was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC",
                    "nothing to do; `ledger verify` checks its seal",
                )
            last = s.scalar(sa.select(m.Seal).order_by(m.Seal.id.desc()).limit(1))
            previous = last.digest if last else scheme2.ZERO_DIGEST
            closed_at = now()
            conn = s.connection()
            declared, arts = batch_parts(
                conn, ledger.backend, batch.id, chunks=True
            )  # chunks' seal_part fields, not rows
            unchecked: list[str] = []
            changed = import_digest_problems(s, conn, ledger.backend, arts, unchecked)
            if ledger.backend == "duckdb":  # no triggers: the declared rows against the digests the ledger kept
                rows = check_declared(conn, {p.table: p.data.column("id").to_pylist() for p in declared})
                changed += rows.problems
                unchecked += [f"declared rows: {u}" for u in rows.unchecked]
            if changed:
                raise Refused(
                    "R10",
                    f"close batch {name!r}",
                    "rows changed behind the ledger since their import: " + "; ".join(changed[:5]),
                    "find them with `ledger verify`; import the data again into a new batch",
                )
            root = scheme3.batch_root(declared, arts)
            parts = [*declared, *(p for ps in arts.values() for p in ps)]
            count = sum(p.count for p in parts)
            digest = scheme2.seal_digest(previous, name, root, count, closed_at, scheme3.SCHEME)
            seal = m.Seal(
                batch_id=batch.id,
                digest=digest,
                merkle_root=root,
                row_count=count,
                previous_digest=previous,
                closed_at=closed_at,
                table_counts=scheme3.counts_json(declared, arts),
                table_roots=_part_roots_json(parts),
                scheme=scheme3.SCHEME,
            )
            s.add(seal)
            s.flush()
            conn.execute(
                sa.insert(m.SealPart), [r for p in parts for r in part_rows.seal_part_rows(seal.id, p)]
            )  # one statement
            batch.status, batch.closed_at, batch.seal_digest = "closed", closed_at, digest
            result = SealResult(
                name,
                digest,
                root,
                count,
                previous,
                closed_at,
                json.loads(seal.table_counts),
                scheme3.SCHEME,
                unchecked=unchecked,
            )
            s.flush()
            if seal_file is not None:
                written = sealfile.write_line(seal_file, json.dumps(result.as_line(), sort_keys=True))
                result.seal_file = seal_file
    except BaseException:
        if seal_file is not None and written is not False:
            sealfile.restore(seal_file, written)  # type: ignore[arg-type]
        raise
    return result


def batch_parts(conn: sa.Connection, backend: str, batch_id: int, chunks: bool = False):
    """The batch's declared parts and its artefacts' parts, the large tables streamed
    (:func:`ledger.seal.streams.artefact_digest_parts`; with ``chunks`` each chunk's seal_part fields kept, for
    close)."""
    declared = scheme3.declared_parts(conn, backend, batch_id)
    arts = streams.artefact_digest_parts(
        conn, backend, f"SELECT id FROM artefact WHERE batch_id = {int(batch_id)}", chunks
    )
    return declared, arts


def _part_roots_json(parts: list[scheme3.Part | scheme3.HeldPart]) -> str:
    return json.dumps({scheme3.part_key(p): [p.count, p.root] for p in parts}, sort_keys=True)
