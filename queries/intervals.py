"""Rounding-aware intervals, exact (R11: rounding is evidence).

A printed number is kept with its precision: "2,791" means any true value in [2790.5, 2791.5];
"about 86.9" / "约 86.9" / "~86.9" means [86.85, 86.95]; "+18.5%" is [18.45, 18.55] percentage
points; "2.16x" is [2.155, 2.165]; "16.59M" is [16,585,000, 16,595,000]. The interval is closed:
either rounding rule (half-up, half-even) may have produced the printed digits.

Arithmetic on intervals is exact (``Fraction``) and conservative: the result holds every value the
operands' true values could produce. A recomputed interval is *consistent* with a printed one when
the two meet; :func:`check` reports the margin (overlap width, or the distance between them).

Counts are integers: :func:`grim` checks that a printed mean or percentage over a count N is
achievable as k/N for an integer k (the GRIM test).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from bench_ledger.errors import Refused
from bench_ledger.units import convert as convert_exact

__all__ = [
    "Interval",
    "Printed",
    "check",
    "convert",
    "difference",
    "fmt",
    "grim",
    "hull",
    "integers_in",
    "interval_of",
    "is_count_text",
    "is_range",
    "parse",
    "parse_range",
    "percent_change",
    "product",
    "ratio",
    "total",
]

# ----------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A closed interval [lo, hi] of exact rationals."""

    lo: Fraction
    hi: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "lo", Fraction(self.lo))
        object.__setattr__(self, "hi", Fraction(self.hi))
        if self.lo > self.hi:
            raise ValueError(f"empty interval [{self.lo}, {self.hi}]")

    @classmethod
    def point(cls, x: Fraction | int | str) -> Interval:
        x = Fraction(x)
        return cls(x, x)

    @classmethod
    def of(cls, x: Interval | Fraction | int | str) -> Interval:
        return x if isinstance(x, Interval) else cls.point(x)

    # -- properties
    @property
    def mid(self) -> Fraction:
        return (self.lo + self.hi) / 2

    @property
    def width(self) -> Fraction:
        return self.hi - self.lo

    def contains(self, x: Fraction | int) -> bool:
        return self.lo <= x <= self.hi

    def meets(self, other: Interval) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    def overlap(self, other: Interval) -> Fraction | None:
        """Width of the intersection (0 when they touch), or None when they do not meet."""
        if not self.meets(other):
            return None
        return min(self.hi, other.hi) - max(self.lo, other.lo)

    def distance(self, other: Interval) -> Fraction:
        """Gap between the two intervals; 0 when they meet."""
        if self.meets(other):
            return Fraction(0)
        return other.lo - self.hi if self.hi < other.lo else self.lo - other.hi

    # -- arithmetic
    def __neg__(self) -> Interval:
        return Interval(-self.hi, -self.lo)

    def __add__(self, other: Interval | Fraction | int) -> Interval:
        o = Interval.of(other)
        return Interval(self.lo + o.lo, self.hi + o.hi)

    __radd__ = __add__

    def __sub__(self, other: Interval | Fraction | int) -> Interval:
        o = Interval.of(other)
        return Interval(self.lo - o.hi, self.hi - o.lo)

    def __rsub__(self, other: Interval | Fraction | int) -> Interval:
        return Interval.of(other) - self

    def __mul__(self, other: Interval | Fraction | int) -> Interval:
        o = Interval.of(other)
        products = (self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
        return Interval(min(products), max(products))

    __rmul__ = __mul__

    def __truediv__(self, other: Interval | Fraction | int) -> Interval:
        o = Interval.of(other)
        if o.contains(0):
            raise Refused(
                "R11",
                f"divide by {o}",
                "the divisor's interval contains 0, so the quotient is unbounded",
                "divide by a number printed with enough precision to exclude zero",
            )
        return self * Interval(1 / o.hi, 1 / o.lo)

    def __rtruediv__(self, other: Interval | Fraction | int) -> Interval:
        return Interval.of(other) / self

    def __str__(self) -> str:
        if self.lo == self.hi:
            return fmt(self.lo)
        return f"[{fmt(self.lo)}, {fmt(self.hi)}]"


def fmt(x: Fraction | int, digits: int = 6) -> str:
    """A Fraction for people: exact when it is a short decimal, else rounded to ``digits`` significant."""
    x = Fraction(x)
    if x.denominator == 1:
        return f"{x.numerator:,}"
    d = Decimal(x.numerator) / Decimal(x.denominator)
    if len(str(d.normalize())) <= 16 and Fraction(str(d)) == x:
        whole, _, frac = f"{d.normalize():f}".partition(".")
        sign = "-" if whole.startswith("-") else ""
        return f"{sign}{int(whole.lstrip('-')):,}" + (f".{frac}" if frac else "")
    mag = math.floor(math.log10(abs(float(x)))) if x else 0
    places = max(0, digits - 1 - mag)
    return f"{float(x):,.{places}f}"


# ----------------------------------------------------------------------------- printed numbers

MINUS = "-\u2212\u2012\u2013\uff0d"  # hyphen-minus, minus sign, figure dash, en dash, fullwidth
APPROX = ("about", "approx.", "approximately", "around", "roughly", "约", "大约", "~", "≈", "～")
SCALE = {"K": Fraction(10**3), "k": Fraction(10**3), "M": Fraction(10**6), "万": Fraction(10**4)}
RATIO_UNITS = {"x": "x", "×": "x", "X": "x", "倍": "x"}

_NUMBER = re.compile(
    r"""^(?P<sign>[+"""
    + re.escape(MINUS)
    + r"""])?\s*
        (?P<int>\d{1,3}(?:,\d{3})+|\d+)?(?:\.(?P<frac>\d+))?
        (?P<scale>[KkM万](?![A-Za-z]))?\s*(?P<unit>.*?)\s*$""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Printed:
    """One number as printed, with the interval its rounding allows.

    ``value`` is the nominal number (scale applied: "16.59M" -> 16,590,000); ``step`` the unit in
    the last printed place; ``interval`` is value +- step/2. ``unit`` is what followed the number
    ("%", "x", "GB", "tok/s"...; ratios written "×"/"倍" become "x"). ``approx`` records an
    "about"/"约"/"~" prefix (it does not widen the interval: the digits fix the precision).
    """

    text: str
    value: Fraction
    step: Fraction
    unit: str | None
    approx: bool = False
    signed: bool = False
    decimals: int = 0

    @property
    def interval(self) -> Interval:
        half = self.step / 2
        return Interval(self.value - half, self.value + half)

    @property
    def is_integer(self) -> bool:
        return self.decimals == 0 and self.value.denominator == 1


def _strip_approx(text: str) -> tuple[str, bool]:
    t = text.strip()
    approx = False
    changed = True
    while changed:
        changed = False
        for word in APPROX:
            if t.lower().startswith(word.lower()):
                t = t[len(word) :].lstrip()
                approx = changed = True
    return t, approx


def parse(text: str) -> Printed:
    """Parse one printed number: '2,791', 'about 86.9', '约 86.9', '+18.5%', '−16.2%', '2.16×',
    '16.59M', '510.31 GB', '133.39 tok/s'. Raises ValueError when the text is not one number."""
    return _parse(text)


@functools.lru_cache(maxsize=4096)  # an audit reads each claim's text several times; Printed is frozen
def _parse(text: str) -> Printed:
    body, approx = _strip_approx(text)
    m = _NUMBER.match(body)
    if not m or (m.group("int") is None and m.group("frac") is None):
        raise ValueError(f"not a printed number: {text!r}")
    int_part = (m.group("int") or "0").replace(",", "")
    frac = m.group("frac") or ""
    sign = -1 if m.group("sign") and m.group("sign") in MINUS else 1
    digits = Fraction(int(int_part + frac), 10 ** len(frac))
    step = Fraction(1, 10 ** len(frac))
    scale = SCALE.get(m.group("scale") or "", Fraction(1))
    unit = m.group("unit") or None
    if unit is not None:
        unit = unit.strip()
        unit = RATIO_UNITS.get(unit, unit)
        if re.search(r"\d", unit):
            raise ValueError(f"not one printed number: {text!r}")
    return Printed(
        text=text,
        value=sign * digits * scale,
        step=step * scale,
        unit=unit or None,
        approx=approx,
        signed=m.group("sign") is not None,
        decimals=len(frac),
    )


_RANGE_SEP = re.compile(r"\s*(?:\.\.|\u2026|\bto\b|至|～|~|[-\u2013\u2014])\s*")


def parse_range(text: str) -> tuple[Printed, Printed]:
    """Parse a printed range '1.77x-2.78x', '21,170 .. 1,840,234', '419–165,230', '+45% .. +59%',
    '22.0-25.8 ms'. A range claim is two numbers; a unit printed only on the second end applies to
    both. Raises ValueError when the text is not a range."""
    body, approx = _strip_approx(text)
    # try every separator position; the first split whose both halves parse wins
    for m in _RANGE_SEP.finditer(body):
        left, right = body[: m.start()], body[m.end() :]
        if not left.strip() or not right.strip():
            continue
        if left.rstrip()[-1:] in "+" + MINUS:
            continue
        try:
            a, b = parse(left), parse(right)
        except ValueError:
            continue
        if a.unit is None and b.unit is not None:
            a = Printed(a.text, a.value, a.step, b.unit, a.approx, a.signed, a.decimals)
        if approx:
            a = Printed(a.text, a.value, a.step, a.unit, True, a.signed, a.decimals)
            b = Printed(b.text, b.value, b.step, b.unit, True, b.signed, b.decimals)
        return a, b
    raise ValueError(f"not a printed range: {text!r}")


def is_range(text: str) -> bool:
    try:
        parse(text)
        return False
    except ValueError:
        pass
    try:
        parse_range(text)
        return True
    except ValueError:
        return False


def interval_of(text: str) -> Interval:
    """The interval a printed number (or range: its hull) allows."""
    if is_range(text):
        a, b = parse_range(text)
        return Interval(min(a.interval.lo, b.interval.lo), max(a.interval.hi, b.interval.hi))
    return parse(text).interval


# ----------------------------------------------------------------------------- helpers


def ratio(a: Interval, b: Interval) -> Interval:
    """a / b (division by an interval containing 0 is refused)."""
    return Interval.of(a) / Interval.of(b)


def percent_change(a: Interval, b: Interval) -> Interval:
    """(b - a) / a x 100, in percentage points, computed as (b/a - 1) x 100 so that ``a`` is used
    once and the interval is tight."""
    return (ratio(b, a) - 1) * 100


def difference(a: Interval, b: Interval) -> Interval:
    return Interval.of(a) - Interval.of(b)


def total(*xs: Interval) -> Interval:
    out = Interval.point(0)
    for x in xs:
        out = out + Interval.of(x)
    return out


def product(*xs: Interval) -> Interval:
    out = Interval.point(1)
    for x in xs:
        out = out * Interval.of(x)
    return out


def convert(x: Interval, unit: str, to: str) -> Interval:
    """Exact unit conversion of both ends (``ledger.units``; R12: unconfirmed units refuse)."""
    return Interval(convert_exact(x.lo, unit, to), convert_exact(x.hi, unit, to))


def hull(*xs: Interval) -> Interval:
    return Interval(min(x.lo for x in xs), max(x.hi for x in xs))


# ----------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Check:
    """A recomputed interval against a printed one."""

    recomputed: Interval
    printed: Interval
    consistent: bool
    overlap: Fraction | None  # width of the intersection when they meet
    distance: Fraction  # gap between them when they do not (0 when they meet)

    @property
    def margin(self) -> str:
        """The margin in words: how far inside the printed rounding, or how far outside it."""
        if self.consistent:
            if self.recomputed.width == 0:
                inside = min(self.recomputed.lo - self.printed.lo, self.printed.hi - self.recomputed.hi)
                if self.printed.width == 0:
                    return "equal to the printed value"
                return f"inside the printed rounding, {fmt(inside)} from its edge"
            return f"meets the printed rounding, overlap {fmt(self.overlap or 0)}"
        side = "above" if self.recomputed.lo > self.printed.hi else "below"
        return f"outside the printed rounding: off by {fmt(self.distance)} ({side})"


def check(recomputed: Interval, printed: Interval | str) -> Check:
    """Consistent when the recomputed interval and the printed interval meet (R11)."""
    p = interval_of(printed) if isinstance(printed, str) else printed
    r = Interval.of(recomputed)
    ov = r.overlap(p)
    return Check(r, p, ov is not None, ov, r.distance(p))


def grim(printed: Printed | str, n: int, *, percent: bool | None = None) -> bool:
    """GRIM: can a mean (or a percentage, when the unit is '%') of n integer items print as this?

    True when some integer k gives k/n (or 100 k/n) inside the printed interval.
    """
    p = parse(printed) if isinstance(printed, str) else printed
    if n <= 0:
        raise ValueError("n must be positive")
    pct = (p.unit == "%") if percent is None else percent
    iv = p.interval
    if pct:
        iv = Interval(iv.lo / 100, iv.hi / 100)
    k_lo = math.ceil(iv.lo * n)
    k_hi = math.floor(iv.hi * n)
    return k_lo <= k_hi


def integers_in(x: Interval) -> Interval | None:
    """The integers a count printed as ``x`` can be: [ceil(lo), floor(hi)], or None when there is
    none (a count is an integer: "2" is exactly 2, "约 18.61M" any integer in its interval)."""
    lo, hi = math.ceil(x.lo), math.floor(x.hi)
    return Interval(Fraction(lo), Fraction(hi)) if lo <= hi else None


def is_count_text(printed: Printed | str) -> bool:
    """A count is an integer: '1,840,234' is; '2,791.5' is not."""
    p = parse(printed) if isinstance(printed, str) else printed
    return p.is_integer and p.step >= 1
