"""Read-side views of what the captured tables hold: one artefact, the hardware samples of a batch,
the server-log facts of a batch or deployment (`ledger show artefact`, `ledger hardware`, `ledger logs`).

Why it is built this way:

* Nothing here defines a statistic: per-card statistics are the definitions of
  :mod:`queries.metrics_hardware` (``mean`` of the card's values, as ``card_stat``), the power
  statistics across cards are its three power metrics evaluated through :mod:`queries.metrics`
  (one per power counter: average and instantaneous power are different counters, R14), and what a
  statistic across cards may be is its :data:`~queries.metrics_hardware.ACROSS_CARDS` table.
* Every value says where it comes from: the artefact (id, file, format) and the lines it was read from.
* Log facts keep their line; the launch a log belongs to is the launch that names it
  (``launch.log_artefact_id``); a run ran against the launch of its deployment whose ``label`` its
  ``run.metadata.launch`` names (:func:`launch_runs`, the one definition of that link). Nothing is
  guessed from times or deployments: without a label the run link is n/a with the reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.counters import POWER_COUNTERS, kind_of, meaning_of
from bench_ledger.errors import NotFound, UsageError
from bench_ledger.queries.metrics_hardware import HS, LF, across_cards, read_cards
from bench_ledger.queries.metrics_requests import mean
from bench_ledger.queries.values import Scope
from bench_ledger.revisions import current
from bench_ledger.store import Ledger, unknown

A, B, D, L, R = (t.__table__ for t in (m.Artefact, m.Batch, m.Deployment, m.Launch, m.Run))
CAP, PV, REQ, CG, DG = (t.__table__ for t in (m.Capture, m.PublishedValue, m.Request, m.ChunkGap, m.ArtefactDigest))


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
            sa.select(A, B.c.name.label("batch_name"), D.c.name.label("dep_name"))
            .outerjoin(B, B.c.id == A.c.batch_id)
            .outerjoin(D, D.c.id == A.c.deployment_id)
            .where(A.c.id == artefact_id)
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
            "capture": count(CAP),
            "request": count(REQ),
            "chunk_gap": count(CG),
            "hardware_sample": count(HS),
            "log_fact": count(LF),
            "published_value": count(PV),
        }
        caps = conn.execute(
            sa.select(CAP.c.run_id, CAP.c.record_count, CAP.c.sampled, R.c.label, B.c.name.label("batch"))
            .join(R, R.c.id == CAP.c.run_id)
            .join(B, B.c.id == R.c.batch_id)
            .where(CAP.c.artefact_id == artefact_id)
            .order_by(CAP.c.run_id)
        ).all()
        per_run: dict[int, int] = dict(
            conn.execute(
                sa.select(REQ.c.run_id, sa.func.count()).where(REQ.c.artefact_id == artefact_id).group_by(REQ.c.run_id)
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
                sa.select(D.c.name, L.c.attempt, L.c.label)
                .join(D, D.c.id == L.c.deployment_id)
                .where(L.c.log_artefact_id == artefact_id, current(L))
                .order_by(L.c.id)
            )
        ]
        view.digest = [
            {"table": r.table_name, "rows": int(r.row_count), "root": r.root}
            for r in conn.execute(
                sa.select(DG.c.table_name, DG.c.row_count, DG.c.root)
                .where(DG.c.artefact_id == artefact_id)
                .order_by(DG.c.table_name)
            )
        ]
        view.flags = {
            r.flag: int(r.n)
            for r in conn.execute(
                sa.select(PV.c.flag, sa.func.count().label("n"))
                .where(PV.c.artefact_id == artefact_id)
                .group_by(PV.c.flag)
                .order_by(PV.c.flag)
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
        bid = conn.execute(sa.select(B.c.id).where(B.c.name == batch)).scalar()
        if bid is None:
            raise unknown(conn, "batch", batch)
        groups = read_cards(conn, [HS.c.artefact_id.in_(sa.select(A.c.id).where(A.c.batch_id == bid))])
        arts = conn.execute(  # the batch's files that hold samples: those the samples' groups name
            sa.select(A.c.id, A.c.file_name, A.c.format, A.c.node, A.c.note)
            .where(A.c.id.in_(sorted({g.artefact_id for g in groups})))
            .order_by(A.c.id)
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
            from bench_ledger.queries.metrics import evaluate_power

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


# --------------------------------------------------------------------------- server-log facts


@dataclass
class LogFactRow:
    artefact: int
    file: str
    line: int
    process: str | None
    kind: str
    text: str
    value: str | None
    unit: str | None
    logged_at: str | None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class LogView:
    """The facts of each server log in scope, and what each log tells about its launch."""

    scope: str
    logs: list[dict]  # artefact, file, batch, deployment, launch (or None) and why not, warm_compile and basis
    facts: list[LogFactRow]

    def as_dict(self) -> dict:
        return {"scope": self.scope, "logs": self.logs, "facts": [f.as_dict() for f in self.facts]}


NO_LAUNCH = "no launch names this log (a manifest's launch names its log: `log:` under the launch, `ledger declare`)"
NO_LABEL = (
    "its launch has no label, and runs find their launch by label (run.metadata.launch; a manifest launch's `label:`)"
)
NO_RUNS = "no current run of the deployment names this launch's label in run.metadata.launch"


def _launch_of(meta: str | None) -> str | None:
    if not meta:
        return None
    try:
        value = json.loads(meta).get("launch")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def launch_runs(conn: sa.Connection, launch_ids: list[int]) -> dict[int, list[dict]]:
    """The current runs of each launch: runs of the launch's deployment (theirs, or their batch's)
    whose ``run.metadata.launch`` is the launch's label. The one definition of the run -> launch link."""
    if not launch_ids:
        return {}
    launches = conn.execute(sa.select(L.c.id, L.c.deployment_id, L.c.label).where(L.c.id.in_(launch_ids))).all()
    out: dict[int, list[dict]] = {la.id: [] for la in launches}
    by_key = {(la.deployment_id, la.label): la.id for la in launches if la.label is not None}
    if not by_key:
        return out
    dep = sa.func.coalesce(R.c.deployment_id, B.c.deployment_id)
    rows = conn.execute(
        sa.select(R.c.id, R.c.label, R.c.metadata_json, B.c.name.label("batch"), dep.label("dep"))
        .join(B, B.c.id == R.c.batch_id)
        .where(current(R), dep.in_(sorted({d for d, _ in by_key})))
        .order_by(R.c.id)
    ).all()
    for r in rows:
        lid = by_key.get((r.dep, _launch_of(r.metadata_json)))
        if lid is not None:
            out[lid].append({"run": r.id, "batch": r.batch, "label": r.label})
    return out


def run_launch(conn: sa.Connection, run_id: int) -> tuple[dict | None, str]:
    """The launch a run ran against ({deployment, attempt, label, log_artefact_id}) or None, and why."""
    dep = sa.func.coalesce(R.c.deployment_id, B.c.deployment_id)
    r = conn.execute(
        sa.select(R.c.metadata_json, dep.label("dep")).join(B, B.c.id == R.c.batch_id).where(R.c.id == run_id)
    ).one()
    name = _launch_of(r.metadata_json)
    if name is None:
        return None, "the run names no launch (run.metadata.launch)"
    if r.dep is None:
        return None, f"the run names launch {name!r} but has no deployment, and launches belong to a deployment"
    la = conn.execute(
        sa.select(L.c.id, L.c.attempt, L.c.label, L.c.log_artefact_id, D.c.name)
        .join(D, D.c.id == L.c.deployment_id)
        .where(L.c.deployment_id == r.dep, L.c.label == name, current(L))
        .order_by(L.c.id)
    ).all()
    if len(la) != 1:
        return None, (
            f"launch {name!r} of the run's deployment is "
            + (
                "not recorded"
                if not la
                else f"recorded {len(la)} times ({', '.join(f'{x.name}#{x.attempt}' for x in la)})"
            )
        )
    x = la[0]
    return {
        "launch_id": x.id,
        "deployment": x.name,
        "attempt": x.attempt,
        "label": x.label,
        "log_artefact": x.log_artefact_id,
    }, "run.metadata.launch = the launch's label"


def warm_compile_of_log(conn: sa.Connection, artefact_id: int) -> tuple[str | None, str]:
    """The compile-cache state a server log measured (its warm_compile fact) and its basis."""
    own = conn.execute(
        sa.select(LF.c.kind, LF.c.line, LF.c.text)
        .where(
            LF.c.artefact_id == artefact_id,
            LF.c.kind.in_(["warm_compile", "compile_cache_load_seconds", "graph_compile_seconds"]),
        )
        .order_by(LF.c.line)
    ).all()
    rows = [LogFactRow(artefact_id, "", f.line, None, f.kind, f.text, None, None, None) for f in own]
    warm = next((f for f in rows if f.kind == "warm_compile"), None)
    return (warm.text if warm else None), _warm_basis(rows, warm)


def log_view(ledger: Ledger, batch: str | None = None, deployment: str | None = None) -> LogView:
    """Server-log facts with file and line, of a batch's logs or a deployment's (its artefacts and the
    logs of its launches)."""
    if (batch is None) == (deployment is None):
        raise UsageError("name the logs: --batch B or --deployment D (one of them)")
    with ledger.connection() as conn:
        has_facts = sa.exists().where(LF.c.artefact_id == A.c.id)
        stmt = (
            sa.select(A.c.id, A.c.file_name, B.c.name.label("batch"), D.c.name.label("dep"))
            .outerjoin(B, B.c.id == A.c.batch_id)
            .outerjoin(D, D.c.id == A.c.deployment_id)
            .where(has_facts)
        )
        if batch is not None:
            bid = conn.execute(sa.select(B.c.id).where(B.c.name == batch)).scalar()
            if bid is None:
                raise unknown(conn, "batch", batch)
            stmt, scope = stmt.where(A.c.batch_id == bid), f"batch {batch}"
        else:
            assert deployment is not None  # one of the two, checked above
            did = conn.execute(sa.select(D.c.id).where(D.c.name == deployment)).scalar()
            if did is None:
                raise unknown(conn, "deployment", deployment)
            launched = sa.select(L.c.log_artefact_id).where(L.c.deployment_id == did, L.c.log_artefact_id.is_not(None))
            stmt, scope = stmt.where(sa.or_(A.c.deployment_id == did, A.c.id.in_(launched))), f"deployment {deployment}"
        arts = conn.execute(stmt.order_by(A.c.id)).all()
        ids = [a.id for a in arts]
        dep_rows = {
            r.name: dict(r._mapping)
            for r in conn.execute(sa.select(D).where(D.c.name.in_(sorted({a.dep for a in arts if a.dep is not None}))))
        }
        launches: dict[int, list] = {}
        for r in conn.execute(
            sa.select(L.c.id, L.c.log_artefact_id, D.c.name, L.c.attempt, L.c.label)
            .join(D, D.c.id == L.c.deployment_id)
            .where(L.c.log_artefact_id.in_(ids), current(L))
            .order_by(L.c.id)
        ):
            launches.setdefault(r.log_artefact_id, []).append(r)
        runs_of = launch_runs(conn, [la.id for las in launches.values() for la in las])
        frows = (
            conn.execute(
                sa.select(LF).where(LF.c.artefact_id.in_(ids)).order_by(LF.c.artefact_id, LF.c.line, LF.c.kind)
            ).all()
            if ids
            else []
        )
    name = {a.id: a.file_name for a in arts}
    facts = [
        LogFactRow(
            artefact=f.artefact_id,
            file=name[f.artefact_id],
            line=f.line,
            process=f.process,
            kind=f.kind,
            text=f.text,
            value=None if f.value is None else str(f.value),
            unit=f.unit,
            logged_at=f.logged_at,
        )
        for f in frows
    ]
    logs = []
    for a in arts:
        own = [f for f in facts if f.artefact == a.id]
        warm = next((f for f in own if f.kind == "warm_compile"), None)
        linked = launches.get(a.id, [])
        runs = [r for la in linked for r in runs_of.get(la.id, [])]
        why = None
        if not linked:
            why = NO_LAUNCH
        elif not runs:
            why = NO_RUNS if any(la.label is not None for la in linked) else NO_LABEL
        logs.append(
            {
                "artefact": a.id,
                "file": a.file_name,
                "batch": a.batch,
                "deployment": a.dep,
                "launch": ", ".join(f"{la.name}#{la.attempt}" + (f" ({la.label})" if la.label else "") for la in linked)
                or None,
                "launch_reason": None if linked else NO_LAUNCH,
                "runs": runs or None,
                "runs_reason": why,
                "warm_compile": warm.text if warm else None,
                "warm_compile_basis": _warm_basis(own, warm),
                "settings": settings_check(own, dep_rows.get(a.dep) if a.dep else None, a.dep),
            }
        )
    return LogView(scope=scope, logs=logs, facts=facts)


# deployment field -> the log fact kinds that state it, preferred first ("Using max model len" is the
# value the engine resolved; "non-default args" is what the user passed)
SETTINGS: dict[str, tuple[str, ...]] = {
    "max_model_len": ("max_model_len", "arg_max_model_len"),
    "tp": ("arg_tensor_parallel_size",),
    "pp": ("arg_pipeline_parallel_size",),
    "dp": ("arg_data_parallel_size",),
    "max_num_seqs": ("arg_max_num_seqs",),
    "chunked_prefill_tokens": ("max_num_batched_tokens", "arg_max_num_batched_tokens"),
}


def settings_check(facts: list[LogFactRow], declared: dict[str, object] | None, deployment: str | None) -> list[dict]:
    """Each engine setting the deployment declares against what the log printed: agree, differ, or
    n/a with why (not declared, or not printed: a non-default arg absent from the dict was left at
    vLLM's default, which the ledger does not assume)."""
    out = []
    for fld, kinds in SETTINGS.items():
        logged = next(([f for f in facts if f.kind == k] for k in kinds if any(f.kind == k for f in facts)), [])
        values = sorted({f.value for f in logged if f.value is not None})
        want = None if declared is None else declared.get(fld)
        row: dict = {
            "setting": fld,
            "declared": None if want is None else str(want),
            "logged": ", ".join(values) or None,
            "lines": [f.line for f in logged],
            "kind": logged[0].kind if logged else None,
        }
        if deployment is None:
            row["status"], row["reason"] = "n/a", "the log has no deployment to compare with"
        elif want is None:
            row["status"], row["reason"] = "n/a", f"deployment {deployment} does not declare {fld}"
        elif not values:
            row["status"], row["reason"] = (
                "n/a",
                (
                    f"the log prints none of {', '.join(kinds)} (an engine argument left "
                    "at vLLM's default is not printed)"
                ),
            )
        else:
            same = all(Fraction(v) == Fraction(str(want)) for v in values)
            row["status"] = "agree" if same else "differ"
            row["reason"] = f"{logged[0].kind} at line {', '.join(str(f.line) for f in logged[:5])}"
        out.append(row)
    return out


def _warm_basis(facts: list[LogFactRow], warm: LogFactRow | None) -> str:
    loads = [f.line for f in facts if f.kind == "compile_cache_load_seconds"]
    compiles = [f.line for f in facts if f.kind == "graph_compile_seconds"]
    shown = lambda lines: ", ".join(str(n) for n in lines[:5]) + (" …" if len(lines) > 5 else "")  # noqa: E731
    if warm is None:
        return (
            "n/a: no 'Directly load the compiled graph(s) … from the cache' and no 'Compiling a graph for …' "
            "line in this log (eager mode, another vLLM version or a cut capture): compile state unknown"
        )
    if warm.text == "warm":
        return f"measured: compiled graphs loaded from the compile cache (line {shown(loads)}), none compiled"
    if warm.text == "cold":
        return f"measured: graphs compiled (line {shown(compiles)}), none loaded from the compile cache"
    return (
        f"measured, mixed: graphs loaded from the cache (line {shown(loads)}) and compiled (line "
        f"{shown(compiles)}): some shapes or ranks missed the cache"
    )
