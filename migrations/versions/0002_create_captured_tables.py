"""Create the captured tables: captures and their fields, requests, chunk gaps, hardware samples, log facts.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hardware_sample",
        sa.Column("artefact_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("counter", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("ts", sa.DateTime(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_hardware_sample_artefact_id_artefact")),
        sa.PrimaryKeyConstraint("artefact_id", "line", "counter", name=op.f("pk_hardware_sample")),
    )
    op.create_table(
        "log_fact",
        sa.Column("artefact_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("process", sa.String(), nullable=True),
        sa.Column("value", sa.String(), nullable=True),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=True),
        sa.Column("logged_at", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_log_fact_artefact_id_artefact")),
        sa.PrimaryKeyConstraint("artefact_id", "line", "kind", name=op.f("pk_log_fact")),
    )
    op.create_table(
        "capture",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("artefact_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("record_count", sa.Integer(), nullable=False),
        sa.Column("sampled", sa.Boolean(), nullable=False),
        sa.Column("sample_note", sa.String(), nullable=True),
        sa.Column("clock", sa.String(), nullable=True),
        sa.Column("token_source", sa.String(), nullable=False),
        sa.Column("success_rule", sa.String(), nullable=False),
        sa.CheckConstraint(
            "clock IS NULL OR clock IN ('monotonic_s', 'epoch_s', 'epoch_ns')", name=op.f("ck_capture_clock")
        ),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_capture_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_capture_run_id_run")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capture")),
        sa.UniqueConstraint("artefact_id", "run_id", name=op.f("uq_capture_artefact_id_run_id")),
    )
    op.create_index(op.f("ix_capture_run_id"), "capture", ["run_id"], unique=False)
    op.create_table(
        "request",
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
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_request_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_request_run_id_run")),
        sa.PrimaryKeyConstraint("artefact_id", "idx", name=op.f("pk_request")),
    )
    op.create_index(op.f("ix_request_run_id"), "request", ["run_id"], unique=False)
    op.create_table(
        "capture_field",
        sa.Column("capture_id", sa.Integer(), nullable=False),
        sa.Column("field", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["capture_id"], ["capture.id"], name=op.f("fk_capture_field_capture_id_capture")),
        sa.PrimaryKeyConstraint("capture_id", "field", name=op.f("pk_capture_field")),
    )
    op.create_table(
        "chunk_gap",
        sa.Column("artefact_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("request_idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("gap_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["artefact_id", "request_idx"],
            ["request.artefact_id", "request.idx"],
            name=op.f("fk_chunk_gap_artefact_id_request"),
        ),
        sa.PrimaryKeyConstraint("artefact_id", "request_idx", "seq", name=op.f("pk_chunk_gap")),
    )


def downgrade() -> None:
    op.drop_table("log_fact")
    op.drop_table("hardware_sample")
    op.drop_table("chunk_gap")
    op.drop_table("request")
    op.drop_table("capture_field")
    op.drop_table("capture")
