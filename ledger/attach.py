"""Attaching an imported artefact's reported values to another run of its batch (``ledger attach``):
a correction (R10) of each value and of the run, which learns the settings it did not state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import InputError, NotFound, Refused
from bench_ledger.revisions import correct_in, current, require_current
from bench_ledger.store import Ledger

__all__ = ["Attached", "attach"]


# what a run learns from the run an attached artefact came from, where it states nothing itself
_LEARNED = (
    "input_target_tokens",
    "output_cap_tokens",
    "concurrency",
    "request_count",
    "request_rate",
    "seed",
    "dataset",
    "tool",
    "tool_version",
    "started_at",
    "ended_at",
    "duration_s",
)


@dataclass
class Attached:
    artefact_id: int
    run_id: int  # the target run's new revision
    superseded_run_id: int
    from_run_id: int  # the run the artefact's values were on (its current revision)
    moved: int  # reported values, each a new revision on the target run
    learned: dict[str, Any] = field(default_factory=dict)
    not_learned: str | None = None  # why no setting was taken from the artefact's run


def attach(ledger: Ledger, artefact_id: int, run_id: int, reason: str) -> Attached:
    """Attach an imported artefact's reported values to another run of its batch: a correction (R10).

    Each current published value of the artefact becomes a new revision on ``run_id`` (the old one
    superseded, ``ledger history published_value ID``), and the run gets a new revision recording the
    attachment (``ledger history run ID``) that learns the settings it did not state from the run the
    artefact was on, when that run holds no other artefact (values come from the attached file only). Captured rows never move (R9): an artefact holding per-request records is
    refused, naming the aggregate artefacts of the target run that can be attached the other way.
    One transaction; a closed batch refuses it (R10)."""
    if not reason or not reason.strip():
        raise InputError("an attachment is a correction: it needs a reason (--reason)")
    C, PV = m.Capture.__table__, m.PublishedValue.__table__
    with ledger.session() as s:
        art = s.get(m.Artefact, artefact_id)
        if art is None:
            raise NotFound(f"no artefact with id {artefact_id}")
        target = s.get(m.Run, run_id)
        if target is None:
            raise NotFound(f"no run with id {run_id}")
        require_current(s.connection(), "run", run_id)
        caps = s.execute(sa.select(C.c.run_id, C.c.record_count).where(C.c.artefact_id == artefact_id)).all()
        # where its values are now (an earlier attachment moved them), else where it was captured
        keys = sorted(
            set(
                s.scalars(
                    sa.select(PV.c.run_id).where(PV.c.artefact_id == artefact_id, current(PV), PV.c.run_id.is_not(None))
                )
            )
            or {c.run_id for c in caps}
        )
        if not keys:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}, {art.format}) holds no benchmark run: nothing to attach"
            )
        if len(keys) > 1:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) holds {len(keys)} runs; one run's artefact can be "
                "attached, a file of several runs cannot"
            )
        src_key, dst_key = keys[0], target.origin_id or target.id
        source = s.scalars(
            sa.select(m.Run).where(sa.func.coalesce(m.Run.origin_id, m.Run.id) == src_key, current(m.Run))
        ).one()
        if src_key == dst_key:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) is already attached to run {run_id} {target.label!r}"
            )
        if source.batch_id != target.batch_id:
            names = dict(
                s.execute(
                    sa.select(m.Batch.id, m.Batch.name).where(m.Batch.id.in_([source.batch_id, target.batch_id]))
                ).all()
            )
            raise Refused(
                "R2",
                f"attach artefact {artefact_id} to run {run_id}",
                f"the artefact's run {source.id} is in batch {names[source.batch_id]!r}, run {run_id} in batch "
                f"{names[target.batch_id]!r}; runs of different batches are never one run",
                "import the file into the run's batch (`ledger import FILE --batch B --run LABEL`)",
            )
        records = sum(c.record_count for c in caps)
        if records:
            others = sorted(
                a
                for (a,) in s.execute(
                    sa.select(C.c.artefact_id)
                    .where(C.c.run_id == dst_key, C.c.record_count == 0)
                    .where(sa.exists().where(PV.c.artefact_id == C.c.artefact_id, PV.c.run_id == dst_key, current(PV)))
                )
            )
            held = s.execute(
                sa.select(sa.func.count()).select_from(C).where(C.c.run_id == dst_key, C.c.record_count > 0)
            ).scalar()
            commands = "; ".join(f"`ledger attach {a} --run {source.id} --reason ...`" for a in others)
            instead = (
                f"run {run_id} holds per-request records too: they are two runs"
                if held
                else f"attach the aggregate artefact(s) of run {run_id} to run {source.id} instead: {commands}"
                if others
                else f"import the other file of the run with --run {source.label!r}"
            )
            raise Refused(
                "R9",
                f"attach artefact {artefact_id} ({art.file_name}) to run {run_id}",
                f"it holds {records:,} per-request records captured for run {source.id} {source.label!r}; "
                "captured rows never move",
                instead,
            )
        batch = Ledger.get_batch(s, s.get_one(m.Batch, target.batch_id).name, lock="share")
        if batch.status == "closed":
            raise Refused(
                "R10",
                f"attach artefact {artefact_id} to run {run_id} of batch {batch.name!r}",
                f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
                "record the pairing in a new batch that names this one",
            )
        why = (
            f"attached artefact {artefact_id} ({art.file_name}) from run {source.id} {source.label!r}: {reason.strip()}"
        )
        values = s.scalars(
            sa.select(PV.c.id)
            .where(PV.c.artefact_id == artefact_id, PV.c.run_id == src_key, current(PV))
            .order_by(PV.c.id)
        ).all()
        if not values:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) has no reported values on run {source.id}: nothing to attach"
            )
        for pv_id in values:
            correct_in(s, m.PublishedValue, pv_id, why, {"run_id": dst_key})
        # the settings the artefact states: its run's, where that run holds this artefact alone (else
        # another file's values could be among them, and none is taken)
        alone = {a for (a,) in s.execute(sa.select(C.c.artefact_id).where(C.c.run_id == src_key))} == {artefact_id}
        learned = {
            k: getattr(source, k)
            for k in _LEARNED
            if alone and getattr(target, k) is None and getattr(source, k) is not None
        }
        new_run = correct_in(s, m.Run, run_id, why, learned)
        not_learned = (
            None
            if alone
            else (
                f"run {source.id} holds other artefacts too: its settings are not this file's alone, so none was taken"
            )
        )
        return Attached(artefact_id, new_run, run_id, source.id, len(values), learned, not_learned)
