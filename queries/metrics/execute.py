"""The one executor of request metrics: a metric's plan on a scope's figures, through its decision function.

The decision functions (:func:`count_value`, :func:`total_value`, :func:`wall_value`, :func:`rate_value`,
:func:`dist_value`, :func:`cache_value`) turn the figures a plan reads into a value with its inputs, or
n/a with its reason. :class:`Execution` runs them for one scope; where the figures come from is the only
difference between evaluating one scope (:func:`scope_execution`, its own statements) and every run of a
selection at once (:mod:`queries.metrics.grouped`, a few grouped statements, a run being one scope), so
flags, n/a reasons and inputs cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from bench_ledger.queries.lattice import derived_flag
from bench_ledger.queries.metrics.definitions import (
    E9,
    Cache,
    CaptureInfo,
    Count,
    Ctx,
    Dist,
    Groups,
    Metric,
    Plan,
    Rate,
    Rows,
    Total,
    Wall,
    derived,
    exact,
    fields_given,
    fields_used,
    mean,
    na,
    percentile_linear,
    precheck_caps,
    std,
)
from bench_ledger.queries.metrics.requests import Q, aggregate_columns, aggregate_row, captures
from bench_ledger.queries.values import MetricValue

__all__ = ["Distribution", "Execution", "Shared", "apply_stat", "read_values", "value_of"]


def _count_value(
    metric: Metric, ctx: Ctx, caps: list[CaptureInfo], n: int, count: int | None, fields: list[str] | None = None
) -> MetricValue:
    """``fields``: the fields used, where the caller has them (:func:`fields_given`); likewise in the other
    decision functions."""
    return derived(
        metric,
        ctx,
        Fraction(int(count or 0)),
        runs=ctx.run_ids,
        requests=int(n),
        fields=fields_given(caps, metric, fields),
    )


def _record_groups(metric: Metric, ctx: Ctx) -> MetricValue:
    return derived(
        metric,
        ctx,
        Fraction(len(ctx.run_ids)),
        runs=ctx.run_ids,
        basis="runs (record groups) in the scope: a count of records, never of requests (R2)",
    )


def _total_value(
    metric: Metric,
    ctx: Ctx,
    caps: list[CaptureInfo],
    column: str,
    total: int | None,
    ok: int,
    missing: int | None,
    fields: list[str] | None = None,
) -> MetricValue:
    if ok == 0:
        return na(metric, ctx, "no ok requests", requests_ok=0)
    if missing:
        return na(
            metric,
            ctx,
            f"{column} reported for {ok - missing} of {ok} ok requests",
            coverage=f"{ok - missing} of {ok} ok requests",
        )
    return derived(
        metric,
        ctx,
        Fraction(int(total)),  # type: ignore[arg-type]
        runs=ctx.run_ids,
        requests_ok=int(ok),
        fields=fields_given(caps, metric, fields),
    )


def _wall_value(metric: Metric, ctx: Ctx, caps: list[CaptureInfo], fetch: Callable[[], object]) -> MetricValue:
    """The decision of a :class:`Wall` plan; ``fetch`` gives the aggregate row (read only if needed)."""
    if any(c.sampled for c in caps):
        return na(metric, ctx, "records are a sample: their first send / last end is not the run's")
    timed = bool(caps) and all({"send_time", "end_time"} <= c.fields for c in caps)
    if timed:
        row: Any = fetch()
        if row.clocks > 1:
            return na(metric, ctx, "requests are on different clocks: no common wall clock")
        if row.first_send is not None and row.last_end is not None and row.last_end > row.first_send:
            return derived(
                metric,
                ctx,
                Fraction(int(row.last_end) - int(row.first_send), E9),
                runs=ctx.run_ids,
                requests_timed=int(row.timed),
                fields=["end_time", "send_time"],
                basis="first send to last end of the run's requests, one clock",
            )
    durations = [ctx.durations.get(r) for r in ctx.run_ids]
    if len(durations) == 1 and durations[0] is not None:
        return derived(
            metric,
            ctx,
            Fraction(durations[0]),
            flag="reported",
            runs=ctx.run_ids,
            basis="tool's own duration (run.duration_s): the records have no send/end times",
        )
    return na(metric, ctx, "no send/end times captured and the tool recorded no duration")


# --------------------------------------------------------------------------- rates over the wall clock


def _rate_value(metric: Metric, ctx: Ctx, parts: list[MetricValue], clock: MetricValue, per: int) -> MetricValue:
    """The decision of a :class:`Rate` plan on the token totals and the wall clock already computed:
    n/a propagates, the wall clock's basis is kept."""
    for v in [*parts, clock]:
        if v.value is None:
            return na(metric, ctx, f"{v.metric}: {v.na_reason}", **{v.metric: None})
    if not clock.value:  # a Fraction: zero
        return na(metric, ctx, "wall clock is zero")
    known = [p.value for p in parts if p.value is not None]
    wall = clock.value
    assert wall is not None and len(known) == len(parts)  # each n/a returned above
    # token totals are integers: their sum as one (the same rational as a sum of Fractions)
    total = (
        Fraction(sum(k.numerator for k in known)) if all(k.denominator == 1 for k in known) else sum(known, Fraction(0))
    )
    inputs: dict[str, Any] = {p.metric: str(p.value) for p in parts} | {
        "wall_clock_s": wall.numerator / wall.denominator,  # float(wall): the correctly rounded quotient
        "basis": clock.inputs.get("basis"),
        "requests_ok": parts[0].inputs.get("requests_ok"),
    }
    flag = derived_flag([*(p.flag for p in parts), clock.flag])  # the weakest input decides (lattice)
    # per·total/wall as one fraction (one normalisation instead of two): the same rational
    rate = Fraction(per * total.numerator * wall.denominator, total.denominator * wall.numerator)
    return derived(metric, ctx, rate, flag=flag, runs=ctx.run_ids, **inputs)


def apply_stat(stat: str, values: Sequence[Fraction]) -> Fraction:
    """One statistic of sorted values, by numpy's definitions (vLLM, SGLang, AIPerf): ``mean``, ``min``,
    ``max``, ``std`` (population, ddof 0: the square root is a float), ``pN`` / ``pN.N`` (linear)."""
    if stat == "mean":
        return mean(values)
    if stat == "max":
        return values[-1]
    if stat == "min":
        return values[0]
    if stat == "std":
        return Fraction(std(values, 0))
    if stat.startswith("p"):
        return percentile_linear(values, Fraction(stat[1:]) if "." in stat else int(stat[1:]))
    raise ValueError(stat)


def _dist_value(
    metric: Metric,
    ctx: Ctx,
    caps: list[CaptureInfo],
    stat: str,
    population: str,
    n: int,
    missing: int,
    values: Callable[[], Sequence[Fraction]],
    fields: list[str] | None = None,
) -> MetricValue:
    """The decision of a :class:`Dist` plan: n values of which ``missing`` are NULL; ``values()`` sorted."""
    if missing:
        return na(
            metric,
            ctx,
            f"value missing for {missing} of {n} {population}",
            coverage=f"{n - missing} of {n} {population}",
        )
    if not n:
        return na(metric, ctx, f"no {population}")
    vals = values()
    return derived(
        metric,
        ctx,
        apply_stat(stat, vals),
        runs=ctx.run_ids,
        values=len(vals),
        population=population,
        fields=fields_given(caps, metric, fields),
        method="numpy linear (type 7)"
        if stat.startswith("p")
        else "population (ddof 0), as numpy"
        if stat == "std"
        else stat,
    )


def _cache_value(metric: Metric, ctx: Ctx, bad: MetricValue | None, fetch: Callable[[], object]) -> MetricValue:
    """The decision of a :class:`Cache` plan (n/a where not reported, never 0, never from TTFT, R9);
    ``fetch`` gives the cached-token total, ok count and how many lack it."""
    if bad:
        bad.inputs.setdefault("basis", "cached_tokens is n/a where a capture lacks it: never 0, never estimated")
        if bad.na_reason and " captured for " in bad.na_reason:
            bad.na_reason = f"cached_tokens captured for {bad.inputs['coverage']}"
        return bad
    row: Any = fetch()
    if row.ok == 0:
        return na(metric, ctx, "no ok requests")
    if row.missing:
        return na(
            metric,
            ctx,
            f"cached_tokens reported for {row.ok - row.missing} of {row.ok} ok requests",
            coverage=f"{row.ok - row.missing} of {row.ok} ok requests",
        )
    return derived(
        metric, ctx, Fraction(int(row.total)), runs=ctx.run_ids, requests_ok=int(row.ok), fields=["cached_tokens"]
    )


Distribution = tuple[int, int, Callable[[], Sequence[Fraction]]]  # n values, n NULL, the sorted values


class Shared:
    """What the decisions of one grouped read compute once for every run of the same captures' shape
    (which captures, sampled or not, with which fields) instead of per run and value."""

    def __init__(self) -> None:
        self.fit: dict[Any, set[Any]] = {}  # shape -> the needs for which precheck_caps passed
        self.fields: dict[Any, dict[Any, list[str]]] = {}  # shape -> needs -> fields_used


class Execution:
    """A request metric's plan on one scope's figures, through its decision function: the one executor.

    The figures come from ``aggregate()`` (the row of :func:`queries.metrics.requests.aggregate_columns`
    over the scope's requests) and ``distribution(plan)`` (n values, n NULL, the sorted values), read
    for this scope alone (:func:`scope_execution`) or for every run of a selection at once, a run being
    one scope (:func:`queries.metrics.grouped.batch_values`). Each is asked for only where a decision
    needs it; a rate reuses the token totals and wall clock it has computed."""

    def __init__(
        self,
        ctx: Ctx,
        caps: list[CaptureInfo],
        aggregate: Callable[[], SimpleNamespace],
        distribution: Callable[[Dist], Distribution],
        shared: Shared | None = None,
    ) -> None:
        self.ctx, self.caps, self._aggregate, self.distribution = ctx, caps, aggregate, distribution
        self._agg: SimpleNamespace | None = None
        self.done: dict[str, MetricValue] = {}
        shared = Shared() if shared is None else shared
        # all precheck_caps's pass and fields_used depend on, for one scope: the captures are there,
        # which are samples, and which fields each has
        shape = tuple((c.sampled, frozenset(c.fields)) for c in caps)
        self.fit = shared.fit.setdefault(shape, set())
        self.fields_of = shared.fields.setdefault(shape, {})

    def aggregate(self) -> SimpleNamespace:
        if self._agg is None:
            self._agg = self._aggregate()
        return self._agg

    def value(self, mt: Metric) -> MetricValue:
        v = self.done.get(mt.name)
        if v is None:
            v = self.done[mt.name] = self.compute(mt)
        return v

    def fields(self, mt: Metric) -> list[str]:
        """:func:`fields_used` of the captures for ``mt``: once per shape and needs, a new list per value."""
        got = self.fields_of.get(mt.needs)
        if got is None:
            got = self.fields_of[mt.needs] = fields_used(self.caps, mt)
        return list(got)

    def _cache_row(self) -> SimpleNamespace:
        agg = self.aggregate()
        return SimpleNamespace(total=agg.cached_tokens_total, ok=agg.ok or 0, missing=agg.cached_tokens_missing)

    def compute(self, mt: Metric) -> MetricValue:
        ctx, caps, plan = self.ctx, self.caps, mt.plan
        kind = type(plan)
        if kind is Rate:
            return _rate_value(mt, ctx, [self.value(t) for t in plan.tokens], self.value(plan.wall), plan.per)  # type: ignore[union-attr]
        if kind is Groups:
            return _record_groups(mt, ctx)
        if kind is Wall:
            return _wall_value(mt, ctx, caps, self.aggregate)
        # precheck_caps passes or not by the captures' shape and the metric's needs only: passed once,
        # passed for every run of that shape and metric of those needs (an n/a, which names the run's
        # counts, is built per metric and run: cache_value edits it)
        bad = None
        if mt.needs not in self.fit:
            bad = precheck_caps(ctx, mt, caps)
            if bad is None:
                self.fit.add(mt.needs)
        if kind is Cache:
            return _cache_value(mt, ctx, bad, self._cache_row)
        if bad:
            return bad
        if kind is Dist:
            assert isinstance(plan, Dist)
            n, missing, values = self.distribution(plan)
            return _dist_value(
                mt,
                ctx,
                caps,
                plan.stat,
                plan.population,
                n,
                missing,
                values,
                self.fields(mt) if n and not missing else None,
            )
        agg = self.aggregate()
        if kind is Count:
            assert isinstance(plan, Count)
            return _count_value(mt, ctx, caps, agg.n, getattr(agg, plan.status), self.fields(mt))
        if kind is Total:
            assert isinstance(plan, Total)
            col = plan.column
            return _total_value(
                mt,
                ctx,
                caps,
                col,
                getattr(agg, f"{col}_total"),
                agg.ok or 0,
                getattr(agg, f"{col}_missing"),
                self.fields(mt),
            )
        raise ValueError(f"no plan execution for {mt.name}")


# --------------------------------------------------------------------------- one scope's figures


def read_values(conn: sa.Connection, rows: Rows, run_ids: list[int]) -> list[float | None]:
    """The values of a distribution over the runs ``run_ids``, unsorted (NULL where a value is missing);
    read again from ``rows.full()`` where this form leaves some pending."""
    cols = [rows.v.label("v")]
    if rows.pending is not None:
        cols.append(sa.and_(rows.member, rows.pending).label("p"))
    got = conn.execute(sa.select(*cols).select_from(rows.source).where(Q.c.run_id.in_(run_ids), rows.member)).all()
    if rows.pending is not None and rows.full is not None and any(r.p for r in got):
        return read_values(conn, rows.full(), run_ids)
    return [r.v for r in got]


def _scope_execution(conn: sa.Connection, ctx: Ctx) -> Execution:
    """The executor over one resolved scope, its figures read by its own statements when first asked."""
    ids = list(ctx.run_ids)

    def aggregate() -> SimpleNamespace:
        return aggregate_row(conn.execute(sa.select(*aggregate_columns(Q.c)).where(Q.c.run_id.in_(ids))).one()._mapping)

    def distribution(plan: Dist) -> Distribution:
        raw = read_values(conn, plan.rows(ids), ids)
        missing = sum(1 for v in raw if v is None)
        return len(raw), missing, lambda: sorted(exact(v) for v in raw)  # type: ignore[arg-type]

    return Execution(ctx, captures(conn, ids), aggregate, distribution)


def value_of(conn: sa.Connection, ctx: Ctx, mt: Metric) -> MetricValue:
    """One metric on one resolved scope: a request metric's plan by :func:`scope_execution`, a hardware or
    log metric by its own function."""
    if isinstance(mt.plan, Plan):
        return _scope_execution(conn, ctx).value(mt)
    return mt.plan(conn, ctx, mt)
