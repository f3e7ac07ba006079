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

from bench_ledger.queries.audit import Auditor, Evaluator, FactorsOf, jsonable
from bench_ledger.queries.claims import ClaimsFile, Formula
from bench_ledger.queries.intervals import fmt
from bench_ledger.queries.types import MetricValue


@dataclass
class EvidenceStep:
    level: str  # claim | formula | metric | operand | runs | requests | artefacts | source report
    text: str
    detail: dict = field(default_factory=dict)


def explain(claims: ClaimsFile, ledger: Any, claim_id: str, *, claims_path: Path | None = None,
            evaluate: Evaluator | None = None, factors: FactorsOf | None = None) -> list[EvidenceStep]:  # fmt: skip
    """The evidence chain of one claim: claim -> formula or metric -> runs -> requests (how many,
    which fields) -> artefacts (sha256, file, lines) -> source report."""
    if claim_id not in claims.by_id():
        from bench_ledger.errors import NotFound

        raise NotFound(f"no claim {claim_id!r} in the claims file; ids: {', '.join(c.id for c in claims.claims[:10])}...")
    auditor = Auditor(claims, ledger, evaluate=evaluate, factors=factors)
    steps: list[EvidenceStep] = []
    _explain_claim(auditor, claim_id, steps, depth=0, seen=set())
    steps.append(_source_step(claims, ledger, claims_path))
    return steps


def _explain_claim(a: Auditor, cid: str, steps: list[EvidenceStep], depth: int, seen: set[str]) -> None:
    c = a.claims[cid]
    r = a.result(cid)
    pad = "  " * depth
    verdict = r.verdict + (f" ({r.rule})" if r.rule else "")
    steps.append(EvidenceStep("claim", f"{pad}claim {c.id}: {c.text!r} {c.unit or ''} [{c.kind}] -> {verdict}",
                              {"claim": c.id, "verdict": r.verdict, "rule": r.rule}))  # fmt: skip
    for line in filter(None, [r.statement and f"says: {r.statement}", r.printed and f"printed interval {r.printed}",
                              r.recomputed and f"recomputed {r.recomputed}", r.margin and f"margin: {r.margin}",
                              r.why and f"why: {r.why}", r.instead and f"instead: {r.instead}",
                              r.missing and f"missing: {r.missing}", r.provenance and f"provenance: {r.provenance}",
                              r.weakest and f"capped by its weakest operand: {r.weakest}",
                              *r.notes]):  # fmt: skip
        steps.append(EvidenceStep("claim", f"{pad}  {line}"))
    if cid in seen:
        return
    seen.add(cid)
    if c.quoted:
        steps.append(EvidenceStep("quoted", f"{pad}  quoted from: {c.quoted.source}"
                                  + (f" ({c.quoted.locator})" if c.quoted.locator else "")))  # fmt: skip
    if c.estimated:
        steps.append(EvidenceStep("estimated", f"{pad}  estimated from: {c.estimated.basis}"))
    if c.na and c.na.would_fill:
        steps.append(EvidenceStep("formula", f"{pad}  would fill with {a._formula_text(c.na.would_fill)}: refused (R9)"))
    if c.derived:
        steps.append(EvidenceStep("formula", f"{pad}  formula {a._formula_text(c.derived)}"))
        for ref in _refs(c.derived):
            _explain_claim(a, ref, steps, depth + 1, seen)
    if c.metric:
        mv = a.metric_values.get(cid)
        steps.append(EvidenceStep("metric", f"{pad}  metric {c.metric.name} over {c.metric.scope.to_scope().describe()}"
                                  + (f" = {fmt(Fraction(mv.value))} {mv.unit} ({mv.flag})" if mv and mv.value is not None
                                     else f" = n/a ({mv.na_reason})" if mv else "")))  # fmt: skip
        if mv is not None:
            if mv.inputs:
                steps.append(EvidenceStep("metric", f"{pad}  inputs: {jsonable(mv.inputs)}"))
            steps.extend(_records_steps(a.ledger, mv, pad + "  "))


def _refs(f: Formula) -> list[str]:
    from bench_ledger.queries.claims import claim_refs

    return claim_refs(f)


def _records_steps(ledger: Any, mv: MetricValue, pad: str) -> list[EvidenceStep]:
    """runs -> requests (how many, which fields) -> artefacts (sha256, file, lines)."""
    if ledger is None:
        return []
    import sqlalchemy as sa
    from bench_ledger import models as m

    out: list[EvidenceStep] = []
    artefact_ids: set[int] = set()
    for key in ("artefact_ids", "artefacts", "artefact_id", "log_artefacts", "log_artefact"):
        v = mv.inputs.get(key) if isinstance(mv.inputs, dict) else None
        if isinstance(v, int):
            artefact_ids.add(v)
        elif isinstance(v, list | tuple | set):
            artefact_ids |= {int(x) for x in v if isinstance(x, int) or str(x).isdigit()}
    with ledger.session() as s:
        # request metrics name their runs in inputs['runs']; log and hardware metrics name artefacts
        runs = mv.inputs.get("runs") if isinstance(mv.inputs, dict) else None
        for run_id in (runs if isinstance(runs, list) else []):
            run = s.get(m.Run, run_id)
            if run is None:
                continue
            batch = s.get(m.Batch, run.batch_id)
            out.append(EvidenceStep("runs", f"{pad}run {run.id} {run.label} (batch {batch.name if batch else '?'})",
                                    {"run_id": run.id}))  # fmt: skip
            n = s.execute(sa.select(sa.func.count()).select_from(m.Request).where(m.Request.run_id == run_id)).scalar()
            caps = s.execute(sa.select(m.Capture).where(m.Capture.run_id == run_id)).scalars().all()
            for cap in caps:
                fields = s.execute(sa.select(m.CaptureField.field).where(m.CaptureField.capture_id == cap.id)).scalars().all()
                art = s.get(m.Artefact, cap.artefact_id)
                lines = s.execute(sa.select(sa.func.min(m.Request.line), sa.func.max(m.Request.line), sa.func.count())
                                  .where(m.Request.run_id == run_id, m.Request.artefact_id == cap.artefact_id)).first()  # fmt: skip
                out.append(EvidenceStep("requests", f"{pad}  requests: {lines[2] if lines else n} of {n} "
                                        f"(fields: {', '.join(sorted(fields)) or 'none'})"))  # fmt: skip
                if art is not None:
                    artefact_ids.discard(art.id)
                    where = f", lines {lines[0]}-{lines[1]}" if lines and lines[0] is not None else ""
                    out.append(EvidenceStep("artefacts", f"{pad}    artefact {art.id} {art.file_name} [{art.format}] "
                                            f"sha256 {art.sha256}{where}", {"sha256": art.sha256}))  # fmt: skip
        for aid in sorted(artefact_ids):
            art = s.get(m.Artefact, aid)
            if art is None:
                continue
            lines = _artefact_lines(s, aid)
            out.append(EvidenceStep("artefacts", f"{pad}artefact {art.id} {art.file_name} [{art.format}] "
                                    f"sha256 {art.sha256}{lines}", {"sha256": art.sha256}))  # fmt: skip
    return out


def _artefact_lines(s: Any, aid: int) -> str:
    import sqlalchemy as sa
    from bench_ledger import models as m

    for table in (m.LogFact, m.HardwareSample, m.Request):
        row = s.execute(sa.select(sa.func.min(table.line), sa.func.max(table.line), sa.func.count())
                        .where(table.artefact_id == aid)).first()  # fmt: skip
        if row and row[2]:
            return f", lines {row[0]}-{row[1]} ({row[2]} rows of {table.__tablename__})"
    return ""


def _source_step(claims: ClaimsFile, ledger: Any, claims_path: Path | None) -> EvidenceStep:
    src = claims.source_report
    sha = None
    if ledger is not None:
        try:
            import sqlalchemy as sa
            from bench_ledger import models as m

            with ledger.session() as s:
                row = s.execute(sa.select(m.SourceReport).where(m.SourceReport.slug == src.slug)).scalar_one_or_none()
                sha = row.text_sha256 if row is not None else None
        except Exception:  # noqa: BLE001 - the report need not be declared
            sha = None
    if sha is None and src.file and claims_path is not None:
        p = (claims_path.parent / src.file)
        if p.is_file():
            sha = hashlib.sha256(p.read_bytes()).hexdigest()
    return EvidenceStep("source report", f"source report {src.slug}: {src.title}"
                        + (f" (file {src.file})" if src.file else "") + (f" sha256 {sha}" if sha else ""),
                        {"slug": src.slug, "sha256": sha})  # fmt: skip
