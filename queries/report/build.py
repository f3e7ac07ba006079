"""What `ledger report` shows, as data: tables, plot series and the evidence chain of every number.

Why a data layer of its own: the HTML page and the Markdown tables (:mod:`queries.report.render`)
must show the very same figures with the same provenance markers and n/a reasons, and each figure
must link to the chain `ledger explain` prints (metric -> runs -> requests -> artefact sha256 and
lines -> source report). So the figures are computed here once, by the metric registry
(:func:`queries.metrics.registry.run_metrics`, :func:`queries.metrics.registry.evaluate`) and the audit
(:class:`queries.audit.Auditor`), and the renderers only format them.

Rules kept here:

* R2: batches are never pooled. Every series belongs to one batch; the throughput plot draws each
  batch as its own series; hardware statistics are per batch.
* R9: a run whose metric is n/a has no curve or point; the plot lists it with the metric's reason.
* R13/R14: dmon ``sm`` is plotted as "GPU activity time", power per card; the three power
  statistics are shown side by side, never one for another.
* Synthetic data says so: a batch whose runs carry a ``synthetic`` metadata key or whose artefacts'
  file names say SYNTHETIC (the case-study generator does both) is labelled synthetic, as is a
  report built with ``synthetic=True`` or from a claims file marked ``synthetic: true``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.metrics.registry import METRICS, RunMetrics, evaluate, run_metrics
from bench_ledger.queries.report.model import (
    CARD_STATS,
    POWER_STATS,
    SAMPLERS,
    AuditRow,
    CardRow,
    Evidence,
    LaunchRow,
    ReportData,
    RunRow,
    anchor,
    card_column,
    evidence_id,
)
from bench_ledger.queries.report.plots import add_plots, card_key, hw_artefacts
from bench_ledger.queries.values import MetricValue, Scope
from bench_ledger.revisions import current
from bench_ledger.store import Ledger, unknown
from bench_ledger.vocab import READY

__all__ = ["build_report"]

# --------------------------------------------------------------------------- building


_R, _B, _A, _D, _L = (t.__table__ for t in (m.Run, m.Batch, m.Artefact, m.Deployment, m.Launch))
_LF = m.LogFact.__table__


def build_report(
    ledger: Ledger,
    batches: list[str] | None = None,
    claims_file: Path | None = None,
    *,
    synthetic: bool = False,
    auditor: Any = None,
) -> ReportData:
    """Everything `ledger report` shows for the named batches (default: every batch), side by side,
    and the audit of ``claims_file`` when given (``auditor``: a :class:`queries.audit.Auditor` of
    that file already run, so its verdicts are not computed twice)."""
    from bench_ledger.store import now

    with ledger.connection() as conn:
        known = [r[0] for r in conn.execute(sa.select(_B.c.name).order_by(_B.c.id))]
    names = list(batches) if batches else known
    for b in names:
        if b not in known:
            with ledger.connection() as conn:
                raise unknown(conn, "batch", b)
    rows = run_metrics(ledger, names) if names else []
    data = ReportData(
        title="bench-ledger report: " + (", ".join(names) or "no batches"),
        batches=names,
        generated_at=now(),
        ledger_url=ledger.display_url,
        synthetic_batches=[b for b in names if b in _synthetic_batches(ledger)] if names else [],
        runs=[
            RunRow(
                r.batch,
                r.run_id,
                r.label,
                r.input_target_tokens,
                r.output_cap_tokens,
                r.concurrency,
                r.request_count,
                r.values,
            )
            for r in rows
        ],
        launches=[],
        cards=[],
        power={},
        plots=[],
    )
    if synthetic:
        data.synthetic_batches = list(names)
    _run_evidence(ledger, data, rows)
    _launches(ledger, data)
    _hardware(ledger, data)
    add_plots(ledger, data, rows)
    if claims_file is not None:
        _audit(ledger, data, claims_file, auditor)
    return data


def _synthetic_batches(ledger: Ledger) -> set[str]:
    out: set[str] = set()
    with ledger.connection() as conn:
        for name, meta in conn.execute(sa.select(_B.c.name, _R.c.metadata_json).join(_R, _R.c.batch_id == _B.c.id)):
            if meta and "synthetic" in json.loads(meta):
                out.add(name)
        for (name,) in conn.execute(
            sa.select(_B.c.name).join(_A, _A.c.batch_id == _B.c.id).where(_A.c.file_name.contains("SYNTHETIC"))
        ):
            out.add(name)
    return out


def _run_chain(ledger: Ledger, run_ids: list[int]) -> list[str]:
    """runs -> requests (how many, which fields) -> artefacts (sha256, lines): `ledger explain`'s steps."""
    from bench_ledger.queries.audit import records_steps

    return [s.text for s in records_steps(ledger, {"runs": run_ids}, "")]


def _run_evidence(ledger: Ledger, data: ReportData, rows: list[RunMetrics]) -> None:
    for r in rows:
        origins = next((v.run_ids for v in r.values.values() if v.run_ids), [r.run_id])
        chain = _run_chain(ledger, list(origins))
        for name, mv in r.values.items():
            mt = METRICS[name]
            head = f"metric {name} over run {r.run_id} {r.label} (batch {r.batch}) = " + (
                f"{float(mv.value):.6g} {mv.unit} ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"
            )
            lines = [head, f"  formula: {mt.formula}", f"  over: {mt.interval}"]
            if mv.inputs:
                lines.append(f"  inputs: {_jsonable(mv.inputs)}")
            lines += ["  " + x for x in chain]
            data.evidence[evidence_id(r.run_id, name)] = Evidence(
                evidence_id(r.run_id, name), f"{name}, run {r.run_id} {r.label}", lines
            )


def _jsonable(x: Any) -> str:
    from bench_ledger.queries.audit import jsonable

    return json.dumps(jsonable(x), ensure_ascii=False, default=str)[:600]


def _launches(ledger: Ledger, data: ReportData) -> None:
    with ledger.connection() as conn:
        q = (
            sa.select(
                _L.c.id,
                _L.c.attempt,
                _L.c.outcome,
                _L.c.cause,
                _L.c.log_artefact_id,
                _D.c.name.label("dep"),
                _A.c.file_name,
                _A.c.sha256,
            )
            .join(_D, _D.c.id == _L.c.deployment_id)
            .outerjoin(_A, _A.c.id == _L.c.log_artefact_id)
            .where(current(_L))
            .order_by(_D.c.id, _L.c.attempt)
        )
        launches = conn.execute(q).all()
        stamps: dict[int, list] = defaultdict(list)
        ids = [x.log_artefact_id for x in launches if x.log_artefact_id is not None]
        if ids:
            for aid, kind, at, line in conn.execute(
                sa.select(_LF.c.artefact_id, _LF.c.kind, _LF.c.logged_at, _LF.c.line)
                .where(_LF.c.artefact_id.in_(ids), _LF.c.logged_at.is_not(None))
                .order_by(_LF.c.artefact_id, _LF.c.line)
            ):
                stamps[aid].append((kind, at, line))
    for x in launches:
        mv = evaluate(ledger, "seconds_to_ready", Scope(deployment=x.dep, launch=x.attempt))
        facts = stamps.get(x.log_artefact_id, [])
        at = sorted(f[1] for f in facts)
        ready = next((f[1] for f in facts if f[0] == READY), None)
        data.launches.append(
            LaunchRow(
                x.dep,
                x.attempt,
                x.outcome,
                x.cause,
                mv,
                f"{x.file_name} sha256 {x.sha256}" if x.file_name else None,
                at[0] if at else None,
                at[-1] if at else None,
                ready,
                anchor("ev-launch", x.id),
            )
        )
        lines = [
            f"launch {x.attempt} of {x.dep}: outcome {x.outcome} (declared)" + (f"; {x.cause}" if x.cause else ""),
            "metric seconds_to_ready = "
            + (f"{float(mv.value):g} s ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"),
            f"  formula: {METRICS['seconds_to_ready'].formula}",
        ]
        if mv.inputs:
            lines.append(f"  inputs: {_jsonable(mv.inputs)}")
        if x.file_name:
            lines.append(
                f"  artefact {x.log_artefact_id} {x.file_name} [vllm-server-log] sha256 {x.sha256}"
                + (f", timestamped lines {facts[0][2]}-{facts[-1][2]}" if facts else "")
            )
        else:
            lines.append("  no server log linked to this launch")
        eid = anchor("ev-launch", x.id)
        data.evidence[eid] = Evidence(eid, f"launch {x.attempt} of {x.dep}", lines)


def _hardware(ledger: Ledger, data: ReportData) -> None:
    for b in data.batches:
        with ledger.connection() as conn:
            if not hw_artefacts(conn, b):
                continue
        scope = Scope(batch=b)
        data.power[b] = {s: evaluate(ledger, s, scope) for s in POWER_STATS}
        for s, mv in data.power[b].items():
            eid = anchor("ev-hw", b, s)
            data.evidence[eid] = Evidence(eid, f"{s}, batch {b}", _hw_lines(ledger, mv, s, b))
        data.cards += _card_rows(ledger, data, b)


def _card_rows(ledger: Ledger, data: ReportData, batch: str) -> list[CardRow]:
    """One row per card and sampler file: each card's own statistics of every sampler's counters (never
    pooled across cards, R13/R14); a file with two counters of one kind (power.draw, power.draw.instant)
    gives a row per counter, since they are different quantities (R14)."""
    from bench_ledger.counters import meaning_of
    from bench_ledger.queries.captured import hardware_view

    kinds = {k for k, _, _ in CARD_STATS}
    by: dict[tuple[str, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for c in hardware_view(ledger, batch).cards:
        if c.quantity_kind in kinds:
            by[(c.card, c.artefact)][c.quantity_kind].append(c)
    rows: list[CardRow] = []
    lines: dict[str, list[str]] = defaultdict(list)
    meanings: dict[str, list[str]] = defaultdict(list)
    for (card, art), counters in sorted(by.items(), key=lambda kv: (card_key(kv[0][0]), kv[0][1])):
        for i in range(max(len(v) for v in counters.values())):
            chosen = {k: v[i] for k, v in counters.items() if i < len(v)}
            fmt = next(iter(chosen.values())).format
            row = CardRow(
                batch, card, {}, f"{fmt}, artefact {art}: " + ", ".join(sorted({x.counter for x in chosen.values()}))
            )
            for kind, stat, _ in CARD_STATS:
                if kind not in chosen:
                    continue
                c = chosen[kind]
                col = card_column(kind, stat)
                row.values[col], row.units[col] = (c.mean if stat == "mean" else c.max), c.unit
                exact = f" (exact mean {c.exact_mean})" if stat == "mean" and c.exact_mean else ""
                lines[col].append(
                    f"  card {card}: {row.values[col]} {c.unit}{exact} of counter {c.counter!r} over {c.values} "
                    f"values of {c.samples} samples; artefact {art} [{fmt}] lines {c.lines}"
                )
                meaning = (
                    f"  {c.counter!r} ({SAMPLERS.get(fmt, fmt)}): {meaning_of(c.counter) or 'no meaning recorded'}"
                )
                if meaning not in meanings[col]:
                    meanings[col].append(meaning)
            rows.append(row)
    for kind, stat, heading in CARD_STATS:
        eid = anchor("ev-hw", batch, card_column(kind, stat))
        head = [
            f"{heading}, batch {batch}: the {stat} of each card's own samples of one counter of kind {kind!r}, in "
            "its unit as printed; cards are never pooled (R13, R14); counters:"
        ]
        col = card_column(kind, stat)
        data.evidence[eid] = Evidence(
            eid, f"{heading} per card, batch {batch}", head + meanings[col] + (lines[col] or ["  none sampled"])
        )
    return rows


def _hw_lines(ledger: Ledger, mv: MetricValue, name: str, batch: str) -> list[str]:
    from bench_ledger.queries.audit import records_steps

    head = f"metric {name} over {mv.scope.describe()}" + (f" card {mv.scope.gpu}" if mv.scope.gpu else "") + " = "
    head += f"{float(mv.value):.6g} {mv.unit} ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"
    lines = [head, f"  formula: {METRICS[name].formula}"]
    if mv.inputs:
        lines.append(f"  inputs: {_jsonable(mv.inputs)}")
    return lines + ["  " + s.text for s in records_steps(ledger, mv.inputs, "")]


# --------------------------------------------------------------------------- audit


def _audit(ledger: Ledger, data: ReportData, claims_file: Path, auditor: Any = None) -> None:
    from bench_ledger.queries.audit import Auditor, claim_steps, source_step
    from bench_ledger.queries.claims import VERDICTS, load_claims

    if auditor is None:
        auditor = Auditor(load_claims(claims_file), ledger)
    claims = auditor.file
    report = auditor.run()
    data.audit_source = report.source_report
    data.audit_synthetic = report.synthetic
    for verdict in VERDICTS:
        rows = [r for r in report.results if r.verdict == verdict]
        if rows:
            data.audit[verdict] = [
                AuditRow(
                    r.claim_id,
                    r.text,
                    r.unit,
                    r.verdict,
                    r.rule,
                    r.recomputed,
                    r.why or r.missing or r.margin or "; ".join(r.notes) or None,
                    anchor("ev-claim", r.claim_id),
                )
                for r in rows
            ]
    source = source_step(claims, ledger, claims_file)
    for r in report.results:
        steps = [*claim_steps(auditor, r.claim_id), source]
        data.evidence[anchor("ev-claim", r.claim_id)] = Evidence(
            anchor("ev-claim", r.claim_id), f"claim {r.claim_id}", [s.text for s in steps]
        )
