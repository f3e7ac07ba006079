"""Coverage of a request field (R9): for how many requests was it captured at all?

Why: a field a capture did not contain stays n/a for its requests forever, so a metric that needs
it (cache-hit tokens, cache cost) covers only the requests whose capture had it. The coverage is
shown next to such a metric: "cached_tokens captured for 120 of 442 requests".
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import InputError
from bench_ledger.records import REQUEST_FIELDS
from bench_ledger.store import Ledger


@dataclass(frozen=True)
class Coverage:
    field: str
    captured: int
    total: int

    def __str__(self) -> str:
        return f"{self.field} captured for {self.captured} of {self.total} requests"


def field_coverage(ledger: Ledger, field: str, scope: str | int | None = None) -> Coverage:
    """Requests whose capture contained ``field``; scope: a batch name, a run id, or the whole ledger."""
    if field not in REQUEST_FIELDS:
        raise InputError(f"unknown request field {field!r}; known: {', '.join(REQUEST_FIELDS)}")
    r, c, f = m.Request, m.Capture, m.CaptureField
    base = sa.select(sa.func.count()).select_from(r)
    if isinstance(scope, str):
        base = base.join(m.Run, m.Run.id == r.run_id).join(m.Batch, m.Batch.id == m.Run.batch_id).where(m.Batch.name == scope)
    elif isinstance(scope, int):
        base = base.where(r.run_id == scope)
    captured = base.join(c, sa.and_(c.artefact_id == r.artefact_id, c.run_id == r.run_id)).join(
        f, sa.and_(f.capture_id == c.id, f.field == field)
    )
    with ledger.connection() as conn:
        return Coverage(field, conn.execute(captured).scalar_one(), conn.execute(base).scalar_one())
