"""Server-log metrics: the KV capacity ratio (a capacity, kind ``capacity_ratio``, never a concurrency: R5)
and the seconds to ready of a launch (R8), from the log facts of the scope's launches.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.queries.metrics.definitions import Ctx, Metric, derived, na
from bench_ledger.vocab import KV_CACHE_TOKENS, MAX_CONCURRENCY_WINDOW_TOKENS, SECONDS_TO_READY

__all__ = ["log_metrics"]

_LF = m.LogFact.__table__
_A = m.Artefact.__table__


def _facts(conn: sa.Connection, artefact_ids: list[int], kind: str) -> list:
    return list(
        conn.execute(
            sa.select(_LF.c.artefact_id, _LF.c.line, _LF.c.process, _LF.c.value, _LF.c.text)
            .where(_LF.c.artefact_id.in_(artefact_ids), _LF.c.kind == kind)
            .order_by(_LF.c.artefact_id, _LF.c.line)
        )
    )


def _log_artefacts(conn: sa.Connection, ctx: Ctx) -> list[int]:
    L = m.Launch.__table__
    ids: list[int] = []
    if ctx.launch_ids:
        ids = [
            r[0]
            for r in conn.execute(sa.select(L.c.log_artefact_id).where(L.c.id.in_(ctx.launch_ids)))
            if r[0] is not None
        ]
    if ctx.kind == "deployment" and ctx.deployment_id is not None:
        ids += [
            r[0]
            for r in conn.execute(
                sa.select(_A.c.id)
                .where(_A.c.deployment_id == ctx.deployment_id, _A.c.format == "vllm-server-log")
                .order_by(_A.c.id)
            )
        ]
    return sorted(set(ids))


def _kv_capacity_ratio(conn: sa.Connection, ctx: Ctx, metric: Metric):
    """KV pool tokens of one engine / DP group over the window tokens: a capacity, never a concurrency (R5)."""
    logs = _log_artefacts(conn, ctx)
    if not logs:
        return na(metric, ctx, "no server log linked to this launch / deployment")
    pools = _facts(conn, logs, KV_CACHE_TOKENS)
    if not pools:
        return na(metric, ctx, "no 'GPU KV cache size' line in the server log(s)")
    distinct = sorted({Decimal(p.value) for p in pools if p.value is not None})
    if len(distinct) != 1:
        return na(
            metric,
            ctx,
            f"KV pool differs between engines / launches: {[str(d) for d in distinct]}; name one launch",
            pools=[p.text for p in pools],
        )
    windows = sorted(
        {Decimal(w.value) for w in _facts(conn, logs, MAX_CONCURRENCY_WINDOW_TOKENS) if w.value is not None}
    )
    basis = "log: Maximum concurrency for N tokens per request"
    if len(windows) != 1:
        dep = None
        if ctx.deployment_id is not None:
            dep = conn.execute(
                sa.select(m.Deployment.__table__.c.max_model_len).where(
                    m.Deployment.__table__.c.id == ctx.deployment_id
                )
            ).scalar()
        if dep is None:
            return na(
                metric,
                ctx,
                "window tokens unknown: no 'Maximum concurrency for N tokens' line and no deployment max_model_len",
            )
        windows, basis = [Decimal(dep)], "deployment.max_model_len"
    pool, window = distinct[0], windows[0]
    return derived(
        metric,
        ctx,
        Fraction(pool) / Fraction(window),
        kv_pool_tokens=str(pool),
        window_tokens=str(window),
        window_basis=basis,
        per="one engine / DP group",
        log_artefacts=logs,
        meaning="theoretical capacity in full windows; not requests served at once (R5)",
    )


def _seconds_to_ready(conn: sa.Connection, ctx: Ctx, metric: Metric):
    """Time to READY of one launch: the log's derived fact, else the declared (reported) figure."""
    L = m.Launch.__table__
    if len(ctx.launch_ids) != 1:
        return na(metric, ctx, f"per launch: {len(ctx.launch_ids)} launches in scope; name one (Scope.launch)")
    logs = _log_artefacts(conn, ctx)
    facts = _facts(conn, logs, SECONDS_TO_READY) if logs else []
    if facts:
        f = facts[-1]
        return derived(
            metric,
            ctx,
            Fraction(Decimal(f.value)),
            log_artefact=f.artefact_id,
            line=f.line,
            basis="first log timestamp to the ready line, 1 s resolution, a lower bound",
        )
    row = conn.execute(
        sa.select(L.c.seconds_to_ready, L.c.seconds_to_ready_flag).where(L.c.id == ctx.launch_ids[0])
    ).one()
    if row.seconds_to_ready is not None and row.seconds_to_ready_flag != "n/a":
        return derived(
            metric,
            ctx,
            Fraction(Decimal(row.seconds_to_ready)),
            flag=row.seconds_to_ready_flag,
            basis="declared for the launch, not read from a log",
        )
    return na(metric, ctx, "no ready line in a linked log and no declared seconds_to_ready")


def log_metrics() -> list[Metric]:
    return [
        Metric(
            "kv_capacity_ratio",
            "x",
            "capacity_ratio",
            "capacity ratio",
            "one launch's engine",
            (),
            "log kv_cache_tokens / max_concurrency_window_tokens (else deployment.max_model_len) (R5)",
            "log",
            _kv_capacity_ratio,
        ),
        Metric(
            "seconds_to_ready",
            "s",
            "startup_time",
            "duration",
            "process start to READY of one launch",
            (),
            "log fact seconds_to_ready; else launch.seconds_to_ready as declared (R8)",
            "log",
            _seconds_to_ready,
        ),
    ]
