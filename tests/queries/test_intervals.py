"""Rounding-aware intervals (R11): every printed form of the case study and its edge cases."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from bench_ledger.errors import Refused
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.intervals import Interval


def I(lo, hi) -> Interval:  # noqa: E743
    return Interval(F(lo), F(hi))


@pytest.mark.parametrize(
    ("text", "lo", "hi", "unit"),
    [
        ("2,791", "2790.5", "2791.5", None),
        ("1,840,234", "1840233.5", "1840234.5", None),
        ("97,871 MiB", "97870.5", "97871.5", "MiB"),
        ("86.9", "86.85", "86.95", None),
        ("about 86.9", "86.85", "86.95", None),
        ("约 86.9", "86.85", "86.95", None),
        ("约86.9", "86.85", "86.95", None),
        ("~86.9", "86.85", "86.95", None),
        ("≈86.9", "86.85", "86.95", None),
        ("约 86.9 倍", "86.85", "86.95", "x"),
        ("0.336 s", "0.3355", "0.3365", "s"),
        ("133.39 tok/s", "133.385", "133.395", "tok/s"),
        ("510.31 GB", "510.305", "510.315", "GB"),
        ("16.59M", "16585000", "16595000", None),
        ("18.61M", "18605000", "18615000", None),
        ("50K", "49500", "50500", None),
        ("2,577.0", "2576.95", "2577.05", None),
    ],
)
def test_printed_numbers(text, lo, hi, unit):
    p = iv.parse(text)
    assert p.interval == I(lo, hi)
    assert p.unit == unit


def test_about_does_not_widen_and_is_recorded():
    assert iv.parse("约 86.9").approx and iv.parse("about 86.9").approx and not iv.parse("86.9").approx
    assert iv.parse("约 86.9").interval == iv.parse("86.9").interval


def test_trailing_zero_is_precision():
    assert iv.parse("7.0").interval == I("6.95", "7.05")
    assert iv.parse("7").interval == I("6.5", "7.5")
    assert iv.parse("22.0 ms").interval == I("21.95", "22.05")


@pytest.mark.parametrize(
    ("text", "lo", "hi"),
    [
        ("+18.5%", "18.45", "18.55"),
        ("18.5%", "18.45", "18.55"),
        ("−16.2%", "-16.25", "-16.15"),  # U+2212 minus sign
        ("-16.2%", "-16.25", "-16.15"),
        ("－9.6%", "-9.65", "-9.55"),  # fullwidth
        ("约 −26.1%", "-26.15", "-26.05"),
        ("+139%", "138.5", "139.5"),
    ],
)
def test_percentages_are_percentage_points(text, lo, hi):
    p = iv.parse(text)
    assert p.unit == "%"
    assert p.interval == I(lo, hi)


@pytest.mark.parametrize("text", ["2.16x", "2.16×", "2.16 倍", "约 2.16 倍", "2.16X"])
def test_ratios(text):
    p = iv.parse(text)
    assert p.unit == "x" and p.interval == I("2.155", "2.165")


@pytest.mark.parametrize(
    ("text", "a", "b", "unit"),
    [
        ("1.77x-2.78x", ("1.765", "1.775"), ("2.775", "2.785"), "x"),
        ("1.77×–2.78×", ("1.765", "1.775"), ("2.775", "2.785"), "x"),
        ("21,170 .. 1,840,234", ("21169.5", "21170.5"), ("1840233.5", "1840234.5"), None),
        ("419–165,230", ("418.5", "419.5"), ("165229.5", "165230.5"), None),
        ("+45% .. +59%", ("44.5", "45.5"), ("58.5", "59.5"), "%"),
        ("45%–59%", ("44.5", "45.5"), ("58.5", "59.5"), "%"),
        ("22.0-25.8 ms", ("21.95", "22.05"), ("25.75", "25.85"), "ms"),
        ("278-283 W", ("277.5", "278.5"), ("282.5", "283.5"), "W"),
        ("6.5%–7.8%", ("6.45", "6.55"), ("7.75", "7.85"), "%"),
    ],
)
def test_ranges_are_two_numbers(text, a, b, unit):
    assert iv.is_range(text)
    lo, hi = iv.parse_range(text)
    assert lo.interval == I(*a) and hi.interval == I(*b)
    assert lo.unit == unit and hi.unit == unit
    assert iv.interval_of(text) == I(a[0], b[1])


def test_a_negative_number_is_not_a_range():
    assert not iv.is_range("−16.2%")
    assert not iv.is_range("-16.2%")
    assert not iv.is_range("2,791")


@pytest.mark.parametrize("text", ["", "abc", "N/A", "2,577 / 2,329", "1.2.3"])
def test_not_a_number(text):
    with pytest.raises(ValueError):
        iv.parse(text)


def test_arithmetic():
    a, b = I(1, 2), I(3, 5)
    assert a + b == I(4, 7)
    assert b - a == I(1, 4)
    assert a * b == I(3, 10)
    assert I(-1, 2) * I(3, 5) == I(-5, 10)
    assert b / a == I(F(3, 2), 5)
    assert -a == I(-2, -1)
    assert 60 * a == I(60, 120)


def test_division_by_interval_containing_zero_is_refused():
    with pytest.raises(Refused) as exc:
        _ = I(1, 2) / I(-1, 1)
    assert exc.value.rule == "R11"
    with pytest.raises(Refused):
        iv.ratio(I(1, 2), iv.parse("0").interval)


def test_percent_change_uses_the_base_once():
    # (b/a - 1) x 100: tight, not the naive (b - a)/a that uses a twice
    pc = iv.percent_change(I(100, 100), I(110, 110))
    assert pc == I(10, 10)
    pc = iv.percent_change(I(99, 101), I(110, 110))
    assert pc == I(F(110, 101) * 100 - 100, F(110, 99) * 100 - 100)


def test_helpers():
    assert iv.difference(I(5, 6), I(1, 2)) == I(3, 5)
    assert iv.total(I(1, 2), I(3, 4), I(5, 6)) == I(9, 12)
    assert iv.product(I(2, 3), I(4, 5)) == I(8, 15)
    assert iv.hull(I(1, 2), I(5, 6)) == I(1, 6)


def test_unit_conversion_exact_and_r12():
    gib = iv.convert(iv.parse("510.31").interval, "GB", "GiB")
    assert gib == I(F(510305 * 10**6, 2**30), F(510315 * 10**6, 2**30))
    assert iv.check(gib, "475.26").consistent
    with pytest.raises(Refused) as exc:
        iv.convert(iv.parse("92,153").interval, "unconfirmed", "GiB")
    assert exc.value.rule == "R12"


def test_check_reports_margin():
    ok = iv.check(I(10, 12), "11")
    assert ok.consistent and ok.overlap == 1 and ok.distance == 0 and "overlap" in ok.margin
    touching = iv.check(I(0, F(21, 2)), "11")  # [10.5, 11.5] touches at 10.5
    assert touching.consistent and touching.overlap == 0
    off = iv.check(I(12, 13), "11")
    assert not off.consistent and off.distance == F(1, 2) and "off by 0.5" in off.margin
    point = iv.check(Interval.point(F(16593113, 262144)), "63.3")
    assert point.consistent and "inside" in point.margin


def test_margins_in_words():
    assert iv.check(Interval.point(F("2791.1")), "2,791").margin == "inside the printed rounding, 0.4 from its edge"
    assert iv.check(Interval.point(F("2791.45")), "2,791").margin == "inside the printed rounding, 0.05 from its edge"
    assert iv.check(I(10, 12), "11").margin == "meets the printed rounding, overlap 1"
    assert iv.check(I(12, 13), "11").margin == "outside the printed rounding: off by 0.5 (above)"
    assert iv.check(Interval.point(8), "8.47").margin == "outside the printed rounding: off by 0.465 (below)"


@pytest.mark.parametrize(
    ("a", "b", "op", "printed"),
    [
        ("11.019", "0.336", iv.ratio, "32.8x"),  # cold/warm TTFT
        ("1,840,234", "21,170", iv.ratio, "86.9"),  # load-sensitivity range
        ("165,230", "419", iv.ratio, "394"),
        ("142.97", "66.11", iv.ratio, "2.16x"),
        ("6,660", "3,761", iv.ratio, "1.77x"),
        ("3,872", "1,395", iv.ratio, "2.78x"),
        ("150,936", "178,817", iv.percent_change, "+18.5%"),
        ("11.51", "9.65", iv.percent_change, "−16.2%"),
        ("2,577.0", "2,329.1", iv.percent_change, "−9.6%"),
        ("1,612.9", "2,577.0", iv.percent_change, "+59.8%"),
        ("195.7", "144.6", iv.percent_change, "−26.1%"),
        ("139,746", "165,230", iv.percent_change, "+18.2%"),
    ],
)
def test_case_study_arithmetic_is_consistent(a, b, op, printed):
    assert iv.check(op(iv.parse(a).interval, iv.parse(b).interval), printed).consistent


def test_rounded_summary_times_sixty():
    # old output TPM 139,746 = rounded 2,329.1 tok/s x 60: [139,743, 139,749] meets [139,745.5, 139,746.5]
    r = iv.convert(iv.parse("2,329.1").interval, "tok/s", "TPM")
    assert r == I(139743, 139749)
    assert iv.check(r, "139,746").consistent


def test_inconsistent_arithmetic_is_caught():
    assert not iv.check(iv.ratio(iv.parse("6,660").interval, iv.parse("3,761").interval), "1.80x").consistent


def test_grim_means_and_percentages():
    # a mean of 8 integers is k/8: 75.875 can be, 75.87 (two decimals) can be (75.875 rounds), 75.83 cannot
    assert iv.grim("75.875", 8)
    assert iv.grim("75.88", 8)
    assert not iv.grim("75.83", 8)
    # a percentage of 16 items: 6.25% is 1/16; 7.0% is not k/16 (6.25, 12.5)
    assert iv.grim("6.25%", 16)
    assert not iv.grim("7.0%", 16)
    assert iv.grim("0%", 322) and iv.grim("100%", 322)
    with pytest.raises(ValueError):
        iv.grim("1.5", 0)


def test_counts_are_integers():
    assert iv.is_count_text("1,840,234")
    assert iv.is_count_text("322")
    assert not iv.is_count_text("2,791.5")
