"""``ledger attest``: an unsigned in-toto Statement (v1) of a closed batch, its seal as the predicate."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import InputError
from bench_ledger.store import Ledger

__all__ = ["INTOTO_STATEMENT", "PREDICATE_TYPE", "intoto_statement"]

INTOTO_STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:bench-ledger:seal:1"


def intoto_statement(ledger: Ledger, batch: str) -> dict[str, Any]:
    """An unsigned in-toto Statement (v1) for a closed batch: its subjects are the batch's artefacts
    (file name, sha256), its predicate the seal (docs/seals.md). Sign it with any in-toto/DSSE tool."""
    with ledger.session() as s:
        b = Ledger.get_batch(s, batch)
        seal = s.scalar(sa.select(m.Seal).where(m.Seal.batch_id == b.id))
        if b.status != "closed" or seal is None:
            raise InputError(
                f"batch {batch!r} is open: only a closed batch has a seal to attest (`ledger close {batch}`)"
            )
        arts = s.execute(
            sa.select(m.Artefact.file_name, m.Artefact.sha256)
            .where(m.Artefact.batch_id == b.id)
            .order_by(m.Artefact.id)
        ).all()
        return {
            "_type": INTOTO_STATEMENT,
            "subject": [{"name": name, "digest": {"sha256": sha}} for name, sha in arts],
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "scheme": seal.scheme,
                "batch": batch,
                "digest": seal.digest,
                "merkle_root": seal.merkle_root,
                "row_count": seal.row_count,
                "previous_digest": seal.previous_digest,
                "closed_at": seal.closed_at.isoformat(timespec="microseconds"),
                "table_counts": json.loads(seal.table_counts),
                "table_roots": json.loads(seal.table_roots),
                "schema_revision": ledger.revision(),
            },
        }
