"""The metric registry: every metric defined once, evaluated on a scope, with its provenance.

``METRICS`` maps a name to its :class:`~queries.metrics.definitions.Metric` (unit, quantity kind,
statistic, interval, captured fields it needs, formula). Definitions live in
:mod:`queries.metrics.requests` (requests: counts, totals, wall clock, TPM, latency distributions),
:mod:`queries.metrics.hardware` (dmon counters), :mod:`queries.metrics.power` (R14) and
:mod:`queries.metrics.server_log` (server-log facts); this module resolves a
:class:`~queries.values.Scope` and enforces the rules that apply to *any* metric:

* R2: no computation crosses a batch. A scope whose runs or samples span two batches is refused.
* R7: within one batch, only counts and totals add up over runs; a percentile, mean or rate pooled
  over the runs of a sweep mixes loads, so it is refused unless the batch holds one run.
* Every value is ``derived`` with its inputs, or ``n/a`` with its reason (never 0, never filled in);
  in the table of :func:`run_metrics` an n/a value is replaced by the tool's own equivalent figure
  where it reported one (:mod:`queries.metrics.reported`, flag ``reported``).

Percentiles are numpy's default linear method (type 7) = vLLM's ``np.percentile`` = pandas'
``quantile``; see :func:`queries.metrics.definitions.percentile_linear`.

:func:`evaluate` is one metric on one scope. A request metric is executed by the one executor
(:class:`queries.metrics.execute.Execution`) whether on one scope or, for the table of `ledger metrics`
(:func:`run_metrics`), on *all* its runs at once, their figures read by a few grouped statements
(:mod:`queries.metrics.grouped`); tests/queries/metrics/test_grouped_equals_evaluate.py checks every
value, flag, n/a reason and input equal on both backends, against :func:`run_metrics_per_run`
(:func:`evaluate` called per run and metric).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import LedgerError, NotFound, Refused
from bench_ledger.gcpause import gc_paused
from bench_ledger.queries.metrics.definitions import Ctx, Dist, Metric, precheck_caps
from bench_ledger.queries.metrics.execute import read_values, value_of
from bench_ledger.queries.metrics.grouped import RunRef, batch_values, supported
from bench_ledger.queries.metrics.hardware import card_metrics, parse_window
from bench_ledger.queries.metrics.power import POWER_STATS, power_metric, power_metrics, power_values
from bench_ledger.queries.metrics.reported import fill_reported
from bench_ledger.queries.metrics.requests import request_metrics
from bench_ledger.queries.metrics.server_log import log_metrics
from bench_ledger.queries.values import MetricValue, Scope
from bench_ledger.records import UNCONFIRMED_ZONE
from bench_ledger.revisions import current, require_current
from bench_ledger.store import Ledger, unknown

__all__ = [
    "METRICS",
    "ROW_METRICS",
    "Evaluator",
    "RunMetrics",
    "distribution_values",
    "evaluate",
    "evaluate_power",
    "list_metrics",
    "run_metrics",
    "run_metrics_per_run",
    "scope_of",
    "to_arrow",
]

METRICS: dict[str, Metric] = {
    mt.name: mt for mt in [*request_metrics(), *card_metrics(), *power_metrics(), *log_metrics()]
}

# The columns of `ledger metrics` (one row per run), in order.
ROW_METRICS = (
    "requests_ok",
    "requests_failed",
    "requests_unknown",
    "input_tokens",
    "output_tokens",
    "wall_clock_s",
    "total_tpm",
    "output_tpm",
    "output_tokens_per_s",
    "ttft_p50",
    "ttft_p99",
    "e2e_latency_p50",
    "per_stream_decode_rate_median",
    "cache_hit_tokens",
)

_R, _B, _D, _L, _A = (t.__table__ for t in (m.Run, m.Batch, m.Deployment, m.Launch, m.Artefact))


def list_metrics() -> list[dict]:
    return [mt.describe() for mt in METRICS.values()]


def _current_runs() -> sa.ColumnElement[bool]:
    """Runs not superseded by a correction (R10: the correction is the current row)."""
    return current(_R)


def _resolve(conn: sa.Connection, scope: Scope, metric: Metric) -> Ctx:
    """Which runs / samples / launches the scope means, refusing a scope that spans batches (R2)."""
    ctx = Ctx(scope=scope, kind="batch")
    runs: Sequence[Any] = []
    # Captured rows belong to a run's first revision (Run.origin_id); settings come from the current one.
    q = sa.select(
        sa.func.coalesce(_R.c.origin_id, _R.c.id).label("id"),
        _R.c.duration_s,
        _R.c.started_at,
        _R.c.ended_at,
        _B.c.name.label("batch"),
        _B.c.id.label("bid"),
        _R.c.deployment_id,
        _B.c.deployment_id.label("bdep"),
    ).join(_B, _B.c.id == _R.c.batch_id)
    if scope.run is not None:
        ctx.kind = "run"
        if scope.run.startswith("#"):
            if runs := conn.execute(q.where(_R.c.id == int(scope.run[1:]))).all():
                require_current(conn, "run", int(scope.run[1:]))
        else:
            if scope.batch is None:
                raise NotFound(f"run label {scope.run!r} needs its batch (labels are unique within a batch)")
            runs = conn.execute(q.where(_R.c.label == scope.run, _B.c.name == scope.batch, _current_runs())).all()
        if not runs:
            raise (
                NotFound(f"no run {scope.run!r}")
                if scope.batch is None
                else unknown(conn, "run", scope.run, scope.batch)
            )
    elif scope.deployment is not None:
        dep = conn.execute(sa.select(_D.c.id).where(_D.c.name == scope.deployment)).scalar()
        if dep is None:
            raise unknown(conn, "deployment", scope.deployment)
        ctx.deployment_id = dep
        if scope.launch is not None:
            ctx.kind = "launch"
            lid = conn.execute(
                sa.select(_L.c.id).where(_L.c.deployment_id == dep, _L.c.attempt == scope.launch, current(_L))
            ).scalar()
            if lid is None:
                raise NotFound(f"no launch attempt {scope.launch} of deployment {scope.deployment!r}")
            ctx.launch_ids = [lid]
        else:
            ctx.kind = "deployment"
            ctx.launch_ids = [
                r[0] for r in conn.execute(sa.select(_L.c.id).where(_L.c.deployment_id == dep, current(_L)))
            ]
        where = sa.or_(_R.c.deployment_id == dep, sa.and_(_R.c.deployment_id.is_(None), _B.c.deployment_id == dep))
        if scope.batch is not None:
            where = sa.and_(where, _B.c.name == scope.batch)
        runs = conn.execute(q.where(where, _current_runs()).order_by(_R.c.id)).all()
    elif scope.batch is not None:
        bid = conn.execute(sa.select(_B.c.id).where(_B.c.name == scope.batch)).scalar()
        if bid is None:
            raise unknown(conn, "batch", scope.batch)
        runs = conn.execute(q.where(_B.c.name == scope.batch, _current_runs()).order_by(_R.c.id)).all()
        ctx.batch_names = [scope.batch]
    ctx.run_ids = [r.id for r in runs]
    ctx.durations = {r.id: r.duration_s for r in runs}
    ctx.batch_names = sorted({r.batch for r in runs}) or ctx.batch_names

    if metric.family == "hardware":
        _hardware_scope(conn, ctx, scope, runs)
        batches = ctx.batch_names
    elif metric.family == "requests":
        batches = ctx.batch_names
    else:
        batches = []
    if len(batches) > 1:
        raise Refused(
            "R2",
            f"{metric.name} over {scope.describe()}",
            f"the scope spans batches {', '.join(batches)}: no total, rate, percentile or series is computed "
            "across batches",
            "evaluate it per batch (Scope(batch=...)) and show the rows side by side, each labelled",
        )
    if metric.family == "requests" and not metric.pools and len(ctx.run_ids) > 1:
        raise Refused(
            "R7",
            f"{metric.name} over {scope.describe()}",
            f"the scope holds {len(ctx.run_ids)} runs (different load points); a {metric.statistic} pooled over "
            "them mixes loads",
            "evaluate it per run (Scope(batch=..., run=LABEL)) and show the runs side by side",
        )
    return ctx


def _hardware_scope(conn: sa.Connection, ctx: Ctx, scope: Scope, runs: Sequence[Any]) -> None:
    """Samples of the scope: the batch's (or deployment's) dmon artefacts; a run cuts its own window."""
    has_samples = sa.exists().where(m.HardwareSample.__table__.c.artefact_id == _A.c.id)
    stmt = (
        sa.select(_A.c.id, _A.c.batch_id, _B.c.name, _A.c.note)
        .outerjoin(_B, _B.c.id == _A.c.batch_id)
        .where(has_samples)
    )
    if ctx.kind == "run":
        stmt = stmt.where(_A.c.batch_id == runs[0].bid)
        r = runs[0]
        if scope.window is None:
            if r.started_at is not None and r.ended_at is not None:
                ctx.window = (r.started_at, r.ended_at)
            else:
                ctx.window_note = "the run has no wall-clock start/end to cut the samples: give Scope.window"
    elif scope.batch is not None and scope.deployment is None:
        stmt = stmt.where(_B.c.name == scope.batch)
    elif ctx.deployment_id is not None:
        stmt = stmt.where(_A.c.deployment_id == ctx.deployment_id)
        if scope.batch is not None:
            stmt = stmt.where(_B.c.name == scope.batch)
    rows = conn.execute(stmt.order_by(_A.c.id)).all()
    ctx.hw_artefact_ids = [r.id for r in rows]
    ctx.batch_names = sorted({r.name for r in rows if r.name is not None})
    if scope.window is not None:
        ctx.window = parse_window(scope.window)
    elif ctx.window is not None and (unzoned := [r.id for r in rows if UNCONFIRMED_ZONE in (r.note or "")]):
        ctx.window, ctx.window_note = (
            None,
            (
                f"samples of artefact(s) {', '.join(map(str, unzoned))} carry host-local times with an unconfirmed time "
                "zone: they cannot be placed in the run's window (import them with --time-zone)"
            ),
        )


def evaluate(ledger: Ledger, metric: str, scope: Scope) -> MetricValue:
    """One metric on one scope: ``derived`` with inputs, or ``n/a`` with the reason; Refused (R2, R7)."""
    if metric not in METRICS:
        raise NotFound(f"no metric named {metric!r}; known: {', '.join(METRICS)}")
    return _evaluate_metric(ledger, METRICS[metric], scope)


def _evaluate_metric(ledger: Ledger, mt: Metric, scope: Scope) -> MetricValue:
    """:func:`evaluate` for a metric object (a registered one, or a variant such as
    ``queries.metrics.power.power_metric(name, counter)``), under the same scope rules."""
    with ledger.connection() as conn:
        ctx = _resolve(conn, scope, mt)
        return value_of(conn, ctx, mt)


def evaluate_power(ledger: Ledger, counter: str, scope: Scope) -> list[MetricValue]:
    """The three power metrics (:data:`queries.metrics.power.POWER_STATS`, R14) of one power counter on one scope,
    as :func:`evaluate_metric` gives each, from one resolution of the scope and one read of the samples."""
    metrics = [power_metric(name, counter) for name, _ in POWER_STATS]
    with ledger.connection() as conn:
        return power_values(conn, _resolve(conn, scope, metrics[0]), metrics, counter)


class Evaluator:
    """:func:`evaluate` for many calls against a ledger that does not change meanwhile (an audit, a
    draft): each (metric, scope) is computed once, and a run scope (batch + label) of a metric the batch
    path serves is computed for *every* current run of its batch at its first call, by the grouped
    statements of :mod:`queries.metrics.grouped` (values equal :func:`evaluate`'s, metric by metric; a
    statement over one run reads as many rows as over all, the request table has no index by run).
    Every other scope, and every error (an unknown batch or label, a superseded id), is
    :func:`evaluate`'s own. A new instance per audit: nothing is kept across ledger changes."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, Scope], MetricValue | Exception] = {}
        self._runs: dict[str, dict[str, RunRef]] = {}  # batch -> label -> its current run
        self._batched: set[tuple[str, str]] = set()  # (batch, metric) computed for every run
        self._bare: dict[str, dict[str, int]] = {}  # batch -> label -> origin id of runs without records

    def __call__(self, ledger: Ledger, metric: str, scope: Scope) -> MetricValue:
        key = (metric, scope)
        if key not in self._memo:
            mt = METRICS.get(metric)
            run_scope = (
                mt is not None
                and scope.batch is not None
                and scope.run is not None
                and not scope.run.startswith("#")
                and scope == Scope(batch=scope.batch, run=scope.run)
            )
            if run_scope and supported(mt):  # type: ignore[arg-type]
                self._whole_batch(ledger, mt, scope.batch)  # type: ignore[arg-type]
            elif run_scope and isinstance(mt.plan, Dist):  # type: ignore[union-attr]
                self._without_records(ledger, mt, scope)  # type: ignore[arg-type]
            if key not in self._memo:
                try:
                    self._memo[key] = evaluate(ledger, metric, scope)
                except (LedgerError, KeyError, ValueError) as exc:  # Refused is a LedgerError too
                    self._memo[key] = exc
        v = self._memo[key]
        if isinstance(v, Exception):
            raise v
        return v

    def _without_records(self, ledger: Ledger, mt: Metric, scope: Scope) -> None:
        """A distribution the batch path leaves to :func:`evaluate` (a mean, std, min) over a run of an
        aggregate-only file: n/a by :func:`evaluate`'s own decision (``precheck_caps`` on no captures),
        without its statements. The runs of a batch that hold records are read once."""
        batch = scope.batch
        assert batch is not None and scope.run is not None
        if batch not in self._bare:
            origin = sa.func.coalesce(_R.c.origin_id, _R.c.id)
            CAP = m.Capture.__table__
            with ledger.connection() as conn:
                rows = conn.execute(
                    sa.select(
                        _R.c.label,
                        origin.label("origin"),
                        sa.exists().where(CAP.c.run_id == origin, CAP.c.record_count > 0).label("has"),
                    )
                    .join(_B, _B.c.id == _R.c.batch_id)
                    .where(_B.c.name == batch, _current_runs())
                ).all()
            self._bare[batch] = {r.label: r.origin for r in rows if not r.has}
        origin_id = self._bare[batch].get(scope.run)
        if origin_id is not None:
            ctx = Ctx(scope=scope, kind="run", run_ids=[origin_id], batch_names=[batch])
            self._memo[(mt.name, scope)] = precheck_caps(ctx, mt, [])  # type: ignore[assignment]

    def _whole_batch(self, ledger: Ledger, mt: Metric, batch: str) -> None:
        if (batch, mt.name) in self._batched:
            return
        self._batched.add((batch, mt.name))
        origin = sa.func.coalesce(_R.c.origin_id, _R.c.id)
        stmt = (
            sa.select(_R.c.id, _R.c.label, origin.label("origin"), _R.c.duration_s)
            .join(_B, _B.c.id == _R.c.batch_id)
            .where(_B.c.name == batch, _current_runs())
            .order_by(_R.c.id)
        )
        with ledger.connection() as conn:
            if batch not in self._runs:
                self._runs[batch] = {r.label: RunRef(r.id, r.origin, batch, r.duration_s) for r in conn.execute(stmt)}
            runs = self._runs[batch]
            values = batch_values(conn, list(runs.values()), [mt], stmt.with_only_columns(origin).order_by(None))
        for label, ref in runs.items():
            mv = values[ref.id][mt.name]
            scope = Scope(batch=batch, run=label)
            self._memo[(mt.name, scope)] = replace(mv, scope=scope)


def scope_of(ledger: Ledger, run_id: int) -> Scope:
    with ledger.connection() as conn:
        row = conn.execute(
            sa.select(_R.c.label, _B.c.name).join(_B, _B.c.id == _R.c.batch_id).where(_R.c.id == run_id)
        ).first()
    if row is None:
        raise NotFound(f"no run with id {run_id}; `ledger runs` lists them")
    return Scope(batch=row.name, run=f"#{run_id}")


@dataclass
class RunMetrics:
    """One run's row of `ledger metrics`: its workload settings and its metric values."""

    run_id: int
    batch: str
    label: str
    tool: str | None
    input_target_tokens: int | None
    output_cap_tokens: int | None
    concurrency: int | None
    request_count: int | None
    values: dict[str, MetricValue] = field(default_factory=dict)
    # metric -> its sampling interval (queries.stats.read.add_intervals); as_dict carries it where present
    sampling: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        out: dict = {
            k: getattr(self, k)
            for k in (
                "run_id",
                "batch",
                "label",
                "tool",
                "input_target_tokens",
                "output_cap_tokens",
                "concurrency",
                "request_count",
            )
        }
        out["metrics"] = {
            name: {
                "value": None if v.value is None else float(v.value),
                "exact": None if v.value is None else str(v.value),
                "unit": v.unit,
                "flag": v.flag,
                "na_reason": v.na_reason,
                "inputs": v.inputs,
            }
            | ({"sampling": self.sampling[name].as_dict()} if name in self.sampling else {})
            for name, v in self.values.items()
        }
        return out

    def flat(self) -> dict:
        """One flat record (for CSV / Arrow): value and flag columns per metric."""
        out = {k: v for k, v in self.as_dict().items() if k != "metrics"}
        for name, v in self.values.items():
            out[name] = None if v.value is None else float(v.value)
            out[f"{name}_flag"] = v.flag
            out[f"{name}_na_reason"] = v.na_reason
        return out


def run_metrics(
    ledger: Ledger, batches: list[str] | None = None, run_id: int | None = None, metrics: tuple[str, ...] = ROW_METRICS
) -> list[RunMetrics]:
    """One row per run (of the named batches, or one run), never pooled across runs or batches (R2).

    Request metrics come from the batch path (:mod:`queries.metrics.grouped`: a few grouped statements
    over all the runs at once, values equal to :func:`evaluate`'s); the others are evaluated per run.
    """
    for name in metrics:
        if name not in METRICS:
            raise NotFound(f"no metric named {name!r}; known: {', '.join(METRICS)}")
    stmt = (
        sa.select(
            _R.c.id,
            _B.c.name.label("batch"),
            _R.c.label,
            _R.c.tool,
            _R.c.input_target_tokens,
            _R.c.output_cap_tokens,
            _R.c.concurrency,
            _R.c.request_count,
            sa.func.coalesce(_R.c.origin_id, _R.c.id).label("origin"),
            _R.c.duration_s,
        )
        .join(_B, _B.c.id == _R.c.batch_id)
        .where(_current_runs())
        .order_by(_B.c.id, _R.c.id)
    )
    with ledger.connection() as conn:
        if batches:
            known = {r[0] for r in conn.execute(sa.select(_B.c.name).where(_B.c.name.in_(batches)))}
            for b in batches:
                if b not in known:
                    raise unknown(conn, "batch", b)
            stmt = stmt.where(_B.c.name.in_(batches))
        if run_id is not None:
            require_current(conn, "run", run_id)
            stmt = stmt.where(_R.c.id == run_id)
        rows = conn.execute(stmt).all()
        if run_id is not None and not rows:
            raise NotFound(f"no run with id {run_id}; `ledger runs` lists them")
        fast = [METRICS[name] for name in metrics if supported(METRICS[name])]
        selection = stmt.with_only_columns(sa.func.coalesce(_R.c.origin_id, _R.c.id)).order_by(None)
        values = batch_values(conn, [RunRef(r.id, r.origin, r.batch, r.duration_s) for r in rows], fast, selection)
        out = []
        # all from the batch path (the default columns): nothing left to evaluate, and a collection pass
        # here would walk every value just made; else per-run evaluations run with the collector on
        with gc_paused() if len(fast) == len(metrics) else contextlib.nullcontext():
            named = [(name, METRICS[name]) for name in metrics]
            for r in rows:
                rm = RunMetrics(
                    r.id,
                    r.batch,
                    r.label,
                    r.tool,
                    r.input_target_tokens,
                    r.output_cap_tokens,
                    r.concurrency,
                    r.request_count,
                )
                got, mine = values[r.id], rm.values
                for name, mt in named:
                    v = got.get(name)
                    mine[name] = (
                        v
                        if v is not None
                        else value_of(conn, _resolve(conn, Scope(batch=r.batch, run=f"#{r.id}"), mt), mt)
                    )
                out.append(rm)
        fill_reported(conn, out)
    return out


def run_metrics_per_run(
    ledger: Ledger, batches: list[str] | None = None, run_id: int | None = None, metrics: tuple[str, ...] = ROW_METRICS
) -> list[RunMetrics]:
    """The reference for :func:`run_metrics`: every metric of every run by :func:`evaluate` itself (its own
    connection, scope resolution and statements), one metric and run at a time, then the tool's reported
    figures filled in as :func:`run_metrics` fills them. Slow; for tests."""
    out = run_metrics(ledger, batches, run_id, metrics=())
    for rm in out:
        scope = Scope(batch=rm.batch, run=f"#{rm.run_id}")
        for name in metrics:
            rm.values[name] = evaluate(ledger, name, scope)
    with ledger.connection() as conn:
        fill_reported(conn, out)
    return out


def distribution_values(ledger: Ledger, metric: str, run_ids: list[int]) -> list[float]:
    """The sorted per-request values a distribution metric (``ttft_p50``, ``e2e_latency_p99``...) is
    taken over, for plotting its CDF: the metric's own statement, so the population is the same.
    Call it only where the metric itself is derived (a needed field not captured makes it n/a, R9)."""
    mt = METRICS.get(metric)
    plan = mt.plan if mt is not None else None
    if not isinstance(plan, Dist):
        raise NotFound(f"{metric!r} is not a distribution metric")
    with ledger.connection() as conn:
        ids = list(run_ids)
        return sorted(float(v) for v in read_values(conn, plan.rows(ids), ids) if v is not None)


def to_arrow(rows: list[RunMetrics]):
    """The rows as an Arrow table (flat: value, flag and reason per metric)."""
    import pyarrow as pa

    return pa.Table.from_pylist([r.flat() for r in rows])
