"""Units, converted exactly (R1, R12).

Byte units are explicit: GB = 10^9 B, GiB = 2^30 B, MiB = 2^20 B. Conversions use Fraction, so
510.31 GB -> GiB is exact before any rounding for display. A unit recorded as ``unconfirmed``
(a dmon column without a units line) never converts.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from bench_ledger.errors import Refused

__all__ = ["UNCONFIRMED", "convert", "dimension", "parse_quantity", "printed_places"]

UNCONFIRMED = "unconfirmed"

# unit -> (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, Fraction]] = {
    "B": ("bytes", Fraction(1)),
    "kB": ("bytes", Fraction(10**3)),
    "MB": ("bytes", Fraction(10**6)),
    "GB": ("bytes", Fraction(10**9)),
    "TB": ("bytes", Fraction(10**12)),
    "KiB": ("bytes", Fraction(2**10)),
    "MiB": ("bytes", Fraction(2**20)),
    "GiB": ("bytes", Fraction(2**30)),
    "TiB": ("bytes", Fraction(2**40)),
    "ns": ("time", Fraction(1, 10**9)),
    "us": ("time", Fraction(1, 10**6)),
    "ms": ("time", Fraction(1, 1000)),
    "s": ("time", Fraction(1)),
    "min": ("time", Fraction(60)),
    "h": ("time", Fraction(3600)),
    "tokens/s": ("token_rate", Fraction(1)),
    "tok/s": ("token_rate", Fraction(1)),
    "tokens/min": ("token_rate", Fraction(1, 60)),
    "TPM": ("token_rate", Fraction(1, 60)),
    "W": ("power", Fraction(1)),
    "kW": ("power", Fraction(1000)),
    "MHz": ("frequency", Fraction(10**6)),
    "GHz": ("frequency", Fraction(10**9)),
    "%": ("fraction", Fraction(1, 100)),
    "x": ("fraction", Fraction(1)),
    "tokens": ("tokens", Fraction(1)),
    "requests": ("requests", Fraction(1)),
}


def dimension(unit: str) -> str | None:
    entry = _UNITS.get(unit)
    return entry[0] if entry else None


def convert(value: Fraction, unit: str, to: str) -> Fraction:
    """Convert exactly between two units of one dimension; refuse unconfirmed units (R12)."""
    if unit == to:
        return value
    if UNCONFIRMED in (unit, to):
        raise Refused(
            "R12",
            f"convert a value in {unit!r} to {to!r}",
            "the unit was not confirmed by the file's units line",
            "read the tool's header (units line) and record the unit before converting",
        )
    a, b = _UNITS.get(unit), _UNITS.get(to)
    if a is None or b is None:
        unknown = unit if a is None else to
        raise ValueError(f"unknown unit {unknown!r}")
    if a[0] != b[0]:
        raise ValueError(f"cannot convert {unit} ({a[0]}) to {to} ({b[0]})")
    return value * a[1] / b[1]


_QUANTITY = re.compile(r"^\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*(\S.*)?$")


def parse_quantity(text: str) -> tuple[Decimal, str | None]:
    """'97871 MiB' -> (Decimal('97871'), 'MiB'); commas are thousands separators."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a number with a unit: {text!r}")
    try:
        number = Decimal(match.group(1).replace(",", ""))
    except InvalidOperation:
        raise ValueError(f"not a number: {match.group(1)!r}") from None
    return number, (match.group(2) or None)


def printed_places(text: str) -> int | None:
    """The decimal places a printed number fixes, from its last digit (R11): '0.25' -> 2, '150' -> 0,
    '2,791' -> 0, '1e-05' -> 5, '1.5e3' -> -2 (hundreds); None when the text is not a finite number.

    The one definition: an importer stores it as a reported value's precision, and ``check``'s
    tolerance of half a unit in that place is computed from it.
    """
    try:
        d = Decimal(text.replace(",", "").strip())
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    return -int(d.as_tuple().exponent)
