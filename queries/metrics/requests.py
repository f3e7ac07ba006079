"""Request metrics: counts, token totals, the common wall clock, TPM, latency distributions, and the SQL
they read (SQLAlchemy Core, so it renders for DuckDB and PostgreSQL alike).

What a request metric reads is defined here once, for one scope and for many runs alike: the captures
holding records (:func:`read_captures`), the aggregate columns over the request table
(:func:`aggregate_columns`: counts by status, ok-token totals with how many lack them, first send / last
end, clocks) and each distribution's :class:`~queries.metrics.definitions.Rows`. The executor
(:mod:`queries.metrics.execute`) selects them for one scope's runs; the grouped read
(:mod:`queries.metrics.grouped`) for every run of a selection at once, grouped by run. Divisions are cast
to DOUBLE PRECISION because PostgreSQL divides integers as integers.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.metrics.definitions import (
    E9,
    Cache,
    CaptureInfo,
    Count,
    Ctx,
    Dist,
    Groups,
    Metric,
    Rate,
    Rows,
    Total,
    Wall,
    na,
)
from bench_ledger.queries.values import MetricValue

__all__ = [
    "AGGREGATE_INPUTS",
    "Q",
    "aggregate_columns",
    "aggregate_row",
    "captures",
    "empty_aggregate",
    "read_captures",
    "request_metrics",
]

Q = m.Request.__table__
_G = m.GAP_VALUES  # the view chunk_gap's values (no seq needed here; one unnest on DuckDB)
_CAP = m.Capture.__table__
_CF = m.CaptureField.__table__
_DOUBLE: sa.Double[float] = sa.Double()


_OK_ROW = Q.c.status == "ok"


# --------------------------------------------------------------------------- captures and fields


def captures(conn: sa.Connection, run_ids: list[int]) -> list[CaptureInfo]:
    """Captures of the runs that hold per-request records (aggregate-only files hold none), by id."""
    return sorted((c for caps in read_captures(conn, run_ids).values() for c in caps), key=lambda c: c.id)


# --------------------------------------------------------------------------- distributions over ok requests


def _seconds(ns_a: sa.ColumnElement, ns_b: sa.ColumnElement) -> sa.ColumnElement:
    return sa.cast(ns_a - ns_b, _DOUBLE) / E9


def _ttft_expr() -> sa.ColumnElement:
    return sa.case((Q.c.ttft_s.is_not(None), Q.c.ttft_s), else_=_seconds(Q.c.first_token_ns, Q.c.send_ns))


def _latency_expr() -> sa.ColumnElement:
    return sa.case((Q.c.latency_s.is_not(None), Q.c.latency_s), else_=_seconds(Q.c.end_ns, Q.c.send_ns))


def _tpot_expr() -> sa.ColumnElement:
    """vLLM's TPOT: (latency - ttft) / (output tokens - 1), for requests with more than one token."""
    return (Q.c.latency_s - Q.c.ttft_s) / sa.cast(Q.c.output_tokens - 1, _DOUBLE)


def _decode_rate_expr(gap_sum: sa.ColumnElement) -> sa.ColumnElement:
    """(output tokens - 1) / (last token - first token) of one stream (R4).

    The first-to-last-token span is latency - TTFT, else end - first token on the request's clock,
    else the sum of its chunk gaps ``gap_sum`` (the legacy vLLM writer keeps gaps but no latency).
    """
    span = sa.case(
        (sa.and_(Q.c.latency_s.is_not(None), Q.c.ttft_s.is_not(None)), Q.c.latency_s - Q.c.ttft_s),
        (sa.and_(Q.c.end_ns.is_not(None), Q.c.first_token_ns.is_not(None)), _seconds(Q.c.end_ns, Q.c.first_token_ns)),
        else_=gap_sum,
    )
    # NULLIF typed: untyped, SQLAlchemy casts the divisor to NUMERIC on PostgreSQL, which rounds a double to
    # 15 significant digits (a span of 0.30000000000000004 s became 0.3) and costs a conversion per request
    return sa.cast(Q.c.output_tokens - 1, _DOUBLE) / sa.func.nullif(span, 0, type_=_DOUBLE)


def _needs_gaps(q: sa.FromClause) -> sa.ColumnElement[bool]:
    """A request whose first-to-last-token span can only come from its chunk gaps."""
    return sa.and_(
        sa.or_(q.c.latency_s.is_(None), q.c.ttft_s.is_(None)),
        sa.or_(q.c.end_ns.is_(None), q.c.first_token_ns.is_(None)),
    )


def _decode_rate_rows(runs: Any) -> Rows:
    """The decode rate's :class:`Rows` for the runs ``runs`` names. The span of a request without latency/TTFT and
    without end/first token is the sum of its chunk gaps: :func:`decode_rate_expr` leaves it NULL here
    (``pending``), and if any such request exists, ``full()`` reads the gap sums by one grouped LEFT
    JOIN over only those requests (not a correlated subquery per request). Same gaps, same SUM: same value."""
    member = sa.and_(_OK_ROW, Q.c.output_tokens > 1)

    def full() -> Rows:
        q2 = Q.alias("q2")
        gs = (
            sa.select(_G.c.artefact_id, _G.c.request_idx, sa.func.sum(_G.c.gap_s).label("s"))
            .select_from(_G.join(q2, sa.and_(q2.c.artefact_id == _G.c.artefact_id, q2.c.idx == _G.c.request_idx)))
            .where(q2.c.run_id.in_(runs), q2.c.status == "ok", q2.c.output_tokens > 1, _needs_gaps(q2))
            .group_by(_G.c.artefact_id, _G.c.request_idx)
            .subquery("gs")
        )
        source = Q.outerjoin(gs, sa.and_(gs.c.artefact_id == Q.c.artefact_id, gs.c.request_idx == Q.c.idx))
        return Rows(source, _decode_rate_expr(gap_sum=gs.c.s), member)

    return Rows(Q, _decode_rate_expr(gap_sum=sa.null()), member, pending=_needs_gaps(Q), full=full)


def _values_rows(expr: sa.ColumnElement, where: sa.ColumnElement | None = None) -> Rows:
    """The :class:`Rows` of a distribution of ``expr`` over ok requests (and ``where``)."""
    return Rows(Q, expr, _OK_ROW if where is None else sa.and_(_OK_ROW, where))


def _itl_rows(runs: Any) -> Rows:
    """Chunk gaps of ok requests, flattened (vLLM's ITL list)."""
    return Rows(
        _G.join(Q, sa.and_(Q.c.artefact_id == _G.c.artefact_id, Q.c.idx == _G.c.request_idx)), _G.c.gap_s, _OK_ROW
    )


# --------------------------------------------------------------------------- the request metrics


def _tool_only(conn: sa.Connection, ctx: Ctx, metric: Metric) -> MetricValue:
    """A figure only the tool computes (from its own per-second buckets): n/a here, the tool's reported
    value backs a claim (queries.metrics.reported)."""
    return na(metric, ctx, f"{metric.name} is computed by the benchmark tool, not recomputed from records here")


_OK = "ok requests of the run"
# the statistics the serving tools publish for each per-request quantity (vLLM, SGLang, AIPerf, llmperf)
_STATISTICS = ("mean", "min", "max", "std", "p25", "p50", "p75", "p90", "p95", "p99", "p99.9")
_TTFT_NEEDS = (("ttft_s",), ("send_time", "first_token_time"))
_LAT_NEEDS = (("latency_s",), ("send_time", "end_time"))


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
                _decode_rate_rows,
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
    every = _STATISTICS
    dists = [
        (
            "ttft",
            _TTFT_NEEDS,
            lambda runs: _values_rows(_ttft_expr(), sa.or_(Q.c.output_tokens.is_(None), Q.c.output_tokens > 0)),
            every,
            "time to first token (ttft_s, else first_token - send); a request with 0 output tokens has no first token",
            "ok requests with output",
        ),
        (
            "tpot",
            (("ttft_s", "latency_s", "output_tokens"),),
            lambda runs: _values_rows(_tpot_expr(), Q.c.output_tokens > 1),
            every,
            "(latency_s - ttft_s) / (output_tokens - 1), output_tokens > 1 (vLLM's TPOT)",
            "ok requests with more than one output token",
        ),
        (
            "itl",
            (("chunk_gaps",),),
            _itl_rows,
            every,
            "gaps between streamed chunks of ok requests, flattened (one chunk may carry several tokens)",
            "chunk gaps of ok requests",
        ),
        (
            "e2e_latency",
            _LAT_NEEDS,
            lambda runs: _values_rows(_latency_expr()),
            every,
            "end-to-end latency (latency_s, else end - send)",
            "ok requests",
        ),
        (
            "isl",
            (("input_tokens", "status"),),
            lambda runs: _values_rows(Q.c.input_tokens),
            every,
            "input tokens of each request (actual, not the input target)",
            "ok requests",
        ),
        (
            "osl",
            (("output_tokens", "status"),),
            lambda runs: _values_rows(Q.c.output_tokens),
            every,
            "output tokens of each request (actual, not the output cap)",
            "ok requests",
        ),
        (
            "output_tps",
            (("latency_s", "output_tokens"), ("send_time", "end_time", "output_tokens")),
            lambda runs: _values_rows(
                sa.cast(Q.c.output_tokens, _DOUBLE) / _latency_expr(),
                sa.and_(Q.c.output_tokens.is_not(None), _latency_expr() > 0),
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


def read_captures(conn: sa.Connection, runs: Any) -> dict[int, list[CaptureInfo]]:
    """Captures holding records, with their fields, of the runs ``runs`` names (ids or a SELECT): one
    statement (ordered by capture id),
    a capture's fields gathered by ``array_agg`` (one row per capture, not per field)."""
    out: dict[int, list[CaptureInfo]] = defaultdict(list)
    cols = (_CAP.c.id, _CAP.c.run_id, _CAP.c.record_count, _CAP.c.sampled, _CAP.c.sample_note)
    stmt = (
        sa.select(*cols, sa.func.array_agg(_CF.c.field).label("fields"))
        .select_from(_CAP.outerjoin(_CF, _CF.c.capture_id == _CAP.c.id))
        .where(_CAP.c.run_id.in_(runs), _CAP.c.record_count > 0)
        .group_by(*cols)
        .order_by(_CAP.c.id)
    )
    for r in conn.execute(stmt):
        fields = {f for f in r.fields if f is not None}  # a capture without fields: one NULL from the outer join
        out[r.run_id].append(CaptureInfo(r.id, r.run_id, r.record_count, bool(r.sampled), r.sample_note, fields))
    return out


_TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens")
AGGREGATE_INPUTS = ("status", "send_ns", "end_ns", "clock", *_TOKEN_COLUMNS)  # the request columns they read


def aggregate_columns(c: Any) -> list[sa.ColumnElement]:
    """Counts by status, ok-token totals with how many lack them, first send / last end, clocks, over
    the columns ``c`` (the request table's, or a subquery's with the same names)."""
    ok = c.status == "ok"
    cols: list[sa.ColumnElement] = [
        sa.func.count().label("n"),
        *(sa.func.sum(sa.case((c.status == s, 1), else_=0)).label(s) for s in ("ok", "failed", "unknown")),
        sa.func.min(c.send_ns).label("first_send"),
        sa.func.max(c.end_ns).label("last_end"),
        sa.func.min(c.clock).label("clock_min"),
        sa.func.max(c.clock).label("clock_max"),
        sa.func.count(c.send_ns).label("timed"),
    ]
    for col in _TOKEN_COLUMNS:
        cols += [
            sa.func.sum(sa.case((ok, c[col]))).label(f"{col}_total"),
            sa.func.sum(sa.case((sa.and_(ok, c[col].is_(None)), 1), else_=0)).label(f"{col}_missing"),
        ]
    return cols


_AGGREGATES = [c.name for c in aggregate_columns(Q.c)]


def aggregate_row(row: Any) -> SimpleNamespace:
    ns = SimpleNamespace(**{k: row[k] for k in _AGGREGATES})
    # wall_clock only asks whether the requests are on more than one clock: MIN <> MAX says it
    # without COUNT(DISTINCT), which PostgreSQL can only do by sorting
    ns.clocks = 0 if ns.clock_min is None else 1 if ns.clock_min == ns.clock_max else 2
    return ns


def empty_aggregate() -> SimpleNamespace:
    """What the per-run statements return for a run without request rows."""
    ns = SimpleNamespace(n=0, ok=None, failed=None, unknown=None, first_send=None, last_end=None, clocks=0, timed=0)
    for c in _TOKEN_COLUMNS:
        setattr(ns, f"{c}_total", None)
        setattr(ns, f"{c}_missing", None)
    return ns
