"""Check what benchmark tools reported, by each tool's own definition (R15).

A tool's summary (vLLM's ``output_throughput``, llmperf's ``results_ttft_s_quantiles_p99``...) is
a claim: stored as ``published_value`` with flag ``reported``. :func:`check` gives every reported
value of the runs in scope two kinds of rows:

* section ``records``: recomputed from the run's per-request records the way *that tool* computes
  it (the tool's entry in :mod:`queries.check.registry`, its statistic definition from
  :mod:`queries.check.stat_definitions`), or "not re-derivable" with the reason the records give (none in
  the run's artefacts, a sample, a field not captured, a value only the tool's clock knows);
* section ``identity``: the tool's own summary identities over the reported values alone
  (``output_throughput = total_output_tokens / duration``, ``median = p50``, ``avg x count = sum``),
  which hold exactly on an untouched file and catch hand-edited or mis-merged summaries.

Recomputation here is deliberately separate from the metric registry: it follows each tool's
definition, which is not always the ledger's (R3, R4).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.check.core import (
    AGREE,
    DISAGREE,
    IDENTITY,
    NOT_DERIVABLE,
    REL_FLOOR,
    CheckRow,
    Records,
    Reported,
    is_exact_count,
    load_records,
    reported_interval,
    tolerance,
)
from bench_ledger.queries.check.registry import tool_check
from bench_ledger.queries.check.stat_definitions import NotDerivable
from bench_ledger.revisions import current, require_current
from bench_ledger.store import Ledger
from bench_ledger.tools import PRINTED_ROUNDED

__all__ = ["check"]

_PV, _R, _B, _A = (t.__table__ for t in (m.PublishedValue, m.Run, m.Batch, m.Artefact))


def _as_reported(pv, machine: bool) -> Reported | None:
    if pv.value is None:
        return None
    value = Fraction(Decimal(pv.value))
    # a console table prints rounded text that may look like a float's repr ("0.17"): never machine
    iv = reported_interval(pv.text, value, pv.quantity_kind, machine and pv.artefact_format not in PRINTED_ROUNDED)
    return None if iv is None else Reported(pv.key, pv.text, value, iv)


def _reported(rows, machine: bool) -> dict[str, Reported]:
    out: dict[str, Reported] = {}
    for pv in rows:
        if (r := _as_reported(pv, machine)) is not None:
            out.setdefault(pv.key, r)
    return out


def _where(pv) -> str:
    return f"{pv.file_name or 'a report'} {pv.locator or ''}".strip()


def _repeats(rid: int, pvs: list, machine: bool) -> list[CheckRow]:
    """A key the run's artefacts report more than once (a sweep's summary.json and its run=N.json, a
    console table and its JSON, a line printed twice): every repeat must meet the first (R11)."""
    first: dict[str, tuple] = {}
    out = []
    for pv in pvs:
        r = _as_reported(pv, machine)
        if pv.key not in first:
            first[pv.key] = (pv, r)
            continue
        pv0, r0 = first[pv.key]
        name = f"{pv.key} in {_where(pv)} = {pv.key} in {_where(pv0)}"
        if r is None or r0 is None:
            if pv.file_name == pv0.file_name:
                continue  # a text event a log repeats (MLPerf's generic_message), not one quantity printed twice
            same = pv.text.strip() == pv0.text.strip()
            out.append(
                CheckRow(
                    rid,
                    pv.batch,
                    pv.label,
                    pv.tool,
                    pv.key,
                    pv.text,
                    pv.unit,
                    None,
                    AGREE if same else DISAGREE,
                    None,
                    f"{name}: printed {pv.text!r} and {pv0.text!r}",
                    IDENTITY,
                    "repeated value",
                )
            )
            continue
        ok = r.interval.meets(r0.interval)
        out.append(
            CheckRow(
                rid,
                pv.batch,
                pv.label,
                pv.tool,
                pv.key,
                pv.text,
                pv.unit,
                float(r0.value),
                AGREE if ok else DISAGREE,
                f"±{float((r.interval.width + r0.interval.width) / 2):.3g}",
                f"{name}: {pv0.text}",
                IDENTITY,
                "repeated value",
            )
        )
    return out


# --------------------------------------------------------------------------- the check


def check(ledger: Ledger, batch: str | None = None, run_id: int | None = None) -> list[CheckRow]:
    """Every reported value of the runs in scope: agree / disagree / not re-derivable (R15),
    recomputed from records and, where the tool has them, by its summary identities."""
    stmt = (
        sa.select(
            _R.c.id.label("run_id"),
            _PV.c.run_id.label("origin"),
            _B.c.name.label("batch"),
            _R.c.label,
            _R.c.tool,
            _R.c.request_count,
            _PV.c.key,
            _PV.c.text,
            _PV.c.value,
            _PV.c.unit,
            _PV.c.quantity_kind,
            _PV.c.locator,
            _PV.c.note,
            _A.c.format.label("artefact_format"),
            _A.c.file_name,
        )
        # values hang on a run's first revision (Run.origin_id); the row shown is its current revision
        .select_from(_PV)
        .join(_R, sa.and_(sa.func.coalesce(_R.c.origin_id, _R.c.id) == _PV.c.run_id, current(_R)))
        .join(_B, _B.c.id == _R.c.batch_id)
        .outerjoin(_A, _A.c.id == _PV.c.artefact_id)
        .where(_PV.c.flag == "reported", current(_PV))
        .order_by(_B.c.id, _R.c.id, _PV.c.id)
    )
    if batch is not None:
        with ledger.session() as s:
            Ledger.get_batch(s, batch)
        stmt = stmt.where(_B.c.name == batch)
    if run_id is not None:
        with ledger.session() as s:
            Ledger.get_run(s, run_id)
            require_current(s.connection(), "run", run_id)
        stmt = stmt.where(_R.c.id == run_id)
    out: list[CheckRow] = []
    with ledger.connection() as conn:
        by_run: dict[int, list] = {}
        for pv in conn.execute(stmt):
            by_run.setdefault(pv.run_id, []).append(pv)
        for rid, pvs in by_run.items():
            first = pvs[0]
            tc = tool_check(first.tool)
            rec = load_records(conn, first.origin)
            if isinstance(rec, Records):
                rec.notes = {pv.key: pv.note for pv in pvs if pv.note is not None}
                if tc is not None and tc.recompute is not None and "chunk_gaps" in rec.fields:
                    rec.source.read_ahead()  # the tool's checks read the records' columns and gaps
            machine = tc is not None and tc.machine_floats
            reported = _reported(pvs, machine)
            for pv in pvs:
                out.append(_record_row(pv, rec, tc))
            out.extend(_repeats(rid, pvs, machine))
            if tc is not None and tc.text_checks is not None:
                texts: dict[str, str] = {}
                for pv in pvs:
                    if pv.value is None:
                        texts.setdefault(pv.key, pv.text.strip())
                for tr in tc.text_checks(texts):
                    out.append(
                        CheckRow(
                            rid,
                            first.batch,
                            first.label,
                            first.tool,
                            tr.key,
                            texts[tr.key],
                            None,
                            None,
                            tr.status,
                            None,
                            tr.reason,
                            IDENTITY,
                            tr.name,
                        )
                    )
            if tc is not None:
                units = _units(pvs)
                for ident in tc.identities(reported, first):
                    out.append(
                        CheckRow(
                            rid,
                            first.batch,
                            first.label,
                            first.tool,
                            ident.key,
                            reported[ident.key].text,
                            units.get(ident.key),
                            ident.recomputed,
                            ident.status,
                            ident.tolerance,
                            ident.reason,
                            IDENTITY,
                            ident.name,
                        )
                    )
    return out


def _units(pvs) -> dict[str, str | None]:
    """Each key's unit, as its first reported value gives it."""
    out: dict[str, str | None] = {}
    for p in pvs:
        out.setdefault(p.key, p.unit)
    return out


def _record_row(pv, rec: Records | str, tc) -> CheckRow:
    row = CheckRow(pv.run_id, pv.batch, pv.label, pv.tool, pv.key, pv.text, pv.unit, None, NOT_DERIVABLE, None, None)
    half = tolerance(pv.text)
    if pv.value is None or half is None:
        if tc is not None and isinstance(rec, Records) and tc.recompute_text is not None:
            try:
                agrees, how = tc.recompute_text(pv.key, pv.text, rec)
            except NotDerivable as exc:
                row.reason = str(exc)
                return row
            row.status, row.reason, row.definition = (AGREE if agrees else DISAGREE), how, tc.definition.name
            return row
        # a text the tool's check recomputes from records (llmperf's error-code dict): without records, say so
        recomputable = tc is not None and tc.recompute_text is not None and isinstance(rec, str)
        row.reason = rec if recomputable and isinstance(rec, str) else "printed as text, not a number"
        return row
    if isinstance(rec, str):
        row.reason = rec
        return row
    if tc is None or tc.recompute is None:
        row.reason = f"recomputation by {pv.tool or 'an unknown tool'}'s own definition is not implemented"
        return row
    try:
        value, how = tc.recompute(pv.key, rec)
    except NotDerivable as exc:
        row.reason = str(exc)
        return row
    reported = Fraction(Decimal(pv.value))
    # an integer a tool's JSON wrote (``"error_rate": 0``) is that integer exactly, whatever its kind
    exact = is_exact_count(pv.text, pv.quantity_kind) or (
        tc.machine_floats and pv.artefact_format not in PRINTED_ROUNDED and pv.text.strip().lstrip("-").isdigit()
    )
    tol = REL_FLOOR * abs(reported) if exact else max(half, REL_FLOOR * abs(reported))
    row.recomputed = float(value)
    row.tolerance = f"±{float(tol):.3g}"
    row.status = AGREE if abs(value - reported) <= tol else DISAGREE
    row.reason = how
    row.definition = tc.definition.name
    return row
