"""Rebuild the query views of migration 0003 on the current-revision rule.

0003's views grouped every revision of a run: after a correction, ``v_run_metrics`` showed the
superseded revision with the requests and the correction with none. Here every view keeps only the
current revision of a run -- the rule of ``ledger.books.current``: no other run row supersedes it
(``NOT EXISTS (SELECT 1 FROM run n WHERE n.supersedes_id = r.id)``) -- and reads the captured
rows through the run's first revision (``COALESCE(r.origin_id, r.id)``, where requests and
captures point). Columns are unchanged; ``run_id`` is the current revision's id.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

CURRENT_RUN = "NOT EXISTS (SELECT 1 FROM run n WHERE n.supersedes_id = r.id)"

V_RUN_REQUESTS = f"""
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
    (SELECT COUNT(*) FROM capture c WHERE c.run_id = COALESCE(r.origin_id, r.id) AND c.sampled) AS sampled_captures
FROM run r
JOIN batch b ON b.id = r.batch_id
LEFT JOIN request q ON q.run_id = COALESCE(r.origin_id, r.id)
WHERE {CURRENT_RUN}
GROUP BY r.id, b.name, r.label, r.revision, r.origin_id
"""

V_CAPTURE_FIELDS = f"""
CREATE VIEW v_capture_fields AS
SELECT
    c.id AS capture_id,
    r.id AS run_id,
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
JOIN run r ON COALESCE(r.origin_id, r.id) = c.run_id AND {CURRENT_RUN}
JOIN batch b ON b.id = r.batch_id
JOIN artefact a ON a.id = c.artefact_id
JOIN capture_field f ON f.capture_id = c.id
"""


def _views_0003():
    """Migration 0003's module (its file name is not importable by name): v_run_metrics and the old SQL."""
    path = Path(__file__).with_name("0003_create_query_views.py")
    spec = importlib.util.spec_from_file_location("_ledger_migration_0003", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _drop() -> None:
    op.execute("DROP VIEW IF EXISTS v_capture_fields")
    op.execute("DROP VIEW IF EXISTS v_run_metrics")
    op.execute("DROP VIEW IF EXISTS v_run_requests")


def upgrade() -> None:
    _drop()
    op.execute(V_RUN_REQUESTS)
    op.execute(_views_0003().V_RUN_METRICS)  # unchanged: it reads v_run_requests
    op.execute(V_CAPTURE_FIELDS)


def downgrade() -> None:
    _drop()
    old = _views_0003()
    op.execute(old.V_RUN_REQUESTS)
    op.execute(old.V_RUN_METRICS)
    op.execute(old.V_CAPTURE_FIELDS)
