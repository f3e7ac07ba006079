"""Create the query views: per-run request counts and totals, per-run TPM, captured fields.

Plain SQL that DuckDB 1.5 and PostgreSQL 15 both run, so that a user of ``duckdb`` or ``psql``
gets the same per-run figures as ``ledger metrics``. Every view groups by run: none crosses a
batch (R2). A figure whose inputs are incomplete (a sampled capture, an ok request without a
token count, requests on several clocks, no times) is NULL, never 0 (R9); the figures the Python
registry (``queries.metrics``) adds on top (the tool's own duration as a fallback, percentiles,
reasons for n/a) are not in the views.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

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

V_CAPTURE_FIELDS = """
CREATE VIEW v_capture_fields AS
SELECT
    c.id AS capture_id,
    c.run_id,
    b.name AS batch,
    r.label AS run_label,
    a.file_name,
    a.format,
    c.record_count,
    c.sampled,
    c.clock,
    c.token_source,
    f.field
FROM capture c
JOIN run r ON r.id = c.run_id
JOIN batch b ON b.id = r.batch_id
JOIN artefact a ON a.id = c.artefact_id
JOIN capture_field f ON f.capture_id = c.id
"""


def upgrade() -> None:
    op.execute(V_RUN_REQUESTS)
    op.execute(V_RUN_METRICS)
    op.execute(V_CAPTURE_FIELDS)


def downgrade() -> None:
    op.execute("DROP VIEW v_capture_fields")
    op.execute("DROP VIEW v_run_metrics")
    op.execute("DROP VIEW v_run_requests")
