"""Shared fixtures: every store test runs on DuckDB and on PostgreSQL.

PostgreSQL comes from $LEDGER_TEST_PG_URL (default: the local server of DEVELOPERS.md). Each test
gets its own schema, dropped afterwards. When no server answers the PostgreSQL half is skipped
with a message, or fails when LEDGER_REQUIRE_PG=1 (as CI sets it).

The Alembic revisions run once per test session and backend, into a template: `ledger_url` and
`ledger` hand each test a copy of it (DuckDB: the template file copied; PostgreSQL: the SQL that
the migration executed, recorded once and replayed into the test's own schema). `empty_ledger_url`
is a database with no schema at all, for the tests of `ledger init` and of the migrations.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from bench_ledger.store import Ledger

PG_URL = os.environ.get("LEDGER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("LEDGER_REQUIRE_PG") == "1"
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _pg_available() -> str | None:
    try:
        engine = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 3})
        with engine.connect():
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means "no server"
        return str(exc).strip().splitlines()[0]


_PG_PROBLEM: list[str | None] = []


def pg_problem() -> str | None:
    if not _PG_PROBLEM:
        _PG_PROBLEM.append(_pg_available())
    return _PG_PROBLEM[0]


def _pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


def _require_pg() -> None:
    problem = pg_problem()
    if problem:
        message = f"PostgreSQL not reachable at {PG_URL}: {problem}"
        if REQUIRE_PG:
            pytest.fail(message + " (LEDGER_REQUIRE_PG=1)")
        pytest.skip(message + " (set LEDGER_TEST_PG_URL, or LEDGER_REQUIRE_PG=1 to make this fatal)")


@pytest.fixture
def _pg_schema() -> Iterator[str]:
    """A fresh, empty PostgreSQL schema for one test, dropped afterwards."""
    _require_pg()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture(params=["duckdb", "postgresql"])
def empty_ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database (no schema) on each backend."""
    if request.param == "duckdb":
        yield f"duckdb:///{tmp_path / 'ledger.duckdb'}"
        return
    yield _pg_schema_url(request.getfixturevalue("_pg_schema"))


@pytest.fixture(scope="session")
def _duckdb_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "ledger.duckdb"
    with Ledger(f"duckdb:///{path}") as led:
        led.init()
    return path


@pytest.fixture(scope="session")
def _pg_template() -> list[tuple[str, Any]]:
    """Every statement (with its parameters) that migrating an empty schema to head executed."""
    _require_pg()
    schema = f"tmpl_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    statements: list[tuple[str, Any]] = []
    try:
        with Ledger(_pg_schema_url(schema)) as led:
            def record(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
                statements.append((statement, parameters))

            sa.event.listen(led.engine, "before_cursor_execute", record)
            led.init()
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()
    assert not any(schema in stmt for stmt, _ in statements), "the migration names its schema: cannot replay it"
    return statements


@pytest.fixture(params=["duckdb", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a database migrated to head (a copy of the session's template) on each backend."""
    if request.param == "duckdb":
        path = tmp_path / "ledger.duckdb"
        shutil.copyfile(request.getfixturevalue("_duckdb_template"), path)
        yield f"duckdb:///{path}"
        return
    statements = request.getfixturevalue("_pg_template")
    url = _pg_schema_url(request.getfixturevalue("_pg_schema"))
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        for statement, parameters in statements:
            conn.exec_driver_sql(statement, parameters)
    engine.dispose()
    yield url


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    """A migrated, empty ledger on each backend."""
    with Ledger(ledger_url) as led:
        yield led


@pytest.fixture
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"real samples folder {SAMPLES} is absent")
    return SAMPLES


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
