"""A metric value's sampling interval, from its run's per-request values read in request order.

The values are the metric's own (its :class:`~queries.metrics.definitions.Dist` plan's rows, the same
population and expression), ordered as the requests were sent (send time, then file and line), since the
dependence between neighbouring requests is what :mod:`queries.stats.dependence` measures.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import sqlalchemy as sa
from bench_ledger.queries.metrics.definitions import Dist, Metric
from bench_ledger.queries.metrics.requests import Q
from bench_ledger.queries.stats.sampling import DEFAULT_CONFIDENCE, SamplingInterval, not_sampled, sampling_interval
from bench_ledger.queries.values import MetricValue

__all__ = ["add_intervals", "interval_of"]


def _ordered_values(conn: sa.Connection, mt: Metric, run_ids: list[int]) -> dict[int, np.ndarray]:
    """Each run's values of a distribution metric, in request order (``run_ids``: the runs' first revisions,
    as a metric value's ``run_ids`` names them)."""
    plan = mt.plan
    assert isinstance(plan, Dist)
    rows = plan.rows(list(run_ids))
    if rows.full is not None:
        rows = rows.full()
    stmt = (
        sa.select(Q.c.run_id, rows.v.label("v"))
        .select_from(rows.source)
        .where(Q.c.run_id.in_(list(run_ids)), rows.member)
        .order_by(Q.c.run_id, Q.c.send_ns.is_(None), Q.c.send_ns, Q.c.artefact_id, Q.c.idx)
    )
    got = conn.execute(stmt).all()
    out: dict[int, list[float]] = {r: [] for r in run_ids}
    for rid, v in got:
        out[rid].append(float("nan") if v is None else float(v))
    return {r: np.asarray(v, dtype=np.float64) for r, v in out.items()}


def _why_none(mv: MetricValue, mt: Metric | None) -> str | None:
    """Why a metric value has no sampling interval from the ledger's records (None: it may have one)."""
    if mv.flag == "n/a" or mv.value is None:
        return f"the value is n/a ({mv.na_reason})"
    if mv.flag in ("reported", "estimated"):
        return f"a {mv.flag} figure, not computed from requests here: its sampling error is unknown"
    if mt is None or not isinstance(mt.plan, Dist):
        return (
            "a count, total or run-level rate, not a statistic of a sample of requests: its variation shows "
            "only across repeated runs (ledger compare --stats with repeats)"
        )
    if mt.name.startswith("itl_"):
        return "chunk gaps come many per request, in no stored order here: intervals are offered per request"
    if len(mv.run_ids) != 1:
        return "the scope holds several runs"
    return None


def _intervals_of(
    conn: sa.Connection, values: Iterable[MetricValue], confidence: float = DEFAULT_CONFIDENCE
) -> list[SamplingInterval]:
    """The sampling interval of each metric value (n/a with the reason where it has none); one read per metric."""
    from bench_ledger.queries.metrics.registry import METRICS

    values = list(values)
    out: list[SamplingInterval | None] = [None] * len(values)
    wanted: dict[str, list[int]] = {}
    for i, mv in enumerate(values):
        mt = METRICS.get(mv.metric)
        stat = mt.plan.stat if mt is not None and isinstance(mt.plan, Dist) else mv.metric
        why = _why_none(mv, mt)
        if why is not None:
            out[i] = not_sampled(stat, why, confidence)
        else:
            wanted.setdefault(mv.metric, []).append(i)
    for name, idx in wanted.items():
        mt = METRICS[name]
        assert isinstance(mt.plan, Dist)
        series = _ordered_values(conn, mt, sorted({values[i].run_ids[0] for i in idx}))
        for i in idx:
            si = sampling_interval(mt.plan.stat, series[values[i].run_ids[0]], confidence)
            si.estimate = float(values[i].value)  # type: ignore[arg-type]  # the metric's own (exact) value, shown
            out[i] = si
    return [x for x in out if x is not None]


def interval_of(ledger, mv: MetricValue, confidence: float = DEFAULT_CONFIDENCE) -> SamplingInterval:
    """:func:`_intervals_of` for one value."""
    with ledger.connection() as conn:
        return _intervals_of(conn, [mv], confidence)[0]


def add_intervals(ledger, rows: list, confidence: float = DEFAULT_CONFIDENCE) -> None:
    """Fill each :class:`~queries.metrics.registry.RunMetrics` row's ``sampling`` with every value's interval."""
    flat = [(r, name, mv) for r in rows for name, mv in r.values.items()]
    with ledger.connection() as conn:
        got = _intervals_of(conn, [mv for _, _, mv in flat], confidence)
    for (r, name, _), si in zip(flat, got, strict=True):
        r.sampling[name] = si
