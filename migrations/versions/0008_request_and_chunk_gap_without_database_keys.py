"""request and chunk_gap without database keys: the importer guarantees them, the seal shows changes.

Maintaining the keys of ``request`` (PRIMARY KEY (artefact_id, idx), FOREIGN KEYs to ``artefact``
and ``run``) and ``chunk_gap`` (PRIMARY KEY (artefact_id, request_idx, seq), FOREIGN KEY
(artefact_id, request_idx) -> request) was ~77% (DuckDB) and ~85% (PostgreSQL) of importing 1M
vLLM requests. Both tables lose their foreign keys, and chunk_gap its primary key, as
hardware_sample did in 0007.

request's PRIMARY KEY was measured on its own (benchmarks/profile_notes.md, "request and
chunk_gap keys"): 200k requests into a table keeping the ix_request_run_id index, best of 3, with
the primary key vs without: DuckDB 0.42 s vs 0.33 s (the key is 22% of the insert), PostgreSQL
COPY 1.22 s vs 0.86 s (30%). The rule was to keep it only if it costs < 20% on both backends, so
it is dropped too. The ix_request_run_id index (the views and metrics select requests by run) is
kept. The keys stay the rows' logical identity (ledger.models Request and ChunkGap: the ORM's
identity, the seal's row order and row names) and are guaranteed by the importer: ``idx`` is the
record's position in its artefact, numbered across the artefact's runs; the gaps of a request
come from that request's record, numbered seq = 0, 1, ...; artefact and run rows are written in
the same transaction.

DuckDB cannot drop a constraint with ALTER TABLE, so both tables are recreated on both backends
(chunk_gap first: the request it references cannot be dropped while its foreign key exists):
create the new table, copy the rows in key order, drop the old one, rename, re-create
ix_request_run_id. The downgrade renames the keyless table away first and creates the keyed one
under its own name (see ``_restore``: DuckDB keeps a stale record of a renamed foreign key). The views v_run_requests and v_run_metrics of migration 0003 read ``request``
(PostgreSQL refuses to drop a table a view depends on), so they are dropped first and re-created
from a literal copy of 0003's SQL at the end. PostgreSQL's append-only triggers of migration 0005 go with the
dropped tables and are created again on the new ones (and on DuckDB where its triggers are
supported, as 0005 does). Rows are copied unchanged, so seals of closed batches still verify.
The downgrade restores every key (request first, then chunk_gap with its foreign key) and fails,
as it should, if rows now break one.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

REQUEST_COLUMNS = (
    "artefact_id, idx, run_id, line, status, error, retries, input_tokens, output_tokens, clock, send_ns, "
    "first_token_ns, end_ns, ttft_s, latency_s, queue_s, itl_mean_s, chunk_count, cached_tokens"
)
GAP_COLUMNS = "artefact_id, request_idx, seq, gap_s"


def _request_columns() -> list[sa.schema.SchemaItem]:
    return [
        sa.Column("artefact_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("clock", sa.String(), nullable=True),
        sa.Column("send_ns", sa.BigInteger(), nullable=True),
        sa.Column("first_token_ns", sa.BigInteger(), nullable=True),
        sa.Column("end_ns", sa.BigInteger(), nullable=True),
        sa.Column("ttft_s", sa.Float(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=True),
        sa.Column("queue_s", sa.Float(), nullable=True),
        sa.Column("itl_mean_s", sa.Float(), nullable=True),
        sa.Column("chunk_count", sa.Integer(), nullable=True),
        sa.Column("cached_tokens", sa.Integer(), nullable=True),
        sa.CheckConstraint("status IN ('ok', 'failed', 'unknown')", name=op.f("ck_request_status")),
    ]


def _gap_columns() -> list[sa.schema.SchemaItem]:
    return [
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("request_idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("gap_s", sa.Float(), nullable=False),
    ]


# Migration 0003's views, copied literally (a revision is a frozen snapshot: it loads no other file).
V_RUN_REQUESTS = """
CREATE VIEW v_run_requests AS
SELECT
    r.id AS run_id,
    b.name AS batch,
    r.label AS run_label,
    r.revision AS run_revision,
    COUNT(q.idx) AS requests,
    SUM(CASE WHEN q.status = 'ok' THEN 1 ELSE 0 END) AS requests_ok,
    SUM(CASE WHEN q.status = 'failed' THEN 1 ELSE 0 END) AS requests_failed,
    SUM(CASE WHEN q.status = 'unknown' THEN 1 ELSE 0 END) AS requests_unknown,
    SUM(CASE WHEN q.status = 'ok' THEN q.input_tokens END) AS input_tokens_ok,
    SUM(CASE WHEN q.status = 'ok' THEN q.output_tokens END) AS output_tokens_ok,
    SUM(CASE WHEN q.status = 'ok' AND q.input_tokens IS NULL THEN 1 ELSE 0 END) AS ok_without_input_tokens,
    SUM(CASE WHEN q.status = 'ok' AND q.output_tokens IS NULL THEN 1 ELSE 0 END) AS ok_without_output_tokens,
    MIN(q.send_ns) AS first_send_ns,
    MAX(q.end_ns) AS last_end_ns,
    COUNT(DISTINCT q.clock) AS clocks,
    MIN(q.clock) AS clock,
    (SELECT COUNT(*) FROM capture c WHERE c.run_id = r.id AND c.sampled) AS sampled_captures
FROM run r
JOIN batch b ON b.id = r.batch_id
LEFT JOIN request q ON q.run_id = r.id
GROUP BY r.id, b.name, r.label, r.revision
"""

V_RUN_METRICS = """
CREATE VIEW v_run_metrics AS
SELECT
    run_id, batch, run_label, requests, requests_ok, requests_failed, requests_unknown,
    input_tokens_ok, output_tokens_ok, wall_clock_s,
    CASE WHEN complete THEN 60 * CAST(input_tokens_ok + output_tokens_ok AS DOUBLE PRECISION) / wall_clock_s END
        AS total_tpm,
    CASE WHEN complete THEN 60 * CAST(output_tokens_ok AS DOUBLE PRECISION) / wall_clock_s END AS output_tpm,
    CASE WHEN complete THEN CAST(output_tokens_ok AS DOUBLE PRECISION) / wall_clock_s END AS output_tokens_per_s
FROM (
    SELECT
        v.*,
        CASE WHEN v.clocks = 1 AND v.last_end_ns > v.first_send_ns AND v.sampled_captures = 0
             THEN CAST(v.last_end_ns - v.first_send_ns AS DOUBLE PRECISION) / CAST(1000000000 AS DOUBLE PRECISION)
        END AS wall_clock_s,
        (v.requests_ok > 0 AND v.ok_without_input_tokens = 0 AND v.ok_without_output_tokens = 0
         AND v.sampled_captures = 0 AND v.clocks = 1 AND v.last_end_ns > v.first_send_ns) AS complete
    FROM v_run_requests v
) t
"""


def _drop_guards(dialect: str, table: str) -> None:
    if dialect == "postgresql":  # a DROP TABLE would drop them too; explicit for the downgrade's sake
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS ledger_append_only_truncate ON {table}")


def _create_guards(dialect: str, table: str) -> None:
    """The append-only guards of migration 0005 on a recreated table."""
    if dialect == "postgresql":
        op.execute(
            f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )
        op.execute(
            f"CREATE TRIGGER ledger_append_only_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_append_only('R9')"
        )


def _recreate(table: str, columns: list[sa.schema.SchemaItem], copied: str, order: str) -> None:
    """Upgrade, as 0007: create ``{table}_0008`` (no keys), copy the rows in key order, drop, rename."""
    dialect = op.get_bind().dialect.name
    new = f"{table}_0008"
    op.create_table(new, *columns)
    op.execute(f"INSERT INTO {new} ({copied}) SELECT {copied} FROM {table} ORDER BY {order}")
    _drop_guards(dialect, table)
    op.drop_table(table)
    op.rename_table(new, table)
    _create_guards(dialect, table)


def _restore(
    table: str, columns: list[sa.schema.SchemaItem], copied: str, order: str, *constraints: sa.Constraint
) -> None:
    """Downgrade: rename the keyless table away, create ``table`` with its keys, copy, drop the old one.

    Not create-then-rename as in the upgrade: DuckDB does not update the referenced table's record of
    a FOREIGN KEY when the referencing table is renamed, so a renamed table with a foreign key would
    leave ``request`` (or ``artefact``, ``run``) naming a table that no longer exists, and the next
    upgrade could not drop ``request``. The constraints get their final names directly."""
    dialect = op.get_bind().dialect.name
    old = f"{table}_0008"
    _drop_guards(dialect, table)
    op.rename_table(table, old)
    op.create_table(table, *columns, *constraints)
    op.execute(f"INSERT INTO {table} ({copied}) SELECT {copied} FROM {old} ORDER BY {order}")
    op.drop_table(old)
    _create_guards(dialect, table)


def _drop_views() -> None:
    op.execute("DROP VIEW IF EXISTS v_run_metrics")
    op.execute("DROP VIEW IF EXISTS v_run_requests")


def _create_views() -> None:
    op.execute(V_RUN_REQUESTS)
    op.execute(V_RUN_METRICS)


def upgrade() -> None:
    _drop_views()
    # chunk_gap first: its foreign key references request
    _recreate("chunk_gap", _gap_columns(), GAP_COLUMNS, "artefact_id, request_idx, seq")
    _recreate("request", _request_columns(), REQUEST_COLUMNS, "artefact_id, idx")
    op.create_index(op.f("ix_request_run_id"), "request", ["run_id"], unique=False)
    _create_views()


def downgrade() -> None:
    # Back to 0002's tables; fails (as it should) if rows now break a key.
    _drop_views()
    op.drop_index(op.f("ix_request_run_id"), table_name="request")  # DuckDB renames no table with an index
    _restore(
        "request",
        _request_columns(),
        REQUEST_COLUMNS,
        "artefact_id, idx",
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_request_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_request_run_id_run")),
        sa.PrimaryKeyConstraint("artefact_id", "idx", name=op.f("pk_request")),
    )
    op.create_index(op.f("ix_request_run_id"), "request", ["run_id"], unique=False)
    _restore(  # after request: its foreign key needs request's primary key
        "chunk_gap",
        _gap_columns(),
        GAP_COLUMNS,
        "artefact_id, request_idx, seq",
        sa.ForeignKeyConstraint(
            ["artefact_id", "request_idx"],
            ["request.artefact_id", "request.idx"],
            name=op.f("fk_chunk_gap_artefact_id_request"),
        ),
        sa.PrimaryKeyConstraint("artefact_id", "request_idx", "seq", name=op.f("pk_chunk_gap")),
    )
    _create_views()
