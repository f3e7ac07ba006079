"""Add launch.label: the name a benchmark tool's output gives the server launch its runs ran against
(an inference-perf report folder, a vLLM sweep's SERVE setting), so imports record one launch row per
such launch and a run names its launch by (deployment, label) (run.metadata.launch).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain nullable column (DuckDB cannot add constraints with ALTER TABLE); one current launch per
    # (deployment, label) is kept by the importer (ledger.ingest).
    op.add_column("launch", sa.Column("label", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("launch", "label")
