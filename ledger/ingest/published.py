"""The values a file reports (``published_value`` rows): the artefact's own, through the ORM, and a
run's tool aggregates, as rows for the bulk path."""

from __future__ import annotations

from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.store import now
from sqlalchemy.orm import Session

__all__ = ["published_row", "write_published"]


def published_row(
    p: rec.Published, artefact_id: int, batch_id: int | None, run_id: int | None, deployment_id: int | None, stamp
) -> dict:
    return dict(
        artefact_id=artefact_id,
        key=p.key,
        text=p.text,
        value=p.value,
        unit=p.unit,
        quantity_kind=p.quantity_kind,
        precision=p.precision,
        flag=p.flag,
        na_reason=p.na_reason,
        batch_id=batch_id,
        run_id=run_id,
        deployment_id=deployment_id,
        locator=p.locator,
        note=p.note,
        revision=0,
        recorded_at=stamp,
    )


def write_published(
    s: Session,
    values: list[rec.Published],
    artefact_id: int,
    batch_id: int | None,
    run_id: int | None,
    deployment_id: int | None,
) -> int:
    stamp = now()
    s.add_all(m.PublishedValue(**published_row(p, artefact_id, batch_id, run_id, deployment_id, stamp)) for p in values)
    return len(values)
