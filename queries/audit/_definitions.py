"""Two definitions of one quantity: the verdict names the one that reproduces the number (issue 38).

llmperf's per-request output throughput ``request_output_throughput_token_per_s`` is, in
token_benchmark_ray.py, the request's output tokens / its end-to-end latency: the ledger's ``output_tps_*``
metrics. Older llmperf kept the value its client computed, streamed chunks / end-to-end latency (the
llmperf-leaderboard records: value x latency = 149 chunks for 150 or 157 recounted tokens), and its summary's
statistics are taken over that stored value. Where a run's records keep the tool's own per-request value
(``request_value``), a metric claim over such a statistic is checked against both: the verdict names the
definition that reproduces the printed number (``evidence.definition``), or says that neither does.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.intervals import Interval, fmt
from bench_ledger.queries.metrics.execute import apply_stat
from bench_ledger.queries.values import MetricValue

__all__ = ["name_definition"]

_RV, _RQ = m.RequestValue.__table__, m.Request.__table__


# metric base -> (the ledger's definition, the tool's stored key, its name, what it was in the older tool)
ALTERNATIVES: dict[str, tuple[str, str, str, str]] = {
    "output_tps": (
        "output tokens / end-to-end latency",
        "request_output_throughput_token_per_s",
        "llmperf's stored request_output_throughput_token_per_s",
        "older llmperf: streamed chunks / end-to-end latency",
    ),
}


def name_definition(auditor: Any, c: Any, r: Any, mv: MetricValue, value: Fraction, printed: Interval) -> None:
    """After a metric claim's verdict on the ledger's definition: check the tool's stored definition too."""
    hit = re.fullmatch(r"(?P<base>.+?)_(?P<stat>mean|min|max|std|p\d+(?:_\d+)?)", mv.metric)
    if hit is None or hit["base"] not in ALTERNATIVES or r.verdict not in ("reproduced", "mismatch"):
        return
    if not mv.run_ids or not hasattr(auditor.ledger, "connection"):
        return
    primary, key, name, how = ALTERNATIVES[hit["base"]]
    stored = _stored(auditor.ledger, list(mv.run_ids), key)
    if not stored:
        return
    other = auditor.to_unit(apply_stat(hit["stat"].replace("_", "."), stored), mv.unit, c.unit)
    chk = iv.check(Interval.point(other), printed)
    r.evidence["definitions"] = {primary: fmt(value), name: fmt(other)}
    if r.verdict == "reproduced":
        r.evidence["definition"] = primary
        where = "inside the printed rounding too" if chk.consistent else "outside the printed rounding"
        r.notes.append(f"by {primary}; {name} gives {fmt(other)}: {where}")
    elif chk.consistent:
        r.verdict, r.why, r.recomputed = "reproduced", None, fmt(other)
        r.evidence["definition"] = name
        r.margin = f"{chk.margin}, by {name} ({how}), not {primary} ({fmt(value)})"
        auditor.ledger_values[c.id] = Interval.point(other)
    else:
        r.why = f"{r.why}; {name} gives {fmt(other)}: outside too"


def _stored(ledger: Any, run_ids: list[int], key: str) -> list[Fraction]:
    """The tool's own per-request values of ``key`` over the ok requests of the runs, sorted."""
    join = _RV.join(_RQ, sa.and_(_RQ.c.artefact_id == _RV.c.artefact_id, _RQ.c.idx == _RV.c.request_idx))
    q = (
        sa.select(_RV.c.value)
        .select_from(join)
        .where(_RQ.c.run_id.in_(run_ids), _RQ.c.status == "ok", _RV.c.key == key, _RV.c.value.is_not(None))
        .order_by(_RV.c.value)
    )
    with ledger.connection() as conn:
        return [Fraction(v) for (v,) in conn.execute(q)]
