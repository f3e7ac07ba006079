"""What is in the ledger: batches, runs, and one run in detail. Typed rows, no rendering."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

import sqlalchemy as sa
from bench_ledger import factors
from bench_ledger import models as m
from bench_ledger.records import REQUEST_FIELDS
from bench_ledger.revisions import current, require_current
from bench_ledger.store import Ledger

__all__ = ["list_batches", "list_cards", "list_runs", "request_table", "run_detail", "sample_table", "to_json"]


@dataclass(frozen=True)
class BatchRow:
    id: int
    name: str
    status: str
    deployment: str | None
    runs: int
    requests: int
    artefacts: int
    created_at: datetime
    closed_at: datetime | None
    description: str | None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunRow:
    id: int
    batch: str
    label: str
    tool: str | None
    input_target_tokens: int | None
    output_cap_tokens: int | None
    concurrency: int | None
    request_count: int | None
    requests: int
    artefacts: int
    factors: dict[str, dict[str, str]] = field(default_factory=dict)  # what its files state (ledger.factors): value, at

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class CaptureDetail:
    artefact_id: int
    sha256: str
    file_name: str
    format: str
    record_count: int
    fields: list[str]
    missing: list[str]
    sampled: bool
    sample_note: str | None
    clock: str | None
    token_source: str
    success_rule: str


@dataclass
class PublishedDetail:
    key: str
    text: str
    unit: str | None
    flag: str
    quantity_kind: str | None
    artefact_id: int | None
    locator: str | None
    na_reason: str | None
    note: str | None


@dataclass
class RunDetail:
    run: RunRow
    deployment: str | None
    seed: int | None
    dataset: str | None
    request_rate: str | None
    warm: dict[str, str]
    status_counts: dict[str, int]
    captures: list[CaptureDetail] = field(default_factory=list)
    published: list[PublishedDetail] = field(default_factory=list)
    launch: dict | None = None  # the launch the run ran against (queries.logs.run_launch)
    launch_reason: str = ""  # how it was found, or why there is none
    warm_compile_measured: str | None = None  # the compile-cache state the launch's server log measured
    warm_compile_basis: str = ""  # its lines, or why it is n/a
    factors: dict[str, dict[str, str]] = field(default_factory=dict)  # what its files state (ledger.factors): value, at

    def as_dict(self) -> dict:
        return asdict(self)


def _count(table: sa.FromClause, where: sa.ColumnElement) -> sa.ScalarSelect:
    return sa.select(sa.func.count()).select_from(table).where(where).scalar_subquery()


def list_batches(ledger: Ledger) -> list[BatchRow]:
    b, r, a, q = m.Batch.__table__, m.Run.__table__, m.Artefact.__table__, m.Request.__table__
    d = m.Deployment.__table__
    rq = r.alias("rq")
    requests_in_batch = (
        sa.select(sa.func.count()).select_from(q.join(rq, rq.c.id == q.c.run_id)).where(rq.c.batch_id == b.c.id)
    ).scalar_subquery()
    stmt = (
        sa.select(
            b.c.id,
            b.c.name,
            b.c.status,
            d.c.name.label("deployment"),
            _count(r, sa.and_(r.c.batch_id == b.c.id, current(r))).label("runs"),
            requests_in_batch.label("requests"),
            _count(a, a.c.batch_id == b.c.id).label("artefacts"),
            b.c.created_at,
            b.c.closed_at,
            b.c.description,
        )
        .select_from(b.outerjoin(d, d.c.id == b.c.deployment_id))
        .order_by(b.c.id)
    )
    with ledger.connection() as conn:
        return [BatchRow(**row._mapping) for row in conn.execute(stmt)]


def list_runs(ledger: Ledger, batch: str | None = None, as_of: datetime | None = None) -> list[RunRow]:
    """Current runs (``as_of``: as the ledger stood then), optionally of one batch."""
    r, b, q, c = m.Run.__table__, m.Batch.__table__, m.Request.__table__, m.Capture.__table__
    origin = sa.func.coalesce(r.c.origin_id, r.c.id)  # captured rows belong to the first revision
    listed = [current(r, as_of)]
    if batch is not None:
        with ledger.session() as s:
            Ledger.get_batch(s, batch)
        listed.append(b.c.name == batch)
    runs = r.join(b, b.c.id == r.c.batch_id)
    # the listed runs' requests counted in one grouped pass, not one count per run: PostgreSQL's run
    # index is a block-range index (migration 0017), with which a count per run read a range or two each
    requests = (
        sa.select(q.c.run_id, sa.func.count().label("n"))
        .group_by(q.c.run_id)
        .where(q.c.run_id.in_(sa.select(origin).select_from(runs).where(*listed)))
        .subquery("requests")
    )
    stmt = (
        sa.select(
            r.c.id,
            b.c.name.label("batch"),
            r.c.label,
            r.c.tool,
            r.c.input_target_tokens,
            r.c.output_cap_tokens,
            r.c.concurrency,
            r.c.request_count,
            r.c.metadata_json,
            sa.func.coalesce(requests.c.n, 0).label("requests"),
            _count(c, c.c.run_id == origin).label("artefacts"),
        )
        .select_from(runs.outerjoin(requests, requests.c.run_id == origin))
        .where(*listed)
        .order_by(b.c.id, r.c.id)
    )
    with ledger.connection() as conn:
        return [
            RunRow(
                **{k: v for k, v in row._mapping.items() if k != "metadata_json"}, factors=_factors(row.metadata_json)
            )
            for row in conn.execute(stmt)
        ]


def _factors(metadata_json: str | None) -> dict[str, dict[str, str]]:
    """A run's factors (``ledger.factors``) as plain dicts: value and where it was read."""
    return {k: v.model_dump() for k, v in factors.of_metadata(factors.run_metadata(metadata_json)).items()}


def run_detail(ledger: Ledger, run_id: int) -> RunDetail:
    with ledger.session() as s:
        run = Ledger.get_run(s, run_id)
        batch = s.get_one(m.Batch, run.batch_id)  # a foreign key: the batch exists
        dep = s.get(m.Deployment, run.deployment_id) if run.deployment_id else None
        require_current(s.connection(), "run", run_id)
        row = next(x for x in list_runs(ledger, batch.name) if x.id == run_id)
        key = run.origin_id or run.id  # captured rows belong to the first revision
        statuses = dict(
            s.execute(
                sa.select(m.Request.status, sa.func.count()).where(m.Request.run_id == key).group_by(m.Request.status)
            ).all()
        )
        detail = RunDetail(
            run=row,
            deployment=dep.name if dep else None,
            seed=run.seed,
            dataset=run.dataset,
            request_rate=run.request_rate,
            warm={
                "prefix_cache": run.warm_prefix_cache,
                "process": run.warm_process,
                "compile": run.warm_compile,
                "file_cache": run.warm_file_cache,
            },
            status_counts={k: statuses.get(k, 0) for k in ("ok", "failed", "unknown")},
            factors=row.factors,
        )
        from bench_ledger.queries.logs import run_launch, warm_compile_of_log

        detail.launch, detail.launch_reason = run_launch(s.connection(), run_id)
        if detail.launch is None:
            detail.warm_compile_basis = f"n/a: {detail.launch_reason}"
        elif detail.launch["log_artefact"] is None:
            detail.warm_compile_basis = "n/a: no server log linked to the run's launch"
        else:
            state, basis = warm_compile_of_log(s.connection(), detail.launch["log_artefact"])
            detail.warm_compile_measured = state
            detail.warm_compile_basis = f"log artefact {detail.launch['log_artefact']}: {basis}"
        caps = s.execute(
            sa.select(m.Capture, m.Artefact)
            .join(m.Artefact, m.Artefact.id == m.Capture.artefact_id)
            .where(m.Capture.run_id == key)
            .order_by(m.Capture.id)
        ).all()
        for cap, art in caps:
            fields = sorted(s.scalars(sa.select(m.CaptureField.field).where(m.CaptureField.capture_id == cap.id)))
            detail.captures.append(
                CaptureDetail(
                    artefact_id=art.id,
                    sha256=art.sha256,
                    file_name=art.file_name,
                    format=art.format,
                    record_count=cap.record_count,
                    fields=fields,
                    missing=[f for f in REQUEST_FIELDS if f not in fields] if cap.record_count else [],
                    sampled=cap.sampled,
                    sample_note=cap.sample_note,
                    clock=cap.clock,
                    token_source=cap.token_source,
                    success_rule=cap.success_rule,
                )
            )
        for pv in s.scalars(
            sa.select(m.PublishedValue)
            .where(m.PublishedValue.run_id == key, current(m.PublishedValue))
            .order_by(m.PublishedValue.id)
        ):
            detail.published.append(
                PublishedDetail(
                    key=pv.key,
                    text=pv.text,
                    unit=pv.unit,
                    flag=pv.flag,
                    quantity_kind=pv.quantity_kind,
                    artefact_id=pv.artefact_id,
                    locator=pv.locator,
                    na_reason=pv.na_reason,
                    note=pv.note,
                )
            )
    return detail


def list_cards(ledger: Ledger, batch: str | None = None, deployment: str | None = None) -> list[str]:
    """The GPU cards with hardware samples in a batch or a deployment (all, without either), named
    as a scope's ``gpu`` names them ('node0:gpu3')."""
    from bench_ledger.queries.metrics.hardware import card_name

    hs, a, b, d = m.HardwareSample.__table__, m.Artefact.__table__, m.Batch.__table__, m.Deployment.__table__
    stmt = (
        sa.select(hs.c.artefact_id, hs.c.node, hs.c.gpu)
        .distinct()
        .select_from(
            hs.join(a, a.c.id == hs.c.artefact_id)
            .outerjoin(b, b.c.id == a.c.batch_id)
            .outerjoin(d, d.c.id == a.c.deployment_id)
        )
    )
    if batch is not None:
        stmt = stmt.where(b.c.name == batch)
    if deployment is not None:
        stmt = stmt.where(d.c.name == deployment)
    with ledger.connection() as conn:
        names = {card_name(row) for row in conn.execute(stmt)}
    return sorted(
        names, key=lambda c: (c.split(":")[0], int(c.rsplit("gpu", 1)[1]) if c.rsplit("gpu", 1)[1].isdigit() else 0)
    )


def to_json(rows: object) -> str:
    return json.dumps(rows, indent=2, default=str, ensure_ascii=False)


def request_table(ledger: Ledger, batch: str | None = None, run_id: int | None = None):
    """Per-request rows as Arrow, each with its batch and its run's current id and label (R2: labelled,
    never pooled). Captured rows belong to a run's first revision; the current revision names them."""
    import pyarrow as pa
    from bench_ledger.revisions import current
    from bench_ledger.transfer import schema_of

    r, b, q = m.Run.__table__, m.Batch.__table__, m.Request.__table__
    cur = sa.select(r).where(current(r)).subquery()
    origin = sa.func.coalesce(cur.c.origin_id, cur.c.id)
    stmt = (
        sa.select(
            b.c.name.label("batch"),
            cur.c.id.label("run_id"),
            cur.c.label.label("run_label"),
            *[c for c in q.c if c.name != "run_id"],
        )
        .select_from(q.join(cur, origin == q.c.run_id).join(b, b.c.id == cur.c.batch_id))
        .order_by(b.c.id, cur.c.id, q.c.artefact_id, q.c.idx)
    )
    if batch is not None:
        stmt = stmt.where(b.c.name == batch)
    if run_id is not None:
        stmt = stmt.where(cur.c.id == run_id)
    schema = pa.schema(
        [
            pa.field("batch", pa.string()),
            pa.field("run_id", pa.int64()),
            pa.field("run_label", pa.string()),
            *[f for f in schema_of("request") if f.name != "run_id"],
        ]
    )
    return _arrow(ledger, stmt, schema)


def _arrow(ledger: Ledger, stmt: sa.Select, schema):
    """The statement's rows as an Arrow table of ``schema`` (types from the models, not guessed)."""
    import pyarrow as pa

    with ledger.connection() as conn:
        rows = conn.execute(stmt).all()
    return pa.Table.from_pydict({f.name: [r[i] for r in rows] for i, f in enumerate(schema)}, schema=schema)


def sample_table(ledger: Ledger, batch: str | None = None, counter: str | None = None):
    """Hardware samples (long form) as Arrow, with their batch and artefact file name."""
    import pyarrow as pa
    from bench_ledger.transfer import schema_of

    h, a, b = m.HardwareSample.__table__, m.Artefact.__table__, m.Batch.__table__
    stmt = (
        sa.select(b.c.name.label("batch"), a.c.file_name, *h.c)
        .select_from(h.join(a, a.c.id == h.c.artefact_id).outerjoin(b, b.c.id == a.c.batch_id))
        .order_by(h.c.artefact_id, h.c.line, h.c.counter)
    )
    if batch is not None:
        stmt = stmt.where(b.c.name == batch)
    if counter is not None:
        stmt = stmt.where(h.c.counter == counter)
    schema = pa.schema(
        [pa.field("batch", pa.string()), pa.field("file_name", pa.string()), *schema_of("hardware_sample")]
    )
    return _arrow(ledger, stmt, schema)
