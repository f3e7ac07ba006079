"""Database guards: append-only captured tables and closed batches (R9, R10), where the database can.

PostgreSQL: BEFORE UPDATE OR DELETE row triggers and BEFORE TRUNCATE statement triggers on the
captured tables and the seal tables; on declared tables, triggers that refuse inserting, updating
or deleting runs, artefacts and published values of a closed batch, any change to a closed batch
(reopening included), and any launch update other than linking its server log. Every message
starts with ``refused by R9`` or ``refused by R10`` and names the table.

DuckDB 1.x has no CREATE TRIGGER at all (probed by ``tests/ledger/test_guards.py``), so nothing is created
there and the seal (`ledger verify`) is what detects a change. Triggers are invisible to
``compare_metadata``. Frozen: this revision imports nothing of the package, so later edits of the
code cannot change what it does.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

CAPTURED = ("artefact", "capture", "capture_field", "request", "chunk_gap", "hardware_sample", "log_fact")
SEALS = ("seal", "seal_chunk")

PG_FUNCTIONS = r"""
CREATE FUNCTION ledger_refuse_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'refused by %: % of %: rows of this table are append-only (captured data and seals are never changed)',
    TG_ARGV[0], TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'raise_exception', HINT = 'import a new artefact; a correction is a new row';
END $$;

CREATE FUNCTION ledger_guard_closed_batch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  ids integer[] := ARRAY[]::integer[];
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    ids := ids || OLD.batch_id;
    IF TG_TABLE_NAME = 'published_value' THEN  -- nested: OLD.run_id exists on this table only
      IF OLD.run_id IS NOT NULL THEN
        ids := ids || (SELECT batch_id FROM run WHERE id = OLD.run_id);
      END IF;
    END IF;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    ids := ids || NEW.batch_id;
    IF TG_TABLE_NAME = 'published_value' THEN  -- nested: NEW.run_id exists on this table only
      IF NEW.run_id IS NOT NULL THEN
        ids := ids || (SELECT batch_id FROM run WHERE id = NEW.run_id);
      END IF;
    END IF;
  END IF;
  IF EXISTS (SELECT 1 FROM batch WHERE id = ANY(ids) AND status = 'closed') THEN
    RAISE EXCEPTION 'refused by R10: % of % in a closed batch: a closed batch is immutable', TG_OP, TG_TABLE_NAME
      USING ERRCODE = 'raise_exception', HINT = 'import into a new batch';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;

CREATE FUNCTION ledger_guard_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.status = 'closed' THEN
    RAISE EXCEPTION 'refused by R10: % of batch % (closed): a closed batch stays closed and unchanged', TG_OP, OLD.name
      USING ERRCODE = 'raise_exception';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  IF NEW.status = 'closed' AND (NEW.seal_digest IS NULL OR NEW.closed_at IS NULL) THEN
    RAISE EXCEPTION 'refused by R10: closing batch % without a seal', OLD.name USING ERRCODE = 'raise_exception';
  END IF;
  RETURN NEW;
END $$;

CREATE FUNCTION ledger_guard_launch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.log_artefact_id IS NULL AND NEW.log_artefact_id IS NOT NULL
     AND (to_jsonb(NEW) - 'log_artefact_id') = (to_jsonb(OLD) - 'log_artefact_id') THEN
    RETURN NEW;  -- linking the server log of the launch (ledger.ingest)
  END IF;
  RAISE EXCEPTION 'refused by R10: % of launch: a launch is corrected by a new revision, not edited', TG_OP
    USING ERRCODE = 'raise_exception';
END $$;
"""


def _pg_upgrade() -> None:
    op.execute(PG_FUNCTIONS)
    for table in CAPTURED + SEALS:
        rule = "R9" if table in CAPTURED else "R10"
        op.execute(
            f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('{rule}')"
        )
        op.execute(
            f"CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('{rule}')"
        )
    for table in ("run", "published_value", "artefact"):
        op.execute(
            f"CREATE TRIGGER ledger_closed_batch BEFORE INSERT OR UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ledger_guard_closed_batch()"
        )
    op.execute(
        "CREATE TRIGGER ledger_closed_batch BEFORE UPDATE OR DELETE ON batch "
        "FOR EACH ROW EXECUTE FUNCTION ledger_guard_batch()"
    )
    op.execute(
        "CREATE TRIGGER ledger_closed_batch_truncate BEFORE TRUNCATE ON batch "
        "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R10')"
    )
    op.execute(
        "CREATE TRIGGER ledger_launch BEFORE UPDATE OR DELETE ON launch "
        "FOR EACH ROW EXECUTE FUNCTION ledger_guard_launch()"
    )


def _pg_downgrade() -> None:
    for table in CAPTURED + SEALS:
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only_truncate ON {table}")
    for table in ("run", "published_value", "artefact", "batch"):
        op.execute(f"DROP TRIGGER IF EXISTS ledger_closed_batch ON {table}")
    op.execute("DROP TRIGGER IF EXISTS ledger_closed_batch_truncate ON batch")
    op.execute("DROP TRIGGER IF EXISTS ledger_launch ON launch")
    for fn in (
        "ledger_refuse_append_only()",
        "ledger_guard_closed_batch()",
        "ledger_guard_batch()",
        "ledger_guard_launch()",
    ):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _pg_upgrade()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _pg_downgrade()
