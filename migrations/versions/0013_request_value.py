"""request_value: the per-request values a tool wrote that have no column of ``request`` (issue 14).

llmperf's ``request_output_throughput_token_per_s``, guidellm's ``time_per_output_token_ms``,
``inter_token_latency_ms``, ``total_tokens``, ``info.timings.request_iterations`` and its per-request
text counts were thrown away at import, so the tools' statistics over them could not be recomputed.
One row per request and key, in long form like ``hardware_sample``: ``(artefact_id, request_idx,
key, value, flag)``; ``flag`` is ``measured`` (a count or time the tool measured) or ``reported``
(a value the tool computed per request from its measurements).

A bulk table like ``chunk_gap`` (migration 0008): no PRIMARY KEY and no FOREIGN KEY in the
database; (artefact_id, request_idx, key) is the logical key (ledger.models.RequestValue), which the
importer guarantees (one value per record and key, written with its request in the artefact's own
import transaction). On PostgreSQL the guards of migrations 0005 and 0010 are created on it:
append-only (``ledger_append_only``, ``ledger_append_only_truncate``, rule R9) and no backfill
(``ledger_no_backfill``). The seal (scheme 3) covers its rows as an artefact part that enters the
artefact digest only when the artefact has such rows, so digests and seals made before this
revision verify unchanged (docs/seals.md).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_value",
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("request_idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("flag", sa.String(), nullable=False),
        sa.CheckConstraint("flag IN ('measured', 'reported')", name=op.f("ck_request_value_flag")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON request_value "
            "FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )
        op.execute(
            "CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON request_value "
            "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )
        op.execute(
            "CREATE TRIGGER ledger_no_backfill AFTER INSERT ON request_value REFERENCING NEW TABLE AS new_rows "
            "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_backfill()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS ledger_no_backfill ON request_value")
        op.execute("DROP TRIGGER IF EXISTS ledger_append_only_truncate ON request_value")
        op.execute("DROP TRIGGER IF EXISTS ledger_append_only ON request_value")
    op.drop_table("request_value")
