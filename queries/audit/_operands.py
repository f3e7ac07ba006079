"""The operands of a derivation as :class:`Term` objects: a claim id, a printed literal, a metric over a
ledger scope, a nested formula; their arithmetic (units aligned, intervals exact) and the factors the
ledger recorded for each (R6). :class:`Operands` is the half of the :class:`Auditor` that resolves
them; the auditor gives the verdicts."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

from bench_ledger.errors import LedgerError, Refused
from bench_ledger.kinds import INTEGER_KINDS
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.audit._defaults import Evaluator, FactorsOf
from bench_ledger.queries.audit._raw import RAW_MISMATCH
from bench_ledger.queries.audit._result import AuditResult
from bench_ledger.queries.audit._rules import Derivation, Term, infer_kind, sides
from bench_ledger.queries.claims import Claim, Formula, LiteralNumber, MetricOperand, kind_algebra
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.lattice import Evidence, weakest
from bench_ledger.queries.values import IDENTITY_FACTORS, UNKNOWN, MetricValue, factor_known
from bench_ledger.units import UNCONFIRMED, dimension
from bench_ledger.units import convert as convert_units

__all__ = ["Operands", "formula_text"]

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


class Operands:
    """Resolves the operands of the claims of one file (the state is the :class:`Auditor`'s)."""

    claims: dict[str, Claim]
    ledger: Any
    evaluate: Evaluator | None
    factors_of: FactorsOf | None
    metric_values: dict[str, MetricValue]
    ratio_of: dict[str, frozenset[str]]
    _factors: dict[str, dict | LedgerError]
    _run_ids: dict[str, dict[str, int]]
    result: Callable[[str], AuditResult]

    @staticmethod
    def printed_interval(c: Claim) -> Interval | None:
        return None if c.printed is None else _printed(c.printed, c.kind in INTEGER_KINDS)

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
        base.interval = Interval.point(self.to_unit(Fraction(mv.value), mv.unit, base.unit))
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
                interval = Interval.point(self.to_unit(Fraction(mv.value), mv.unit, c.unit))
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
        if v in ("mismatch", RAW_MISMATCH):
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
                formula_text(f),
                kind_algebra.undefined(f.op, kinds),
                "combine values as the kind table allows (docs/claims.md)",
            )
        of = [t.ratio_of for t in terms]
        conflict = kind_algebra.ratio_conflict(f.op, kinds, of)
        if conflict is not None:
            raise Refused(
                conflict[0],
                formula_text(f),
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
                got = self.compute(f.op, terms, unit, None)
                interval = got if isinstance(got, Interval) else None  # only "range" gives a pair
            except (Refused, ValueError):
                interval = None
        flags = {t.flag for t in terms}
        flag = next(
            (x for x in ("n/a", "missing", "estimated", "reported", "derived", "measured") if x in flags), "derived"
        )
        ctx = terms[0].context if terms else {}
        label = formula_text(f)
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

    def to_unit(self, value: Fraction, unit: str | None, to: str | None) -> Fraction:
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

    def compute(
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

    def comparability_note(self, d: Derivation) -> str | None:
        if d.op not in ("ratio", "percent_change", "difference") or len(d.terms) != 2:
            return None
        sd = sides(d)
        if sd is None or (not sd.differ and not any(t.context or t.factors for t in d.terms)):
            return None
        stack = "hardware" in sd.names and bool(sd.names & {"engine", "engine_version", "engine_options"})
        return "comparability: differs in " + sd.listed() + ("; a stack ratio, not a hardware ratio" if stack else "")

    # ------------------------------------------------------------------ display

    @staticmethod
    def show(x: Interval | None) -> str | None:
        return None if x is None else _shown(x)

    @staticmethod
    def term_dict(t: Term) -> dict:
        return {
            "operand": t.label,
            "kind": t.kind,
            "unit": t.unit,
            "interval": None if t.interval is None else str(t.interval),
            "flag": t.flag,
            "scope": t.scope_ref,
            "context": t.context or None,
        }


def formula_text(f: Formula) -> str:
    """A formula as text: ``op(operand, ...)``, a metric operand as ``metric[scope]``."""
    parts = []
    for o in f.operands:
        if isinstance(o, str):
            parts.append(o)
        elif isinstance(o, LiteralNumber):
            parts.append(f"{o.value or '?'}{(' ' + o.unit) if o.unit else ''}")
        elif isinstance(o, MetricOperand):
            parts.append(f"{o.metric}[{o.scope.ref()}]")
        else:
            parts.append(formula_text(o))
    return f"{f.op}({', '.join(parts)})"


def _unit_of(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return iv.parse(text).unit
    except ValueError:
        return None
