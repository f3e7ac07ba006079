"""ExactColumn (issue 17): the statistics of a column read as one numpy array are exactly those of
the same values as a list of Fractions, on adversarial values: subnormals, the largest and smallest
magnitudes, negative zero, cancellation, ties, integers beyond 2**53."""

from __future__ import annotations

import math
import random
import sys
from fractions import Fraction

import numpy as np
import pytest
from bench_ledger.queries.check.stat_definitions import DEFINITIONS, NotDerivable, exact_sorted, percentile_level
from bench_ledger.queries.metrics.definitions import exact_sum, sum_of_squares_about_mean
from bench_ledger.queries.metrics.exact_column import ExactColumn

TINY = 5e-324  # the smallest subnormal
BIG = sys.float_info.max


def floats(seed: int, n: int) -> list[float]:
    """Random doubles of every magnitude and sign, with repeats, zeros and subnormals."""
    rng = random.Random(seed)
    out: list[float] = []
    for _ in range(n):
        kind = rng.randrange(6)
        if kind == 0:
            out.append(math.ldexp(rng.random(), rng.randint(-1074, 1023)) * rng.choice((1, -1)))
        elif kind == 1:
            out.append(rng.choice((0.0, -0.0, TINY, -TINY, 2.2250738585072014e-308, BIG, -BIG, 1.0, -1.0)))
        elif kind == 2:
            out.append(round(rng.uniform(0, 2), 3))  # latencies printed to ms: many ties
        elif kind == 3:
            out.append(rng.randint(1, 9) * TINY)  # subnormal multiples
        elif kind == 4 and out:
            out.append(-rng.choice(out))  # exact cancellation
        else:
            out.append(rng.uniform(-1e6, 1e6))
    return out


ADVERSARIAL = {
    "subnormals": [TINY, 2 * TINY, -TINY, 3 * TINY, 2.2250738585072014e-308, -2.225073858507201e-308],
    "huge": [BIG, BIG, -BIG, 1e300, -1e-300],
    "cancellation": [1e308, -1e308, 1.0, 1e-308, -1.0, 5e-324, 1e16, -1e16, 0.1],
    "negative zero": [-0.0, 0.0, -0.0, 1.5, -0.0],
    "one value": [0.1],
    "ties": [0.25, 0.1, 0.25, 0.1, 0.1, 3.0],
    "mixed exponents": [0.1, 0.2, 0.3, 1e-10, 1e10, 123.456, 1 / 3, 2 / 3],
    "random": floats(17, 3000),
}


def reference_sum(values: list[float]) -> Fraction:
    return sum((Fraction(v) for v in values), Fraction(0))


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_exact_sums_are_the_fraction_sums(name: str) -> None:
    vals = ADVERSARIAL[name]
    col = ExactColumn(np.array(vals, dtype=np.float64))
    assert col.exact_sum() == reference_sum(vals)
    assert exact_sum(col) == exact_sum([Fraction(v) for v in vals])
    assert col.exact_sum_of_squares() == sum((Fraction(v) ** 2 for v in vals), Fraction(0))
    assert sum_of_squares_about_mean(col) == sum_of_squares_about_mean([Fraction(v) for v in vals])


def test_integer_columns_are_exact_beyond_2_53() -> None:
    vals = [2**62, 2**62 - 1, -(2**61), 3, 2**53 + 1, 0]
    col = ExactColumn(np.array(vals, dtype=np.int64))
    assert col.exact_sum() == sum(vals)  # np.sum would wrap past 2**63; a float sum would round
    assert col.exact_sum_of_squares() == sum(v * v for v in vals)
    assert list(col) == [Fraction(v) for v in vals] and col[-1] == 0 and isinstance(col[0], Fraction)
    # list semantics: + concatenates; mixed number types fall back to a list of the exact values
    both = col + ExactColumn(np.array([7], dtype=np.int64))
    assert isinstance(both, ExactColumn) and list(both) == [*map(Fraction, vals), 7]
    assert col + ExactColumn(np.array([0.5])) == [*map(Fraction, vals), Fraction(1, 2)]


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_order_and_distinct_values_are_those_of_the_fractions(name: str) -> None:
    vals = ADVERSARIAL[name]
    col = ExactColumn(np.array(vals, dtype=np.float64))
    assert list(exact_sorted(col)) == sorted(Fraction(v) for v in vals)
    values, counts = col.distinct()
    merged: dict[Fraction, int] = {}
    for v in vals:
        merged[Fraction(v)] = merged.get(Fraction(v), 0) + 1
    assert list(values) == sorted(merged) and counts.tolist() == [merged[v] for v in sorted(merged)]


STATS = (
    "count",
    "mean",
    "sum",
    "median",
    "min",
    "max",
    "mode",
    "std",
    "variance",
    "p1",
    "p25",
    "p50",
    "p75",
    "p90",
    "p99",
    "p99.9",
    "p001",
    "p999",
)


@pytest.mark.parametrize("definition", sorted(DEFINITIONS))
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_every_statistic_of_every_definition_is_unchanged(definition: str, name: str) -> None:
    d = DEFINITIONS[definition]
    vals = ADVERSARIAL[name]
    for stat in STATS:
        want = _stat(d, [Fraction(v) for v in vals], stat)
        got = _stat(d, ExactColumn(np.array(vals, dtype=np.float64)), stat)
        assert got == want, (definition, name, stat)
        assert type(got) is type(want)


def _stat(d, values, stat: str):  # noqa: ANN001, ANN202 - the value or the exception it raised
    try:
        return d.stat(values, stat)
    # too few values for ddof 1; the sqrt of a variance beyond the floats: the same refusal either way
    except (NotDerivable, OverflowError, ValueError) as exc:
        return (type(exc), str(exc))


def test_percentile_levels_read_at_most_two_values() -> None:
    """An order statistic converts only the values it reads (the point of the column)."""
    reads: list[int] = []

    class Counting(ExactColumn):
        def __getitem__(self, i):  # noqa: ANN001, ANN204
            reads.append(i)
            return super().__getitem__(i)

    col = ExactColumn(np.array(floats(3, 10_000)))
    s = Counting(col.sorted().array)
    for p in ("p50", "p99", "p99.9"):
        reads.clear()
        DEFINITIONS["numpy-linear"].percentile(s, percentile_level(p))
        assert len(reads) <= 2


def test_a_non_finite_value_is_refused() -> None:
    with pytest.raises(ValueError, match="1 value\\(s\\) of the column are not finite"):
        ExactColumn(np.array([1.0, float("nan")]))
    with pytest.raises(TypeError, match="float64 or int64"):
        ExactColumn(np.array([1, 2], dtype=np.int32))


def test_vllm_tpot_replays_the_tools_float_division() -> None:
    """The serving checks' TPOT column: numpy's elementwise (latency - ttft) / (output_tokens - 1) is the
    per-request Python float arithmetic the series was computed with before."""
    from bench_ledger.queries.check.serving import _serving_series  # private: the series check reads

    rng = random.Random(5)
    n = 5000
    out = [rng.choice((0, 1, 2, 3, 1024, 2**40)) for _ in range(n)]
    ttft = [rng.uniform(0, 1) for _ in range(n)]
    lat = [t + rng.uniform(0, 30) for t in ttft]

    class Rec:
        fields = {"ttft_s", "latency_s", "output_tokens", "status"}

        def need_status(self) -> None:
            pass

        def column(self, name: str) -> ExactColumn:
            return ExactColumn(np.array({"ttft_s": ttft, "latency_s": lat, "output_tokens": out}[name]))

    got = _serving_series(Rec(), "tpot")  # type: ignore[arg-type]
    want = [Fraction((la - t) / (o - 1)) for o, t, la in zip(out, ttft, lat, strict=True) if o > 1]
    assert list(got) == want


def test_a_vllm_check_reads_columns_never_rows(ledger, ledger_url: str, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """vLLM's statistics read request columns and chunk gaps as ExactColumns: no record becomes a dict
    (that was a quarter of a 200k-request check), and the rows are what the dict path gave."""
    import json

    from bench_ledger.queries.check import checker as chk
    from bench_ledger.queries.check.core import _RunRows  # private: check's run rows, built directly

    from tests.clirun import run

    obj = {
        "date": "20260301-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "model_id": "m",
        "num_prompts": 5,
        "request_rate": "inf",
        "max_concurrency": 2,
        "duration": 4.0,
        "completed": 4,
        "failed": 1,
        "total_input_tokens": 40,
        "total_output_tokens": 13,
        "request_throughput": 1.0,
        "output_throughput": 3.25,
        "input_lens": [10, 10, 10, 10, 10],
        "output_lens": [4, 3, 2, 4, 0],
        "ttfts": [0.04, 0.05, 0.125, 0.04, 0.0],
        "itls": [[0.01, 0.02, 0.03], [0.02, 0.02], [0.5], [0.0, -0.0, 5e-324], []],
        "latencies": [1.5, 0.25, 0.75, 0.3, 0.0],
        "errors": ["", "", "", "", "HTTP 500"],
        "mean_ttft_ms": 63.75,
        "median_ttft_ms": 45.0,
        "std_ttft_ms": 35.0,
        "p99_ttft_ms": 123.5,
        "mean_tpot_ms": 300.0,
        "p99_tpot_ms": 620.0,
        "median_itl_ms": 20.0,
        "p99_itl_ms": 462.4,
        "std_e2el_ms": 500.0,
        "mean_e2el_ms": 700.0,
    }
    (tmp_path / "v.json").write_text(json.dumps(obj))
    run("import", "--db", ledger_url, "-q", "--batch", "v", tmp_path / "v.json")
    want = [r.as_dict() for r in chk.check(ledger, batch="v")]

    def no_rows(self):  # noqa: ANN001, ANN202
        raise AssertionError("a vLLM check built the records as dicts")

    monkeypatch.setattr(_RunRows, "rows", no_rows)
    got = [r.as_dict() for r in chk.check(ledger, batch="v")]
    assert got == want
    by = {r["key"]: r for r in got if r["section"] == "records"}
    # the 9 gaps sorted: -0.0, 0.0, 5e-324, 0.01, 0.02 x3, 0.03, 0.5; p99 at h = 7.92
    assert (by["median_itl_ms"]["recomputed"], by["p99_itl_ms"]["recomputed"]) == (20.0, pytest.approx(462.4))
    assert by["p99_itl_ms"]["status"] == "agree"
    assert by["mean_tpot_ms"]["recomputed"] == pytest.approx(1000 * (1.46 / 3 + 0.2 / 2 + 0.625 + 0.26 / 3) / 4)


def _textbook_pdf(pairs: list[tuple[Fraction, Fraction]]) -> tuple[list[Fraction], list[float], list[Fraction]]:
    """guidellm's weighted PDF the plain way (the code before issue 17's rewrite): a dict of Fractions,
    sorted Fractions, one Fraction division per value."""
    merged: dict[Fraction, Fraction] = {}
    for v, w in pairs:
        merged[v] = merged.get(v, Fraction(0)) + w
    values = [v for v in sorted(merged) if merged[v] > 0]
    weights = [merged[v] for v in values]
    if sum(weights, Fraction(0)) <= Fraction(1, 10**6):
        weights = [Fraction(1)] * len(values)
    total = sum(weights, Fraction(0))
    return values, [float(w) / float(total) for w in weights], [w / total for w in weights]


@pytest.mark.parametrize("seed", range(12))
def test_guidellm_pdf_and_statistics_are_the_textbook_fractions(seed: int) -> None:
    """weighted_pdf and guidellm_stat (merging by a Fraction's (numerator, denominator), sorting by
    floats, mean and variance as Σ v·w / Σ w and Σ w·v² / Σ w - mean²) give exactly the rationals and
    floats of the textbook forms: repeated values, zero and all-zero weights, ints beside Fractions,
    and distinct Fractions that round to the same float (their order is decided as Fractions)."""
    from bench_ledger.queries.check.stat_definitions import GUIDELLM_STATS, guidellm_stat, weighted_pdf

    rng = random.Random(seed)
    vals = [Fraction(x) for x in floats(seed, 60) if abs(x) < 1e150]  # a variance within a float
    vals += [Fraction(1, 3), Fraction(1, 3) + Fraction(1, 10**30)]  # distinct, one float
    pairs: list[tuple[Fraction, Fraction]] = []
    for _ in range(300):
        v = rng.choice(vals) * rng.choice((1, 1000))
        w = rng.choice((Fraction(1), Fraction(0), Fraction(rng.uniform(0, 3)), Fraction(rng.randint(0, 5), 7), 2))
        pairs.append((v, w))
    one = [p for p in pairs if p[1] != 0][:1]
    for case in (pairs, one, one * 3):
        values, probs, exact = _textbook_pdf(case)
        pdf = weighted_pdf(case)
        assert (pdf.values, pdf.probs) == (values, probs)
        assert [w / pdf.total for w in pdf.weights] == exact
        mu = sum((v * q for v, q in zip(values, exact, strict=True)), Fraction(0))
        var = sum(((v - mu) ** 2 * q for v, q in zip(values, exact, strict=True)), Fraction(0))
        assert guidellm_stat(case, "mean") == mu
        assert guidellm_stat(case, "variance") == var
        assert guidellm_stat(case, "std_dev") == Fraction(math.sqrt(var))
        for stat in (*GUIDELLM_STATS, "p1", "p50", "p99.9"):
            assert type(guidellm_stat(case, stat)) is Fraction, stat
    zero = [(v, Fraction(0)) for v, _ in pairs[:20]]  # every weight 0: no value kept, refused
    assert weighted_pdf(zero).values == [] and guidellm_stat(zero, "count") == 0
    with pytest.raises(NotDerivable, match="^every value's weight is 0: guidellm's PDF of these values is empty$"):
        guidellm_stat(zero, "min")
