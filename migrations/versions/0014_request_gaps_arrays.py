"""request_gaps: the chunk gaps of a request as one array; chunk_gap becomes a view of the same rows.

A vLLM import of 1M requests with 4 gaps each wrote 4M ``chunk_gap`` rows beside the 1M request rows:
flattening the tool's per-request lists into (request_idx, seq, gap_s) rows, inserting (COPYing) and
hashing them were a large share of the import (benchmarks/profile_notes.md, issue 17). Now a request's
gaps are one row of ``request_gaps (artefact_id, request_idx, gaps)``, ``gaps`` an array in stream
order (DuckDB ``DOUBLE[]``, PostgreSQL ``double precision[]``), written straight from the list column
the importers already hold; a request without gaps has no row, as it had no chunk_gap row.
``chunk_gap`` is a VIEW with the old columns (artefact_id, request_idx, seq, gap_s): element k of
the array is the row with seq = k (DuckDB ``unnest`` beside ``generate_subscripts``; PostgreSQL
``unnest WITH ORDINALITY``), so every reader (ITL metrics, ``ledger check``, export, report, the
seal) reads the same rows as before, and seals made before this revision verify unchanged: scheme 3
hashes the view's rows with the same encoding (ledger.seal3, ledger.digest, docs/seals.md).

Upgrade: refuse a ledger whose gaps of a request are not numbered 0, 1, ... without a hole (the
arrays could not hold them, and renumbering would change sealed rows: fail closed, naming the
artefact and request); create ``request_gaps`` (no PRIMARY or FOREIGN KEY: a bulk table like
request, migration 0008; (artefact_id, request_idx) is its logical key, ledger.models.RequestGaps),
copy the gaps aggregated in seq order, in key order, drop the table ``chunk_gap`` (its triggers go
with it) and create the view. On PostgreSQL the guards of migrations 0005 and 0010 are then created
on ``request_gaps`` (after the copy: the backfill guard refuses rows of artefacts of earlier
transactions): append-only (``ledger_append_only``, ``ledger_append_only_truncate``, R9) and no
backfill (``ledger_no_backfill``). The view needs none: PostgreSQL cannot update or delete through
a view with a lateral unnest, and its rows are request_gaps' own.

The downgrade turns the view's rows back into the keyless table of 0008 with its guards.

Frozen: this revision imports nothing of the package; the view's SQL is the same as
``ledger.models.VIEWS`` (a test compares them).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

VIEW_SQL = {
    "duckdb": (
        "CREATE VIEW chunk_gap AS SELECT artefact_id, request_idx, "
        "CAST(generate_subscripts(gaps, 1) - 1 AS INTEGER) AS seq, unnest(gaps) AS gap_s FROM request_gaps"
    ),
    "postgresql": (
        "CREATE VIEW chunk_gap AS SELECT g.artefact_id, g.request_idx, CAST(u.k - 1 AS INTEGER) AS seq, "
        "u.gap_s FROM request_gaps g CROSS JOIN LATERAL unnest(g.gaps) WITH ORDINALITY AS u(gap_s, k)"
    ),
}

# the first request whose gap rows are not seq 0..n-1 (a hole, a duplicate, a negative seq), if any
_HOLES = (
    "SELECT artefact_id, request_idx FROM chunk_gap GROUP BY artefact_id, request_idx "
    "HAVING min(seq) <> 0 OR max(seq) <> count(*) - 1 OR count(DISTINCT seq) <> count(*) "
    "ORDER BY artefact_id, request_idx LIMIT 1"
)


def _refusal(artefact: str, request: str) -> str:
    """SQL of the refusal's text naming the artefact and request (concatenation: no ``%``, which the
    drivers' parameter styles would read)."""
    return (
        f"'chunk_gap rows of artefact ' || CAST({artefact} AS VARCHAR) || ' request ' || CAST({request} AS VARCHAR) || "
        "' are not numbered 0, 1, ... without a hole: they cannot become one array; nothing was migrated "
        "(restore the rows: `ledger verify` names them)'"
    )


def _refuse_holes(dialect: str) -> None:
    """Fail (a database error: the store reports it, nothing is migrated) if a request's gaps have holes."""
    if dialect == "postgresql":
        op.execute(
            "DO $$ DECLARE a integer; r integer; BEGIN "
            f"SELECT artefact_id, request_idx INTO a, r FROM ({_HOLES}) h; "
            f"IF a IS NOT NULL THEN RAISE EXCEPTION USING MESSAGE = {_refusal('a', 'r')}; END IF; END $$"
        )
    else:
        op.execute(f"SELECT error({_refusal('artefact_id', 'request_idx')}) FROM ({_HOLES}) h")


def _guards(table: str) -> None:
    op.execute(
        f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('R9')"
    )
    op.execute(
        f"CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R9')"
    )
    op.execute(
        f"CREATE TRIGGER ledger_no_backfill AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_backfill()"
    )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _refuse_holes(dialect)
    op.create_table(
        "request_gaps",
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("request_idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("gaps", sa.ARRAY(sa.Float()), nullable=False),
    )
    agg = "array_agg(gap_s ORDER BY seq)" if dialect == "postgresql" else "list(gap_s ORDER BY seq)"
    op.execute(
        f"INSERT INTO request_gaps (artefact_id, request_idx, gaps) SELECT artefact_id, request_idx, {agg} "
        "FROM chunk_gap GROUP BY artefact_id, request_idx ORDER BY artefact_id, request_idx"
    )
    op.drop_table("chunk_gap")
    op.execute(VIEW_SQL[dialect])
    if dialect == "postgresql":
        _guards("request_gaps")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "chunk_gap_0014",
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("request_idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("gap_s", sa.Float(), nullable=False),
    )
    op.execute(
        "INSERT INTO chunk_gap_0014 (artefact_id, request_idx, seq, gap_s) "
        "SELECT artefact_id, request_idx, seq, gap_s FROM chunk_gap ORDER BY artefact_id, request_idx, seq"
    )
    op.execute("DROP VIEW chunk_gap")
    op.drop_table("request_gaps")  # its triggers go with it
    op.rename_table("chunk_gap_0014", "chunk_gap")
    if dialect == "postgresql":
        _guards("chunk_gap")
