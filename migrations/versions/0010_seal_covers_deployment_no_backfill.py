"""PostgreSQL guards for the deployment a closed batch names, and against backfill (R9, R10).

* ``ledger_sealed_deployment`` (BEFORE UPDATE OR DELETE ON deployment, per row): the seal covers
  the deployments a batch, its runs or its artefacts name (scheme bench-ledger-seal/2), so such a
  deployment is refused once one of those batches is closed.
* ``ledger_no_backfill`` (AFTER INSERT, per statement, on capture, capture_field, request,
  chunk_gap, hardware_sample, log_fact): rows describing an artefact (or a capture) are refused
  unless that artefact (capture) row was written by the same transaction (``xmin`` is the current
  transaction id: the importer writes an artefact and all its rows in one transaction), and refused
  for an artefact of a closed batch. Statement level with a transition table, so a COPY of millions
  of rows runs the check once.

DuckDB 1.5 has no triggers (migration 0005): there the session guards refuse the same through the
ORM and ``ledger verify`` detects raw SQL. Triggers are invisible to ``compare_metadata``.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

PG_FUNCTIONS = r"""
CREATE FUNCTION ledger_guard_sealed_deployment() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  sealed text;
BEGIN
  SELECT b.name INTO sealed FROM batch b
   WHERE b.status = 'closed' AND (b.deployment_id = OLD.id
         OR b.id IN (SELECT r.batch_id FROM run r WHERE r.deployment_id = OLD.id)
         OR b.id IN (SELECT a.batch_id FROM artefact a WHERE a.deployment_id = OLD.id))
   LIMIT 1;
  IF sealed IS NOT NULL THEN
    RAISE EXCEPTION 'refused by R10: % of deployment %: closed batch % names it and is sealed', TG_OP, OLD.name, sealed
      USING ERRCODE = 'raise_exception', HINT = 'declare a new deployment';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;

CREATE FUNCTION ledger_refuse_backfill() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad integer;
BEGIN
  IF TG_TABLE_NAME = 'capture_field' THEN
    SELECT c.id INTO bad FROM (SELECT DISTINCT capture_id FROM new_rows) n
      JOIN capture c ON c.id = n.capture_id JOIN artefact a ON a.id = c.artefact_id
      LEFT JOIN batch b ON b.id = a.batch_id
     WHERE c.xmin <> pg_current_xact_id()::xid OR b.status = 'closed' LIMIT 1;
  ELSE
    SELECT a.id INTO bad FROM (SELECT DISTINCT artefact_id FROM new_rows) n
      JOIN artefact a ON a.id = n.artefact_id LEFT JOIN batch b ON b.id = a.batch_id
     WHERE a.xmin <> pg_current_xact_id()::xid OR b.status = 'closed' LIMIT 1;
  END IF;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'refused by R9: INSERT into % for % %, imported earlier or sealed: no backfill', TG_TABLE_NAME,
      CASE WHEN TG_TABLE_NAME = 'capture_field' THEN 'capture' ELSE 'artefact' END, bad
      USING ERRCODE = 'raise_exception', HINT = 'import a new artefact';
  END IF;
  RETURN NULL;
END $$;
"""

BACKFILL_TABLES = ("capture", "capture_field", "request", "chunk_gap", "hardware_sample", "log_fact")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(PG_FUNCTIONS)
    op.execute(
        "CREATE TRIGGER ledger_sealed_deployment BEFORE UPDATE OR DELETE ON deployment "
        "FOR EACH ROW EXECUTE FUNCTION ledger_guard_sealed_deployment()"
    )
    for table in BACKFILL_TABLES:
        op.execute(
            f"CREATE TRIGGER ledger_no_backfill AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
            f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_backfill()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in BACKFILL_TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS ledger_no_backfill ON {table}")
    op.execute("DROP TRIGGER IF EXISTS ledger_sealed_deployment ON deployment")
    op.execute("DROP FUNCTION IF EXISTS ledger_refuse_backfill()")
    op.execute("DROP FUNCTION IF EXISTS ledger_guard_sealed_deployment()")
