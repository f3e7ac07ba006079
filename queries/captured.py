"""Read-side views of what the captured tables hold: one artefact and the hardware samples of a batch
(`ledger show artefact`, `ledger hardware`; the server-log facts of `ledger logs` are :mod:`queries.logs`).

Why it is built this way:

* Nothing here defines a statistic: per-card statistics are the definitions of
  :mod:`queries.metrics.hardware` (``mean`` of the card's values, as ``card_stat``), the power
  statistics across cards are its three power metrics evaluated through :mod:`queries.metrics.registry`
  (one per power counter: average and instantaneous power are different counters, R14), and what a
  statistic across cards may be is its :data:`~queries.metrics.hardware.ACROSS_CARDS` table.
* Every value says where it comes from: the artefact (id, file, format) and the lines it was read from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.counters import POWER_COUNTERS, kind_of, meaning_of
from bench_ledger.errors import NotFound
from bench_ledger.queries.metrics.definitions import mean
from bench_ledger.queries.metrics.hardware import HS, LF, across_cards, read_cards
from bench_ledger.queries.values import Scope
from bench_ledger.revisions import current
from bench_ledger.store import Ledger, unknown

__all__ = ["AcrossCards", "ArtefactView", "CardCounter", "HardwareView", "artefact_detail", "hardware_view"]

_A, _B, _D, _L, _R = (t.__table__ for t in (m.Artefact, m.Batch, m.Deployment, m.Launch, m.Run))
_CAP, _PV, _REQ, _CG, _DG = (
    t.__table__ for t in (m.Capture, m.PublishedValue, m.Request, m.ChunkGap, m.ArtefactDigest)
)


# --------------------------------------------------------------------------- one artefact


@dataclass
class ArtefactView:
    id: int
    file_name: str
    format: str
    format_version: str | None
    sha256: str
    size_bytes: int
    stored_path: str | None
    importer: str
    importer_version: str
    imported_at: str
    batch: str | None
    deployment: str | None
    node: str | None
    note: str | None
    rows: dict[str, int] = field(default_factory=dict)  # captured / declared table -> rows from this artefact
    runs: list[dict] = field(default_factory=list)  # run id, batch, label, requests, records, sampled
    launches: list[str] = field(default_factory=list)  # "deployment#attempt" whose log this is
    digest: list[dict] = field(default_factory=list)  # table, rows, root (stored at import, seal scheme 3)
    flags: dict[str, int] = field(default_factory=dict)  # provenance flags of its published values
    units: dict[str, int] = field(default_factory=dict)  # hardware sample rows per unit as printed

    def as_dict(self) -> dict:
        return asdict(self)


def artefact_detail(ledger: Ledger, artefact_id: int) -> ArtefactView:
    """Everything the ledger holds of one artefact, from its row and the rows it produced."""
    with ledger.connection() as conn:
        a = conn.execute(
            sa.select(_A, _B.c.name.label("batch_name"), _D.c.name.label("dep_name"))
            .outerjoin(_B, _B.c.id == _A.c.batch_id)
            .outerjoin(_D, _D.c.id == _A.c.deployment_id)
            .where(_A.c.id == artefact_id)
        ).first()
        if a is None:
            raise NotFound(f"no artefact with id {artefact_id}; `ledger show run ID` names a run's artefacts")
        view = ArtefactView(
            id=a.id,
            file_name=a.file_name,
            format=a.format,
            format_version=a.format_version,
            sha256=a.sha256,
            size_bytes=a.size_bytes,
            stored_path=a.stored_path,
            importer=a.importer,
            importer_version=a.importer_version,
            imported_at=str(a.imported_at),
            batch=a.batch_name,
            deployment=a.dep_name,
            node=a.node,
            note=a.note,
        )

        def count(table: sa.FromClause, col: str = "artefact_id") -> int:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(table).where(table.c[col] == artefact_id)
                ).scalar_one()
            )

        view.rows = {
            "capture": count(_CAP),
            "request": count(_REQ),
            "chunk_gap": count(_CG),
            "hardware_sample": count(HS),
            "log_fact": count(LF),
            "published_value": count(_PV),
        }
        caps = conn.execute(
            sa.select(_CAP.c.run_id, _CAP.c.record_count, _CAP.c.sampled, _R.c.label, _B.c.name.label("batch"))
            .join(_R, _R.c.id == _CAP.c.run_id)
            .join(_B, _B.c.id == _R.c.batch_id)
            .where(_CAP.c.artefact_id == artefact_id)
            .order_by(_CAP.c.run_id)
        ).all()
        per_run: dict[int, int] = dict(
            conn.execute(
                sa.select(_REQ.c.run_id, sa.func.count())
                .where(_REQ.c.artefact_id == artefact_id)
                .group_by(_REQ.c.run_id)
            ).all()
        )
        view.runs = [
            {
                "run": c.run_id,
                "batch": c.batch,
                "label": c.label,
                "records": c.record_count,
                "requests": int(per_run.get(c.run_id, 0)),
                "sampled": bool(c.sampled),
            }
            for c in caps
        ]
        view.launches = [
            f"{r.name}#{r.attempt}" + (f" ({r.label})" if r.label else "")
            for r in conn.execute(
                sa.select(_D.c.name, _L.c.attempt, _L.c.label)
                .join(_D, _D.c.id == _L.c.deployment_id)
                .where(_L.c.log_artefact_id == artefact_id, current(_L))
                .order_by(_L.c.id)
            )
        ]
        view.digest = [
            {"table": r.table_name, "rows": int(r.row_count), "root": r.root}
            for r in conn.execute(
                sa.select(_DG.c.table_name, _DG.c.row_count, _DG.c.root)
                .where(_DG.c.artefact_id == artefact_id)
                .order_by(_DG.c.table_name)
            )
        ]
        view.flags = {
            r.flag: int(r.n)
            for r in conn.execute(
                sa.select(_PV.c.flag, sa.func.count().label("n"))
                .where(_PV.c.artefact_id == artefact_id)
                .group_by(_PV.c.flag)
                .order_by(_PV.c.flag)
            )
        }
        view.units = {
            r.unit: int(r.n)
            for r in conn.execute(
                sa.select(HS.c.unit, sa.func.count().label("n"))
                .where(HS.c.artefact_id == artefact_id)
                .group_by(HS.c.unit)
                .order_by(HS.c.unit)
            )
        }
    return view


# --------------------------------------------------------------------------- hardware samples


@dataclass
class CardCounter:
    """One counter of one card: its statistics over the batch's samples, as printed units."""

    card: str
    counter: str
    unit: str
    quantity_kind: str
    samples: int  # rows (ticks) of this card and counter
    values: int  # rows with a value ('-', [N/A] are none)
    mean: float | None
    min: float | None
    max: float | None
    exact_mean: str | None  # the exact mean of the printed values (Fraction), as text
    artefact: int
    format: str
    lines: str  # first-last line of the file the rows come from
    timed: bool  # the samples carry timestamps

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class AcrossCards:
    """One counter across the batch's cards: what may be computed (rule) and, for power, the values."""

    counter: str
    unit: str
    quantity_kind: str
    meaning: str | None  # what the counter measures (bench_ledger.counters), None where not described
    cards: int
    allowed: str
    rule: str
    why: str
    values: list[dict] = field(default_factory=list)  # metric, value, unit, flag, na_reason, inputs

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class HardwareView:
    batch: str
    artefacts: list[dict]
    cards: list[CardCounter]
    across: list[AcrossCards]
    notes: list[str]

    def as_dict(self) -> dict:
        return {
            "batch": self.batch,
            "artefacts": self.artefacts,
            "cards": [c.as_dict() for c in self.cards],
            "across_cards": [a.as_dict() for a in self.across],
            "notes": self.notes,
        }


def _card_order(card: str) -> tuple[str, int]:
    head, _, tail = card.rpartition("gpu")
    return head, int(tail) if tail.isdigit() else 0


def hardware_view(ledger: Ledger, batch: str) -> HardwareView:
    """Per-card statistics of every counter sampled in the batch, and what may be said across cards."""
    with ledger.connection() as conn:
        bid = conn.execute(sa.select(_B.c.id).where(_B.c.name == batch)).scalar()
        if bid is None:
            raise unknown(conn, "batch", batch)
        groups = read_cards(conn, [HS.c.artefact_id.in_(sa.select(_A.c.id).where(_A.c.batch_id == bid))])
        arts = conn.execute(  # the batch's files that hold samples: those the samples' groups name
            sa.select(_A.c.id, _A.c.file_name, _A.c.format, _A.c.node, _A.c.note)
            .where(_A.c.id.in_(sorted({g.artefact_id for g in groups})))
            .order_by(_A.c.id)
        ).all()
        cards: list[CardCounter] = []
        units_of: dict[str, set[str]] = {}
        cards_of: dict[str, set[str]] = {}
        fmt = {a.id: a.format for a in arts}
        for g in groups:
            vals = g.values  # exact: each printed value is one binary rational (ExactColumn)
            mu = mean(vals) if len(vals) else None
            counter, card, unit = g.counter, g.card, g.unit
            cards.append(
                CardCounter(
                    card=card,
                    counter=counter,
                    unit=unit,
                    quantity_kind=kind_of(counter),
                    samples=g.samples,
                    values=len(vals),
                    mean=None if mu is None else float(mu),
                    min=float(vals.array.min()) + 0.0 if len(vals) else None,  # + 0.0: -0.0 is the rational 0
                    max=float(vals.array.max()) + 0.0 if len(vals) else None,
                    exact_mean=None if mu is None else str(mu),
                    artefact=g.artefact_id,
                    format=fmt[g.artefact_id],
                    lines=f"{g.first_line}-{g.last_line}",
                    timed=g.timed,
                )
            )
            units_of.setdefault(counter, set()).add(unit)
            cards_of.setdefault(counter, set()).add(card)
    cards.sort(key=lambda c: (_card_order(c.card), c.counter))
    across: list[AcrossCards] = []
    for counter in sorted(cards_of, key=lambda c: (c not in POWER_COUNTERS, c)):
        kind = kind_of(counter)
        allowed, rule, why = across_cards(kind)
        units = sorted(units_of[counter])
        ac = AcrossCards(
            counter=counter,
            unit=", ".join(units),
            quantity_kind=kind,
            meaning=meaning_of(counter),
            cards=len(cards_of[counter]),
            allowed=allowed,
            rule=rule,
            why=why,
        )
        if counter in POWER_COUNTERS:
            from bench_ledger.queries.metrics.registry import evaluate_power

            for v in evaluate_power(ledger, counter, Scope(batch=batch)):
                ac.values.append(
                    {
                        "metric": v.metric,
                        "value": None if v.value is None else float(v.value),
                        "exact": None if v.value is None else str(v.value),
                        "unit": v.unit,
                        "flag": v.flag,
                        "na_reason": v.na_reason,
                        "inputs": {k: v.inputs[k] for k in ("aligned_by", "ticks", "at") if k in v.inputs},
                    }
                )
        across.append(ac)
    notes = []
    present = [c for c in POWER_COUNTERS if c in cards_of]
    if len(present) > 1:
        notes.append(
            f"power counters {', '.join(present)} are different counters (R14): each has its own "
            "statistics; none is substituted for another or combined"
        )
    for art in arts:
        if art.note:
            notes.append(f"artefact {art.id} {art.file_name}: {art.note}")
    return HardwareView(
        batch=batch,
        artefacts=[{"id": a.id, "file": a.file_name, "format": a.format, "node": a.node} for a in arts],
        cards=cards,
        across=across,
        notes=notes,
    )
