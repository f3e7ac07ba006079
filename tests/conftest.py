"""Shared fixtures: every store test runs on DuckDB and on PostgreSQL.

PostgreSQL comes from $LEDGER_TEST_PG_URL (default: the local server of DEVELOPERS.md). Each test
gets its own schema, dropped afterwards. When no server answers the PostgreSQL half is skipped
with a message, or fails when LEDGER_REQUIRE_PG=1 (as CI sets it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(params=["duckdb", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database on each backend."""
    if request.param == "duckdb":
        yield f"duckdb:///{tmp_path / 'ledger.duckdb'}"
        return
    problem = pg_problem()
    if problem:
        message = f"PostgreSQL not reachable at {PG_URL}: {problem}"
        if REQUIRE_PG:
            pytest.fail(message + " (LEDGER_REQUIRE_PG=1)")
        pytest.skip(message + " (set LEDGER_TEST_PG_URL, or LEDGER_REQUIRE_PG=1 to make this fatal)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    """A migrated, empty ledger on each backend."""
    with Ledger(ledger_url) as led:
        led.init()
        yield led


@pytest.fixture
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"real samples folder {SAMPLES} is absent")
    return SAMPLES


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
