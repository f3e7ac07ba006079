"""Create the declared tables: source reports, deployments, batches, artefacts, launches, runs, published values.

Revision ID: 0001
Revises: None
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("gpu_model", sa.String(), nullable=True),
        sa.Column("gpus_per_node", sa.Integer(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=True),
        sa.Column("gpu_memory", sa.String(), nullable=True),
        sa.Column("gpu_memory_unit", sa.String(), nullable=True),
        sa.Column("interconnect_intra", sa.String(), nullable=True),
        sa.Column("interconnect_inter", sa.String(), nullable=True),
        sa.Column("engine", sa.String(), nullable=True),
        sa.Column("engine_version", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("weights_version", sa.String(), nullable=True),
        sa.Column("shards", sa.Integer(), nullable=True),
        sa.Column("size_on_disk", sa.String(), nullable=True),
        sa.Column("size_on_disk_unit", sa.String(), nullable=True),
        sa.Column("tp", sa.Integer(), nullable=True),
        sa.Column("dp", sa.Integer(), nullable=True),
        sa.Column("ep", sa.Integer(), nullable=True),
        sa.Column("pp", sa.Integer(), nullable=True),
        sa.Column("kv_cache_dtype", sa.String(), nullable=True),
        sa.Column("prefix_caching", sa.Boolean(), nullable=True),
        sa.Column("max_num_seqs", sa.Integer(), nullable=True),
        sa.Column("max_model_len", sa.Integer(), nullable=True),
        sa.Column("chunked_prefill_tokens", sa.Integer(), nullable=True),
        sa.Column("speculative_method", sa.String(), nullable=True),
        sa.Column("speculative_tokens", sa.Integer(), nullable=True),
        sa.Column("kernel_backend", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployment")),
        sa.UniqueConstraint("name", name=op.f("uq_deployment_name")),
    )
    op.create_index(op.f("ix_deployment_fingerprint"), "deployment", ["fingerprint"], unique=False)
    op.create_table(
        "source_report",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("published_on", sa.Date(), nullable=True),
        sa.Column("author", sa.String(), nullable=True),
        sa.Column("language", sa.String(), nullable=True),
        sa.Column("text_sha256", sa.String(length=64), nullable=True),
        sa.Column("location", sa.String(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source_report")),
        sa.UniqueConstraint("slug", name=op.f("uq_source_report_slug")),
    )
    op.create_table(
        "batch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=True),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("closed_at", sa.DateTime(), nullable=True),
        sa.Column("seal_digest", sa.String(length=64), nullable=True),
        sa.CheckConstraint("status IN ('open', 'closed')", name=op.f("ck_batch_status")),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], name=op.f("fk_batch_deployment_id_deployment")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch")),
        sa.UniqueConstraint("name", name=op.f("uq_batch_name")),
    )
    op.create_table(
        "artefact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("file_name", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("format_version", sa.String(), nullable=True),
        sa.Column("importer", sa.String(), nullable=False),
        sa.Column("importer_version", sa.String(), nullable=False),
        sa.Column("imported_at", sa.DateTime(), nullable=False),
        sa.Column("stored_path", sa.String(), nullable=True),
        sa.Column("batch_id", sa.Integer(), nullable=True),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name=op.f("fk_artefact_batch_id_batch")),
        sa.ForeignKeyConstraint(
            ["deployment_id"], ["deployment.id"], name=op.f("fk_artefact_deployment_id_deployment")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artefact")),
        sa.UniqueConstraint("sha256", name=op.f("uq_artefact_sha256")),
    )
    op.create_index(op.f("ix_artefact_batch_id"), "artefact", ["batch_id"], unique=False)
    op.create_table(
        "launch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("seconds_to_ready", sa.String(), nullable=True),
        sa.Column("seconds_to_ready_flag", sa.String(), nullable=False),
        sa.Column("cause", sa.String(), nullable=True),
        sa.Column("log_artefact_id", sa.Integer(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("supersedes_id", sa.Integer(), nullable=True),
        sa.Column("correction_reason", sa.String(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("outcome IN ('ready', 'failed', 'unknown')", name=op.f("ck_launch_outcome")),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], name=op.f("fk_launch_deployment_id_deployment")),
        sa.ForeignKeyConstraint(["log_artefact_id"], ["artefact.id"], name=op.f("fk_launch_log_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["supersedes_id"], ["launch.id"], name=op.f("fk_launch_supersedes_id_launch")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_launch")),
        sa.UniqueConstraint(
            "deployment_id", "attempt", "revision", name=op.f("uq_launch_deployment_id_attempt_revision")
        ),
    )
    op.create_index(op.f("ix_launch_deployment_id"), "launch", ["deployment_id"], unique=False)
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.Column("input_target_tokens", sa.Integer(), nullable=True),
        sa.Column("output_cap_tokens", sa.Integer(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("request_count", sa.Integer(), nullable=True),
        sa.Column("request_rate", sa.String(), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("dataset", sa.String(), nullable=True),
        sa.Column("tool", sa.String(), nullable=True),
        sa.Column("tool_version", sa.String(), nullable=True),
        sa.Column("warm_prefix_cache", sa.String(), nullable=False),
        sa.Column("warm_process", sa.String(), nullable=False),
        sa.Column("warm_compile", sa.String(), nullable=False),
        sa.Column("warm_file_cache", sa.String(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("artefact_id", sa.Integer(), nullable=True),
        sa.Column("metadata_json", sa.String(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("supersedes_id", sa.Integer(), nullable=True),
        sa.Column("correction_reason", sa.String(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("warm_compile IN ('cold', 'warm', 'unknown')", name=op.f("ck_run_warm_compile")),
        sa.CheckConstraint("warm_file_cache IN ('cold', 'warm', 'unknown')", name=op.f("ck_run_warm_file_cache")),
        sa.CheckConstraint("warm_prefix_cache IN ('cold', 'warm', 'unknown')", name=op.f("ck_run_warm_prefix_cache")),
        sa.CheckConstraint("warm_process IN ('cold', 'warm', 'unknown')", name=op.f("ck_run_warm_process")),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_run_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name=op.f("fk_run_batch_id_batch")),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], name=op.f("fk_run_deployment_id_deployment")),
        sa.ForeignKeyConstraint(["supersedes_id"], ["run.id"], name=op.f("fk_run_supersedes_id_run")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
        sa.UniqueConstraint("batch_id", "label", "revision", name=op.f("uq_run_batch_id_label_revision")),
    )
    op.create_index(op.f("ix_run_batch_id"), "run", ["batch_id"], unique=False)
    op.create_table(
        "published_value",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_report_id", sa.Integer(), nullable=True),
        sa.Column("artefact_id", sa.Integer(), nullable=True),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=True),
        sa.Column("unit", sa.String(), nullable=True),
        sa.Column("quantity_kind", sa.String(), nullable=True),
        sa.Column("precision", sa.Integer(), nullable=True),
        sa.Column("flag", sa.String(), nullable=False),
        sa.Column("na_reason", sa.String(), nullable=True),
        sa.Column("batch_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.Column("locator", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("supersedes_id", sa.Integer(), nullable=True),
        sa.Column("correction_reason", sa.String(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "flag IN ('measured', 'derived', 'estimated', 'reported', 'n/a')", name=op.f("ck_published_value_flag")
        ),
        sa.ForeignKeyConstraint(["artefact_id"], ["artefact.id"], name=op.f("fk_published_value_artefact_id_artefact")),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name=op.f("fk_published_value_batch_id_batch")),
        sa.ForeignKeyConstraint(
            ["deployment_id"], ["deployment.id"], name=op.f("fk_published_value_deployment_id_deployment")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_published_value_run_id_run")),
        sa.ForeignKeyConstraint(
            ["source_report_id"], ["source_report.id"], name=op.f("fk_published_value_source_report_id_source_report")
        ),
        sa.ForeignKeyConstraint(
            ["supersedes_id"], ["published_value.id"], name=op.f("fk_published_value_supersedes_id_published_value")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_published_value")),
    )
    op.create_index(op.f("ix_published_value_artefact_id"), "published_value", ["artefact_id"], unique=False)
    op.create_index(op.f("ix_published_value_batch_id"), "published_value", ["batch_id"], unique=False)
    op.create_index(op.f("ix_published_value_run_id"), "published_value", ["run_id"], unique=False)
    op.create_index(op.f("ix_published_value_source_report_id"), "published_value", ["source_report_id"], unique=False)


def downgrade() -> None:
    op.drop_table("published_value")
    op.drop_table("run")
    op.drop_table("launch")
    op.drop_table("artefact")
    op.drop_table("batch")
    op.drop_table("source_report")
    op.drop_table("deployment")
