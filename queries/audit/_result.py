"""What an audit gives: a verdict per claim (:class:`AuditResult`), the file's report, and the values
written into them (exact, formatted once)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from bench_ledger.queries.claims import VERDICTS
from bench_ledger.queries.intervals import fmt as _fmt

__all__ = ["AuditReport", "AuditResult", "fmt", "jsonable"]


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
