"""What a metric is: its definition (:class:`Metric`), a request metric's :class:`Plan` (what it reads and
which decision turns that into a value), a resolved scope (:class:`Ctx`), and the exact statistics.

Why it is built this way:

* Each metric is one :class:`Metric` row of the registry (``queries.metrics.registry.METRICS``). A request
  metric's plan is executed by one executor (:mod:`queries.metrics.execute`) for one scope and, grouped,
  for every run of a selection at once (:mod:`queries.metrics.grouped`): the same plan, the same SQL
  expressions (:mod:`queries.metrics.requests`) and the same decision functions either way.
* The statistic of a distribution (mean, numpy-linear percentile, max) is finished in Python with
  :class:`fractions.Fraction`, so both backends give the very same exact value (SQL ``AVG`` of
  doubles differs in the last bits between engines, and ``percentile_cont`` is not exact).
* Percentiles are numpy's default "linear" method (Hyndman-Fan type 7), which is what vLLM uses
  (``np.percentile``) and what pandas' ``Series.quantile`` (llmperf) uses: for sorted x of length n,
  h = (n-1)·p/100, value = x[floor h] + (h - floor h)·(x[floor h + 1] - x[floor h]).
* Only ``ok`` requests enter token totals and latency statistics (vLLM and llmperf do the same);
  a needed field that a capture did not contain makes the value n/a, never zero (R9); records
  that are a sample give n/a (R15).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.queries.values import MetricValue, Scope

__all__ = [
    "E9",
    "Cache",
    "CaptureInfo",
    "Count",
    "Ctx",
    "Dist",
    "Groups",
    "Metric",
    "Plan",
    "Rate",
    "Rows",
    "Total",
    "Wall",
    "derived",
    "exact",
    "exact_sum",
    "fields_given",
    "fields_used",
    "mean",
    "na",
    "percentile_linear",
    "precheck_caps",
    "ratio_sum",
    "std",
    "sum_of_squares_about_mean",
]

E9 = 10**9  # nanoseconds per second


# --------------------------------------------------------------------------- statistics


def percentile_linear(sorted_values: Sequence[Fraction], p: Fraction | int) -> Fraction:
    """numpy's default (linear, type 7) percentile of already sorted values, exactly."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    # h = (n-1)·p/100 = lo + frac, in integers: p = a/b, so (n-1)·a = lo·100b + rem, frac = rem / 100b
    pn, pd = (p, 1) if type(p) is int else Fraction(p).as_integer_ratio()
    den = 100 * pd
    lo, rem = divmod((n - 1) * pn, den)
    if lo + 1 >= n:
        return sorted_values[-1]
    a = sorted_values[lo]
    if rem == 0:
        return a if isinstance(a, Fraction) else Fraction(a)
    b = sorted_values[lo + 1]
    # a + rem/den·(b - a) = (a·(den - rem) + b·rem) / den: the same rational, one normalisation
    an, ad, bn, bd = a.numerator, a.denominator, b.numerator, b.denominator
    return Fraction(an * bd * (den - rem) + bn * ad * rem, ad * bd * den)


def exact_sum(values: Iterable[Fraction | int]) -> Fraction:
    """``sum(values, Fraction(0))``, the same exact rational, without a Fraction addition per value:
    numerators are added as integers per denominator (values from floats share a few powers of two);
    an :class:`ExactColumn` adds its integer mantissas per exponent."""
    if isinstance(values, ExactColumn):
        return values.exact_sum()
    return ratio_sum((v.numerator, v.denominator) for v in values)


def ratio_sum(terms: Iterable[tuple[int, int]]) -> Fraction:
    """The exact sum of the rationals n/d of ``terms`` ((n, d) pairs, d > 0), no Fraction made per
    term: numerators added as integers per denominator (values from floats share a few powers of two)."""
    by_den: dict[int, int] = {}
    for n, d in terms:
        by_den[d] = by_den.get(d, 0) + n
    return sum((Fraction(n, d) for d, n in by_den.items()), Fraction(0))


def sum_of_squares_about_mean(values: Sequence[Fraction]) -> Fraction:
    """Σ (v - mean)² = Σ v² - n·mean², exactly (an identity of rationals)."""
    if isinstance(values, ExactColumn):
        total = values.exact_sum_of_squares()
    else:
        total = ratio_sum((v.numerator * v.numerator, v.denominator * v.denominator) for v in values)
    mu = mean(values)
    return total - len(values) * mu * mu


def mean(values: Sequence[Fraction]) -> Fraction:
    return exact_sum(values) / len(values)


def std(values: Sequence[Fraction], ddof: int) -> float:
    """Standard deviation: ddof=0 population (numpy, vLLM), ddof=1 sample (pandas, llmperf)."""
    var = sum_of_squares_about_mean(values) / (len(values) - ddof)
    return math.sqrt(var)


def exact(v: float | int) -> Fraction:
    return Fraction(v)


# --------------------------------------------------------------------------- registry rows


@dataclass
class Ctx:
    """A resolved scope: which runs / artefacts / launches a metric reads (all within one batch)."""

    scope: Scope
    kind: str  # run | batch | deployment | launch
    run_ids: list[int] = field(default_factory=list)
    batch_names: list[str] = field(default_factory=list)
    durations: dict[int, float | None] = field(default_factory=dict)  # run id -> tool's duration_s
    deployment_id: int | None = None
    launch_ids: list[int] = field(default_factory=list)
    hw_artefact_ids: list[int] = field(default_factory=list)
    window: tuple[object, object] | None = None
    window_note: str | None = None


# --------------------------------------------------------------------------- plans of request metrics
# A request metric is a typed plan: what it reads and which decision turns that into a value. One
# executor (queries.metrics.execute) runs it for one scope and, grouped, for every run of a selection.


@dataclass(frozen=True)
class Count:
    """Requests of one status (API requests: one request row each, never record groups, R2)."""

    status: str


@dataclass(frozen=True)
class Groups:
    """Runs (record groups) in the scope."""


@dataclass(frozen=True)
class Total:
    """SUM of a token column over ok requests; n/a where any ok request lacks it (R9)."""

    column: str


@dataclass(frozen=True)
class Wall:
    """First send to last end on one clock (R3); else the tool's own duration, flagged reported."""


@dataclass(frozen=True)
class Rate:
    """per x (sum of the token totals) / the wall clock (R3)."""

    tokens: tuple[Metric, ...]
    wall: Metric
    per: int


@dataclass(frozen=True)
class Rows:
    """Where a distribution's values are: ``v`` of each row of ``source`` (the request table, alone or
    joined) for which ``member`` holds; the caller selects the runs by the request table's ``run_id``
    (one scope's, or every run of a selection). The grouped read takes the distributions whose ``source``
    is the request table alone in one scan."""

    source: sa.FromClause
    v: sa.ColumnElement
    member: sa.ColumnElement[bool]
    # rows this form leaves without their value (NULL): if any exist, the values are read from ``full()``
    pending: sa.ColumnElement[bool] | None = None
    full: Callable[[], Rows] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Dist:
    """A statistic of per-request values: ``rows(runs)`` says where they are (:class:`Rows`), for the runs
    ``runs`` names (a list of ids or a SELECT of them); metrics that share the callable share one read."""

    rows: Callable[[Any], Rows] = field(compare=False)
    stat: str
    population: str


@dataclass(frozen=True)
class Cache:
    """SUM of cached_tokens over ok requests: only from a captured cache field (R9)."""


Plan = Count | Groups | Total | Wall | Rate | Dist | Cache


@dataclass(frozen=True)
class Metric:
    """One metric, defined once: what it is, what it needs, how it is computed (a request metric's
    :class:`Plan`, or a ``compute`` function for hardware and log metrics)."""

    name: str
    unit: str
    quantity_kind: str
    statistic: str  # count, total, rate, per_stream_rate, percentile, mean, max, capacity_ratio, ...
    interval: str  # the time interval or population it is taken over
    needs: tuple[tuple[str, ...], ...]  # captured fields; each inner tuple is one acceptable set
    formula: str  # the definition in words / SQL (METRICS listing, list_metrics())
    family: str  # requests | hardware | log
    plan: Plan | Callable[[sa.Connection, Ctx, Metric], MetricValue] = field(repr=False, compare=False)
    pools: bool = False  # additive over runs of one batch (counts, totals)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "quantity_kind": self.quantity_kind,
            "statistic": self.statistic,
            "interval": self.interval,
            "needs": [" + ".join(s) for s in self.needs],
            "formula": self.formula,
            "family": self.family,
        }


def na(metric: Metric, ctx: Ctx, reason: str, **inputs: object) -> MetricValue:
    # ``inputs`` is a new dict at every call (keyword arguments): the value owns it
    return MetricValue(
        metric.name, ctx.scope, None, metric.unit, metric.quantity_kind, "n/a", reason, inputs, list(ctx.run_ids)
    )


def derived(
    metric: Metric, ctx: Ctx, value: Fraction, unit: str | None = None, flag: str = "derived", **inputs: object
) -> MetricValue:
    return MetricValue(
        metric.name,
        ctx.scope,
        value,
        unit or metric.unit,
        metric.quantity_kind,
        flag,  # type: ignore[arg-type]
        None,
        inputs,
        list(ctx.run_ids),
    )


# --------------------------------------------------------------------------- captures and fields


@dataclass
class CaptureInfo:
    id: int
    run_id: int
    record_count: int
    sampled: bool
    sample_note: str | None
    fields: set[str]


def precheck_caps(ctx: Ctx, metric: Metric, caps: list[CaptureInfo]) -> MetricValue | None:
    """The decision of :func:`precheck` on captures already read (shared with the batch path)."""
    if not caps:
        return na(metric, ctx, "no per-request records in this scope's artefacts (aggregates only)")
    bare = sorted(set(ctx.run_ids) - {c.run_id for c in caps})
    if bare:
        return na(
            metric,
            ctx,
            f"no per-request records for run(s) {', '.join(map(str, bare))} of the scope (aggregates only)",
            runs_without_records=bare,
        )
    sampled = [c for c in caps if c.sampled]
    if sampled:
        note = sampled[0].sample_note or "the file keeps only a sample of its records"
        return na(
            metric,
            ctx,
            f"records are a sample ({note}): aggregates over them cannot be derived",
            sampled_captures=[c.id for c in sampled],
        )
    total = sum(c.record_count for c in caps)
    for options in [metric.needs] if metric.needs else []:
        sets = _option_sets(options)
        have = [c for c in caps if any(opt <= c.fields for opt in sets)]
        if len(have) < len(caps):
            want = " or ".join(" + ".join(o) for o in options)
            covered = sum(c.record_count for c in have)
            if not have:
                return na(metric, ctx, f"{want} not captured", coverage=f"0 of {total} requests")
            return na(
                metric,
                ctx,
                f"{want} captured for {covered} of {total} requests",
                coverage=f"{covered} of {total} requests",
            )
    return None


@functools.cache
def _option_sets(needs: tuple[tuple[str, ...], ...]) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(o) for o in needs)


def fields_used(caps: list[CaptureInfo], metric: Metric) -> list[str]:
    """The fields used: per capture, its first acceptable set of needed fields."""
    used: set[str] = set()
    sets = _option_sets(metric.needs)
    for c in caps:
        for o in sets:
            if o <= c.fields:
                used |= o
                break
    return sorted(used)


def fields_given(caps: list[CaptureInfo], metric: Metric, given: list[str] | None) -> list[str]:
    """The decision functions' fields: ``given`` where the caller has them (the batch path decides them
    once per captures' shape and needs), else :func:`fields_used`."""
    return fields_used(caps, metric) if given is None else given
