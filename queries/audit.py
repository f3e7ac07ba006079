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

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from bench_ledger.errors import LedgerError, Refused
from bench_ledger.kinds import INTEGER_KINDS, SUB_KINDS
from bench_ledger.queries import audit_definitions, audit_raw, kind_algebra
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.audit_rules import Derivation, Term, check_rules, infer_kind, sides
from bench_ledger.queries.claims import VERDICTS, Claim, ClaimsFile, Formula, LiteralNumber, MetricOperand
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.intervals import fmt as _fmt
from bench_ledger.queries.lattice import Evidence, combine, weakest
from bench_ledger.queries.values import IDENTITY_FACTORS, UNKNOWN, MetricValue, factor_known
from bench_ledger.units import UNCONFIRMED, dimension
from bench_ledger.units import convert as convert_units

Evaluator = Callable[[Any, str, Any], MetricValue]
# a metric value's sampling interval (queries.stats.read.interval_of): (ledger, MetricValue) -> SamplingInterval
IntervalsOf = Callable[[Any, MetricValue], Any]
SAMPLED_OPS = ("ratio", "percent_change", "difference")  # comparisons of two statistics: a sampling verdict too
# the factors the ledger recorded for one side ("run:ID", "batch:NAME", "deployment:NAME"): queries.compare.side
FactorsOf = Callable[[Any, str], dict[str, str]]


@dataclass
class AuditResult:
    """The verdict on one claim, with what it was checked against."""

    claim_id: str
    text: str
    unit: str | None
    kind: str
    basis: str  # metric | derived | quoted | estimated | na
    verdict: str
    rule: str | None = None
    why: str | None = None
    instead: str | None = None
    printed: str | None = None  # the printed interval
    recomputed: str | None = None  # the value or interval recomputed here
    margin: str | None = None  # overlap, or the difference when it does not meet
    missing: str | None = None  # what is missing (not-derivable)
    provenance: str | None = None  # derived | derived from rounded | estimated | reported | n/a
    weakest: str | None = None  # the operand that capped a derived claim's verdict (queries.lattice)
    statement: str | None = None
    expected_verdict: str | None = None
    expected_rule: str | None = None
    notes: list[str] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)
    sampling: dict | None = None  # a comparison's sampling verdict (queries.stats.change), beside the rounding one

    @property
    def as_expected(self) -> bool:
        if self.expected_verdict is None:
            return True
        if self.expected_verdict != self.verdict:
            return False
        return self.expected_rule is None or self.expected_rule == self.rule

    def as_dict(self) -> dict:
        d = asdict(self)
        d["as_expected"] = self.as_expected
        return d


@dataclass
class AuditReport:
    source_report: dict
    synthetic: bool
    results: list[AuditResult]

    def counts(self) -> dict[str, int]:
        c = Counter(r.verdict for r in self.results)
        return {v: c[v] for v in VERDICTS if c[v]}

    def unexpected(self) -> list[AuditResult]:
        return [r for r in self.results if not r.as_expected]

    def as_dict(self) -> dict:
        return {
            "source_report": self.source_report,
            "synthetic": self.synthetic,
            "counts": self.counts(),
            "results": [r.as_dict() for r in self.results],
        }


# a draft audits each number against a dozen candidates: one text parsed, one value written, once
fmt = lru_cache(maxsize=16384)(_fmt)
_shown = lru_cache(maxsize=16384)(str)


@lru_cache(maxsize=16384)
def _printed(text: str, integer: bool) -> Interval | None:
    """A printed number's interval (R11); of an integer kind, the integers in it (checked in _grim)."""
    try:
        x = iv.interval_of(text)
    except ValueError:
        return None
    if integer and not iv.is_range(text):
        return iv.integers_in(x) or x  # a count is an integer
    return x


# --------------------------------------------------------------------------- defaults


def default_evaluator() -> Evaluator | None:
    """A fresh :class:`queries.metrics.Evaluator` (``evaluate`` once per metric and scope; the run scopes
    of a batch in one grouped pass), for one audit."""
    try:
        from bench_ledger.queries.metrics.registry import Evaluator as MetricsEvaluator
    except ImportError:
        return None
    return MetricsEvaluator()


def default_intervals() -> IntervalsOf | None:
    """A metric value's sampling interval from the ledger's records (queries.stats.read.interval_of)."""
    try:
        from bench_ledger.queries.stats.read import interval_of
    except ImportError:
        return None
    return interval_of


def default_factors() -> FactorsOf | None:
    """The factors the ledger recorded for a scope spec (:class:`queries.compare.Sides`: each spec once,
    the runs of a batch together), for one audit."""
    try:
        from bench_ledger.queries.compare import Sides
    except ImportError:
        return None
    sides = Sides()
    return lambda ledger, spec: sides(ledger, spec).factors


def default_reported() -> Callable[[Any, MetricValue], MetricValue | None] | None:
    """The tool's own figure for a metric over a run (:class:`queries.metrics.reported.Reported`), for one audit."""
    try:
        from bench_ledger.queries.metrics.reported import Reported
    except ImportError:
        return None
    return Reported()


def _run_ids(ledger: Any, batch: str) -> dict[str, int]:
    """The current revision's id of every run label of a batch (the one no correction supersedes);
    empty when the audit has no ledger (a fake evaluator)."""
    if ledger is None:
        return {}
    import sqlalchemy as sa
    from bench_ledger import models as m
    from bench_ledger.revisions import current

    with ledger.session() as s:
        rows = s.execute(
            sa.select(m.Run.label, m.Run.id)
            .join(m.Batch, m.Batch.id == m.Run.batch_id)
            .where(m.Batch.name == batch, current(m.Run))
        ).all()
    return {label: rid for label, rid in rows}


# --------------------------------------------------------------------------- the auditor


class Auditor:
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
        # claim id -> the value the ledger stands behind, in the claim's unit (queries.audit_raw)
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

    # ------------------------------------------------------------------ printed intervals

    @staticmethod
    def printed_interval(c: Claim) -> Interval | None:
        return None if c.printed is None else _printed(c.printed, c.kind in INTEGER_KINDS)

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
        r.printed = self._show(self.printed_interval(c))
        r.evidence = {"source": c.quoted.source, "locator": c.quoted.locator}  # type: ignore[union-attr]

    def _estimated(self, c: Claim, r: AuditResult) -> None:
        r.verdict, r.provenance = "estimated", "estimated"
        r.printed = self._show(self.printed_interval(c))
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
                f"would-fill {self._formula_text(fill)} refused (R9): a value the capture did not contain "
                "stays n/a; no estimate from other fields"
            )
            r.evidence["would_fill"] = {"rule": "R9", "formula": self._formula_text(fill)}

    def _metric(self, c: Claim, r: AuditResult) -> None:
        spec = c.metric
        assert spec is not None
        scope = spec.scope.to_scope()
        r.evidence = {"metric": spec.name, "scope": scope.describe()}
        r.printed = self._show(self.printed_interval(c))
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
            value = self._to_unit(value, mv.unit, c.unit)
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
                self._to_unit(shown.lo * scale, mv.unit, c.unit), self._to_unit(shown.hi * scale, mv.unit, c.unit)
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
            audit_definitions.name_definition(self, c, r, mv, value, printed)

    def _tool_figure(self, mv: MetricValue) -> MetricValue | None:
        if self.reported is None or self.ledger is None:
            return None
        try:
            return self.reported(self.ledger, mv)
        except LedgerError:
            return None

    def _compare_tool(self, c: Claim, r: AuditResult, tool: MetricValue, value: Fraction, printed: Interval) -> None:
        """R15: the records were recomputed; say whether the tool's own figure agrees with them and with the print."""
        own = self._to_unit(Fraction(tool.value), tool.unit, c.unit)  # type: ignore[arg-type]
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
        r.evidence = {"formula": self._formula_text(d)}
        r.printed = self._show(self.printed_interval(c))
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
        r.evidence["operands"] = [self._term_dict(t) for t in terms]
        cmp_note = self._comparability_note(deriv)
        if cmp_note:
            r.notes.append(cmp_note)
        inputs = [t.evidence or Evidence("measured", t.label) for t in terms]
        missing = [t for t in terms if t.interval is None]
        if missing:
            r.verdict = "not-derivable"
            r.missing = "; ".join(f"{t.label}: {t.na_reason or 'no printed or recomputed value'}" for t in missing)
        else:
            try:
                result = self._compute(d.op, terms, c.unit, d.from_unit)
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
        if d.op in SAMPLED_OPS and len(terms) == 2 and terms[0].kind == terms[1].kind and self._sampling(deriv, r):
            return
        self._apply_lattice(r, inputs)
        audit_raw.recheck(self, c, r, terms)

    def _sampling(self, d: Derivation, r: AuditResult) -> bool:
        """A comparison's sampling verdict (queries.stats.change) beside its rounding verdict; a change attributed
        to a factor while it is within sampling error (or the sample cannot tell) is refused (R6): True then."""
        from bench_ledger.queries.stats.change import change_verdict

        sides = []
        for t in d.terms:
            mv = t.metric_value
            si = None if mv is None or self.intervals is None else self.intervals(self.ledger, mv)
            if si is not None and d.op == "difference" and t.unit and mv is not None and mv.unit != t.unit:
                k = float(self._to_unit(Fraction(1), mv.unit, t.unit))
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

    # ------------------------------------------------------------------ operands

    def term(self, o: str | LiteralNumber | MetricOperand | Formula) -> Term:
        t = self._term(o)
        if t.factors is None and not isinstance(o, Formula):
            self._ledger_factors(t)
        return t

    def _term(self, o: str | LiteralNumber | MetricOperand | Formula) -> Term:
        if isinstance(o, str):
            return self._claim_term(self.claims[o])
        if isinstance(o, LiteralNumber):
            interval = None
            if o.value is not None:
                p = iv.parse(o.value)
                interval = Interval.point(p.value) if o.exact else p.interval
                if o.kind in INTEGER_KINDS:
                    interval = iv.integers_in(interval) or interval
            flag = o.flag or ("measured" if o.value is not None else "missing")
            label = o.label or (o.value or "unprinted value")
            if o.value is None:
                ev = Evidence("not-derivable", label, why="not printed")
            elif flag in ("estimated", "reported"):
                ev = Evidence(flag, label)
            else:
                ev = Evidence("measured" if interval is not None and interval.width == 0 else "rounded", label)
            return Term(
                label=label,
                kind=o.kind or "constant",
                unit=o.unit or _unit_of(o.value),
                interval=interval,
                flag=flag,
                context=dict(o.context),
                na_reason=None if o.value is not None else "not printed",
                evidence=ev,
            )
        if isinstance(o, MetricOperand):
            return self._metric_term(o)
        return self._formula_term(o)

    def _metric_term(self, o: MetricOperand) -> Term:
        scope = o.scope.to_scope()
        label = o.label or f"{o.metric}[{scope.describe()}]"
        context = dict(o.context)
        if o.scope.batch and "batch" not in context:
            context["batch"] = o.scope.batch
        base = Term(
            label=label,
            kind=o.kind,
            unit=o.unit,
            interval=None,
            flag="missing",
            scope_ref=o.scope.ref(),
            context=context,
        )
        if self.evaluate is None:
            base.na_reason = "the metric registry (queries.metrics) is not available"
            base.evidence = Evidence("not-derivable", label, why=base.na_reason)
            return base
        try:
            mv = self.evaluate(self.ledger, o.metric, scope)
        except Refused:
            raise
        except (LedgerError, KeyError, ValueError) as exc:
            base.na_reason = str(exc)
            base.evidence = Evidence("not-derivable", label, why=base.na_reason)
            return base
        if mv.quantity_kind and mv.quantity_kind != o.kind:
            raise Refused(
                kind_algebra.rule_for({mv.quantity_kind, o.kind}),
                f"{label} as {o.kind}",
                f"the metric {o.metric} is of kind {mv.quantity_kind}; the operand says {o.kind}",
                f"give the operand kind {mv.quantity_kind}",
            )
        if mv.value is None or mv.flag == "n/a":
            base.na_reason = mv.na_reason or "the metric is n/a"
            base.evidence = Evidence("not-derivable", label, why=base.na_reason)
            return base
        base.unit = o.unit or mv.unit
        base.metric_value = mv
        base.interval = Interval.point(self._to_unit(Fraction(mv.value), mv.unit, base.unit))
        base.flag = "estimated" if mv.flag == "estimated" else "measured"
        base.evidence = Evidence("estimated" if base.flag == "estimated" else "measured", label)
        return base

    def _claim_term(self, c: Claim) -> Term:
        res = self.result(c.id)
        interval = self.printed_interval(c)
        scope_ref = c.metric.scope.ref() if c.metric else None
        context = dict(c.context)
        flag = {
            "metric": "measured",
            "derived": "derived",
            "quoted": "reported",
            "estimated": "estimated",
            "na": "n/a",
        }[c.basis]
        na_reason = c.na.reason if c.na else None
        if c.basis == "derived" and res.provenance == "estimated":
            flag = "estimated"
        if interval is None and c.basis == "metric":
            mv = self.metric_values.get(c.id)
            if mv is not None and mv.value is not None and mv.flag != "n/a":
                interval = Interval.point(self._to_unit(Fraction(mv.value), mv.unit, c.unit))
            elif flag != "n/a":
                flag, na_reason = "missing", res.missing or "the metric gave no value"
        if c.metric and c.metric.scope.batch and "batch" not in context:
            context["batch"] = c.metric.scope.batch
        return Term(
            label=c.id,
            kind=c.kind,
            unit=c.unit or _unit_of(c.printed),
            interval=interval,
            flag=flag,
            claim_id=c.id,
            scope_ref=scope_ref,
            context=context,
            na_reason=na_reason,
            evidence=self._claim_evidence(c, res, interval),
            metric_value=self.metric_values.get(c.id) if c.basis == "metric" else None,
            ratio_of=self.ratio_of.get(c.id, frozenset()) if c.kind == "ratio" else frozenset(),
        )

    @staticmethod
    def _claim_evidence(c: Claim, res: AuditResult, interval: Interval | None) -> Evidence:
        """An operand claim's evidence level: its own verdict (queries.lattice)."""
        v = res.verdict
        if v == "refused":
            return Evidence("refused", c.id, res.rule, res.why)
        if v == "n/a-kept":
            return Evidence("n/a", c.id, "R9", res.missing)
        if v == "not-derivable":
            return Evidence("not-derivable", c.id, why=res.missing)
        if v in ("mismatch", audit_raw.RAW_MISMATCH):
            return Evidence("mismatch", c.id, why=res.why)
        if v == "estimated":
            return Evidence("estimated", c.id)
        if v == "quoted":
            return Evidence("reported", c.id)
        prov = res.provenance or ""
        if prov.startswith("estimated"):
            return Evidence("estimated", c.id)
        if "reported" in prov:
            return Evidence("reported", c.id)
        if "rounded" in prov or (interval is not None and interval.width > 0):
            return Evidence("rounded", c.id)
        return Evidence("measured", c.id)

    def _formula_term(self, f: Formula) -> Term:
        terms = [self.term(o) for o in f.operands]
        kinds = [t.kind for t in terms]
        kind = infer_kind(f.op, kinds)
        if kind is None:
            raise Refused(
                kind_algebra.rule_for(set(kinds)),
                self._formula_text(f),
                kind_algebra.undefined(f.op, kinds),
                "combine values as the kind table allows (docs/claims.md)",
            )
        of = [t.ratio_of for t in terms]
        conflict = kind_algebra.ratio_conflict(f.op, kinds, of)
        if conflict is not None:
            raise Refused(
                conflict[0],
                self._formula_text(f),
                conflict[1],
                "scale a value only by a ratio of its own quantity",
            )
        below: frozenset[str] = frozenset()
        for t in terms:
            below |= t.all_kinds
        unit = terms[0].unit if terms and f.op in ("sum", "difference", "divide", "product", "range") else None
        interval = None
        if all(t.interval is not None for t in terms) and f.op != "range":
            try:
                got = self._compute(f.op, terms, unit, None)
                interval = got if isinstance(got, Interval) else None  # only "range" gives a pair
            except (Refused, ValueError):
                interval = None
        flags = {t.flag for t in terms}
        flag = next(
            (x for x in ("n/a", "missing", "estimated", "reported", "derived", "measured") if x in flags), "derived"
        )
        ctx = terms[0].context if terms else {}
        label = self._formula_text(f)
        ev = weakest([t.evidence or Evidence("measured", t.label) for t in terms])
        if interval is None and (ev is None or ev.level not in ("refused", "n/a", "not-derivable")):
            ev = Evidence("not-derivable", label, why="its operands give no value")
        first = terms[0] if terms else None
        return Term(
            label=label,
            kind=kind,
            unit=unit,
            interval=interval,
            flag=flag,
            scope_ref=first.scope_ref if first else None,
            context=dict(ctx),
            kinds_below=below,
            evidence=ev,
            factors=dict(first.factors) if first and first.factors is not None else None,
            conflicts=list(first.conflicts) if first else [],
            ratio_of=kind_algebra.ratio_of(f.op, kinds, of) if kind == "ratio" else frozenset(),
        )

    # ------------------------------------------------------------------ arithmetic

    def _to_unit(self, value: Fraction, unit: str | None, to: str | None) -> Fraction:
        if unit is None or to is None or unit == to:
            return value
        if UNCONFIRMED in (unit, to):
            return convert_units(value, unit, to)  # raises Refused R12
        if dimension(unit) is None or dimension(to) is None or dimension(unit) != dimension(to):
            return value
        return convert_units(value, unit, to)

    def _aligned(self, terms: list[Term]) -> list[Interval]:
        base = next((t.unit for t in terms if t.unit), None)
        out = []
        for t in terms:
            x = t.interval
            assert x is not None
            if base and t.unit and t.unit != base and dimension(t.unit) and dimension(t.unit) == dimension(base):
                x = iv.convert(x, t.unit, base)
            out.append(x)
        return out

    def _compute(
        self, op: str, terms: list[Term], unit: str | None, from_unit: str | None
    ) -> Interval | tuple[Interval, Interval]:
        if any(t.interval is None for t in terms):
            raise ValueError("an operand has no value")
        if op == "convert":
            t = terms[0]
            src = t.unit if t.unit not in (None,) else from_unit
            if src is None or unit is None:
                raise ValueError("a conversion needs the operand's unit and the claim's unit")
            return iv.convert(t.interval, src, unit)  # type: ignore[arg-type]
        xs = self._aligned(terms)
        if op == "ratio":
            return iv.ratio(xs[0], xs[1])
        if op == "divide":
            return iv.ratio(xs[0], xs[1])
        if op == "percent_change":
            return iv.percent_change(xs[0], xs[1])
        if op == "difference":
            return iv.difference(xs[0], xs[1])
        if op == "sum":
            return iv.total(*xs)
        if op == "product":
            return iv.product(*xs)
        if op == "range":
            lo = min(xs, key=lambda x: (x.mid, x.lo))
            hi = max(xs, key=lambda x: (x.mid, x.hi))
            return lo, hi
        raise ValueError(f"unknown op {op!r}")

    # ------------------------------------------------------------------ comparability (R6)

    def _ledger_factors(self, t: Term) -> None:
        """Give an operand with a ledger scope the factors the ledger recorded for it; its context
        fills only what the ledger did not record, and a context that contradicts it is noted."""
        if self.factors_of is None or self.ledger is None or not t.scope_ref:
            return
        kind, _, rest = t.scope_ref.partition(":")
        identity_only = kind == "launch"
        spec = self._compare_ref(t.scope_ref)
        if spec is None:
            return
        if spec not in self._factors:  # once per scope: the ledger does not change during an audit
            try:
                self._factors[spec] = dict(self.factors_of(self.ledger, spec))
            except LedgerError as exc:
                self._factors[spec] = exc
        known = self._factors[spec]
        if isinstance(known, LedgerError):
            return
        recorded = dict(known)
        if identity_only:  # a launch: its deployment's identity; workload, seed, warm state, batch unknown
            recorded = {
                k: (v if k in IDENTITY_FACTORS or k == "engine_options" else UNKNOWN) for k, v in recorded.items()
            }
        for k, v in t.context.items():
            if k == "batch" and t.batch is not None and t.scope_ref.startswith(("run:", "batch:")):
                continue
            have = recorded.get(k, UNKNOWN)
            if factor_known(have) and have != v:
                t.conflicts.append(f"context {k}={v!r}, the ledger records {have!r} for {t.scope_ref}")
            elif not factor_known(have):
                recorded[k] = v
        t.factors = recorded

    def _compare_ref(self, ref: str) -> str | None:
        kind, _, rest = ref.partition(":")
        if kind == "run":
            batch, _, label = rest.partition("/")
            if label.startswith("#"):
                return f"run:{int(label[1:])}"
            if batch not in self._run_ids:  # one statement per batch: the ledger does not change meanwhile
                self._run_ids[batch] = _run_ids(self.ledger, batch)
            rid = self._run_ids[batch].get(label)
            return f"run:{rid}" if rid is not None else None
        if kind in ("batch", "deployment"):
            return ref
        if kind == "launch":
            return f"deployment:{rest.rsplit('/', 1)[0]}"
        return None

    def _comparability_note(self, d: Derivation) -> str | None:
        if d.op not in ("ratio", "percent_change", "difference") or len(d.terms) != 2:
            return None
        sd = sides(d)
        if sd is None or (not sd.differ and not any(t.context or t.factors for t in d.terms)):
            return None
        stack = "hardware" in sd.names and bool(sd.names & {"engine", "engine_version", "engine_options"})
        return "comparability: differs in " + sd.listed() + ("; a stack ratio, not a hardware ratio" if stack else "")

    # ------------------------------------------------------------------ display

    @staticmethod
    def _show(x: Interval | None) -> str | None:
        return None if x is None else _shown(x)

    def _formula_text(self, f: Formula) -> str:
        parts = []
        for o in f.operands:
            if isinstance(o, str):
                parts.append(o)
            elif isinstance(o, LiteralNumber):
                parts.append(f"{o.value or '?'}{(' ' + o.unit) if o.unit else ''}")
            elif isinstance(o, MetricOperand):
                parts.append(f"{o.metric}[{o.scope.ref()}]")
            else:
                parts.append(self._formula_text(o))
        return f"{f.op}({', '.join(parts)})"

    @staticmethod
    def _term_dict(t: Term) -> dict:
        return {
            "operand": t.label,
            "kind": t.kind,
            "unit": t.unit,
            "interval": None if t.interval is None else str(t.interval),
            "flag": t.flag,
            "scope": t.scope_ref,
            "context": t.context or None,
        }


def _unit_of(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return iv.parse(text).unit
    except ValueError:
        return None


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set):
        return [jsonable(v) for v in x]
    if isinstance(x, Fraction):
        return fmt(x)
    if isinstance(x, int | float | str | bool) or x is None:
        return x
    return str(x)


def audit(
    claims: ClaimsFile, ledger: Any = None, *, evaluate: Evaluator | None = None, factors: FactorsOf | None = None
) -> AuditReport:
    """Evaluate every claim of a claims file against a ledger."""
    return Auditor(claims, ledger, evaluate=evaluate, factors=factors).run()
