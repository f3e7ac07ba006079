"""Declared tables: what describes the world around the captures (``source_report``, ``deployment``,
``artefact``, ``launch``, ``batch``, ``run``, ``published_value``). Correctable ones (launch, run,
published value) carry ``revision``, ``supersedes_id`` and ``correction_reason``: a correction is a new
row with the next revision, never an edit (R10)."""

# No `from __future__ import annotations` here: SQLAlchemy reads each `Mapped[...]` annotation of a
# model, and with the annotations kept as strings it evaluates every one of them (a cost of every command
# that opens a ledger). The annotations refer to nothing defined later, so they can be plain objects.

from datetime import date, datetime
from decimal import Decimal

import sqlalchemy as sa
from bench_ledger.models.base import Base, ExactDecimal, enum_check, superseded_index
from bench_ledger.vocab import PROVENANCE, WARM
from sqlalchemy.orm import Mapped, mapped_column

__all__ = ["Artefact", "Batch", "Deployment", "Launch", "PublishedValue", "Run", "SourceReport"]


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
        enum_check("outcome", ("ready", "failed", "unknown"), "outcome"),
        sa.UniqueConstraint("deployment_id", "attempt", "revision"),
        superseded_index("launch"),
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
    __table_args__ = (enum_check("status", ("open", "closed"), "status"),)

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
        *(enum_check(f"warm_{d}", WARM, f"warm_{d}") for d in ("prefix_cache", "process", "compile", "file_cache")),
        superseded_index("run"),
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
    __table_args__ = (enum_check("flag", PROVENANCE, "flag"), superseded_index("published_value"))

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
