"""ix_request_run_id on PostgreSQL only: DuckDB drops it (issue 17).

On DuckDB the ART index on ``request.run_id`` cost ~0.2 s of the insert and 0.3-0.6 s of the commit
of a 1M-request import (without it the commit took 0.01-0.03 s; benchmarks/profile_notes.md, notes
19 and 24). DuckDB needs no index to find a run's requests: an import writes a run's rows together
and in order, so the zone maps (min/max of ``run_id`` per row group of 122,880 rows) leave only the
row groups that hold the run, and a run's reads (metrics, audit, ``ledger check``, the listings)
measured the same without it (note 24). PostgreSQL keeps its btree (its heap has no zone maps).

The downgrade creates the index again on DuckDB.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "duckdb":
        op.drop_index("ix_request_run_id", table_name="request")


def downgrade() -> None:
    if op.get_bind().dialect.name == "duckdb":
        op.create_index("ix_request_run_id", "request", ["run_id"], unique=False)
