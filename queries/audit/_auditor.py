"""Audit a claims file against a ledger: can each published number be re-derived, and is each
inference allowed?

Every claim gets one verdict:

=============== ===============================================================================
reproduced      a metric claim: the records give a value inside the printed rounding interval
consistent      a derived claim: the recomputed interval meets the printed one (R11)
mismatch        the recomputed value (shown, with the difference) falls outside the printed rounding
raw-mismatch    a derived claim: the printed arithmetic holds, the ledger's values of its operands do not
not-derivable   the ledger lacks what is needed (the metric came back n/a, with its reason)
quoted          reported by another source: kept and shown, never re-derived
estimated       computed from targets or estimates: flagged, never verified (also by propagation)
n/a-kept        the report marks it n/a; it stays n/a (a derivation that would fill it is refused, R9)
refused         a type rule forbids the derivation (the rule id and why)
=============== ===============================================================================

A refusal is a verdict, not an exception: the audit always runs to the end. The metric registry
(``queries.metrics.evaluate``) and the comparability analysis (``queries.compare.compare``) are
injected, so the engine is testable without a database.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from bench_ledger.errors import LedgerError, Refused
from bench_ledger.kinds import INTEGER_KINDS, SUB_KINDS
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.audit._defaults import (
    Evaluator,
    FactorsOf,
    IntervalsOf,
    default_evaluator,
    default_factors,
    default_intervals,
    default_reported,
)
from bench_ledger.queries.audit._definitions import name_definition
from bench_ledger.queries.audit._operands import Operands, formula_text
from bench_ledger.queries.audit._raw import recheck
from bench_ledger.queries.audit._result import AuditReport, AuditResult, fmt, jsonable
from bench_ledger.queries.audit._rules import Derivation, check_rules
from bench_ledger.queries.claims import Claim, ClaimsFile, kind_algebra
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.lattice import Evidence, combine
from bench_ledger.queries.values import MetricValue

__all__ = ["Auditor", "audit"]

_SAMPLED_OPS = ("ratio", "percent_change", "difference")  # comparisons of two statistics: a sampling verdict too


# --------------------------------------------------------------------------- the auditor


class Auditor(Operands):
    """Evaluates the claims of one file against one ledger, memoising each claim's result."""

    def __init__(
        self,
        claims: ClaimsFile,
        ledger: Any = None,
        *,
        evaluate: Evaluator | None = None,
        factors: FactorsOf | None = None,
        intervals: IntervalsOf | None = None,
        reported: Callable[[Any, MetricValue], MetricValue | None] | None = None,
    ) -> None:
        self.file = claims
        self.claims = claims.by_id()
        self.ledger = ledger
        # sampling intervals read the ledger's records: by default only beside the registry's own evaluator
        self.intervals = intervals if intervals is not None else default_intervals() if evaluate is None else None
        self.evaluate = evaluate if evaluate is not None else default_evaluator()
        self.factors_of = factors if factors is not None else default_factors()
        # the tool's own figure: only against a ledger (a fake evaluator has no published values)
        self.reported = (
            reported if reported is not None else (default_reported() if hasattr(ledger, "connection") else None)
        )
        self.results: dict[str, AuditResult] = {}
        self.metric_values: dict[str, MetricValue] = {}
        # claim id -> the value the ledger stands behind, in the claim's unit (queries.audit._raw)
        self.ledger_values: dict[str, Interval] = {}
        self.ratio_of: dict[str, frozenset[str]] = {}  # derived claim id -> what its ratio is a ratio of
        self._factors: dict[str, dict | LedgerError] = {}  # scope spec -> the factors the ledger recorded
        self._run_ids: dict[str, dict[str, int]] = {}  # batch -> label -> current run id

    # ------------------------------------------------------------------ entry points

    def run(self) -> AuditReport:
        out = [self.result(c.id) for c in self.file.claims]
        return AuditReport(self.file.source_report.model_dump(), self.file.synthetic, out)

    def result(self, claim_id: str) -> AuditResult:
        if claim_id not in self.results:
            c = self.claims[claim_id]
            r = AuditResult(
                claim_id=c.id,
                text=c.text,
                unit=c.unit,
                kind=c.kind,
                basis=c.basis,
                verdict="",
                statement=c.statement,
                expected_verdict=c.expected_verdict,
                expected_rule=c.expected_rule,
            )
            if c.note:
                r.notes.append(c.note)
            getattr(self, f"_{c.basis}")(c, r)
            self._grim(c, r)
            self.results[claim_id] = r
        return self.results[claim_id]

    def _grim(self, c: Claim, r: AuditResult) -> None:
        mv = self.metric_values.get(c.id)
        statistic = mv is not None and mv.value is not None and Fraction(mv.value).denominator != 1
        # a metric whose value is not an integer (a mean of token counts) is a statistic of counts, not a count
        if c.kind in INTEGER_KINDS and r.verdict in ("reproduced", "consistent", "quoted") and not statistic:
            try:
                x = iv.interval_of(c.printed or "")
            except ValueError:
                x = None
            if x is not None and not iv.is_range(c.printed or "") and iv.integers_in(x) is None:
                r.verdict = "mismatch"
                r.why = f"a count is an integer; {c.printed!r} allows none"
                return
        if c.count_of is None or r.verdict not in ("reproduced", "consistent", "quoted"):
            return
        try:
            ok = iv.grim(c.printed or "", c.count_of)
        except ValueError:
            return
        if ok:
            r.notes.append(f"GRIM: achievable as k/{c.count_of}")
        else:
            r.verdict = "mismatch"
            r.why = f"GRIM: no integer k gives k/{c.count_of} inside {r.printed}"

    # ------------------------------------------------------------------ the five bases

    def _quoted(self, c: Claim, r: AuditResult) -> None:
        r.verdict, r.provenance = "quoted", "reported"
        r.printed = self.show(self.printed_interval(c))
        r.evidence = {"source": c.quoted.source, "locator": c.quoted.locator}  # type: ignore[union-attr]

    def _estimated(self, c: Claim, r: AuditResult) -> None:
        r.verdict, r.provenance = "estimated", "estimated"
        r.printed = self.show(self.printed_interval(c))
        r.evidence = {"basis": c.estimated.basis}  # type: ignore[union-attr]
        if c.says == "measured":
            r.verdict, r.rule = "refused", "provenance"
            r.why = "an estimate never satisfies a claim that says measured"

    def _na(self, c: Claim, r: AuditResult) -> None:
        r.verdict, r.provenance = "n/a-kept", "n/a"
        r.missing = c.na.reason  # type: ignore[union-attr]
        fill = c.na.would_fill  # type: ignore[union-attr]
        if fill is not None:
            r.notes.append(
                f"would-fill {formula_text(fill)} refused (R9): a value the capture did not contain "
                "stays n/a; no estimate from other fields"
            )
            r.evidence["would_fill"] = {"rule": "R9", "formula": formula_text(fill)}

    def _metric(self, c: Claim, r: AuditResult) -> None:
        spec = c.metric
        assert spec is not None
        scope = spec.scope.to_scope()
        r.evidence = {"metric": spec.name, "scope": scope.describe()}
        r.printed = self.show(self.printed_interval(c))
        if self.evaluate is None:
            r.verdict, r.missing = "not-derivable", "the metric registry (queries.metrics) is not available"
            return
        try:
            mv = self.evaluate(self.ledger, spec.name, scope)
            if spec.over_cards == "mean":
                mv = self._mean_over_cards(mv, spec.name, scope, r)
        except Refused as exc:
            r.verdict, r.rule, r.why, r.instead = "refused", exc.rule, exc.why, exc.instead
            return
        except (LedgerError, KeyError, ValueError) as exc:
            r.verdict, r.missing = "not-derivable", f"{spec.name} over {scope.describe()}: {exc}"
            return
        self.metric_values[c.id] = mv
        r.evidence.update(
            {
                "run_ids": list(mv.run_ids),
                "inputs": jsonable(mv.inputs),
                "metric_unit": mv.unit,
                "metric_kind": mv.quantity_kind,
                "flag": mv.flag,
            }
        )
        if mv.quantity_kind and mv.quantity_kind != c.kind and SUB_KINDS.get(mv.quantity_kind) != c.kind:
            rule = kind_algebra.rule_for({mv.quantity_kind, c.kind})
            # R9 is about filling what a capture lacks; a claim of another kind than its metric is a kind error
            r.verdict, r.rule = "refused", "kinds" if rule == "R9" else rule
            r.why = f"the metric {spec.name} is of kind {mv.quantity_kind}; the claim says {c.kind}"
            r.instead = f"claim it as {mv.quantity_kind}, or name the metric that measures {c.kind}"
            return
        tool = self._tool_figure(mv) if mv.flag in ("n/a", "derived") else None
        if (mv.flag == "n/a" or mv.value is None) and tool is not None:
            # R15: no records to recompute from; the tool's own published figure is compared (reported)
            r.notes.append(
                f"{tool.inputs['basis']} as {tool.inputs['reported_key']} = {tool.inputs['reported_text']}: "
                f"the ledger cannot recompute it ({mv.na_reason})"
            )
            r.evidence.update(
                {
                    "flag": "reported",
                    "reported_key": tool.inputs["reported_key"],
                    "reported_text": tool.inputs["reported_text"],
                    "file": tool.inputs["file"],
                    "recomputed_na": mv.na_reason,
                }
            )
            self.metric_values[c.id] = mv = tool
        if mv.flag == "n/a" or mv.value is None:
            r.verdict, r.provenance, r.missing = "not-derivable", "n/a", mv.na_reason or "the metric is n/a"
            return
        value = Fraction(mv.value)
        try:
            value = self.to_unit(value, mv.unit, c.unit)
        except Refused as exc:
            r.verdict, r.rule, r.why, r.instead = "refused", exc.rule, exc.why, exc.instead
            return
        r.recomputed = fmt(value)
        if mv.flag == "estimated":
            r.provenance = "estimated"
            if c.says == "measured":
                r.verdict, r.rule, r.why = (
                    "refused",
                    "provenance",
                    "an estimate never satisfies a claim that says measured",
                )
            else:
                r.verdict = "estimated"
            return
        r.provenance = mv.inputs["basis"] if mv.flag == "reported" else "derived"
        printed = self.printed_interval(c)
        if printed is None:
            r.verdict = "reproduced"
            r.notes.append("the report prints no number here; the value is shown as recomputed")
            return
        got = Interval.point(value)
        if mv.flag == "reported" and mv.inputs.get("printed_rounded"):
            # the tool printed it rounded (a console table): its rounding interval, in the claim's unit
            shown = iv.interval_of(mv.inputs["reported_text"])
            scale = Fraction(mv.inputs["scale"])
            got = Interval(
                self.to_unit(shown.lo * scale, mv.unit, c.unit), self.to_unit(shown.hi * scale, mv.unit, c.unit)
            )
        if mv.flag == "derived" and tool is not None:
            self._compare_tool(c, r, tool, value, printed)
        chk = iv.check(got, printed)
        r.margin = chk.margin
        if chk.consistent:
            r.verdict = "reproduced"
            self.ledger_values[c.id] = got
        else:
            r.verdict = "mismatch"
            nominal = iv.parse(c.printed).value if not iv.is_range(c.printed or "") else printed.mid  # type: ignore[arg-type]
            r.why = f"recomputed {fmt(value)} vs printed {c.printed}: difference {fmt(value - nominal)}"
        if mv.flag == "derived":
            name_definition(self, c, r, mv, value, printed)

    def _tool_figure(self, mv: MetricValue) -> MetricValue | None:
        if self.reported is None or self.ledger is None:
            return None
        try:
            return self.reported(self.ledger, mv)
        except LedgerError:
            return None

    def _compare_tool(self, c: Claim, r: AuditResult, tool: MetricValue, value: Fraction, printed: Interval) -> None:
        """R15: the records were recomputed; say whether the tool's own figure agrees with them and with the print."""
        own = self.to_unit(Fraction(tool.value), tool.unit, c.unit)  # type: ignore[arg-type]
        inside = iv.check(Interval.point(own), printed).consistent
        r.evidence["tool_figure"] = {
            "key": tool.inputs["reported_key"],
            "text": tool.inputs["reported_text"],
            "file": tool.inputs["file"],
            "value": fmt(own),
            "difference": fmt(own - value),
            "inside_printed": inside,
        }
        r.notes.append(
            f"the tool's own figure ({tool.inputs['basis']}, {tool.inputs['reported_key']}) is {fmt(own)}: "
            f"{'inside' if inside else 'outside'} the printed rounding, {fmt(own - value)} from the "
            "value recomputed from the records"
        )

    def _mean_over_cards(self, mv: MetricValue, name: str, scope: Any, r: AuditResult) -> MetricValue:
        """Mean over the scope's cards of a per-card statistic, each card evaluated on its own."""
        cards = sorted((mv.inputs or {}).get("per_card") or {})
        if mv.value is not None and not cards:
            return mv  # one card in scope
        if not cards:
            return mv
        from dataclasses import replace

        evaluate = self.evaluate
        assert evaluate is not None  # the caller evaluated the scope with it
        values, run_ids = [], set(mv.run_ids)
        for card in cards:
            one = evaluate(self.ledger, name, replace(scope, gpu=card))
            if one.value is None or one.flag == "n/a":
                return MetricValue(
                    name,
                    scope,
                    None,
                    mv.unit,
                    mv.quantity_kind,
                    "n/a",
                    na_reason=f"card {card}: {one.na_reason}",
                    inputs=mv.inputs,
                )
            values.append(Fraction(one.value))
            run_ids |= set(one.run_ids)
        r.notes.append(f"mean over {len(values)} cards of each card's {name} (a summary; per-card values in evidence)")
        inputs = dict(mv.inputs or {})
        inputs["cards"] = len(values)
        return MetricValue(
            name,
            scope,
            sum(values, Fraction(0)) / len(values),
            mv.unit,
            mv.quantity_kind,
            "derived",
            inputs=inputs,
            run_ids=sorted(run_ids),
        )

    def _derived(self, c: Claim, r: AuditResult) -> None:
        d = c.derived
        assert d is not None
        r.evidence = {"formula": formula_text(d)}
        r.printed = self.show(self.printed_interval(c))
        try:
            terms = [self.term(o) for o in d.operands]
            deriv = Derivation(
                claim_id=c.id,
                op=d.op,
                terms=terms,
                result_kind=c.kind,
                result_unit=c.unit,
                attributes_to=d.attributes_to,
                claims_equal_resources=d.claims_equal_resources,
                claims_paired=d.claims_paired,
                claims_speedup=d.claims_speedup,
                claims_cold_warm=d.claims_cold_warm,
                series=d.series,
                says=c.says,
            )
            self.ratio_of[c.id] = kind_algebra.ratio_of(d.op, deriv.kinds, [t.ratio_of for t in terms])
            check_rules(deriv)
        except Refused as exc:
            r.verdict, r.rule, r.why, r.instead = "refused", exc.rule, exc.why, exc.instead
            return
        r.evidence["operands"] = [self.term_dict(t) for t in terms]
        cmp_note = self.comparability_note(deriv)
        if cmp_note:
            r.notes.append(cmp_note)
        inputs = [t.evidence or Evidence("measured", t.label) for t in terms]
        missing = [t for t in terms if t.interval is None]
        if missing:
            r.verdict = "not-derivable"
            r.missing = "; ".join(f"{t.label}: {t.na_reason or 'no printed or recomputed value'}" for t in missing)
        else:
            try:
                result = self.compute(d.op, terms, c.unit, d.from_unit)
            except Refused as exc:
                r.verdict, r.rule, r.why, r.instead = "refused", exc.rule, exc.why, exc.instead
                return
            except ValueError as exc:
                r.verdict, r.missing = "not-derivable", str(exc)
            else:
                if d.op == "range":
                    self._check_range(c, r, result)  # type: ignore[arg-type]
                else:
                    self._check_value(c, r, result)  # type: ignore[arg-type]
        if d.op in _SAMPLED_OPS and len(terms) == 2 and terms[0].kind == terms[1].kind and self._sampling(deriv, r):
            return
        self._apply_lattice(r, inputs)
        recheck(self, c, r, terms)

    def _sampling(self, d: Derivation, r: AuditResult) -> bool:
        """A comparison's sampling verdict (queries.stats.change) beside its rounding verdict; a change attributed
        to a factor while it is within sampling error (or the sample cannot tell) is refused (R6): True then."""
        from bench_ledger.queries.stats.change import change_verdict

        sides = []
        for t in d.terms:
            mv = t.metric_value
            si = None if mv is None or self.intervals is None else self.intervals(self.ledger, mv)
            if si is not None and d.op == "difference" and t.unit and mv is not None and mv.unit != t.unit:
                k = float(self.to_unit(Fraction(1), mv.unit, t.unit))
                si.estimate, si.low, si.high = (None if x is None else x * k for x in (si.estimate, si.low, si.high))
            sides.append(si)
        first, second = d.terms[0].label, d.terms[1].label
        if d.op == "percent_change":  # from the first operand to the second
            ch = change_verdict(sides[0], sides[1], "percent_change", (first, second))
        else:  # ratio and difference: the first against the second
            ch = change_verdict(sides[1], sides[0], d.op, (second, first))  # type: ignore[arg-type]
        r.sampling = ch.as_dict() | {
            "operands": {t.label: None if si is None else si.as_dict() for t, si in zip(d.terms, sides, strict=True)}
        }
        r.notes.append(f"sampling: {ch.text()}")
        if d.attributes_to and ch.verdict in ("within sampling error", "insufficient sample"):
            r.verdict, r.rule = "refused", "R6"
            r.why = f"the change is attributed to {d.attributes_to}, but it is {ch.verdict} ({ch.reason or ch.text()})"
            r.instead = "report the change as not shown beyond sampling error; measure more requests or repeat the runs"
            return True
        return False

    def _apply_lattice(self, r: AuditResult, inputs: list[Evidence]) -> None:
        """A derivation is never better than its weakest input (queries.lattice.combine)."""
        out = combine(r.verdict, inputs)
        r.provenance = out.provenance
        if out.weakest is None:
            return
        r.weakest = out.weakest.source
        if out.verdict == "estimated":
            r.verdict = "estimated"
            r.notes.append(out.why or "derived from an estimate")
            return
        if out.verdict == "not-derivable":
            r.verdict, r.missing = "not-derivable", out.why
            return
        r.verdict, r.rule, r.why = out.verdict, out.rule, out.why
        if out.verdict == "refused":
            r.instead = "fix or re-derive the operand first; a derivation is never better than its inputs"

    # ------------------------------------------------------------------ checks

    def _check_value(self, c: Claim, r: AuditResult, result: Interval) -> None:
        r.recomputed = str(result)
        printed = self.printed_interval(c)
        if printed is None:
            r.verdict = "consistent"
            r.notes.append("the claim prints no number; its derivation is legal")
            return
        chk = iv.check(result, printed)
        r.margin = chk.margin
        if chk.consistent:
            r.verdict = "consistent"
        else:
            r.verdict = "mismatch"
            r.why = f"recomputed {result} does not meet printed {printed}: off by {fmt(chk.distance)}"

    def _check_range(self, c: Claim, r: AuditResult, ends: tuple[Interval, Interval]) -> None:
        lo, hi = ends
        r.recomputed = f"{lo} .. {hi}"
        text = c.printed or ""
        try:
            a, b = iv.parse_range(text)
        except ValueError:
            r.verdict = "consistent"
            r.notes.append("the claim prints no range; its derivation is legal")
            return
        ca, cb = iv.check(lo, a.interval), iv.check(hi, b.interval)
        r.margin = f"low end {ca.margin}; high end {cb.margin}"
        if ca.consistent and cb.consistent:
            r.verdict = "consistent"
        else:
            r.verdict = "mismatch"
            r.why = f"range ends recomputed {lo} .. {hi} vs printed {a.interval} .. {b.interval}"


def audit(
    claims: ClaimsFile, ledger: Any = None, *, evaluate: Evaluator | None = None, factors: FactorsOf | None = None
) -> AuditReport:
    """Evaluate every claim of a claims file against a ledger."""
    return Auditor(claims, ledger, evaluate=evaluate, factors=factors).run()
