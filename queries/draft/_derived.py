"""A number proposed as derived: a percent change, ratio, quotient, sum or conversion of other numbers of the
same sentence or table row, consistent within rounding (:mod:`queries.intervals`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from bench_ledger.errors import Refused
from bench_ledger.kinds import INTEGER_KINDS
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.draft._guess import Guess, guess
from bench_ledger.queries.draft._numbers import Found
from bench_ledger.units import dimension

__all__ = ["DerivedProposal", "propose_derived"]


@dataclass
class DerivedProposal:
    op: str
    operands: list[Found]
    recomputed: str
    value: str | None  # the printed value with its inferred sign, when the text has none
    why: str


_OP_BEFORE = {"÷": "divide", "/": "divide", "×": "product", "*": "product", "+": "sum", "＋": "sum"}


def _interval(f: Found) -> iv.Interval | None:
    """A number's printed interval; a count (an integer of an integer kind) is exactly itself (R11)."""
    if f.value is None or f.form == "range":
        return None
    try:
        p = iv.parse(f.value)
    except ValueError:
        return None
    if p.is_integer and p.step == 1 and guess(f).kind in INTEGER_KINDS:
        return iv.Interval.point(p.value)
    return p.interval


def _printed(f: Found) -> iv.Printed | None:
    if f.value is None or f.form == "range":
        return None
    try:
        return iv.parse(f.value)
    except ValueError:
        return None


def _tight(res: iv.Interval, printed: iv.Interval) -> bool:
    """Consistent *and* informative: operands printed so coarsely that almost anything fits ("4 and
    8" for +97.2%) prove nothing; the recomputed interval may be at most 10x as wide as the printed one."""
    return iv.check(res, printed).consistent and res.width <= 10 * max(printed.width, Fraction(1, 10**9))


def propose_derived(f: Found, g: Guess, pool: list[Found], text_between: Any) -> DerivedProposal | None:
    """A formula over other numbers of the same sentence or row that gives this one within rounding."""
    p = _printed(f)
    if p is None:
        return None
    with_interval = [(o, i) for o in pool if o is not f and o.form != "na" and (i := _interval(o)) is not None]
    others = [o for o, _ in with_interval]
    before = [o for o in others if (o.place.line, o.place.start) < (f.place.line, f.place.start)]
    # 1. explicit arithmetic printed right before: "384÷16＝24", "16,593,113÷262,144≈63.3"
    if len(before) >= 2:
        a, b = before[-2], before[-1]
        between = text_between(a, b)
        tail = text_between(b, f)
        op = _OP_BEFORE.get(between.strip()[:1]) if between.strip() else None
        if op and (tail.strip()[:1] in "=＝≈" or f.text.lstrip().startswith("≈")):
            res = _apply(op, [a, b])
            if res is not None and _tight(res, p.interval):
                return DerivedProposal(op, [a, b], str(res), None, f"printed arithmetic {a.text}{between}{b.text}")
    ia = {id(o): i for o, i in with_interval}
    if g.kind == "percent_change" or p.unit == "%":
        if g.kind not in ("percent_change",):
            return None
        signs = [1] if p.signed else ([g.sign] if g.sign else [1, -1])
        if not p.signed and g.sign == 0:
            signs = [1, -1]
        order = _pairs(before) + _pairs(others) + _pairs(before, both=True) + _pairs(others, both=True)
        for a, b in order:
            try:
                res = iv.percent_change(ia[id(a)], ia[id(b)])
            except Refused:
                continue
            for sgn in signs:
                target = p.interval if sgn == 1 else -p.interval
                if _tight(res, target):
                    value = None
                    if not p.signed:
                        value = ("+" if sgn == 1 else "−") + p.text.strip().removeprefix("约").strip()
                        value = _clean_value(f, sgn)
                    return DerivedProposal(
                        "percent_change", [a, b], str(res), value, f"({b.text} / {a.text} − 1) × 100"
                    )
        return None
    if p.unit == "x" or g.kind in ("ratio", "capacity_ratio"):
        for a, b in _pairs(before, both=True) + _pairs(others, both=True):
            try:
                res = iv.ratio(ia[id(a)], ia[id(b)])
            except Refused:
                continue
            if _tight(res, p.interval):
                return DerivedProposal("ratio", [a, b], str(res), None, f"{a.text} / {b.text}")
        return None
    # conversion: the number just before it in the same clause, same dimension, another unit
    if before and p.unit and dimension(p.unit):
        a = before[-1]
        pa = _printed(a)
        if (
            pa
            and pa.unit
            and pa.unit != p.unit
            and dimension(pa.unit) == dimension(p.unit)
            and text_between(a, f).strip(" ，,、（(") in ("", "约", "即", "or", "=")
        ):
            try:
                res = iv.convert(pa.interval, pa.unit, p.unit)
            except (Refused, ValueError, KeyError):
                res = None
            if res is not None and _tight(res, p.interval):
                return DerivedProposal("convert", [a], str(res), None, f"{a.text} in {p.unit}")
    # a total printed with its parts in one heading or sentence: "九次启动：五次失败，四次就绪"
    same = [o for o in others if o.segment == f.segment]
    if len(same) >= 2 and all(_is_int(o) for o in same) and _is_int(f):
        # counts are integers: a printed "5" is exactly 5 (R11), so the parts must add up exactly
        res = iv.total(*(iv.Interval.point(_printed(o).value) for o in same))  # type: ignore[union-attr]
        if res.lo == p.value and res.lo > max(_printed(o).value for o in same):  # type: ignore[union-attr]
            return DerivedProposal("sum", same, str(res), None, " + ".join(o.text for o in same))
    return None


def _clean_value(f: Found, sgn: int) -> str:
    core = f.core[0].lstrip("+-−")
    return ("+" if sgn == 1 else "−") + core + "%"


def _is_int(f: Found) -> bool:
    p = _printed(f)
    return (
        p is not None
        and p.is_integer
        and p.unit in (None, "x")
        or (p is not None and p.is_integer and f.form == "word")
    )


def _pairs(items: list[Found], both: bool = False) -> list[tuple[Found, Found]]:
    """Ordered pairs nearest first: (a, b) with a before b; with ``both`` also (b, a)."""
    out = []
    n = len(items)
    for gap in range(1, n):
        for i in range(n - 1, gap - 1, -1):
            a, b = items[i - gap], items[i]
            out.append((a, b))
            if both:
                out.append((b, a))
    return out


def _apply(op: str, xs: list[Found]) -> iv.Interval | None:
    ivs = [_interval(x) for x in xs]
    if any(v is None for v in ivs):
        return None
    try:
        if op == "divide":
            return iv.ratio(ivs[0], ivs[1])  # type: ignore[arg-type]
        if op == "product":
            return iv.product(*ivs)  # type: ignore[arg-type]
        if op == "sum":
            return iv.total(*ivs)  # type: ignore[arg-type]
    except Refused:
        return None
    return None
