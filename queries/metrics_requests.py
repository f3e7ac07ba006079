"""Request metrics: counts, token totals, the common wall clock, TPM, latency distributions.

Why it is built this way:

* Each metric is one :class:`Metric` row of the registry (``queries.metrics.METRICS``): its SQL
  (SQLAlchemy Core, so it renders for DuckDB and PostgreSQL alike) selects either one aggregate
  row (counts, totals, first send / last end) or the per-request values of a distribution, sorted;
  the statistic of a distribution (mean, numpy-linear percentile, max) is finished in Python with
  :class:`fractions.Fraction`, so both backends give the very same exact value (SQL ``AVG`` of
  doubles differs in the last bits between engines, and ``percentile_cont`` is not exact).
* Percentiles are numpy's default "linear" method (Hyndman-Fan type 7), which is what vLLM uses
  (``np.percentile``) and what pandas' ``Series.quantile`` (llmperf) uses: for sorted x of length n,
  h = (n-1)·p/100, value = x[floor h] + (h - floor h)·(x[floor h + 1] - x[floor h]).
* Only ``ok`` requests enter token totals and latency statistics (vLLM and llmperf do the same);
  a needed field that a capture did not contain makes the value n/a, never zero (R9); records
  that are a sample give n/a (R15); divisions are cast to DOUBLE PRECISION because PostgreSQL
  divides integers as integers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.exact_column import ExactColumn
from bench_ledger.queries.lattice import derived_flag
from bench_ledger.queries.values import MetricValue, Scope

Q = m.Request.__table__
G = m.GAP_VALUES  # the view chunk_gap's values (no seq needed here; one unnest on DuckDB)
CAP = m.Capture.__table__
CF = m.CaptureField.__table__
DOUBLE: sa.Double[float] = sa.Double()
E9 = 10**9


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
# A request metric is a typed plan: what it reads and which decision turns that into a value. The
# per-scope evaluation (:func:`run_plan`) and the grouped one (queries.metrics_batch) both execute
# the same plan with the same decision functions, so a metric is defined once.


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
    """Where a distribution's values are, for the batch path: ``v`` of each row of ``source`` (the request
    table, alone or joined) for which ``member`` holds; the caller selects the runs by the request table's
    ``run_id``. Distributions whose ``source`` is the request table alone are read in one scan."""

    source: sa.FromClause
    v: sa.ColumnElement
    member: sa.ColumnElement[bool]
    # rows this form leaves without their value (NULL): if any exist, the values are read from ``full()``
    pending: sa.ColumnElement[bool] | None = None
    full: Callable[[], Rows] | None = field(default=None, compare=False)

    def select(self, runs: sa.Select) -> sa.Select:
        """(run_id, v) of the runs ``runs`` selects, unsorted."""
        return (
            sa.select(Q.c.run_id, self.v.label("v")).select_from(self.source).where(Q.c.run_id.in_(runs), self.member)
        )


@dataclass(frozen=True)
class Dist:
    """A statistic of per-request values: ``sql(run_ids)`` gives them sorted (evaluate), ``sql(runs,
    by_run=True)`` their :class:`Rows` for the runs of a selection (the batch path)."""

    sql: Callable[..., Any] = field(compare=False)  # a sa.Select, or with by_run=True a Rows
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

    def value(self, conn: sa.Connection, ctx: Ctx) -> MetricValue:
        """This metric on one resolved scope."""
        return run_plan(conn, ctx, self, self.plan) if isinstance(self.plan, Plan) else self.plan(conn, ctx, self)

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


def captures(conn: sa.Connection, run_ids: list[int]) -> list[CaptureInfo]:
    """Captures of the runs that hold per-request records (aggregate-only files hold none)."""
    rows = conn.execute(
        sa.select(CAP.c.id, CAP.c.run_id, CAP.c.record_count, CAP.c.sampled, CAP.c.sample_note)
        .where(CAP.c.run_id.in_(run_ids), CAP.c.record_count > 0)
        .order_by(CAP.c.id)
    ).all()
    out = [CaptureInfo(r.id, r.run_id, r.record_count, bool(r.sampled), r.sample_note, set()) for r in rows]
    if out:
        by_id = {c.id: c for c in out}
        for cid, f in conn.execute(sa.select(CF.c.capture_id, CF.c.field).where(CF.c.capture_id.in_(list(by_id)))):
            by_id[cid].fields.add(f)
    return out


def precheck(conn: sa.Connection, ctx: Ctx, metric: Metric) -> tuple[MetricValue | None, list[CaptureInfo]]:
    """n/a when there are no records, the records are a sample, or a needed field is missing (R9, R15)."""
    caps = captures(conn, ctx.run_ids)
    return precheck_caps(ctx, metric, caps), caps


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


def _fields(caps: list[CaptureInfo], metric: Metric, given: list[str] | None) -> list[str]:
    """The decision functions' fields: ``given`` where the caller has them (the batch path decides them
    once per captures' shape and needs), else :func:`fields_used`."""
    return fields_used(caps, metric) if given is None else given


OK = Q.c.status == "ok"


# --------------------------------------------------------------------------- counts and totals


def status_counts_sql(run_ids: list[int]) -> sa.Select:
    """Requests by status: API requests, one row of the request table each (never record groups)."""
    return sa.select(
        sa.func.count().label("n"),
        sa.func.sum(sa.case((Q.c.status == "ok", 1), else_=0)).label("ok"),
        sa.func.sum(sa.case((Q.c.status == "failed", 1), else_=0)).label("failed"),
        sa.func.sum(sa.case((Q.c.status == "unknown", 1), else_=0)).label("unknown"),
    ).where(Q.c.run_id.in_(run_ids))


def count_value(
    metric: Metric, ctx: Ctx, caps: list[CaptureInfo], n: int, count: int | None, fields: list[str] | None = None
) -> MetricValue:
    """``fields``: the fields used, where the caller has them (:func:`_fields`); likewise in the other
    decision functions."""
    return derived(
        metric, ctx, Fraction(int(count or 0)), runs=ctx.run_ids, requests=int(n), fields=_fields(caps, metric, fields)
    )


def record_groups(metric: Metric, ctx: Ctx) -> MetricValue:
    return derived(
        metric,
        ctx,
        Fraction(len(ctx.run_ids)),
        runs=ctx.run_ids,
        basis="runs (record groups) in the scope: a count of records, never of requests (R2)",
    )


def totals_sql(run_ids: list[int], column: sa.ColumnElement[Any]) -> sa.Select:
    return sa.select(
        sa.func.sum(column).label("total"),
        sa.func.count().label("ok"),
        sa.func.sum(sa.case((column.is_(None), 1), else_=0)).label("missing"),
    ).where(Q.c.run_id.in_(run_ids), OK)


def total_value(
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
        fields=_fields(caps, metric, fields),
    )


def wall_clock_sql(run_ids: list[int]) -> sa.Select:
    """First send to last end over the runs' requests, with the number of clocks they are on."""
    return sa.select(
        sa.func.min(Q.c.send_ns).label("first_send"),
        sa.func.max(Q.c.end_ns).label("last_end"),
        sa.func.count(sa.distinct(Q.c.clock)).label("clocks"),
        sa.func.count(Q.c.send_ns).label("timed"),
    ).where(Q.c.run_id.in_(run_ids))


def wall_value(metric: Metric, ctx: Ctx, caps: list[CaptureInfo], fetch: Callable[[], object]) -> MetricValue:
    """The decision of a :class:`Wall` plan; ``fetch`` gives the row of :func:`wall_clock_sql` (read only if needed)."""
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


def rate_value(metric: Metric, ctx: Ctx, parts: list[MetricValue], clock: MetricValue, per: int) -> MetricValue:
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


# --------------------------------------------------------------------------- distributions over ok requests


def _seconds(ns_a: sa.ColumnElement, ns_b: sa.ColumnElement) -> sa.ColumnElement:
    return sa.cast(ns_a - ns_b, DOUBLE) / E9


def ttft_expr() -> sa.ColumnElement:
    return sa.case((Q.c.ttft_s.is_not(None), Q.c.ttft_s), else_=_seconds(Q.c.first_token_ns, Q.c.send_ns))


def latency_expr() -> sa.ColumnElement:
    return sa.case((Q.c.latency_s.is_not(None), Q.c.latency_s), else_=_seconds(Q.c.end_ns, Q.c.send_ns))


def tpot_expr() -> sa.ColumnElement:
    """vLLM's TPOT: (latency - ttft) / (output tokens - 1), for requests with more than one token."""
    return (Q.c.latency_s - Q.c.ttft_s) / sa.cast(Q.c.output_tokens - 1, DOUBLE)


def decode_rate_expr(gap_sum: sa.ColumnElement | None = None) -> sa.ColumnElement:
    """(output tokens - 1) / (last token - first token) of one stream (R4).

    The first-to-last-token span is latency - TTFT, else end - first token on the request's clock,
    else the sum of its chunk gaps (the legacy vLLM writer keeps gaps but no latency).
    """
    if gap_sum is None:
        gap_sum = (
            sa.select(sa.func.sum(G.c.gap_s))
            .where(G.c.artefact_id == Q.c.artefact_id, G.c.request_idx == Q.c.idx)
            .scalar_subquery()
        )
    span = sa.case(
        (sa.and_(Q.c.latency_s.is_not(None), Q.c.ttft_s.is_not(None)), Q.c.latency_s - Q.c.ttft_s),
        (sa.and_(Q.c.end_ns.is_not(None), Q.c.first_token_ns.is_not(None)), _seconds(Q.c.end_ns, Q.c.first_token_ns)),
        else_=gap_sum,
    )
    # NULLIF typed: untyped, SQLAlchemy casts the divisor to NUMERIC on PostgreSQL, which rounds a double to
    # 15 significant digits (a span of 0.30000000000000004 s became 0.3) and costs a conversion per request
    return sa.cast(Q.c.output_tokens - 1, DOUBLE) / sa.func.nullif(span, 0, type_=DOUBLE)


def _needs_gaps(q: sa.FromClause) -> sa.ColumnElement[bool]:
    """A request whose first-to-last-token span can only come from its chunk gaps."""
    return sa.and_(
        sa.or_(q.c.latency_s.is_(None), q.c.ttft_s.is_(None)),
        sa.or_(q.c.end_ns.is_(None), q.c.first_token_ns.is_(None)),
    )


def decode_rate_rows(runs: sa.Select) -> Rows:
    """The decode rate's :class:`Rows` for many runs. The span of a request without latency/TTFT and
    without end/first token is the sum of its chunk gaps: :func:`decode_rate_expr` leaves it NULL here
    (``pending``), and if any such request exists, ``full()`` reads the gap sums by one grouped LEFT
    JOIN over only those requests (not a correlated subquery per request). Same gaps, same SUM: same value."""
    member = sa.and_(OK, Q.c.output_tokens > 1)

    def full() -> Rows:
        q2 = Q.alias("q2")
        gs = (
            sa.select(G.c.artefact_id, G.c.request_idx, sa.func.sum(G.c.gap_s).label("s"))
            .select_from(G.join(q2, sa.and_(q2.c.artefact_id == G.c.artefact_id, q2.c.idx == G.c.request_idx)))
            .where(q2.c.run_id.in_(runs), q2.c.status == "ok", q2.c.output_tokens > 1, _needs_gaps(q2))
            .group_by(G.c.artefact_id, G.c.request_idx)
            .subquery("gs")
        )
        source = Q.outerjoin(gs, sa.and_(gs.c.artefact_id == Q.c.artefact_id, gs.c.request_idx == Q.c.idx))
        return Rows(source, decode_rate_expr(gap_sum=gs.c.s), member)

    return Rows(Q, decode_rate_expr(gap_sum=sa.null()), member, pending=_needs_gaps(Q), full=full)


def values_sql(
    run_ids: list[int] | sa.Select, expr: sa.ColumnElement, where: sa.ColumnElement | None = None, by_run: bool = False
) -> Any:
    """The values of a distribution over ok requests, sorted; ``by_run``: their :class:`Rows` (batch path)."""
    member = OK if where is None else sa.and_(OK, where)
    if by_run:
        return Rows(Q, expr, member)
    return sa.select(expr.label("v")).where(Q.c.run_id.in_(run_ids), member).order_by(expr)


def itl_sql(run_ids: list[int] | sa.Select, by_run: bool = False) -> Any:
    """Chunk gaps of ok requests, flattened (vLLM's ITL list); ``by_run``: their :class:`Rows`."""
    source = G.join(Q, sa.and_(Q.c.artefact_id == G.c.artefact_id, Q.c.idx == G.c.request_idx))
    if by_run:
        return Rows(source, G.c.gap_s, OK)
    return sa.select(G.c.gap_s.label("v")).select_from(source).where(Q.c.run_id.in_(run_ids), OK).order_by(G.c.gap_s)


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


def dist_value(
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
        fields=_fields(caps, metric, fields),
        method="numpy linear (type 7)"
        if stat.startswith("p")
        else "population (ddof 0), as numpy"
        if stat == "std"
        else stat,
    )


def cache_value(metric: Metric, ctx: Ctx, bad: MetricValue | None, fetch: Callable[[], object]) -> MetricValue:
    """The decision of a :class:`Cache` plan (n/a where not reported, never 0, never from TTFT, R9);
    ``fetch`` gives the row of :func:`totals_sql`."""
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


def run_plan(conn: sa.Connection, ctx: Ctx, metric: Metric, plan: Plan) -> MetricValue:
    """A request metric's plan on one scope: its own statements, then its decision function."""
    if isinstance(plan, Groups):
        return record_groups(metric, ctx)
    if isinstance(plan, Wall):
        return wall_value(
            metric, ctx, captures(conn, ctx.run_ids), lambda: conn.execute(wall_clock_sql(ctx.run_ids)).one()
        )
    if isinstance(plan, Rate):
        return rate_value(metric, ctx, [t.value(conn, ctx) for t in plan.tokens], plan.wall.value(conn, ctx), plan.per)
    bad, caps = precheck(conn, ctx, metric)
    if isinstance(plan, Cache):
        return cache_value(metric, ctx, bad, lambda: conn.execute(totals_sql(ctx.run_ids, Q.c.cached_tokens)).one())
    if bad:
        return bad
    if isinstance(plan, Count):
        row = conn.execute(status_counts_sql(ctx.run_ids)).one()
        return count_value(metric, ctx, caps, row.n, row._mapping[plan.status])
    if isinstance(plan, Total):
        row = conn.execute(totals_sql(ctx.run_ids, Q.c[plan.column])).one()
        return total_value(metric, ctx, caps, plan.column, row.total, row.ok, row.missing)
    raw = [r.v for r in conn.execute(plan.sql(ctx.run_ids))]
    missing = sum(1 for v in raw if v is None)
    return dist_value(
        metric, ctx, caps, plan.stat, plan.population, len(raw), missing, lambda: sorted(exact(v) for v in raw)
    )


# --------------------------------------------------------------------------- the request metrics


def _tool_only(conn: sa.Connection, ctx: Ctx, metric: Metric) -> MetricValue:
    """A figure only the tool computes (from its own per-second buckets): n/a here, the tool's reported
    value backs a claim (queries.metrics_reported)."""
    return na(metric, ctx, f"{metric.name} is computed by the benchmark tool, not recomputed from records here")


_OK = "ok requests of the run"
# the statistics the serving tools publish for each per-request quantity (vLLM, SGLang, AIPerf, llmperf)
STATISTICS = ("mean", "min", "max", "std", "p25", "p50", "p75", "p90", "p95", "p99", "p99.9")
TTFT_NEEDS = (("ttft_s",), ("send_time", "first_token_time"))
LAT_NEEDS = (("latency_s",), ("send_time", "end_time"))


def request_metrics() -> list[Metric]:
    input_tokens = Metric(
        "input_tokens",
        "tokens",
        "token_count",
        "total",
        _OK,
        (("input_tokens", "status"),),
        "SUM(input_tokens) WHERE status = 'ok' (actual, not the input target)",
        "requests",
        Total("input_tokens"),
        pools=True,
    )
    output_tokens = Metric(
        "output_tokens",
        "tokens",
        "token_count",
        "total",
        _OK,
        (("output_tokens", "status"),),
        "SUM(output_tokens) WHERE status = 'ok' (actual, not the output cap)",
        "requests",
        Total("output_tokens"),
        pools=True,
    )
    wall = Metric(
        "wall_clock_s",
        "s",
        "duration",
        "span",
        "first send to last end of the run's requests, one clock",
        (),
        "(MAX(end_ns) - MIN(send_ns)) / 1e9; else run.duration_s (flagged: tool's own duration)",
        "requests",
        Wall(),
    )
    requests_ok = Metric(
        "requests_ok",
        "requests",
        "request_count",
        "count",
        "the scope's API requests",
        (("status",),),
        "COUNT(*) FROM request WHERE status = 'ok'",
        "requests",
        Count("ok"),
        pools=True,
    )
    out = [
        requests_ok,
        Metric(
            "requests_failed",
            "requests",
            "request_count",
            "count",
            "the scope's API requests",
            (("status",),),
            "COUNT(*) FROM request WHERE status = 'failed'",
            "requests",
            Count("failed"),
            pools=True,
        ),
        Metric(
            "requests_unknown",
            "requests",
            "request_count",
            "count",
            "the scope's API requests",
            (),
            "COUNT(*) FROM request WHERE status = 'unknown'",
            "requests",
            Count("unknown"),
            pools=True,
        ),
        Metric(
            "record_groups",
            "runs",
            "record_count",
            "count",
            "runs (record groups) of the scope",
            (),
            "COUNT(*) FROM run",
            "requests",
            Groups(),
            pools=True,
        ),
        input_tokens,
        output_tokens,
        wall,
        Metric(
            "total_tpm",
            "tokens/min",
            "aggregate_token_rate",
            "rate over common wall clock",
            "wall_clock_s",
            (),
            "60 × (input_tokens + output_tokens) / wall_clock_s (R3)",
            "requests",
            Rate((input_tokens, output_tokens), wall, 60),
        ),
        Metric(
            "output_tpm",
            "tokens/min",
            "aggregate_token_rate",
            "rate over common wall clock",
            "wall_clock_s",
            (),
            "60 × output_tokens / wall_clock_s (R3)",
            "requests",
            Rate((output_tokens,), wall, 60),
        ),
        Metric(
            "output_tokens_per_s",
            "tokens/s",
            "aggregate_token_rate",
            "rate over common wall clock",
            "wall_clock_s",
            (),
            "output_tokens / wall_clock_s (aggregate, not per stream: R4)",
            "requests",
            Rate((output_tokens,), wall, 1),
        ),
        Metric(
            "total_tokens_per_s",
            "tokens/s",
            "aggregate_token_rate",
            "rate over common wall clock",
            "wall_clock_s",
            (),
            "(input_tokens + output_tokens) / wall_clock_s (R3)",
            "requests",
            Rate((input_tokens, output_tokens), wall, 1),
        ),
        Metric(
            "request_throughput",
            "requests/s",
            "request_rate",
            "rate over common wall clock",
            "wall_clock_s",
            (),
            "requests_ok / wall_clock_s",
            "requests",
            Rate((requests_ok,), wall, 1),
        ),
        Metric(
            "per_stream_decode_rate_median",
            "tokens/s",
            "per_stream_token_rate",
            "per-stream rate, median",
            "first to last token of each stream",
            (
                ("output_tokens", "ttft_s", "latency_s"),
                ("output_tokens", "first_token_time", "end_time"),
                ("output_tokens", "chunk_gaps"),
            ),
            "MEDIAN over ok requests with output_tokens > 1 of (output_tokens - 1) / (latency_s - ttft_s) (R4)",
            "requests",
            Dist(
                lambda ids, by_run=False: (
                    decode_rate_rows(ids) if by_run else values_sql(ids, decode_rate_expr(), Q.c.output_tokens > 1)
                ),
                "p50",
                "ok requests with more than one output token",
            ),
        ),
        Metric(
            "cache_hit_tokens",
            "tokens",
            "cache_hit_tokens",
            "total",
            _OK,
            (("cached_tokens",),),
            "SUM(cached_tokens) WHERE status = 'ok'; n/a where not captured, never 0 (R9)",
            "requests",
            Cache(),
            pools=True,
        ),
    ]
    for name, unit, kind, what in (
        (
            "peak_output_tokens_per_s",
            "tokens/s",
            "aggregate_token_rate",
            "the largest number of output tokens in one second of the run (vLLM's peak output throughput)",
        ),
        (
            "peak_concurrent_requests",
            "requests",
            "concurrency",
            "the largest number of requests in flight at once (vLLM's peak concurrent requests)",
        ),
    ):
        out.append(
            Metric(
                name, unit, kind, "max", "the run's seconds", (), f"{what}; not recomputed here", "reported", _tool_only
            )
        )
    every = STATISTICS
    dists = [
        (
            "ttft",
            TTFT_NEEDS,
            lambda ids, by_run=False: values_sql(
                ids, ttft_expr(), sa.or_(Q.c.output_tokens.is_(None), Q.c.output_tokens > 0), by_run
            ),
            every,
            "time to first token (ttft_s, else first_token - send); a request with 0 output tokens has no first token",
            "ok requests with output",
        ),
        (
            "tpot",
            (("ttft_s", "latency_s", "output_tokens"),),
            lambda ids, by_run=False: values_sql(ids, tpot_expr(), Q.c.output_tokens > 1, by_run),
            every,
            "(latency_s - ttft_s) / (output_tokens - 1), output_tokens > 1 (vLLM's TPOT)",
            "ok requests with more than one output token",
        ),
        (
            "itl",
            (("chunk_gaps",),),
            itl_sql,
            every,
            "gaps between streamed chunks of ok requests, flattened (one chunk may carry several tokens)",
            "chunk gaps of ok requests",
        ),
        (
            "e2e_latency",
            LAT_NEEDS,
            lambda ids, by_run=False: values_sql(ids, latency_expr(), None, by_run),
            every,
            "end-to-end latency (latency_s, else end - send)",
            "ok requests",
        ),
        (
            "isl",
            (("input_tokens", "status"),),
            lambda ids, by_run=False: values_sql(ids, Q.c.input_tokens, None, by_run),
            every,
            "input tokens of each request (actual, not the input target)",
            "ok requests",
        ),
        (
            "osl",
            (("output_tokens", "status"),),
            lambda ids, by_run=False: values_sql(ids, Q.c.output_tokens, None, by_run),
            every,
            "output tokens of each request (actual, not the output cap)",
            "ok requests",
        ),
        (
            "output_tps",
            (("latency_s", "output_tokens"), ("send_time", "end_time", "output_tokens")),
            lambda ids, by_run=False: values_sql(
                ids,
                sa.cast(Q.c.output_tokens, DOUBLE) / latency_expr(),
                sa.and_(Q.c.output_tokens.is_not(None), latency_expr() > 0),
                by_run,
            ),
            every,
            "output tokens / end-to-end latency of each request (llmperf's request_output_throughput_token_per_s "
            "as token_benchmark_ray.py defines it)",
            "ok requests with output tokens and a latency",
        ),
    ]
    units = {"isl": ("tokens", "token_count"), "osl": ("tokens", "token_count")}
    units["output_tps"] = ("tokens/s", "per_stream_token_rate")
    for base, needs, sql, stats, formula, population in dists:
        unit, kind_of = units.get(base, ("s", "latency"))
        for stat in stats:
            kind = stat if stat in ("mean", "max", "min", "std") else "percentile"
            method = "" if kind != "percentile" else ", numpy linear (type 7)"
            out.append(
                Metric(
                    f"{base}_{stat.replace('.', '_')}",
                    unit,
                    kind_of,
                    kind,
                    population,
                    needs,
                    f"{stat.upper()}{method} of {formula}",
                    "requests",
                    Dist(sql, stat, population),
                )
            )
    return out
