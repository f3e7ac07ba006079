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

Modules: :mod:`~ledger.models.base` (the base, types, key columns), :mod:`~ledger.models.declared`,
:mod:`~ledger.models.captured`, :mod:`~ledger.models.seals` (the tables), :mod:`~ledger.models.schema`
(captured tables and views, Alembic's filter, the schema without migrations).
"""

from bench_ledger.models.base import Base, ExactDecimal, enum_values, key_columns
from bench_ledger.models.captured import (
    Capture,
    CaptureField,
    ChunkGap,
    HardwareSample,
    LogFact,
    Request,
    RequestGaps,
    RequestValue,
)
from bench_ledger.models.declared import Artefact, Batch, Deployment, Launch, PublishedValue, Run, SourceReport
from bench_ledger.models.schema import CAPTURED_TABLES, CAPTURED_VIEWS, GAP_VALUES, VIEWS, create_schema, include_object
from bench_ledger.models.seals import ArtefactDigest, DeclaredDigest, Seal, SealChunk, SealPart

__all__ = [
    "CAPTURED_TABLES",
    "CAPTURED_VIEWS",
    "GAP_VALUES",
    "VIEWS",
    "Artefact",
    "ArtefactDigest",
    "Base",
    "Batch",
    "Capture",
    "CaptureField",
    "ChunkGap",
    "DeclaredDigest",
    "Deployment",
    "ExactDecimal",
    "HardwareSample",
    "Launch",
    "LogFact",
    "PublishedValue",
    "Request",
    "RequestGaps",
    "RequestValue",
    "Run",
    "Seal",
    "SealChunk",
    "SealPart",
    "SourceReport",
    "create_schema",
    "enum_values",
    "include_object",
    "key_columns",
]
