"""A tool check's parts: the identities a summary satisfies and the registry entry of one tool (:class:`ToolCheck`).

A :class:`ToolCheck` names the tool's statistic definition (:mod:`queries.check.stat_definitions`), how each
of its reported keys is recomputed from per-request records, and the identities its own summary satisfies;
the tools' entries are in one module each, gathered by :mod:`queries.check.registry`.

Definitions are read from the tools' sources (named per entry); where the source and a real file
disagree the real file is not fitted: the identity is stated as the source computes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from bench_ledger.queries.check.core import AGREE, DISAGREE, REL_IDENTITY, Records, Reported
from bench_ledger.queries.check.stat_definitions import (
    StatDefinition,
)
from bench_ledger.queries.intervals import Interval
from bench_ledger.tools import Tool

__all__ = [
    "Identity",
    "IdentityResult",
    "TextResult",
    "ToolCheck",
    "equal",
    "product",
    "ratio",
    "sum_of",
    "total_ratio",
]

_Recompute = Callable[[str, Records], tuple[Fraction, str]]


# --------------------------------------------------------------------------- identities


@dataclass
class IdentityResult:
    name: str  # the identity as a formula over the tool's keys
    key: str  # the reported value it checks
    recomputed: float | None  # None: beyond a double (the reason prints it)
    status: str
    tolerance: str
    reason: str


@dataclass(frozen=True)
class TextResult:
    """An identity over printed text: ``key`` printed ``expected``, or why it cannot be said."""

    name: str  # the identity, with the tool source it encodes
    key: str
    expected: str | None  # the text the identity gives; None: not re-derivable
    status: str
    reason: str


@dataclass(frozen=True)
class Identity:
    """``key = formula(inputs)`` over reported values; skipped unless every key is reported."""

    name: str
    key: str
    inputs: tuple[str, ...]
    formula: Callable[..., Interval]

    def evaluate(self, values: dict[str, Reported]) -> IdentityResult | None:
        if self.key not in values or any(k not in values for k in self.inputs):
            return None
        try:
            got = self.formula(*(values[k].interval for k in self.inputs))
        except ZeroDivisionError:
            return None
        target = values[self.key].interval
        slack = REL_IDENTITY * abs(values[self.key].value)
        widened = Interval(got.lo - slack, got.hi + slack)
        ok = widened.meets(target)
        half = (widened.width + target.width) / 2
        mid = _double(got.mid)
        return IdentityResult(
            self.name,
            self.key,
            mid,
            AGREE if ok else DISAGREE,
            f"±{_shown(half, 3)}",
            f"{self.name}: {_shown(got.mid, 17)}{'' if mid is not None else ' (beyond a double)'} from the reported "
            + ", ".join(f"{k} {values[k].text}" for k in self.inputs),
        )


def _double(q: Fraction) -> float | None:
    """``q`` as a float, or None where it is beyond a double (a reported duration of 1e-320 s makes a rate
    of about 1e323: compared exactly all the same)."""
    try:
        return float(q)
    except OverflowError:
        return None


def _shown(q: Fraction, digits: int) -> str:
    """``q`` with ``digits`` significant digits, also beyond a double's range."""
    if (f := _double(q)) is not None:
        return f"{f:.{digits}g}"
    with localcontext() as ctx:
        ctx.prec = digits
        return f"{Decimal(q.numerator) / Decimal(q.denominator):.{digits - 1}E}"


def ratio(name: str, key: str, num: str, den: str, scale: int = 1) -> Identity:
    return Identity(name, key, (num, den), lambda a, b: a * scale / b)


def total_ratio(name: str, key: str, nums: tuple[str, ...], den: str) -> Identity:
    def f(*xs: Interval) -> Interval:
        acc = xs[0]
        for x in xs[1:-1]:
            acc = acc + x
        return acc / xs[-1]

    return Identity(name, key, (*nums, den), f)


def equal(key: str, other: str) -> Identity:
    return Identity(f"{key} = {other}", key, (other,), lambda a: a)


def product(name: str, key: str, a: str, b: str) -> Identity:
    return Identity(name, key, (a, b), lambda x, y: x * y)


def sum_of(name: str, key: str, parts: tuple[str, ...]) -> Identity:
    def f(*xs: Interval) -> Interval:
        acc = xs[0]
        for x in xs[1:]:
            acc = acc + x
        return acc

    return Identity(name, key, parts, f)


# --------------------------------------------------------------------------- the registry entry


@dataclass(frozen=True)
class ToolCheck:
    tool: Tool
    definition: StatDefinition
    source: str  # where the definition was read
    recompute: _Recompute | None = None
    recompute_text: Callable[[str, str, Records], tuple[bool, str]] | None = None
    fixed: tuple[Identity, ...] = ()
    families: tuple[Callable[[dict[str, Reported]], Iterable[Identity]], ...] = field(default_factory=tuple)
    # the tool's files hold Python-repr floats (json.dump): a value is one exact binary float, so an
    # identity allows one ulp, not half a unit of its last printed digit ("150.0" is exactly 150)
    machine_floats: bool = True
    # identities over the reported values and the run's declared settings (vLLM's num_prompts)
    declared: Callable[[dict[str, Reported], Any], Iterable[Identity]] | None = None
    # identities over values printed as text (MLPerf's "Result is : VALID"): {key: text as printed}
    text_checks: Callable[[dict[str, str]], Iterable[TextResult]] | None = None

    def identities(self, values: dict[str, Reported], run) -> Iterator[IdentityResult]:
        """Every identity whose keys the run reported, evaluated (run: its declared row, used by
        the ``declared`` identities)."""
        seen = set()
        extra = self.declared(values, run) if self.declared is not None else ()
        for ident in (*self.fixed, *(i for fam in self.families for i in fam(values)), *extra):
            if (ident.name, ident.key) in seen:
                continue
            seen.add((ident.name, ident.key))
            res = ident.evaluate(values)
            if res is not None:
                yield res
