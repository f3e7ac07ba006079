"""A column of per-request values read as one numpy array, exact without a Fraction per value.

``ExactColumn(array)`` is the sequence of the exact rationals ``Fraction(array[i])`` (float64 or
int64; a float is one binary rational, so nothing is rounded). It offers what the statistic
definitions read (:mod:`queries.check.stat_definitions`, :func:`queries.metrics.definitions.exact_sum`) without
converting every value:

* an order statistic reads one or two values of :meth:`sorted` (numpy's sort of the floats: the
  order of their rationals, since conversion is exact and monotone; equal floats are equal
  rationals, so how ties are broken does not matter — ``-0.0`` and ``0.0`` are both 0);
* :meth:`exact_sum` and :meth:`exact_sum_of_squares` are the exact rational sums: each float is
  ``m x 2**e`` with an integer mantissa ``|m| < 2**53`` (``numpy.frexp``, exact), the mantissas of
  one exponent are added as Python integers, and the few per-exponent sums are shifted together;
* :meth:`distinct` gives the distinct values and how often each occurs (``numpy.unique``);
* :meth:`scaled` multiplies every value by a positive rational (a unit conversion, s -> ms) exactly,
  without touching the array.

Item ``i`` (and iteration) still gives ``Fraction(array[i])``, so code that walks the values as
Fractions computes what it did on a list. Values must be finite (the import refuses others).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any, overload

import numpy as np

__all__ = ["ExactColumn"]


class ExactColumn(Sequence[Fraction]):
    """The exact values ``Fraction(x) * scale`` of a 1-D float64 or int64 array (kept as is; never
    copied), ``scale`` a positive rational (1 unless :meth:`scaled`)."""

    __slots__ = ("_a", "_scale", "_sorted", "_items")

    def __init__(self, array: Any, scale: Fraction | int = 1) -> None:
        a = np.asarray(array)
        if a.ndim != 1 or a.dtype not in (np.float64, np.int64):
            raise TypeError(
                f"an exact column holds a 1-D float64 or int64 array, not {a.dtype} of {a.ndim} dimension(s)"
            )
        if a.dtype == np.float64 and not np.isfinite(a).all():
            raise ValueError(f"{int((~np.isfinite(a)).sum())} value(s) of the column are not finite")
        if not scale > 0:
            raise ValueError(f"an exact column's scale is positive, not {scale}")
        self._a, self._scale = a, Fraction(scale)
        self._sorted: ExactColumn | None = None
        self._items: list[Fraction] | None = None

    @property
    def array(self) -> np.ndarray:
        """The values as read, before the scale (do not modify)."""
        return self._a

    def scaled(self, factor: Fraction | int) -> ExactColumn:
        """Every value times ``factor`` (> 0), exactly: ``[v * factor for v in self]`` (a unit conversion)."""
        return ExactColumn(self._a, self._scale * factor)

    def _one(self, x: float | int) -> Fraction:
        return Fraction(x) if self._scale == 1 else Fraction(x) * self._scale

    def __len__(self) -> int:
        return len(self._a)

    @overload
    def __getitem__(self, i: int) -> Fraction: ...
    @overload
    def __getitem__(self, i: slice) -> ExactColumn: ...
    def __getitem__(self, i: int | slice) -> Fraction | ExactColumn:
        if isinstance(i, slice):
            return ExactColumn(self._a[i], self._scale)
        return self._one(self._a[i].item())

    def __iter__(self) -> Iterator[Fraction]:
        """Every value as a Fraction (converted once, on the first walk: code that walks the values
        pays what it paid for a list)."""
        if self._items is None:
            self._items = [self._one(x) for x in self._a.tolist()]
        return iter(self._items)

    def __add__(self, other: object) -> ExactColumn | list[Fraction]:
        """Concatenation, as of two lists (an ExactColumn when both hold the same number type and scale)."""
        if isinstance(other, ExactColumn) and other._a.dtype == self._a.dtype and other._scale == self._scale:
            return ExactColumn(np.concatenate([self._a, other._a]), self._scale)
        if isinstance(other, ExactColumn | list | tuple):
            return [*self, *other]
        return NotImplemented

    def __radd__(self, other: object) -> list[Fraction]:
        if isinstance(other, list | tuple):
            return [*other, *self]
        return NotImplemented

    def __repr__(self) -> str:
        return f"ExactColumn({len(self._a)} x {self._a.dtype}" + ("" if self._scale == 1 else f" x {self._scale}") + ")"

    def sorted(self) -> ExactColumn:
        """The values in ascending order (computed once; a positive scale keeps the order)."""
        if self._sorted is None:
            self._sorted = ExactColumn(np.sort(self._a), self._scale)
            self._sorted._sorted = self._sorted
        return self._sorted

    def exact_sum(self) -> Fraction:
        """The exact sum: ``sum(self, Fraction(0))``."""
        if self._a.dtype == np.int64:
            total = Fraction(sum(self._a.tolist()))
        else:
            mant, exp = _mantissas(self._a)
            total = _by_exponent(mant, exp, square=False)
        return total * self._scale

    def exact_sum_of_squares(self) -> Fraction:
        """The exact sum of squares: ``sum(v * v for v in self)``."""
        if self._a.dtype == np.int64:
            vals = self._a.tolist()
            total = Fraction(sum(map(operator.mul, vals, vals)))
        else:
            mant, exp = _mantissas(self._a)
            total = _by_exponent(mant, 2 * exp, square=True)
        return total * self._scale * self._scale

    def distinct(self) -> tuple[ExactColumn, np.ndarray]:
        """The distinct values in ascending order and the number of times each occurs."""
        values, counts = np.unique(self._a, return_counts=True)
        return ExactColumn(values, self._scale), counts


def _mantissas(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer mantissas and exponents with ``a == mant * 2.0**exp`` exactly (|mant| < 2**53)."""
    frac, exp = np.frexp(a)  # a = frac * 2**exp, 0.5 <= |frac| < 1 (frac = exp = 0 for zero), subnormals too
    mant = np.ldexp(frac, 53).astype(np.int64)  # a power-of-two scaling of a 53-bit fraction: an exact integer
    return mant, exp.astype(np.int64) - 53


def _by_exponent(mant: np.ndarray, exp: np.ndarray, square: bool) -> Fraction:
    """The exact ``sum(mant_i (squared if square) * 2**exp_i)``: Python-integer sums per exponent."""
    if len(mant) == 0:
        return Fraction(0)
    order = np.argsort(exp)
    exps, mants = exp[order], mant[order]
    starts = np.flatnonzero(np.concatenate([[True], exps[1:] != exps[:-1]]))
    bounds = [*starts.tolist(), len(exps)]
    low = int(exps[0])
    total = 0
    for s, t in zip(bounds, bounds[1:], strict=False):
        part = mants[s:t].tolist()
        total += (sum(map(operator.mul, part, part)) if square else sum(part)) << (int(exps[s]) - low)
    return Fraction(total << low) if low >= 0 else Fraction(total, 1 << -low)
