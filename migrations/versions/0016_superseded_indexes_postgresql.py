"""Indexes of the superseding rows on PostgreSQL (issue 17: the read side interactive).

``books.current`` -- a row is current when no row supersedes it -- is an anti-join on
``supersedes_id = id`` of run, published_value and launch. Right after an import of fewer than 100k
rows (the store runs ANALYZE only after larger ones) PostgreSQL estimated one row per table and
planned that anti-join as a nested loop over a sequential scan: ``ledger check`` of one guidellm
file (3,645 published values) spent 1.7 s in it, 12.3M rows compared, growing with the square of
the values a batch holds. A partial index on ``supersedes_id`` (only the corrections, NULL for every
imported row, so an import does not maintain it) makes each probe an index lookup: 8 ms.
DuckDB plans the anti-join as a hash join and gets none (its ART indexes cost imports; migration 0015).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("run", "published_value", "launch")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.create_index(
                f"ix_{table}_supersedes_id",
                table,
                ["supersedes_id"],
                postgresql_where=sa.text("supersedes_id IS NOT NULL"),
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.drop_index(f"ix_{table}_supersedes_id", table_name=table)
