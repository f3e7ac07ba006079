"""Check a claims file against a ledger before any verdict: every name it uses must exist.

A misspelt metric, batch, run label, deployment, launch or card would otherwise come out as a
``not-derivable`` verdict; a context that contradicts the factors the ledger recorded would be
used as if true. :func:`check_names` lists every such problem at once, each with its claim, YAML
line and field, and the names that do exist (``ledger metrics --list``, ``ledger runs --batch B``,
``ledger cards --batch B``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import LedgerError, close_names
from bench_ledger.queries.catalog import list_cards
from bench_ledger.queries.claims._locations import Problem, field_path
from bench_ledger.queries.claims._models import ClaimsFile, Formula, MetricOperand, ScopeSpec
from bench_ledger.queries.values import factor_known
from bench_ledger.revisions import current
from bench_ledger.store import Ledger

__all__ = ["check_names"]


@dataclass
class _Names:
    """What the ledger holds, read once."""

    metrics: list[str]
    batches: list[str]
    runs: dict[str, dict[str, int]]  # batch -> current run label -> id
    run_ids: set[int]
    deployments: list[str]
    launches: dict[str, list[int]]
    cards: dict[tuple, list[str]] = field(default_factory=dict)


def _names(ledger: Ledger) -> _Names:
    from bench_ledger.queries.metrics.registry import METRICS

    r, b, d, la = m.Run.__table__, m.Batch.__table__, m.Deployment.__table__, m.Launch.__table__
    with ledger.connection() as conn:
        batches = [row.name for row in conn.execute(sa.select(b.c.name).order_by(b.c.id))]
        runs: dict[str, dict[str, int]] = {name: {} for name in batches}
        for row in conn.execute(
            sa.select(b.c.name, r.c.label, r.c.id).join(b, b.c.id == r.c.batch_id).where(current(r)).order_by(r.c.id)
        ):
            runs[row.name][row.label] = row.id
        run_ids = {row.id for row in conn.execute(sa.select(r.c.id))}
        deployments = [row.name for row in conn.execute(sa.select(d.c.name).order_by(d.c.id))]
        launches: dict[str, list[int]] = {name: [] for name in deployments}
        for lrow in conn.execute(
            sa.select(d.c.name, la.c.attempt)
            .join(d, d.c.id == la.c.deployment_id)
            .where(current(la))
            .order_by(la.c.attempt)
        ):
            launches[lrow.name].append(lrow.attempt)
    return _Names(list(METRICS), batches, runs, run_ids, deployments, launches)


def _scope_problems(ledger: Ledger, names: _Names, scope: ScopeSpec) -> list[tuple[str, str]]:
    """(field, message) for every name of a scope the ledger does not hold."""
    out: list[tuple[str, str]] = []
    if scope.batch is not None and scope.batch not in names.runs:
        out.append(
            (
                "scope.batch",
                f"no batch named {scope.batch!r}{close_names(scope.batch, names.batches)}; "
                f"batches: {', '.join(names.batches) or 'none'} (`ledger batches`)",
            )
        )
    elif scope.batch is not None and scope.run is not None:
        labels = names.runs[scope.batch]
        if scope.run.startswith("#"):
            rid = scope.run[1:]
            if not rid.isdigit() or int(rid) not in names.run_ids:
                out.append(("scope.run", f"no run with id {scope.run[1:]!r} (`ledger runs --batch {scope.batch}`)"))
            elif int(rid) not in labels.values():
                out.append(
                    (
                        "scope.run",
                        f"run {rid} is not a current run of batch {scope.batch!r} (superseded by a "
                        f"correction, or of another batch); its runs: "
                        f"{', '.join(f'{k} (#{v})' for k, v in labels.items()) or 'none'}",
                    )
                )
        elif scope.run not in labels:
            out.append(
                (
                    "scope.run",
                    f"no run labelled {scope.run!r} in batch {scope.batch!r}"
                    f"{close_names(scope.run, list(labels))}; its runs: {', '.join(labels) or 'none'} "
                    f"(`ledger runs --batch {scope.batch}`)",
                )
            )
    if scope.deployment is not None and scope.deployment not in names.launches:
        out.append(
            (
                "scope.deployment",
                f"no deployment named {scope.deployment!r}"
                f"{close_names(scope.deployment, names.deployments)}; deployments: "
                f"{', '.join(names.deployments) or 'none'}",
            )
        )
    elif (
        scope.deployment is not None
        and scope.launch is not None
        and scope.launch not in names.launches[scope.deployment]
    ):
        have = names.launches[scope.deployment]
        out.append(
            (
                "scope.launch",
                f"deployment {scope.deployment!r} has no launch {scope.launch}; its launches: "
                f"{', '.join(map(str, have)) or 'none'}",
            )
        )
    if scope.gpu is not None and not out:
        from bench_ledger.queries.metrics.hardware import match_cards

        key = (scope.batch, scope.deployment)
        if key not in names.cards:
            names.cards[key] = list_cards(ledger, batch=scope.batch, deployment=scope.deployment)
        cards = names.cards[key]
        hits = match_cards(cards, scope.gpu)
        if len(hits) != 1:
            where = f"batch {scope.batch}" if scope.batch else f"deployment {scope.deployment}"
            opt = f"--batch {scope.batch}" if scope.batch else f"--deployment {scope.deployment}"
            what = f"card {scope.gpu!r} is ambiguous ({', '.join(hits)})" if hits else f"no card {scope.gpu!r}"
            out.append(
                ("scope.gpu", f"{what} in {where}; its cards: {', '.join(cards) or 'none'} (`ledger cards {opt}`)")
            )
    return out


def _context_problems(ledger: Ledger, names: _Names, scope: ScopeSpec, context: dict[str, str]) -> list[str]:
    """Context keys that contradict the factors the ledger recorded for the scope (R6)."""
    if not context:
        return []
    from bench_ledger.queries.compare import side

    if scope.run is not None:
        rid = names.runs.get(scope.batch or "", {}).get(scope.run)
        if scope.run.startswith("#") and scope.run[1:].isdigit():
            rid = int(scope.run[1:])
        spec = f"run:{rid}" if rid is not None else None
    elif scope.batch is not None:
        spec = f"batch:{scope.batch}"
    elif scope.deployment is not None:
        spec = f"deployment:{scope.deployment}"
    else:
        spec = None
    if spec is None:
        return []
    try:
        recorded = side(ledger, spec).factors
    except LedgerError:
        return []
    if scope.launch is not None:  # a launch: only its deployment's identity is recorded
        from bench_ledger.queries.values import IDENTITY_FACTORS

        recorded = {k: v for k, v in recorded.items() if k in IDENTITY_FACTORS or k == "engine_options"}
    return [
        f"context {k}={v!r} contradicts the ledger, which records {recorded[k]!r} for {scope.ref()}"
        for k, v in context.items()
        if factor_known(recorded.get(k)) and recorded[k] != v
    ]


def _walk(f: Formula, loc: tuple) -> list[tuple[tuple, MetricOperand]]:
    out: list[tuple[tuple, MetricOperand]] = []
    for i, o in enumerate(f.operands):
        if isinstance(o, MetricOperand):
            out.append(((*loc, "operands", i), o))
        elif isinstance(o, Formula):
            out += _walk(o, (*loc, "operands", i))
    return out


def check_names(cf: ClaimsFile, ledger: Ledger) -> list[Problem]:
    """Every metric, batch, run, deployment, launch and card name the file uses that the ledger
    does not hold, and every context that contradicts the ledger, as problems with their lines."""
    names = _names(ledger)
    out: list[Problem] = []

    def add(loc: tuple, message: str) -> None:
        out.append(Problem(cf.line_of(loc), cf.claims[loc[1]].id, field_path(loc[2:]), message))

    for i, c in enumerate(cf.claims):
        uses: list[tuple[tuple, str, ScopeSpec, dict[str, str]]] = []
        if c.metric is not None:
            uses.append((("claims", i, "metric"), c.metric.name, c.metric.scope, c.context))
        for key, f in (("derived", c.derived), ("na", c.na.would_fill if c.na else None)):
            if f is not None:
                base = ("claims", i, key) if key == "derived" else ("claims", i, "na", "would_fill")
                uses += [(loc, o.metric, o.scope, o.context) for loc, o in _walk(f, base)]
        for loc, metric, scope, context in uses:
            name_field = (*loc, "name") if loc[-1] == "metric" else (*loc, "metric")
            if metric not in names.metrics:
                add(
                    name_field,
                    f"no metric named {metric!r}{close_names(metric, names.metrics)}; "
                    f"`ledger metrics --list` lists the {len(names.metrics)} metrics",
                )
            for fld, msg in _scope_problems(ledger, names, scope):
                add((*loc, *fld.split(".")), msg)
            for msg in _context_problems(ledger, names, scope, context):
                add(("claims", i, "context") if loc[-1] == "metric" else (*loc, "context"), msg)
    return out
