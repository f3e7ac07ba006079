"""Alembic environment: runs on the connection the store hands over (DuckDB or PostgreSQL)."""

from __future__ import annotations

import duckdb_sqlalchemy.alembic_impl  # noqa: F401  (registers DuckDB with Alembic)
from alembic import context
from bench_ledger.models import Base, include_object

target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:  # pragma: no cover - the store always passes one
        raise RuntimeError("migrations run through ledger.store (ledger init), not the alembic CLI")
    # include_object: the views (models.VIEWS) are mapped as tables but are views in the database
    context.configure(
        connection=connection, target_metadata=target_metadata, transactional_ddl=True, include_object=include_object
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
