"""Explain a claim: the evidence chain from the printed number back to the bytes.

claim -> formula or metric -> runs -> requests (how many, which fields) -> artefacts (sha256, file,
lines) -> source report. It walks the same :class:`queries.audit.Auditor` that gave the verdict.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from bench_ledger.queries.audit._auditor import Auditor
from bench_ledger.queries.audit._defaults import Evaluator, FactorsOf
from bench_ledger.queries.audit._operands import formula_text
from bench_ledger.queries.audit._result import jsonable
from bench_ledger.queries.claims import ClaimsFile, Formula
from bench_ledger.queries.intervals import fmt

__all__ = ["EvidenceStep", "claim_steps", "explain", "records_steps", "source_step"]


@dataclass
class EvidenceStep:
    level: str  # claim | formula | metric | operand | runs | requests | artefacts | source report
    text: str
    detail: dict = field(default_factory=dict)


def explain(
    claims: ClaimsFile,
    ledger: Any,
    claim_id: str,
    *,
    claims_path: Path | None = None,
    evaluate: Evaluator | None = None,
    factors: FactorsOf | None = None,
    auditor: Auditor | None = None,
) -> list[EvidenceStep]:
    """The evidence chain of one claim: claim -> formula or metric -> runs -> requests (how many,
    which fields) -> artefacts (sha256, file, lines) -> source report.

    ``auditor``: one already used for these claims (its verdicts are memoised), so that explaining
    every claim of a file (`ledger report`) evaluates each metric once."""
    if claim_id not in claims.by_id():
        from bench_ledger.errors import NotFound

        raise NotFound(
            f"no claim {claim_id!r} in the claims file; ids: {', '.join(c.id for c in claims.claims[:10])}..."
        )
    if auditor is None:
        auditor = Auditor(claims, ledger, evaluate=evaluate, factors=factors)
    return [*claim_steps(auditor, claim_id), source_step(claims, ledger, claims_path)]


def claim_steps(auditor: Auditor, claim_id: str) -> list[EvidenceStep]:
    """The chain of one claim down to the artefacts, without the source-report step (the same for
    every claim of a file: :func:`source_step`)."""
    steps: list[EvidenceStep] = []
    _explain_claim(auditor, claim_id, steps, depth=0, seen=set())
    return steps


def _explain_claim(a: Auditor, cid: str, steps: list[EvidenceStep], depth: int, seen: set[str]) -> None:
    c = a.claims[cid]
    r = a.result(cid)
    pad = "  " * depth
    verdict = r.verdict + (f" ({r.rule})" if r.rule else "")
    steps.append(
        EvidenceStep(
            "claim",
            f"{pad}claim {c.id}: {c.text!r} {c.unit or ''} [{c.kind}] -> {verdict}",
            {"claim": c.id, "verdict": r.verdict, "rule": r.rule},
        )
    )
    for line in filter(
        None,
        [
            r.statement and f"says: {r.statement}",
            r.printed and f"printed interval {r.printed}",
            r.recomputed and f"recomputed {r.recomputed}",
            r.margin and f"margin: {r.margin}",
            r.why and f"why: {r.why}",
            r.instead and f"instead: {r.instead}",
            r.missing and f"missing: {r.missing}",
            r.provenance and f"provenance: {r.provenance}",
            r.weakest and f"capped by its weakest operand: {r.weakest}",
            _ledger_operands(r.evidence.get("ledger_operands")),
            r.evidence.get("definition") and f"definition that reproduces it: {r.evidence['definition']}",
            *r.notes,
        ],
    ):
        steps.append(EvidenceStep("claim", f"{pad}  {line}"))
    if cid in seen:
        return
    seen.add(cid)
    if c.quoted:
        steps.append(
            EvidenceStep(
                "quoted",
                f"{pad}  quoted from: {c.quoted.source}" + (f" ({c.quoted.locator})" if c.quoted.locator else ""),
                {"claim": c.id, "source": c.quoted.source},
            )
        )
    if c.estimated:
        steps.append(
            EvidenceStep(
                "estimated", f"{pad}  estimated from: {c.estimated.basis}", {"claim": c.id, "basis": c.estimated.basis}
            )
        )
    if c.na and c.na.would_fill:
        steps.append(EvidenceStep("formula", f"{pad}  would fill with {formula_text(c.na.would_fill)}: refused (R9)"))
    if c.derived:
        steps.append(
            EvidenceStep(
                "formula",
                f"{pad}  formula {formula_text(c.derived)}",
                {"claim": c.id, "formula": formula_text(c.derived), "operands": _refs(c.derived)},
            )
        )
        for ref in _refs(c.derived):
            _explain_claim(a, ref, steps, depth + 1, seen)
    if c.metric:
        mv = a.metric_values.get(cid)
        steps.append(
            EvidenceStep(
                "metric",
                f"{pad}  metric {c.metric.name} over {c.metric.scope.to_scope().describe()}"
                + (
                    f" = {fmt(Fraction(mv.value))} {mv.unit} ({mv.flag})"
                    if mv and mv.value is not None
                    else f" = n/a ({mv.na_reason})"
                    if mv
                    else ""
                ),
                {
                    "claim": c.id,
                    "metric": c.metric.name,
                    "scope": c.metric.scope.to_scope().describe(),
                    "value": None if mv is None or mv.value is None else fmt(Fraction(mv.value)),
                    "unit": mv.unit if mv else None,
                    "flag": mv.flag if mv else None,
                    "na_reason": mv.na_reason if mv else None,
                },
            )
        )
        if mv is not None:
            if mv.inputs:
                steps.append(EvidenceStep("metric", f"{pad}  inputs: {jsonable(mv.inputs)}"))
            steps.extend(records_steps(a.ledger, mv.inputs, pad + "  "))


def _ledger_operands(lo: dict | None) -> str | None:
    """The derivation recomputed from the ledger's values of its operands (queries.audit._raw), in one line."""
    if not lo:
        return None
    used = ", ".join(f"{k} = {v}" for k, v in lo["operands"].items())
    return f"from the ledger's values ({used}): {lo['recomputed']}, {lo['margin']}"


def _refs(f: Formula) -> list[str]:
    from bench_ledger.queries.claims import claim_refs

    return claim_refs(f)


def records_steps(ledger: Any, inputs: dict, pad: str) -> list[EvidenceStep]:
    """runs -> requests (how many, which fields) -> artefacts (sha256, file, lines), from a metric
    value's ``inputs`` (request metrics name ``runs``; log and hardware metrics name artefacts)."""
    if ledger is None:
        return []
    import sqlalchemy as sa
    from bench_ledger import models as m

    out: list[EvidenceStep] = []
    artefact_ids: set[int] = set()
    for key in ("artefact_ids", "artefacts", "artefact_id", "log_artefacts", "log_artefact"):
        v = inputs.get(key) if isinstance(inputs, dict) else None
        if isinstance(v, int):
            artefact_ids.add(v)
        elif isinstance(v, list | tuple | set):
            artefact_ids |= {int(x) for x in v if isinstance(x, int) or str(x).isdigit()}
    with ledger.session() as s:
        # request metrics name their runs in inputs['runs']; log and hardware metrics name artefacts.
        # A few grouped statements for all the runs (a batch-wide claim names every run of a sweep).
        runs = inputs.get("runs") if isinstance(inputs, dict) else None
        run_ids = [r for r in (runs if isinstance(runs, list) else []) if isinstance(r, int)]
        R, Bt, Q, C, F, A = (t.__table__ for t in (m.Run, m.Batch, m.Request, m.Capture, m.CaptureField, m.Artefact))
        found = {
            r.id: r
            for r in s.execute(
                sa.select(R.c.id, R.c.label, R.c.tool, R.c.tool_version, Bt.c.name.label("batch"))
                .outerjoin(Bt, Bt.c.id == R.c.batch_id)
                .where(R.c.id.in_(run_ids))
            )
        }
        per_run = dict(
            s.execute(sa.select(Q.c.run_id, sa.func.count()).where(Q.c.run_id.in_(run_ids)).group_by(Q.c.run_id)).all()
        )
        caps: dict[int, list] = {}
        for cap in s.execute(
            sa.select(
                C.c.id,
                C.c.run_id,
                C.c.artefact_id,
                A.c.file_name,
                A.c.format,
                A.c.sha256,
                A.c.importer,
                A.c.importer_version,
                A.c.imported_at,
            )
            .outerjoin(A, A.c.id == C.c.artefact_id)
            .where(C.c.run_id.in_(run_ids))
            .order_by(C.c.id)
        ):
            caps.setdefault(cap.run_id, []).append(cap)
        cap_ids = [c.id for cs in caps.values() for c in cs]
        fields: dict[int, list[str]] = {}
        for cid, name in s.execute(sa.select(F.c.capture_id, F.c.field).where(F.c.capture_id.in_(cap_ids))):
            fields.setdefault(cid, []).append(name)
        spans = {
            (r.run_id, r.artefact_id): r
            for r in s.execute(
                sa.select(
                    Q.c.run_id,
                    Q.c.artefact_id,
                    sa.func.min(Q.c.line).label("lo"),
                    sa.func.max(Q.c.line).label("hi"),
                    sa.func.count().label("n"),
                )
                .where(Q.c.run_id.in_(run_ids))
                .group_by(Q.c.run_id, Q.c.artefact_id)
            )
        }
        for run_id in run_ids:
            run = found.get(run_id)
            if run is None:
                continue
            out.append(
                EvidenceStep(
                    "runs",
                    f"{pad}run {run.id} {run.label} (batch {run.batch or '?'})",
                    {
                        "run_id": run.id,
                        "label": run.label,
                        "batch": run.batch,
                        "tool": run.tool,
                        "tool_version": run.tool_version,
                    },
                )
            )
            n = per_run.get(run_id, 0)
            for cap in caps.get(run_id, []):
                span = spans.get((run_id, cap.artefact_id))
                out.append(
                    EvidenceStep(
                        "requests",
                        f"{pad}  requests: {span.n if span else 0} of {n} "
                        f"(fields: {', '.join(sorted(fields.get(cap.id, []))) or 'none'})",
                        {
                            "run_id": run_id,
                            "artefact_id": cap.artefact_id,
                            "count": span.n if span else 0,
                            "fields": sorted(fields.get(cap.id, [])),
                            "lines": [span.lo, span.hi] if span and span.lo is not None else None,
                        },
                    )
                )
                if cap.sha256 is not None:
                    artefact_ids.discard(cap.artefact_id)
                    where = f", lines {span.lo}-{span.hi}" if span and span.lo is not None else ""
                    out.append(
                        EvidenceStep(
                            "artefacts",
                            f"{pad}    artefact {cap.artefact_id} {cap.file_name} "
                            f"[{cap.format}] sha256 {cap.sha256}{where}",
                            {"sha256": cap.sha256, **_artefact_detail(cap), "run_id": run_id},
                        )
                    )
        for aid in sorted(artefact_ids):
            art = s.get(m.Artefact, aid)
            if art is None:
                continue
            lines = _artefact_lines(s, aid)
            out.append(
                EvidenceStep(
                    "artefacts",
                    f"{pad}artefact {art.id} {art.file_name} [{art.format}] sha256 {art.sha256}{lines}",
                    {"sha256": art.sha256, **_artefact_detail(art)},
                )
            )
    return out


def _artefact_detail(a: Any) -> dict:
    """Who wrote and read an artefact: for the provenance graph (queries.audit._provenance)."""
    return {
        "artefact_id": getattr(a, "artefact_id", None) or a.id,
        "file_name": a.file_name,
        "format": a.format,
        "importer": a.importer,
        "importer_version": a.importer_version,
        "imported_at": str(a.imported_at),
    }


def _artefact_lines(s: Any, aid: int) -> str:
    import sqlalchemy as sa
    from bench_ledger import models as m

    for table in (m.LogFact, m.HardwareSample, m.Request):
        row = s.execute(
            sa.select(sa.func.min(table.line), sa.func.max(table.line), sa.func.count()).where(table.artefact_id == aid)
        ).first()
        if row and row[2]:
            return f", lines {row[0]}-{row[1]} ({row[2]} rows of {table.__tablename__})"
    return ""


def source_step(claims: ClaimsFile, ledger: Any, claims_path: Path | None) -> EvidenceStep:
    src = claims.source_report
    sha = None
    if ledger is not None:
        import sqlalchemy as sa
        from bench_ledger import models as m

        with ledger.session() as s:  # the report need not be declared: then its file's digest, if any
            sha = s.scalar(sa.select(m.SourceReport.text_sha256).where(m.SourceReport.slug == src.slug))
    if sha is None and src.file and claims_path is not None:
        p = claims_path.parent / src.file
        if p.is_file():
            sha = hashlib.sha256(p.read_bytes()).hexdigest()
    return EvidenceStep(
        "source report",
        f"source report {src.slug}: {src.title}"
        + (f" (file {src.file})" if src.file else "")
        + (f" sha256 {sha}" if sha else ""),
        {"slug": src.slug, "sha256": sha},
    )
