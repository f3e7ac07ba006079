"""Declared rows tamper-evident while their batch is open (issue 39, R10).

A declared row (``source_report``, ``deployment``, ``launch``, ``batch``, ``run``, ``published_value``)
is corrected by a new revision, never edited; the ledger itself changes one in place only where it
fills in what it did not know yet (an import's run learning its settings, a launch's server log, a
batch being closed).

* PostgreSQL: ``ledger_writer_only`` (BEFORE UPDATE OR DELETE, per row; BEFORE TRUNCATE, per statement)
  refuses the change unless the transaction is one of the ledger's own: the ledger sets the
  transaction-local ``bench_ledger.writer`` to ``on`` in every transaction it writes in
  (``ledger.guards``); raw SQL from any other client does not. TRUNCATE is refused always.
* Both backends: ``declared_digest`` (table, row id, SHA-256 of the row's canonical form, every
  column) is written by the ledger at each write on DuckDB, which has no triggers, so ``ledger
  verify`` names a declared row changed, deleted or added behind it, and ``ledger close`` refuses to
  seal one. Rows written before this revision have no digest: verify says they were not checked.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

DECLARED = ("source_report", "deployment", "launch", "batch", "run", "published_value")

PG_FUNCTION = r"""
CREATE FUNCTION ledger_guard_declared() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_LEVEL = 'STATEMENT' OR current_setting('bench_ledger.writer', true) IS DISTINCT FROM 'on' THEN
    RAISE EXCEPTION 'refused by R10: % of %: declared rows are changed only by the ledger (a correction is a new revision)',
      TG_OP, TG_TABLE_NAME
      USING ERRCODE = 'raise_exception', HINT = 'record a correction: ledger correct TABLE ID --set FIELD=VALUE --reason ...';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;
"""


def upgrade() -> None:
    op.create_table(
        "declared_digest",
        sa.Column("table_name", sa.String(length=64), nullable=False),
        sa.Column("row_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("table_name", "row_id", name=op.f("pk_declared_digest")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(PG_FUNCTION)
    for table in DECLARED:
        op.execute(
            f"CREATE TRIGGER ledger_writer_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ledger_guard_declared()"
        )
        op.execute(
            f"CREATE TRIGGER ledger_writer_only_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_guard_declared()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in DECLARED:
            op.execute(f"DROP TRIGGER IF EXISTS ledger_writer_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS ledger_writer_only_truncate ON {table}")
        op.execute("DROP FUNCTION IF EXISTS ledger_guard_declared()")
    op.drop_table("declared_digest")
