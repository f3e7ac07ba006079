"""The schema: SQLAlchemy 2.x models of every entity the ledger holds.

Two families of tables:

* **captured** tables hold what raw artefacts contained: ``artefact``, ``capture``,
  ``capture_field``, ``request``, ``request_gaps`` (read as rows through the view ``chunk_gap``),
  ``hardware_sample``, ``log_fact``, ``request_value``. They are
  append-only (R9, R10); their rows are keyed by the artefact and a locator inside it, so every
  value points back to the bytes it was read from.
* **declared** tables describe the world around the captures: ``source_report``, ``deployment``,
  ``launch``, ``batch``, ``run``, ``published_value``. Correctable ones (launch, run, published
  value) carry ``revision``, ``supersedes_id`` and ``correction_reason``: a correction is a new row
  with the next revision, never an edit (R10).

Models never commit; the store owns transactions. Constraints are declared at CREATE time
because DuckDB cannot add a FOREIGN KEY or CHECK with ALTER TABLE, and no foreign key cascades
(DuckDB rejects ON DELETE CASCADE).
"""

# No `from __future__ import annotations` here: SQLAlchemy reads each `Mapped[...]` annotation of a
# model, and with the annotations kept as strings it evaluates every one of them (420 eval calls and
# the typing module's compiles: ~17 ms of the ~75 ms this module costs every command that opens a
# ledger). The annotations refer to nothing defined later, so they can be plain objects.

from datetime import date, datetime
from decimal import Decimal

import sqlalchemy as sa
from bench_ledger.vocab import PROVENANCE, REQUEST_VALUE_FLAGS, STATUS, WARM
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class ExactDecimal(TypeDecorator[Decimal]):
    """A decimal kept exactly as text: never a binary float, never rounded to a column scale.

    Printed numbers ("2,791", "0.22786034579078357") are stored as their exact decimal string so
    that both backends return the very digits that were printed; SQL can still CAST them.
    """

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            raise TypeError(f"ExactDecimal takes Decimal, not {type(value).__name__}")
        if not value.is_finite():
            raise ValueError(f"not a finite decimal: {value}")
        return str(value)

    def process_result_value(self, value: str | None, dialect: sa.Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


def _enum_check(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    quoted = ", ".join(f"'{v}'" for v in values)
    # the values ride along (info) so that input checks name them before the database refuses
    return sa.CheckConstraint(f"{column} IN ({quoted})", name=name, info={"column": column, "values": values})


def _superseded_index(table: str) -> sa.Index:
    """PostgreSQL only (migration 0016): the rows that supersede another, by the row they supersede.
    :func:`bench_ledger.revisions.current` is an anti-join on ``supersedes_id = id``; on statistics that
    an import of fewer than 100k rows leaves stale (no ANALYZE), PostgreSQL planned it as a nested
    loop over a sequential scan: 1.7 s for the 3,645 values of one guidellm file, growing with the
    square of the table. With this index each probe is an index lookup (8 ms). Partial: the few
    corrections are in it, the imported rows (NULL) are not, so an import does not maintain it.
    DuckDB plans the anti-join as a hash join and needs none."""
    return sa.Index(
        f"ix_{table}_supersedes_id", "supersedes_id", postgresql_where=sa.text("supersedes_id IS NOT NULL")
    ).ddl_if(dialect="postgresql")


def enum_values(table: sa.Table, column: str) -> tuple[str, ...] | None:
    """The values a CHECK (``column IN (...)``) of ``table`` allows, or None when it has none."""
    for c in table.constraints:
        if isinstance(c, sa.CheckConstraint) and c.info.get("column") == column:
            return tuple(c.info["values"])
    return None


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def key_columns(table: str) -> list[str]:
    """The primary key of ``table``, in order: the order of its rows in a digest and a seal."""
    return [c.name for c in Base.metadata.tables[table].primary_key.columns]


# --------------------------------------------------------------------------- declared tables


class SourceReport(Base):
    """A document that publishes numbers."""

    __tablename__ = "source_report"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(sa.String, unique=True)
    title: Mapped[str]
    published_on: Mapped[date | None]
    author: Mapped[str | None]
    language: Mapped[str | None]
    text_sha256: Mapped[str | None] = mapped_column(sa.String(64))
    location: Mapped[str | None]
    recorded_at: Mapped[datetime]


class Deployment(Base):
    """The system under test. ``fingerprint`` hashes the fields that change identity."""

    __tablename__ = "deployment"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String, unique=True)
    # hardware
    gpu_model: Mapped[str | None]
    gpus_per_node: Mapped[int | None]
    nodes: Mapped[int | None]
    gpu_memory: Mapped[Decimal | None] = mapped_column(ExactDecimal)
    gpu_memory_unit: Mapped[str | None]
    interconnect_intra: Mapped[str | None]
    interconnect_inter: Mapped[str | None]
    # engine
    engine: Mapped[str | None]
    engine_version: Mapped[str | None]
    # model
    model: Mapped[str | None]
    weights_version: Mapped[str | None]
    shards: Mapped[int | None]
    size_on_disk: Mapped[Decimal | None] = mapped_column(ExactDecimal)
    size_on_disk_unit: Mapped[str | None]
    # parallel layout
    tp: Mapped[int | None]
    dp: Mapped[int | None]
    ep: Mapped[int | None]
    pp: Mapped[int | None]
    # engine options
    kv_cache_dtype: Mapped[str | None]
    prefix_caching: Mapped[bool | None]
    max_num_seqs: Mapped[int | None]
    max_model_len: Mapped[int | None]
    chunked_prefill_tokens: Mapped[int | None]
    speculative_method: Mapped[str | None]
    speculative_tokens: Mapped[int | None]
    kernel_backend: Mapped[str | None]
    note: Mapped[str | None]
    fingerprint: Mapped[str] = mapped_column(sa.String(64), index=True)
    recorded_at: Mapped[datetime]


class Artefact(Base):
    """A raw file that was imported; its identity is the sha256 of its bytes."""

    __tablename__ = "artefact"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), unique=True)
    size_bytes: Mapped[int] = mapped_column(sa.BigInteger)
    file_name: Mapped[str]
    format: Mapped[str]
    format_version: Mapped[str | None]
    importer: Mapped[str]
    importer_version: Mapped[str]
    imported_at: Mapped[datetime]
    stored_path: Mapped[str | None]
    batch_id: Mapped[int | None] = mapped_column(sa.ForeignKey("batch.id"), index=True)
    deployment_id: Mapped[int | None] = mapped_column(sa.ForeignKey("deployment.id"))
    node: Mapped[str | None]
    note: Mapped[str | None]


class Launch(Base):
    """One attempt to start the engine of a deployment (declared, or recorded by an import whose
    files name their server launch: ``label``)."""

    __tablename__ = "launch"
    __table_args__ = (
        _enum_check("outcome", ("ready", "failed", "unknown"), "outcome"),
        sa.UniqueConstraint("deployment_id", "attempt", "revision"),
        _superseded_index("launch"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(sa.ForeignKey("deployment.id"), index=True)
    attempt: Mapped[int]
    outcome: Mapped[str]
    seconds_to_ready: Mapped[Decimal | None] = mapped_column(ExactDecimal)
    seconds_to_ready_flag: Mapped[str] = mapped_column(sa.String, default="n/a")
    cause: Mapped[str | None]
    log_artefact_id: Mapped[int | None] = mapped_column(sa.ForeignKey("artefact.id"))
    revision: Mapped[int] = mapped_column(sa.Integer, default=0)
    supersedes_id: Mapped[int | None] = mapped_column(sa.ForeignKey("launch.id"))
    correction_reason: Mapped[str | None]
    recorded_at: Mapped[datetime]
    # The launch as a tool's output names it (inference-perf report folder, vLLM sweep SERVE setting);
    # runs name it in run.metadata.launch. No constraint (migration 0012 adds it by ALTER TABLE).
    label: Mapped[str | None]


class Batch(Base):
    """One accounting of measurements. Closed batches are sealed and immutable (R10)."""

    __tablename__ = "batch"
    __table_args__ = (_enum_check("status", ("open", "closed"), "status"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String, unique=True)
    description: Mapped[str | None]
    deployment_id: Mapped[int | None] = mapped_column(sa.ForeignKey("deployment.id"))
    status: Mapped[str] = mapped_column(sa.String, default="open")
    created_at: Mapped[datetime]
    closed_at: Mapped[datetime | None]
    seal_digest: Mapped[str | None] = mapped_column(sa.String(64))


class Run(Base):
    """One load point in a batch."""

    __tablename__ = "run"
    __table_args__ = (
        sa.UniqueConstraint("batch_id", "label", "revision"),
        *(_enum_check(f"warm_{d}", WARM, f"warm_{d}") for d in ("prefix_cache", "process", "compile", "file_cache")),
        _superseded_index("run"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    batch_id: Mapped[int] = mapped_column(sa.ForeignKey("batch.id"), index=True)
    label: Mapped[str]
    deployment_id: Mapped[int | None] = mapped_column(sa.ForeignKey("deployment.id"))
    input_target_tokens: Mapped[int | None]
    output_cap_tokens: Mapped[int | None]
    concurrency: Mapped[int | None]
    request_count: Mapped[int | None]
    request_rate: Mapped[str | None]
    seed: Mapped[int | None]
    dataset: Mapped[str | None]
    tool: Mapped[str | None]
    tool_version: Mapped[str | None]
    warm_prefix_cache: Mapped[str] = mapped_column(sa.String, default="unknown")
    warm_process: Mapped[str] = mapped_column(sa.String, default="unknown")
    warm_compile: Mapped[str] = mapped_column(sa.String, default="unknown")
    warm_file_cache: Mapped[str] = mapped_column(sa.String, default="unknown")
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    duration_s: Mapped[float | None] = mapped_column(sa.Float)
    artefact_id: Mapped[int | None] = mapped_column(sa.ForeignKey("artefact.id"))
    metadata_json: Mapped[str | None] = mapped_column(sa.String)
    revision: Mapped[int] = mapped_column(sa.Integer, default=0)
    supersedes_id: Mapped[int | None] = mapped_column(sa.ForeignKey("run.id"))
    # The first revision's id; None on the first revision itself. Captured rows (requests, captures,
    # tool aggregates) always point at the first revision, so a correction never orphans them.
    # No FOREIGN KEY: it was added by ALTER TABLE (migration 0006), which DuckDB cannot constrain.
    origin_id: Mapped[int | None]
    correction_reason: Mapped[str | None]
    recorded_at: Mapped[datetime]


class PublishedValue(Base):
    """A number as printed by a source report or a tool summary, with its provenance flag."""

    __tablename__ = "published_value"
    __table_args__ = (_enum_check("flag", PROVENANCE, "flag"), _superseded_index("published_value"))

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    source_report_id: Mapped[int | None] = mapped_column(sa.ForeignKey("source_report.id"), index=True)
    artefact_id: Mapped[int | None] = mapped_column(sa.ForeignKey("artefact.id"), index=True)
    key: Mapped[str]
    text: Mapped[str]
    value: Mapped[Decimal | None] = mapped_column(ExactDecimal)
    unit: Mapped[str | None]
    quantity_kind: Mapped[str | None]
    precision: Mapped[int | None]
    flag: Mapped[str]
    na_reason: Mapped[str | None]
    batch_id: Mapped[int | None] = mapped_column(sa.ForeignKey("batch.id"), index=True)
    run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("run.id"), index=True)
    deployment_id: Mapped[int | None] = mapped_column(sa.ForeignKey("deployment.id"))
    locator: Mapped[str | None]
    note: Mapped[str | None]
    revision: Mapped[int] = mapped_column(sa.Integer, default=0)
    supersedes_id: Mapped[int | None] = mapped_column(sa.ForeignKey("published_value.id"))
    correction_reason: Mapped[str | None]
    recorded_at: Mapped[datetime]


# --------------------------------------------------------------------------- captured tables


class Capture(Base):
    """What one artefact actually contained for one run; fields outside it are n/a (R9)."""

    __tablename__ = "capture"
    __table_args__ = (
        sa.UniqueConstraint("artefact_id", "run_id"),
        sa.CheckConstraint("clock IS NULL OR clock IN ('monotonic_s', 'epoch_s', 'epoch_ns')", name="clock"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    artefact_id: Mapped[int] = mapped_column(sa.ForeignKey("artefact.id"))
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("run.id"), index=True)
    record_count: Mapped[int]
    sampled: Mapped[bool]
    sample_note: Mapped[str | None]
    clock: Mapped[str | None]
    token_source: Mapped[str]
    success_rule: Mapped[str]


class CaptureField(Base):
    """One request field that a capture contained."""

    __tablename__ = "capture_field"

    capture_id: Mapped[int] = mapped_column(sa.ForeignKey("capture.id"), primary_key=True)
    field: Mapped[str] = mapped_column(sa.String, primary_key=True)


class Request(Base):
    """One API request as its artefact recorded it. Times are integer ns on ``clock``.

    (artefact_id, idx) identifies a row, but since migration 0008 the database keeps neither a
    PRIMARY KEY nor the FOREIGN KEYs to ``artefact`` and ``run`` on this table: maintaining them
    was most of a request import (1M vLLM requests; benchmarks/profile_notes.md has the
    measurements: the primary key alone was 22% of the insert on DuckDB and 30% on PostgreSQL).
    Instead the importer guarantees them: ``idx`` is the record's position in its artefact
    (numbered across the runs of the artefact), ``artefact_id`` is the artefact row and ``run_id``
    the run (first revision) written in the same transaction. The seal (rows in (artefact_id, idx)
    order) is what shows a later change. The key below is therefore *logical*, as on
    ``HardwareSample``: the ORM's identity, the seal's row order and row names, never DDL.
    """

    __tablename__ = "request"
    __table_args__ = (
        _enum_check("status", STATUS, "status"),
        sa.PrimaryKeyConstraint("artefact_id", "idx", name="pk_request").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: not created (migration 0008)
        # PostgreSQL only (migration 0015): on DuckDB the ART index cost +0.2 s of insert and 0.3-0.6 s
        # of commit per 1M rows, while a run's rows are written together, in order, so DuckDB's zone
        # maps (min/max of run_id per row group) already skip all but a run's own row groups; on
        # PostgreSQL a block-range index, the same idea (migration 0017: a btree entry per row was the
        # largest share of the server's import after the heap)
        sa.Index(
            "ix_request_run_id",
            "run_id",
            postgresql_using="brin",
            postgresql_with={"pages_per_range": 32, "autosummarize": "on"},
        ).ddl_if(dialect="postgresql"),
    )

    artefact_id: Mapped[int] = mapped_column(sa.Integer)  # artefact.id; no FOREIGN KEY (see above)
    idx: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    run_id: Mapped[int] = mapped_column(sa.Integer)  # run.id; no FOREIGN KEY (see above); its index: __table_args__
    line: Mapped[int | None]
    status: Mapped[str]
    error: Mapped[str | None] = mapped_column(sa.String)
    retries: Mapped[int | None]
    input_tokens: Mapped[int | None]
    output_tokens: Mapped[int | None]
    clock: Mapped[str | None]
    send_ns: Mapped[int | None] = mapped_column(sa.BigInteger)
    first_token_ns: Mapped[int | None] = mapped_column(sa.BigInteger)
    end_ns: Mapped[int | None] = mapped_column(sa.BigInteger)
    ttft_s: Mapped[float | None] = mapped_column(sa.Float)
    latency_s: Mapped[float | None] = mapped_column(sa.Float)
    queue_s: Mapped[float | None] = mapped_column(sa.Float)
    itl_mean_s: Mapped[float | None] = mapped_column(sa.Float)
    chunk_count: Mapped[int | None]
    cached_tokens: Mapped[int | None]


class RequestGaps(Base):
    """The gaps between streamed chunks of one request (a chunk may carry several tokens), as one
    array in stream order: ``gaps[k]`` is the gap ``seq`` = k (migration 0014). Rows are read as
    rows through the view :class:`ChunkGap`.

    Why an array: a request's gaps were one ``chunk_gap`` row each; flattening the tool's per-request
    lists into (request_idx, seq, gap_s) rows, writing them and hashing them was a large share of a
    vLLM import (1M requests with 4 gaps each: 4M rows beside the 1M request rows,
    benchmarks/profile_notes.md). A request without gaps (none in the file, or an empty list) has no
    row here: ``request.chunk_count`` says which (NULL: the file had no gaps array).

    (artefact_id, request_idx) identifies a row; as on ``request`` the database keeps neither that
    PRIMARY KEY nor a FOREIGN KEY (migration 0008's reasons): the importer writes the gaps of a
    request from that request's own record, in the same transaction. The key is logical only.
    """

    __tablename__ = "request_gaps"
    __table_args__ = (
        sa.PrimaryKeyConstraint("artefact_id", "request_idx", name="pk_request_gaps").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: not created (migration 0014)
    )

    # (artefact_id, request_idx) is a request's (artefact_id, idx); no FOREIGN KEY (see above)
    artefact_id: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    request_idx: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    gaps: Mapped[list[float]] = mapped_column(sa.ARRAY(sa.Float))  # DuckDB DOUBLE[], PostgreSQL double precision[]


class ChunkGap(Base):
    """One gap between streamed chunks of a request, as a row: a read-only VIEW over
    :class:`RequestGaps` (migration 0014), one row per array element, ``seq`` its 0-based position.

    The readers (ITL metrics, ``ledger check``, export, report, the seal) read this shape. It is
    mapped here as a table so that queries, the seal's column encoding and the export's schema come
    from one place; it is *not* created as a table: :data:`VIEWS` holds its SQL (the same as migration
    0014's), :func:`create_schema` creates it, and :func:`include_object` leaves it out of Alembic's
    ``compare_metadata`` (which reflects tables only, so it would report a view as a missing table).
    Nothing writes through it (the importer writes ``request_gaps``; PostgreSQL cannot update such a
    view, and the session guards refuse ORM writes as for every captured table).

    (artefact_id, request_idx, seq) is its *logical* key (ORM identity, the seal's row order and row
    names), never DDL.
    """

    __tablename__ = "chunk_gap"
    __table_args__ = (
        sa.PrimaryKeyConstraint("artefact_id", "request_idx", "seq", name="pk_chunk_gap").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: a view has none
        {"info": {"view": True}},
    )

    artefact_id: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    request_idx: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    seq: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    gap_s: Mapped[float] = mapped_column(sa.Float)


class RequestValue(Base):
    """One per-request value a tool wrote that has no column of ``request`` (migration 0013), as
    written: llmperf's ``request_output_throughput_token_per_s``, guidellm's
    ``time_per_output_token_ms``, ``info.timings.request_iterations``, ``input_metrics.text_words``...
    ``key`` is the tool's own name (dotted path within the record); ``flag`` says whether the tool
    measured it (a count, a time) or computed it from its measurements (``reported``).

    (artefact_id, request_idx, key) identifies a row; as on ``chunk_gap`` the database keeps neither
    that PRIMARY KEY nor a FOREIGN KEY to ``request`` (a bulk table, written with its requests in the
    artefact's import transaction; the seal shows a later change). The key is logical only.
    """

    __tablename__ = "request_value"
    __table_args__ = (
        _enum_check("flag", REQUEST_VALUE_FLAGS, "flag"),
        sa.PrimaryKeyConstraint("artefact_id", "request_idx", "key", name="pk_request_value").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: not created (migration 0013)
    )

    # (artefact_id, request_idx) is a request's (artefact_id, idx); no FOREIGN KEY (see above)
    artefact_id: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    request_idx: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    key: Mapped[str] = mapped_column(sa.String)
    value: Mapped[float] = mapped_column(sa.Float)
    flag: Mapped[str] = mapped_column(sa.String)


class HardwareSample(Base):
    """One counter of one GPU at one tick, as printed (R12, R13).

    (artefact_id, line, counter) identifies a row, but since migration 0007 the database keeps
    neither a PRIMARY KEY nor the FOREIGN KEY to ``artefact`` on this table: maintaining them was
    most of a dmon import (17M rows a day for 16 GPUs; benchmarks/profile_notes.md has the
    measurements). Instead the importer guarantees them: every row of an artefact comes from one
    physical line of that file (``line`` is the line number) and a column set whose names do not
    repeat (refused otherwise), and ``artefact_id`` is the artefact row written in the same
    transaction. The seal (Merkle root over the rows in (artefact_id, line, counter) order) is what
    shows a later change. The key below is therefore *logical*: it gives the ORM its identity and
    the seal its row order and row names (:func:`key_columns`), and is never emitted as DDL
    (``ddl_if``), so ``metadata.create_all`` builds the same table as the migrations.
    """

    __tablename__ = "hardware_sample"
    __table_args__ = (
        sa.PrimaryKeyConstraint("artefact_id", "line", "counter", name="pk_hardware_sample").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: not created (migration 0007)
    )

    artefact_id: Mapped[int] = mapped_column(sa.Integer)  # artefact.id; no FOREIGN KEY (see above)
    line: Mapped[int] = mapped_column(sa.Integer, autoincrement=False)
    counter: Mapped[str] = mapped_column(sa.String)
    node: Mapped[str | None]
    gpu: Mapped[int]
    tick: Mapped[int]
    ts: Mapped[datetime | None]
    value: Mapped[float | None] = mapped_column(sa.Float)
    unit: Mapped[str]


class LogFact(Base):
    """A fact read from one server-log line."""

    __tablename__ = "log_fact"

    artefact_id: Mapped[int] = mapped_column(sa.ForeignKey("artefact.id"), primary_key=True)
    line: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(sa.String, primary_key=True)
    process: Mapped[str | None]
    value: Mapped[Decimal | None] = mapped_column(ExactDecimal)
    text: Mapped[str]
    unit: Mapped[str | None]
    logged_at: Mapped[str | None]


# --------------------------------------------------------------------------- seals (R10)


class Seal(Base):
    """The seal of one closed batch: Merkle root of its rows, chained to the previous seal.

    The construction is documented in :mod:`ledger.seal.scheme2` and docs/seals.md. Append-only.
    """

    __tablename__ = "seal"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    batch_id: Mapped[int] = mapped_column(sa.ForeignKey("batch.id"), unique=True)
    digest: Mapped[str] = mapped_column(sa.String(64), unique=True)
    merkle_root: Mapped[str] = mapped_column(sa.String(64))
    row_count: Mapped[int] = mapped_column(sa.BigInteger)
    previous_digest: Mapped[str] = mapped_column(sa.String(64))
    closed_at: Mapped[datetime]
    table_counts: Mapped[str] = mapped_column(sa.String, doc="JSON {table: rows}")
    table_roots: Mapped[str] = mapped_column(sa.String, doc="JSON {table: Merkle root hex}")
    scheme: Mapped[str] = mapped_column(sa.String)


class SealChunk(Base):
    """Leaf hashes and primary keys of up to CHUNK rows of one table of a seal.

    Kept so that `ledger verify` can name the rows that differ, not just the table. Append-only.
    """

    __tablename__ = "seal_chunk"

    seal_id: Mapped[int] = mapped_column(sa.ForeignKey("seal.id"), primary_key=True)
    table_name: Mapped[str] = mapped_column(sa.String, primary_key=True)
    chunk_no: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    row_count: Mapped[int]
    keys_json: Mapped[str] = mapped_column(sa.String, doc="JSON list of primary keys, in leaf order")
    leaves: Mapped[bytes] = mapped_column(sa.LargeBinary, doc="32-byte leaf hashes, concatenated")


class ArtefactDigest(Base):
    """The digest of one captured table's rows of one artefact, stored by its import (scheme 3).

    ``chunks`` is the concatenated 32-byte SHA-256 of each chunk of 4096 rows (ledger.seal.chunks);
    ``root`` the SHA-256 of ``chunks``. Append-only.
    """

    __tablename__ = "artefact_digest"

    artefact_id: Mapped[int] = mapped_column(sa.ForeignKey("artefact.id"), primary_key=True, autoincrement=False)
    table_name: Mapped[str] = mapped_column(sa.String, primary_key=True)
    row_count: Mapped[int] = mapped_column(sa.BigInteger)
    root: Mapped[str] = mapped_column(sa.String(64))
    chunks: Mapped[bytes] = mapped_column(sa.LargeBinary)


class DeclaredDigest(Base):
    """The SHA-256 of one declared row's canonical form (``ledger.declared``), written by the ledger at
    each write of the row on DuckDB (no triggers there): ``ledger verify`` and ``close`` compare."""

    __tablename__ = "declared_digest"

    table_name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    row_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    sha256: Mapped[str] = mapped_column(sa.String(64))


class SealPart(Base):
    """One chunk of one part of a scheme-3 seal: digest, primary keys and row fingerprints.

    A part is a declared table of the batch (``artefact_id`` 0) or a table of one of its artefacts.
    ``keys`` (zlib) and ``fingerprints`` (64 bits per row) only locate rows that changed. Append-only.
    """

    __tablename__ = "seal_part"

    seal_id: Mapped[int] = mapped_column(sa.ForeignKey("seal.id"), primary_key=True)
    table_name: Mapped[str] = mapped_column(sa.String, primary_key=True)
    artefact_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    chunk_no: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    row_count: Mapped[int]
    digest: Mapped[str] = mapped_column(sa.String(64))
    keys: Mapped[bytes] = mapped_column(sa.LargeBinary)
    fingerprints: Mapped[bytes] = mapped_column(sa.LargeBinary)


CAPTURED_TABLES = (
    "artefact",
    "capture",
    "capture_field",
    "request",
    "request_gaps",
    "hardware_sample",
    "log_fact",
    "request_value",
)
# Captured rows read through a VIEW (mapped above as tables, created by VIEWS' SQL): append-only too
CAPTURED_VIEWS = ("chunk_gap",)

# The SQL of each view per backend; migration 0014 holds a frozen copy of the same statements.
VIEWS: dict[str, dict[str, str]] = {
    "chunk_gap": {
        # generate_subscripts and unnest of one list in one SELECT: zipped, element k with subscript k + 1
        "duckdb": (
            "CREATE VIEW chunk_gap AS SELECT artefact_id, request_idx, "
            "CAST(generate_subscripts(gaps, 1) - 1 AS INTEGER) AS seq, unnest(gaps) AS gap_s FROM request_gaps"
        ),
        "postgresql": (
            "CREATE VIEW chunk_gap AS SELECT g.artefact_id, g.request_idx, CAST(u.k - 1 AS INTEGER) AS seq, "
            "u.gap_s FROM request_gaps g CROSS JOIN LATERAL unnest(g.gaps) WITH ORDINALITY AS u(gap_s, k)"
        ),
    },
}


class _GapValues(sa.sql.expression.TableClause):
    """See :data:`GAP_VALUES`."""

    inherit_cache = True


@compiles(_GapValues)
def _gap_values(element: _GapValues, compiler, **kw) -> str:
    return compiler.visit_table(element, **kw)  # PostgreSQL: the view chunk_gap itself


@compiles(_GapValues, "duckdb")
def _gap_values_duckdb(element: _GapValues, compiler, asfrom: bool = False, **kw) -> str:
    if asfrom:  # the view's rows without their seq: one unnest
        return f"(SELECT artefact_id, request_idx, unnest(gaps) AS gap_s FROM request_gaps) AS {element.name}"
    return compiler.visit_table(element, asfrom=asfrom, **kw)


# The chunk gaps' values for readers that need no ``seq`` (the ITL and decode-rate metrics): the view
# chunk_gap without its seq column. On DuckDB it compiles to one ``unnest`` of request_gaps' arrays,
# since the view's second unnest (its seq) made a scan of 4M gaps ~10x slower than one unnest (and
# than the table it replaced); on PostgreSQL to the view, whose lateral unnest costs what the table did.
GAP_VALUES = _GapValues(
    "chunk_gap",
    sa.column("artefact_id", sa.Integer),
    sa.column("request_idx", sa.Integer),
    sa.column("gap_s", sa.Float),
)


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    """Alembic's filter for ``compare_metadata`` / autogenerate: the views of :data:`VIEWS` are
    mapped as tables but are views in the database (Alembic reflects tables only); an index created on
    one backend only (``ddl_if(dialect=...)``: ``ix_request_run_id``, migration 0015; the
    ``ix_*_supersedes_id`` of migration 0016) is left out too,
    since Alembic compares it on every backend (tests/test_store.py checks where it exists)."""
    if type_ == "index" and name in _ONE_BACKEND_INDEXES:
        return False
    return not (type_ == "table" and name in VIEWS)


# the indexes declared with ddl_if(dialect=...): left out of compare_metadata (see include_object)
_ONE_BACKEND_INDEXES = frozenset(
    ix.name for t in Base.metadata.tables.values() for ix in t.indexes if ix._ddl_if is not None and ix._ddl_if.dialect
)


def create_schema(engine: sa.Engine) -> None:
    """The schema without migrations (a scratch ledger, ``ledger.transfer``): the tables, then the views."""
    Base.metadata.create_all(engine, tables=[t for t in Base.metadata.sorted_tables if t.name not in VIEWS])
    with engine.begin() as conn:
        for sql in VIEWS.values():
            conn.exec_driver_sql(sql[engine.dialect.name])
