"""hardware_sample without PRIMARY KEY and FOREIGN KEY: the importer guarantees them, the seal shows changes.

Maintaining the (artefact_id, line, counter) primary key and the foreign key to ``artefact`` was
most of the time of a dmon import (a day of 16 GPUs is 17M rows); benchmarks/profile_notes.md has
the measurements on both backends. The key stays the row's logical identity (ledger.models
HardwareSample: the ORM's identity, the seal's row order and row names) and is guaranteed by the
importer: one row per physical line and counter of one artefact, column names never repeat.

DuckDB cannot drop a constraint with ALTER TABLE, so the table is recreated on both backends:
create the new table, copy the rows in key order, drop the old one, rename. PostgreSQL's
append-only triggers of migration 0005 go with the dropped table and are created again on the new
one (and on DuckDB where its triggers are supported, as 0005 does). Rows are copied unchanged, so
seals of closed batches still verify.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = "hardware_sample"
NEW = "hardware_sample_0007"
COLUMNS = "artefact_id, line, counter, node, gpu, tick, ts, value, unit"


def _columns() -> list[sa.Column]:
    return [
        sa.Column("artefact_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("counter", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("ts", sa.DateTime(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(), nullable=False),
    ]


def _drop_guards(dialect: str) -> None:
    if dialect == "postgresql":  # a DROP TABLE would drop them too; explicit for the downgrade's sake
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only ON {TABLE}")
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only_truncate ON {TABLE}")


def _create_guards(dialect: str) -> None:
    """The append-only guards of migration 0005 on the recreated table."""
    if dialect == "postgresql":
        op.execute(
            f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
            f"FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )
        op.execute(
            f"CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON {TABLE} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )


def _recreate(*constraints: sa.Constraint) -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(NEW, *_columns(), *constraints)
    op.execute(f"INSERT INTO {NEW} ({COLUMNS}) SELECT {COLUMNS} FROM {TABLE} ORDER BY artefact_id, line, counter")
    _drop_guards(dialect)
    op.drop_table(TABLE)
    op.rename_table(NEW, TABLE)
    if dialect == "postgresql" and constraints:  # constraint names follow the table name
        op.execute(f"ALTER TABLE {TABLE} RENAME CONSTRAINT pk_{NEW} TO pk_{TABLE}")
        op.execute(
            f"ALTER TABLE {TABLE} RENAME CONSTRAINT fk_{NEW}_artefact_id_artefact TO fk_{TABLE}_artefact_id_artefact"
        )
    _create_guards(dialect)


def upgrade() -> None:
    _recreate()


def downgrade() -> None:
    # Back to 0002's table; fails (as it should) if rows now break the key.
    _recreate(
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=f"fk_{NEW}_artefact_id_artefact"),
        sa.PrimaryKeyConstraint("artefact_id", "line", "counter", name=f"pk_{NEW}"),
    )
