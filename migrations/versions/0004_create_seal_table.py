"""Create the seal tables: one seal per closed batch, and the leaf hashes that let verify name rows.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("merkle_root", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("previous_digest", sa.String(length=64), nullable=False),
        sa.Column("closed_at", sa.DateTime(), nullable=False),
        sa.Column("table_counts", sa.String(), nullable=False),
        sa.Column("table_roots", sa.String(), nullable=False),
        sa.Column("scheme", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name=op.f("fk_seal_batch_id_batch")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seal")),
        sa.UniqueConstraint("batch_id", name=op.f("uq_seal_batch_id")),
        sa.UniqueConstraint("digest", name=op.f("uq_seal_digest")),
    )
    op.create_table(
        "seal_chunk",
        sa.Column("seal_id", sa.Integer(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("chunk_no", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("keys_json", sa.String(), nullable=False),
        sa.Column("leaves", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["seal_id"], ["seal.id"], name=op.f("fk_seal_chunk_seal_id_seal")),
        sa.PrimaryKeyConstraint("seal_id", "table_name", "chunk_no", name=op.f("pk_seal_chunk")),
    )


def downgrade() -> None:
    op.drop_table("seal_chunk")
    op.drop_table("seal")
