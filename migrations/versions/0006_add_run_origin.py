"""Add run.origin_id: corrections of a run keep pointing at the revision its records belong to.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain nullable column: DuckDB cannot add a FOREIGN KEY with ALTER TABLE.
    op.add_column("run", sa.Column("origin_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "origin_id")
