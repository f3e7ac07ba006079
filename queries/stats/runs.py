"""The ledger side of run-vs-run statistics: `ledger compare --stats`, `ledger trend`, `ledger plan`.

Runs are grouped by their comparability key (:func:`queries.compare.run_keys`): only runs of one key
are replicates, and nothing is pooled across keys (R2, R7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import NotFound, Refused, UsageError
from bench_ledger.queries.compare import run_keys, side
from bench_ledger.queries.metrics.definitions import Dist
from bench_ledger.queries.metrics.registry import METRICS, RunMetrics, run_metrics
from bench_ledger.queries.stats.change import Change, change_verdict
from bench_ledger.queries.stats.changepoints import MIN_POINTS, ChangePoint, change_points
from bench_ledger.queries.stats.planning import Plan, plan_requests
from bench_ledger.queries.stats.read import add_intervals
from bench_ledger.queries.stats.replicates import RunTest, run_tests
from bench_ledger.queries.stats.sampling import DEFAULT_CONFIDENCE
from bench_ledger.revisions import current
from bench_ledger.store import Ledger

__all__ = ["STATS_METRICS", "MetricStats", "StatsComparison", "Trend", "compare_stats", "plan", "trend"]

STATS_METRICS = (
    "ttft_mean",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "e2e_latency_p50",
    "e2e_latency_p99",
    "tpot_p50",
    "per_stream_decode_rate_median",
    "total_tpm",
    "output_tpm",
)
_R, _B = m.Run.__table__, m.Batch.__table__


def _known(metrics: tuple[str, ...]) -> None:
    for name in metrics:
        if name not in METRICS:
            raise NotFound(f"no metric named {name!r}; `ledger metrics --list` lists them")


def _rows(ledger: Ledger, run_ids: list[int], metrics: tuple[str, ...]) -> list[RunMetrics]:
    return [r for rid in run_ids for r in run_metrics(ledger, run_id=rid, metrics=metrics)]


def _one_key(ledger: Ledger, spec: str, run_ids: list[int]) -> str | None:
    """The side's one comparability key; refused (R7) when its runs are of several keys."""
    if not run_ids:
        raise NotFound(f"{spec} holds no runs")
    keys = run_keys(ledger, run_ids)
    distinct = set(keys.values())
    if len(run_ids) > 1 and (len(distinct) > 1 or None in distinct):
        unknown = [str(r) for r, k in keys.items() if k is None]
        why = (
            f"run(s) {', '.join(unknown)} have no deployment recorded, so they are comparable to nothing"
            if unknown
            else f"its {len(run_ids)} runs are of {len(distinct)} comparability keys (load points, "
            "workloads, systems or warm states differ)"
        )
        raise Refused(
            "R7",
            f"treat the runs of {spec} as replicates",
            why,
            "name runs of one key (ledger trend --batch B lists each run's key), e.g. run:ID or a batch "
            "of repeats of one load point",
        )
    return keys[run_ids[0]]


@dataclass
class MetricStats:
    metric: str
    unit: str
    a: list[tuple[int, float | None]]  # (run id, value) of each run of side A
    b: list[tuple[int, float | None]]
    change: Change | None  # one run per side: the request-level sampling verdict of B against A
    test: RunTest | None = None

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "a": [{"run": r, "value": v} for r, v in self.a],
            "b": [{"run": r, "value": v} for r, v in self.b],
            "change": None if self.change is None else self.change.as_dict(),
            "run_test": None if self.test is None else self.test.as_dict(),
        }


@dataclass
class StatsComparison:
    a: str
    b: str
    key_a: str | None
    key_b: str | None
    confidence: float
    rows: list[MetricStats] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "key_a": self.key_a,
            "key_b": self.key_b,
            "confidence": self.confidence,
            "metrics": [r.as_dict() for r in self.rows],
        }


def compare_stats(
    ledger: Ledger,
    a: str,
    b: str,
    metrics: tuple[str, ...] = STATS_METRICS,
    confidence: float = DEFAULT_CONFIDENCE,
    claim_factor: str | None = None,
) -> StatsComparison:
    """Per metric: with one run per side, the sampling verdict of B against A (within-run sampling error);
    with repeats, a test over runs with false-discovery control across the metrics. A claim attributing the
    change of one metric to a factor is refused while that change is not shown to differ (R6)."""
    _known(metrics)
    sa_, sb = side(ledger, a), side(ledger, b)
    out = StatsComparison(a, b, _one_key(ledger, a, sa_.run_ids), _one_key(ledger, b, sb.run_ids), confidence)
    rows_a, rows_b = _rows(ledger, sa_.run_ids, metrics), _rows(ledger, sb.run_ids, metrics)
    single = len(rows_a) == 1 and len(rows_b) == 1
    if single:
        add_intervals(ledger, [*rows_a, *rows_b], confidence)
    per_metric = {}
    for name in metrics:
        va = [(r.run_id, None if r.values[name].value is None else float(r.values[name].value)) for r in rows_a]  # type: ignore[arg-type]
        vb = [(r.run_id, None if r.values[name].value is None else float(r.values[name].value)) for r in rows_b]  # type: ignore[arg-type]
        change = None
        if single:
            change = change_verdict(
                rows_a[0].sampling[name], rows_b[0].sampling[name], "percent_change", (a, b), confidence
            )
        out.rows.append(MetricStats(name, METRICS[name].unit, va, vb, change))
        per_metric[name] = ([v for _, v in va if v is not None], [v for _, v in vb if v is not None])
    for row, test in zip(out.rows, run_tests(per_metric, confidence), strict=True):
        row.test = test
    if claim_factor is not None and len(metrics) == 1:
        row = out.rows[0]
        shown = (
            row.change is not None and row.change.verdict == "differs"
            if single
            else bool(row.test and row.test.significant)
        )
        if not shown:
            what = row.change.text() if single and row.change else (row.test.text() if row.test else "no test")
            raise Refused(
                "R6",
                f"attribute the change of {row.metric} from {a} to {b} to {claim_factor}",
                f"the change is not shown to differ from sampling error ({what})",
                "measure more requests or repeat the runs (ledger plan --detect), or report no change",
            )
    return out


@dataclass
class Point:
    batch: str
    run_id: int
    label: str
    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass
class Trend:
    metric: str
    unit: str
    key: str
    points: list[Point]
    changes: list[ChangePoint] | None  # None: insufficient data
    confidence: float
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "key": self.key,
            "confidence": self.confidence,
            "notes": self.notes,
            "points": [p.__dict__ for p in self.points],
            "min_points": MIN_POINTS,
            "verdict": "insufficient data" if self.changes is None else f"{len(self.changes)} change point(s)",
            "reason": self.reason,
            "change_points": None
            if self.changes is None
            else [
                c.as_dict() | {"batch": self.points[c.index].batch, "run_id": self.points[c.index].run_id}
                for c in self.changes
            ],
        }


def trend(
    ledger: Ledger,
    metric: str,
    key: str | None = None,
    batches: tuple[str, ...] = (),
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Trend]:
    """One series per comparability key (never pooled across keys): the runs of sealed batches in the order
    the batches were sealed (then run start, id), their values and intervals, and the change points."""
    _known((metric,))
    if key is None and not batches:
        raise UsageError("name the series: --key KEY (a comparability key, or its first 12+ characters) or --batch B")
    if key is not None and len(key) < 12:
        raise UsageError(f"--key {key!r}: give at least 12 characters of the key (ledger trend --batch B shows them)")
    stmt = (
        sa.select(_R.c.id, _R.c.label, _B.c.name.label("batch"), _B.c.status)
        .join(_B, _B.c.id == _R.c.batch_id)
        .where(current(_R))
        .order_by(_B.c.closed_at, _B.c.id, _R.c.started_at, _R.c.id)
    )
    with ledger.connection() as conn:
        if batches:
            rows = conn.execute(sa.select(_B.c.name, _B.c.status).where(_B.c.name.in_(batches))).all()
            found = {r.name: r.status for r in rows}
            for name in batches:
                if name not in found:
                    raise NotFound(f"no batch named {name!r}; `ledger batches` lists them")
                if found[name] != "closed":
                    raise Refused(
                        "R10",
                        f"a trend over batch {name!r}",
                        f"batch {name!r} is {found[name]}: its numbers may still change",
                        f"close it first (ledger close {name}), or leave it out",
                    )
            stmt = stmt.where(_B.c.name.in_(batches))
        else:
            stmt = stmt.where(_B.c.status == "closed")
        runs = conn.execute(stmt).all()
    keys = run_keys(ledger, [r.id for r in runs])
    groups: dict[str, list] = {}
    for r in runs:
        k = keys.get(r.id)
        if k is not None and (key is None or k.startswith(key.lower())):
            groups.setdefault(k, []).append(r)
    if key is not None and len({k for k in groups}) > 1:
        raise UsageError(f"--key {key!r} matches {len(groups)} keys: give more of it")
    if not groups:
        raise NotFound(
            "no run of a sealed batch has "
            + (f"the key {key}" if key else "a recorded deployment")
            + " (runs without a deployment have no comparability key)"
        )
    keyless = [f"{r.id} {r.label} (batch {r.batch})" for r in runs if keys.get(r.id) is None]
    notes = [f"left out, no deployment recorded (no comparability key): run(s) {', '.join(keyless)}"] if keyless else []
    out = []
    for k, members in groups.items():
        by_id = {r.run_id: r for r in run_metrics(ledger, sorted({r.batch for r in members}), metrics=(metric,))}
        chosen = [by_id[r.id] for r in members]
        if isinstance(METRICS[metric].plan, Dist):
            add_intervals(ledger, chosen, confidence)
        points = []
        for rm in chosen:
            v = rm.values[metric]
            si = rm.sampling.get(metric)
            points.append(
                Point(
                    rm.batch,
                    rm.run_id,
                    rm.label,
                    None if v.value is None else float(v.value),
                    si.low if si else None,
                    si.high if si else None,
                )
            )
        values = [p.value for p in points]
        reason = None
        if any(v is None for v in values):
            changes = None
            reason = f"{sum(v is None for v in values)} of {len(values)} points are n/a"
        else:
            changes = change_points([v for v in values if v is not None], confidence)
            if changes is None:
                reason = f"{len(values)} points; change points are looked for from {MIN_POINTS} points on"
        out.append(Trend(metric, METRICS[metric].unit, k, points, changes, confidence, reason, list(notes)))
    return out


def plan(ledger: Ledger, run_id: int, detect: float, metrics: tuple[str, ...], confidence: float) -> list[Plan]:
    """From a pilot run's records: requests per run (and runs per side) to resolve a relative change."""
    _known(metrics)
    if not 0 < detect < 10:
        raise UsageError(f"--detect {detect:.4g}: give a relative change such as 5%")
    rows = run_metrics(ledger, run_id=run_id, metrics=metrics)
    add_intervals(ledger, rows, confidence)
    return [plan_requests(name, rows[0].sampling[name], detect) for name in metrics]
