"""ix_request_run_id on PostgreSQL as a BRIN index instead of a btree (issue 17: the import).

A btree entry per request row was the largest share of the server's work in a request import after
the heap itself: a binary COPY of 256,000 ledger-format requests into a fresh ledger took 0.43 s with
the btree, 0.27 s without any index and 0.31 s with a BRIN index (two rounds each, the same rows;
benchmarks/profile_notes.md, note 44). An import writes a run's rows together and in order, so
the request heap is ordered by ``run_id`` in long stretches, and a block-range summary (min/max of
``run_id`` per 32 pages, ~2,000 rows) finds a run's rows as the btree did, reading a range or two
per run instead of its index entries. Ranges filled since the last summary are read by every
scoped query until they are summarised: ``autosummarize`` queues that work for autovacuum as a range
fills, and the store summarises them after a large import (``Ledger.refresh_statistics``).

DuckDB has no such index (migration 0015: its zone maps do the same). The downgrade restores the btree.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# frozen here; the models declare the same (models.Request)
PAGES_PER_RANGE = 32


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_request_run_id", table_name="request")
        op.create_index(
            "ix_request_run_id",
            "request",
            ["run_id"],
            postgresql_using="brin",
            postgresql_with={"pages_per_range": PAGES_PER_RANGE, "autosummarize": "on"},
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_request_run_id", table_name="request")
        op.create_index("ix_request_run_id", "request", ["run_id"], unique=False)
