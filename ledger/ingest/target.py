"""Where an import goes and what it gives back: the target (batch, run, deployment, node, launch),
the result, the open batch a file is imported into, the launch its runs ran against, and where an
artefact already imported is."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from bench_ledger import guards
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.errors import NotFound, Refused
from bench_ledger.store import Ledger, now
from sqlalchemy.orm import Session

__all__ = [
    "ImportResult",
    "ImportTarget",
    "Parser",
    "launch_of",
    "open_batch",
    "options_not_applied",
    "package_version",
    "runs_of_artefact",
]


@dataclass
class ImportTarget:
    """Where the artefact goes: the batch, an optional run label and deployment, the node."""

    batch: str | None
    run: str | None = None
    deployment: str | None = None
    node: str | None = None
    time_zone: str | None = None  # zone of the host-local sample timestamps, as the user declares it
    start: datetime | None = None  # when sample 0 was taken (timestamp-less samplers), as declared
    interval_s: float | None = None  # seconds between samples, as declared
    launch: tuple[str, int] | None = None  # (deployment, attempt) for a server log
    store_copy: Path | None = None  # content-addressed folder for a copy of the bytes


@dataclass
class ImportResult:
    artefact_id: int
    sha256: str
    format: str
    runs: list[tuple[int, str, int]] = field(default_factory=list)  # (run id, label, requests)
    samples: int = 0
    log_facts: int = 0
    published: int = 0
    created_batch: str | None = None  # the batch this import created (it did not exist before)
    notes: list[str] = field(default_factory=list)  # how runs were paired (ledger.pairing), for the user
    launches: list[str] = field(default_factory=list)  # "deployment#attempt (label)" its runs ran against
    launch_note: str | None = None  # why the launches its files name got no launch row

    @property
    def rows(self) -> int:
        """Requests and samples written so far."""
        return sum(n for _, _, n in self.runs) + self.samples


class Parser(Protocol):
    """What the pipeline needs of an importer (``bench_ledger.importers.base.Importer`` fits)."""

    name: str

    def parse(self, path: Path, options: rec.ParseOptions) -> rec.ParsedArtefact: ...


@functools.cache
def package_version() -> str:
    """The importer version recorded with each artefact: the installed package's version (read once:
    the package metadata lookup costs per call)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as pkg_version

    try:
        return pkg_version("bench-ledger")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def runs_of_artefact(ledger: Ledger, artefact_id: int) -> list[tuple[int, str, str]]:
    """(current run id, label, batch) of each run the artefact's captures belong to."""
    from bench_ledger.revisions import current

    R, C, B = m.Run.__table__, m.Capture.__table__, m.Batch.__table__
    with ledger.session() as s:
        return [
            tuple(r)
            for r in s.execute(
                sa.select(R.c.id, R.c.label, B.c.name)
                .select_from(C)
                .join(R, sa.and_(sa.func.coalesce(R.c.origin_id, R.c.id) == C.c.run_id, current(R)))
                .join(B, B.c.id == R.c.batch_id)
                .where(C.c.artefact_id == artefact_id)
                .order_by(R.c.id)
            )
        ]


def options_not_applied(ledger: Ledger, artefact_id: int, target: ImportTarget) -> tuple[str, list[str]]:
    """Where an already imported artefact is (its batch, deployment, node, time zone) and the options of
    ``target`` that differ from it: an import of the same bytes changes nothing, so they were not applied."""
    with ledger.session() as s:
        art = s.get(m.Artefact, artefact_id)
        assert art is not None  # the caller has just found it; artefacts are never deleted
        batch = s.scalar(sa.select(m.Batch.name).where(m.Batch.id == art.batch_id))
        dep = s.scalar(sa.select(m.Deployment.name).where(m.Deployment.id == art.deployment_id))
    note = art.note or ""
    zone = note.split(rec.DECLARED_ZONE, 1)[1].split(";", 1)[0] if rec.DECLARED_ZONE in note else None
    takes_zone = zone is not None or rec.UNCONFIRMED_ZONE in note  # a format whose sample times are host-local
    where = [
        f"batch {batch!r}" if batch else "no batch",
        f"deployment {dep!r}" if dep else "no deployment",
        f"node {art.node!r}" if art.node else "no node",
    ]
    where += [f"time zone {zone!r}" if zone else rec.UNCONFIRMED_ZONE] if takes_zone else []
    asked = [
        ("--batch", target.batch, batch, True),
        ("--deployment", target.deployment, dep, True),
        ("--node", target.node, art.node, True),
        ("--time-zone", target.time_zone, zone, takes_zone),
    ]
    differ = [f"{opt} {given!r}" for opt, given, held, applies in asked if applies and given not in (None, held)]
    return ", ".join(where), differ


def launch_of(s: Session, deployment_id: int, label: str) -> str:
    """The launch of a deployment that a tool's output names ``label`` (an inference-perf report
    folder, a vLLM sweep SERVE setting): the existing one, else a new row with the next attempt
    number, outcome ``unknown`` (the files do not say how the start went). A concurrent import that
    took the same attempt number conflicts on (deployment, attempt, revision) and runs again."""
    found = s.scalars(
        sa.select(m.Launch)
        .where(m.Launch.deployment_id == deployment_id, m.Launch.label == label)
        .order_by(m.Launch.revision.desc())
    ).first()
    dep = s.get_one(m.Deployment, deployment_id)
    if found is None:
        last = s.scalar(sa.select(sa.func.max(m.Launch.attempt)).where(m.Launch.deployment_id == deployment_id))
        found = m.Launch(
            deployment_id=deployment_id,
            attempt=(last or 0) + 1,
            outcome="unknown",
            seconds_to_ready=None,
            seconds_to_ready_flag="n/a",
            revision=0,
            recorded_at=now(),
            label=label,
        )
        s.add(found)
        s.flush()
    return f"{dep.name}#{found.attempt} ({label})"


def open_batch(s: Session, name: str) -> tuple[m.Batch, bool]:
    """The open batch ``name``, created if new (True). Race-free: a concurrent creator's row wins
    (INSERT ... ON CONFLICT DO NOTHING waits for its transaction) and this one uses it."""
    # locked (PostgreSQL) until the import commits: a concurrent `ledger close` waits for it, or it
    # waits for the close and then sees the batch closed (ledger.seal.close)
    batch = Ledger.find_batch(s, name, lock="share")
    created = False
    if batch is None:
        inserted = s.execute(
            sa.text(
                "INSERT INTO batch (name, status, created_at) VALUES (:name, 'open', :at) "
                "ON CONFLICT (name) DO NOTHING RETURNING id"
            ),
            {"name": name, "at": now()},
        ).scalar()
        created = inserted is not None
        if inserted is not None:
            guards.declared_written(s.connection(), "batch", [inserted])
        batch = Ledger.find_batch(s, name, lock="share")
    if batch is None:  # the row exists: this INSERT or a concurrent one made it
        raise NotFound(f"batch {name!r} vanished while it was being created")
    if batch.status == "closed":
        raise Refused(
            "R10",
            f"import into batch {name!r}",
            f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
            "import into a new batch; a correction names what it supersedes",
        )
    return batch, created
