"""importers.base.exact_ns_of (issue 17): the numpy shortcut gives exactly seconds_ns of the floats'
shortest texts, summed, on generated and edge values; values it does not cover go the decimal way."""

from __future__ import annotations

import math
import random
from decimal import Decimal

import pyarrow as pa
from bench_ledger.importers.base import EXACT_MIN, FAST_NS_MAX, exact_ns_of, seconds_ns


def _reference(*cols: list[float | None]) -> list[int | None]:
    return [None if any(v is None for v in vs) else seconds_ns(*(Decimal(repr(v)) for v in vs)) for vs in zip(*cols)]


def _values(rng: random.Random, n: int) -> list[float | None]:
    out: list[float | None] = []
    edges = [
        0.0,
        -0.0,
        EXACT_MIN,
        math.nextafter(EXACT_MIN, 1),
        1e-7 * 3,
        0.1,
        0.30000000000000004,
        1.005,
        2.0,
        999999.999999999,
        123456.0000000005,
        52341.123456789123,
        4194303.999999999,
        math.nextafter(FAST_NS_MAX, 0),
        FAST_NS_MAX,
        FAST_NS_MAX + 0.5,
        5e6 + 0.123456789,
        999999999.9999999,
        1.0,
        10.0,
        1000.0,
        1e8,
        math.nextafter(1.0, 0),
        math.nextafter(1.0, 2),
        math.nextafter(1000.0, 0),
        9.999999999,
        0.999999999,
        123.000000001,
        123.0000000005,
        0.000000123,
        1.000000001e-7,
    ]
    for v in edges:
        out += [v, -v]
    for _ in range(n):
        kind = rng.randrange(6)
        if kind == 0:  # a decimal of 0-9 places, as most tools print
            places = rng.randrange(10)
            out.append(round(rng.uniform(0, 10 ** rng.randrange(1, 8)), places))
        elif kind == 1:  # a full-precision float (perf_counter), 15-17 digits
            out.append(rng.uniform(0, 10 ** rng.randrange(-6, 9)))
        elif kind == 2:  # near a multiple of 1 ns
            out.append(math.nextafter(rng.randrange(1, 10**15) / 1e9, rng.choice((0.0, math.inf))))
        elif kind == 3:  # an exact multiple of 1 ns as a float
            out.append(rng.randrange(0, 4 * 10**15) / 1e9)
        elif kind == 4:
            out.append(None)
        else:  # beyond the shortcut's range
            out.append(rng.uniform(FAST_NS_MAX, 1e9))
    # the callers keep values where exact_decimal is exact (0, or EXACT_MIN <= |x| < 1e9 in vllm_bench)
    return [v for v in out if v is None or v == 0 or EXACT_MIN <= abs(v) < 1e9]


def test_exact_ns_of_equals_seconds_ns_of_the_shortest_texts() -> None:
    rng = random.Random(17)
    a = _values(rng, 20_000)
    b = _values(rng, len(a))[: len(a)]
    b += [0.5] * (len(a) - len(b))
    rng.shuffle(b)
    for cols in ((a,), (a, b), (b, a)):
        got = exact_ns_of(*(pa.array(c, pa.float64()) for c in cols)).to_pylist()
        assert got == _reference(*cols)


def test_exact_ns_of_takes_chunked_arrays_and_all_nulls() -> None:
    col = pa.chunked_array([[1.25, None], [3.000000001]], pa.float64())
    assert exact_ns_of(col).to_pylist() == [1250000000, None, 3000000001]
    assert exact_ns_of(pa.nulls(3, pa.float64())).to_pylist() == [None, None, None]
