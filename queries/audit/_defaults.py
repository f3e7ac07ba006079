"""What an audit is handed, and what it uses when not handed it: the metric evaluator, the sampling
intervals, the recorded factors of a scope and the tool's own figures (injected, so that the audit runs
without a database)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench_ledger.queries.values import MetricValue

__all__ = [
    "Evaluator",
    "FactorsOf",
    "IntervalsOf",
    "default_evaluator",
    "default_factors",
    "default_intervals",
    "default_reported",
]

Evaluator = Callable[[Any, str, Any], MetricValue]
# a metric value's sampling interval (queries.stats.read.interval_of): (ledger, MetricValue) -> SamplingInterval
IntervalsOf = Callable[[Any, MetricValue], Any]
# the factors the ledger recorded for one side ("run:ID", "batch:NAME", "deployment:NAME"): queries.compare.side
FactorsOf = Callable[[Any, str], dict[str, str]]


def default_evaluator() -> Evaluator | None:
    """A fresh :class:`queries.metrics.Evaluator` (``evaluate`` once per metric and scope; the run scopes
    of a batch in one grouped pass), for one audit."""
    try:
        from bench_ledger.queries.metrics.registry import Evaluator as MetricsEvaluator
    except ImportError:
        return None
    return MetricsEvaluator()


def default_intervals() -> IntervalsOf | None:
    """A metric value's sampling interval from the ledger's records (queries.stats.read.interval_of)."""
    try:
        from bench_ledger.queries.stats.read import interval_of
    except ImportError:
        return None
    return interval_of


def default_factors() -> FactorsOf | None:
    """The factors the ledger recorded for a scope spec (:class:`queries.compare.Sides`: each spec once,
    the runs of a batch together), for one audit."""
    try:
        from bench_ledger.queries.compare import Sides
    except ImportError:
        return None
    sides = Sides()
    return lambda ledger, spec: sides(ledger, spec).factors


def default_reported() -> Callable[[Any, MetricValue], MetricValue | None] | None:
    """The tool's own figure for a metric over a run (:class:`queries.metrics.reported.Reported`), for one audit."""
    try:
        from bench_ledger.queries.metrics.reported import Reported
    except ImportError:
        return None
    return Reported()
