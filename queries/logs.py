"""Read-side view of the server-log facts of a batch or deployment (`ledger logs`), and the link between a
launch, its log and the runs that ran against it.

Why it is built this way:

* Every value says where it comes from: the artefact (id, file, format) and the lines it was read from.
* Log facts keep their line; the launch a log belongs to is the launch that names it
  (``launch.log_artefact_id``); a run ran against the launch of its deployment whose ``label`` its
  ``run.metadata.launch`` names (:func:`launch_runs`, the one definition of that link). Nothing is
  guessed from times or deployments: without a label the run link is n/a with the reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import UsageError
from bench_ledger.queries.metrics.hardware import LF
from bench_ledger.revisions import current
from bench_ledger.store import Ledger, unknown
from bench_ledger.vocab import (
    COMPILE_CACHE_LOAD_SECONDS,
    GRAPH_COMPILE_SECONDS,
    MAX_MODEL_LEN,
    MAX_NUM_BATCHED_TOKENS,
    WARM_COMPILE,
    engine_arg_kind,
)

__all__ = ["LogFactRow", "LogView", "log_view", "run_launch", "warm_compile_of_log"]

_A, _B, _D, _L, _R = (t.__table__ for t in (m.Artefact, m.Batch, m.Deployment, m.Launch, m.Run))


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


_NO_LAUNCH = "no launch names this log (a manifest's launch names its log: `log:` under the launch, `ledger declare`)"
_NO_LABEL = (
    "its launch has no label, and runs find their launch by label (run.metadata.launch; a manifest launch's `label:`)"
)
_NO_RUNS = "no current run of the deployment names this launch's label in run.metadata.launch"


def _launch_of(meta: str | None) -> str | None:
    if not meta:
        return None
    try:
        value = json.loads(meta).get("launch")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _launch_runs(conn: sa.Connection, launch_ids: list[int]) -> dict[int, list[dict]]:
    """The current runs of each launch: runs of the launch's deployment (theirs, or their batch's)
    whose ``run.metadata.launch`` is the launch's label. The one definition of the run -> launch link."""
    if not launch_ids:
        return {}
    launches = conn.execute(sa.select(_L.c.id, _L.c.deployment_id, _L.c.label).where(_L.c.id.in_(launch_ids))).all()
    out: dict[int, list[dict]] = {la.id: [] for la in launches}
    by_key = {(la.deployment_id, la.label): la.id for la in launches if la.label is not None}
    if not by_key:
        return out
    dep = sa.func.coalesce(_R.c.deployment_id, _B.c.deployment_id)
    rows = conn.execute(
        sa.select(_R.c.id, _R.c.label, _R.c.metadata_json, _B.c.name.label("batch"), dep.label("dep"))
        .join(_B, _B.c.id == _R.c.batch_id)
        .where(current(_R), dep.in_(sorted({d for d, _ in by_key})))
        .order_by(_R.c.id)
    ).all()
    for r in rows:
        lid = by_key.get((r.dep, _launch_of(r.metadata_json)))
        if lid is not None:
            out[lid].append({"run": r.id, "batch": r.batch, "label": r.label})
    return out


def run_launch(conn: sa.Connection, run_id: int) -> tuple[dict | None, str]:
    """The launch a run ran against ({deployment, attempt, label, log_artefact_id}) or None, and why."""
    dep = sa.func.coalesce(_R.c.deployment_id, _B.c.deployment_id)
    r = conn.execute(
        sa.select(_R.c.metadata_json, dep.label("dep")).join(_B, _B.c.id == _R.c.batch_id).where(_R.c.id == run_id)
    ).one()
    name = _launch_of(r.metadata_json)
    if name is None:
        return None, "the run names no launch (run.metadata.launch)"
    if r.dep is None:
        return None, f"the run names launch {name!r} but has no deployment, and launches belong to a deployment"
    la = conn.execute(
        sa.select(_L.c.id, _L.c.attempt, _L.c.label, _L.c.log_artefact_id, _D.c.name)
        .join(_D, _D.c.id == _L.c.deployment_id)
        .where(_L.c.deployment_id == r.dep, _L.c.label == name, current(_L))
        .order_by(_L.c.id)
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
            LF.c.kind.in_([WARM_COMPILE, COMPILE_CACHE_LOAD_SECONDS, GRAPH_COMPILE_SECONDS]),
        )
        .order_by(LF.c.line)
    ).all()
    rows = [LogFactRow(artefact_id, "", f.line, None, f.kind, f.text, None, None, None) for f in own]
    warm = next((f for f in rows if f.kind == WARM_COMPILE), None)
    return (warm.text if warm else None), _warm_basis(rows, warm)


def log_view(ledger: Ledger, batch: str | None = None, deployment: str | None = None) -> LogView:
    """Server-log facts with file and line, of a batch's logs or a deployment's (its artefacts and the
    logs of its launches)."""
    if (batch is None) == (deployment is None):
        raise UsageError("name the logs: --batch B or --deployment D (one of them)")
    with ledger.connection() as conn:
        has_facts = sa.exists().where(LF.c.artefact_id == _A.c.id)
        stmt = (
            sa.select(_A.c.id, _A.c.file_name, _B.c.name.label("batch"), _D.c.name.label("dep"))
            .outerjoin(_B, _B.c.id == _A.c.batch_id)
            .outerjoin(_D, _D.c.id == _A.c.deployment_id)
            .where(has_facts)
        )
        if batch is not None:
            bid = conn.execute(sa.select(_B.c.id).where(_B.c.name == batch)).scalar()
            if bid is None:
                raise unknown(conn, "batch", batch)
            stmt, scope = stmt.where(_A.c.batch_id == bid), f"batch {batch}"
        else:
            assert deployment is not None  # one of the two, checked above
            did = conn.execute(sa.select(_D.c.id).where(_D.c.name == deployment)).scalar()
            if did is None:
                raise unknown(conn, "deployment", deployment)
            launched = sa.select(_L.c.log_artefact_id).where(
                _L.c.deployment_id == did, _L.c.log_artefact_id.is_not(None)
            )
            stmt, scope = (
                stmt.where(sa.or_(_A.c.deployment_id == did, _A.c.id.in_(launched))),
                f"deployment {deployment}",
            )
        arts = conn.execute(stmt.order_by(_A.c.id)).all()
        ids = [a.id for a in arts]
        dep_rows = {
            r.name: dict(r._mapping)
            for r in conn.execute(
                sa.select(_D).where(_D.c.name.in_(sorted({a.dep for a in arts if a.dep is not None})))
            )
        }
        launches: dict[int, list] = {}
        for r in conn.execute(
            sa.select(_L.c.id, _L.c.log_artefact_id, _D.c.name, _L.c.attempt, _L.c.label)
            .join(_D, _D.c.id == _L.c.deployment_id)
            .where(_L.c.log_artefact_id.in_(ids), current(_L))
            .order_by(_L.c.id)
        ):
            launches.setdefault(r.log_artefact_id, []).append(r)
        runs_of = _launch_runs(conn, [la.id for las in launches.values() for la in las])
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
        warm = next((f for f in own if f.kind == WARM_COMPILE), None)
        linked = launches.get(a.id, [])
        runs = [r for la in linked for r in runs_of.get(la.id, [])]
        why = None
        if not linked:
            why = _NO_LAUNCH
        elif not runs:
            why = _NO_RUNS if any(la.label is not None for la in linked) else _NO_LABEL
        logs.append(
            {
                "artefact": a.id,
                "file": a.file_name,
                "batch": a.batch,
                "deployment": a.dep,
                "launch": ", ".join(f"{la.name}#{la.attempt}" + (f" ({la.label})" if la.label else "") for la in linked)
                or None,
                "launch_reason": None if linked else _NO_LAUNCH,
                "runs": runs or None,
                "runs_reason": why,
                "warm_compile": warm.text if warm else None,
                "warm_compile_basis": _warm_basis(own, warm),
                "settings": _settings_check(own, dep_rows.get(a.dep) if a.dep else None, a.dep),
            }
        )
    return LogView(scope=scope, logs=logs, facts=facts)


# deployment field -> the log fact kinds that state it, preferred first ("Using max model len" is the
# value the engine resolved; "non-default args" is what the user passed)
_SETTINGS: dict[str, tuple[str, ...]] = {
    "max_model_len": (MAX_MODEL_LEN, engine_arg_kind("max_model_len")),
    "tp": (engine_arg_kind("tensor_parallel_size"),),
    "pp": (engine_arg_kind("pipeline_parallel_size"),),
    "dp": (engine_arg_kind("data_parallel_size"),),
    "max_num_seqs": (engine_arg_kind("max_num_seqs"),),
    "chunked_prefill_tokens": (MAX_NUM_BATCHED_TOKENS, engine_arg_kind("max_num_batched_tokens")),
}


def _settings_check(facts: list[LogFactRow], declared: dict[str, object] | None, deployment: str | None) -> list[dict]:
    """Each engine setting the deployment declares against what the log printed: agree, differ, or
    n/a with why (not declared, or not printed: a non-default arg absent from the dict was left at
    vLLM's default, which the ledger does not assume)."""
    out = []
    for fld, kinds in _SETTINGS.items():
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
    loads = [f.line for f in facts if f.kind == COMPILE_CACHE_LOAD_SECONDS]
    compiles = [f.line for f in facts if f.kind == GRAPH_COMPILE_SECONDS]
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
