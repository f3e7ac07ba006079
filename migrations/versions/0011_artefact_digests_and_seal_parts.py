"""Per-artefact digests at import and the parts of a scheme-3 seal (bench-ledger-seal/3).

* ``artefact_digest``: for every artefact and captured table, the row count, the root and the
  concatenated 32-byte chunk digests of its rows (ledger.digest), written in the artefact's own
  import transaction; ``ledger verify`` recomputes them for open batches too.
* ``seal_part``: for every part of a sealed batch (a declared table of the batch, or a table of
  one of its artefacts; ``artefact_id`` 0 for declared parts) and chunk of 4096 rows: the chunk
  digest, the rows' primary keys and 64-bit fingerprints (to name rows that changed).

Both are append-only: on PostgreSQL the triggers of migration 0005 (``ledger_append_only``,
``ledger_append_only_truncate``) are created on them too, and migration 0010's ``ledger_no_backfill``
on ``artefact_digest`` (only the artefact's own import transaction writes its digest).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLES = ("artefact_digest", "seal_part")


def upgrade() -> None:
    op.create_table(
        "artefact_digest",
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.String(length=64), nullable=False),
        sa.Column("chunks", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_artefact_digest_artefact_id_artefact")),
        sa.PrimaryKeyConstraint("artefact_id", "table_name", name=op.f("pk_artefact_digest")),
    )
    op.create_table(
        "seal_part",
        sa.Column("seal_id", sa.Integer(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("chunk_no", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("keys", sa.LargeBinary(), nullable=False),
        sa.Column("fingerprints", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["seal_id"], ["seal.id"], name=op.f("fk_seal_part_seal_id_seal")),
        sa.PrimaryKeyConstraint("seal_id", "table_name", "artefact_id", "chunk_no", name=op.f("pk_seal_part")),
    )
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('R10')"
            )
            op.execute(
                f"CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R10')"
            )
        # an artefact's digest is written by its own import only (migration 0010's no-backfill rule)
        op.execute(
            "CREATE TRIGGER ledger_no_backfill AFTER INSERT ON artefact_digest REFERENCING NEW TABLE AS new_rows "
            "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_backfill()"
        )


def downgrade() -> None:
    op.drop_table("seal_part")
    op.drop_table("artefact_digest")
