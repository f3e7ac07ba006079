"""The seal tables (R10): the seal of each closed batch and what verify needs to name changed rows
(``seal``, ``seal_chunk``, ``seal_part``), and the digests kept while a batch is open
(``artefact_digest``, ``declared_digest``)."""

# No `from __future__ import annotations` here: SQLAlchemy reads each `Mapped[...]` annotation of a
# model, and with the annotations kept as strings it evaluates every one of them (a cost of every command
# that opens a ledger). The annotations refer to nothing defined later, so they can be plain objects.

from datetime import datetime

import sqlalchemy as sa
from bench_ledger.models.base import Base
from sqlalchemy.orm import Mapped, mapped_column

__all__ = ["ArtefactDigest", "DeclaredDigest", "Seal", "SealChunk", "SealPart"]


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

    ``chunks`` is the concatenated 32-byte SHA-256 of each chunk of 4096 rows (ledger.encoding.chunks);
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
