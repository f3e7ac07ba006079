"""Captured tables: what raw artefacts contained (``capture``, ``capture_field``, ``request``,
``request_gaps`` read as rows through the view ``chunk_gap``, ``request_value``, ``hardware_sample``,
``log_fact``). Append-only (R9, R10); their rows are keyed by the artefact and a locator inside it, so
every value points back to the bytes it was read from."""

# No `from __future__ import annotations` here: SQLAlchemy reads each `Mapped[...]` annotation of a
# model, and with the annotations kept as strings it evaluates every one of them (a cost of every command
# that opens a ledger). The annotations refer to nothing defined later, so they can be plain objects.

from datetime import datetime
from decimal import Decimal

import sqlalchemy as sa

# the tables these refer to are defined first (the metadata's table order, as before the split)
from bench_ledger.models import declared  # noqa: F401
from bench_ledger.models.base import Base, ExactDecimal, enum_check
from bench_ledger.vocab import REQUEST_VALUE_FLAGS, STATUS
from sqlalchemy.orm import Mapped, mapped_column

__all__ = ["Capture", "CaptureField", "ChunkGap", "HardwareSample", "LogFact", "Request", "RequestGaps", "RequestValue"]


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
    was most of a request import (benchmarks/profile_notes.md has the measurements).
    Instead the importer guarantees them: ``idx`` is the record's position in its artefact
    (numbered across the runs of the artefact), ``artefact_id`` is the artefact row and ``run_id``
    the run (first revision) written in the same transaction. The seal (rows in (artefact_id, idx)
    order) is what shows a later change. The key below is therefore *logical*, as on
    ``HardwareSample``: the ORM's identity, the seal's row order and row names, never DDL.
    """

    __tablename__ = "request"
    __table_args__ = (
        enum_check("status", STATUS, "status"),
        sa.PrimaryKeyConstraint("artefact_id", "idx", name="pk_request").ddl_if(
            callable_=lambda *_a, **_k: False
        ),  # logical key only: not created (migration 0008)
        # PostgreSQL only (migration 0015): on DuckDB the ART index cost insert and commit time
        # (benchmarks/profile_notes.md), while a run's rows are written together, in order, so DuckDB's zone
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
        enum_check("flag", REQUEST_VALUE_FLAGS, "flag"),
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
