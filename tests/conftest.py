"""Shared fixtures: every store test runs on DuckDB and on PostgreSQL.

PostgreSQL comes from $LEDGER_TEST_PG_URL (default: the local server the README names). When no
server answers the PostgreSQL half is skipped with a message, or fails when LEDGER_REQUIRE_PG=1 (as
CI sets it).

The Alembic revisions run once per test session and backend, into a template: `ledger_url` and
`ledger` hand each test an empty migrated database (DuckDB: the template file copied; PostgreSQL: the
SQL that the migration executed, recorded once and replayed into one schema per test process, which is
emptied before each test and rebuilt only when a test changed its shape: `_PgWorkerSchema`).
`empty_ledger_url` is a database with no schema at all (a new schema per test on PostgreSQL), for the
tests of `ledger init` and of the migrations.

The suite runs on pytest-xdist workers (`-n auto --dist loadgroup` in pyproject.toml; `-n 0` runs it
in one process). Session fixtures exist once per worker; every test's database is its own (a copy of
the template in its tmp_path; on PostgreSQL its worker's schema, emptied for it). Tests that share an expensive fixture of module
or session scope (the demo run, a module's generated data set) are put in one xdist group, so that
fixture is built once, on one worker; the slowest tests are handed out first. A test process runs
the cyclic collector's full pass a tenth as often, and a test's own `ledger` is closed without
DuckDB's checkpoint (see `_thrown_away`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# An editable install writes no bytecode and these machines set PYTHONDONTWRITEBYTECODE=1, so every
# process of a test run would compile the package from source, and pytest would rewrite every test
# module again (~2 s of CPU per xdist worker). A test run caches its bytecode whatever the variable says
# (__pycache__ is ignored by git); pytest_configure writes the package's before the workers start, for the
# processes the tests start, which read bytecode but do not write it.
sys.dont_write_bytecode = False
# A test process keeps a large heap for its whole run (the package, SQLAlchemy's metadata, the collected
# items), and each full pass of the cyclic collector walks all of it (~0.3 s a pass, 16-19 passes per
# xdist worker, ~11 s of CPU in all); a full pass a tenth as often (after 100 passes of the middle
# generation instead of 10) leaves the young generations, where the garbage is, as they are.
gc.set_threshold(*gc.get_threshold()[:2], 100)
# A bug (an exception none of the ledger's own) reaches a user as one line and exit 70; in the tests it
# propagates with its traceback instead (into CliRunner's result.exception, or a child's stderr), so a
# crash reads as a crash. tests/ledger/cli/test_setup_and_exit_codes.py unsets it to test what a user sees.
os.environ["LEDGER_DEBUG"] = "1"
# Tables fit $COLUMNS when it is set (ledger.cli.app.table); the shell running the suite must not change what
# the tests read. tests/ledger/cli/test_table_width.py sets it where it tests the fitting.
os.environ.pop("COLUMNS", None)

import sqlalchemy as sa  # noqa: E402
from bench_ledger.store import Ledger  # noqa: E402


def _share_the_cores() -> None:
    """Under pytest-xdist, each worker's DuckDB databases use its share of the cores
    (cores / workers, at least 1) instead of every core each: N workers on N cores already keep them busy,
    and a second thread per query only waits or contends (two workers on two cores, the suite in alternating
    runs: 157 / 155 s -> 152 / 143 s). A thread count the test asks for (``?threads=`` in a URL) is kept; one
    process (``-n 0``) and the commands a test spawns use the defaults, as a user's command does."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    share = max(1, (os.cpu_count() or 1) // workers)
    if share >= (os.cpu_count() or 1):  # one worker: every core, as by default
        return
    import duckdb

    connect = duckdb.connect

    def connect_with_share(*args: Any, **kwargs: Any) -> Any:
        kwargs["config"] = {"threads": share, **(kwargs.get("config") or {})}
        return connect(*args, **kwargs)

    duckdb.connect = connect_with_share


_share_the_cores()

PG_URL = os.environ.get("LEDGER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("LEDGER_REQUIRE_PG") == "1"
NO_SYNC = {"options": "-csynchronous_commit=off"}  # see _pg_schema_url
# Real third-party files live beside the repository in ../shared (not in it). $LEDGER_SHARED points
# elsewhere (e.g. from a git worktree); LEDGER_REQUIRE_SAMPLES=1 (as .ci/run sets it) turns the
# skip of the tests that read them into a failure.
SHARED = Path(os.environ.get("LEDGER_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SAMPLES = SHARED / "samples"
REQUIRE_SAMPLES = os.environ.get("LEDGER_REQUIRE_SAMPLES") == "1"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


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
    """The test's own schema; commits not waiting for the WAL flush (a test database needs no durability
    across a crash of the server, and a commit then costs ~0.2 ms instead of ~2 ms of fsync here)."""
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}%20-csynchronous_commit%3Doff"


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
    admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool, connect_args=NO_SYNC)
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
def _pg_template() -> str:
    """Every statement that migrating an empty schema to head executed, as one script (sent in one round
    trip). Alembic's reads (has the version table been created, which revision is stored) are left out:
    they change nothing, and they are the only statements with parameters."""
    _require_pg()
    schema = f"tmpl_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool, connect_args=NO_SYNC)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    statements: list[tuple[str, Any]] = []
    try:
        with Ledger(_pg_schema_url(schema)) as led:

            def record(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
                statements.append((statement, parameters))

            sa.event.listen(led.engine, "before_cursor_execute", record)
            try:
                led.init()
            finally:  # the engine outlives this ledger (ledger.store keeps it for the URL)
                sa.event.remove(led.engine, "before_cursor_execute", record)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()
    assert not any(schema in stmt for stmt, _ in statements), "the migration names its schema: cannot replay it"
    writes = [stmt for stmt, params in statements if not stmt.lstrip().upper().startswith("SELECT")]
    assert all(not params for stmt, params in statements if stmt in writes), (
        "a statement with parameters: cannot join it"
    )
    return ";\n".join(writes)


# The shape of a schema: every catalog row describing it (its tables, views, sequences and indexes,
# their columns and defaults, constraints, triggers, rules, policies, functions and types, the schema
# itself), counted with the sum of their row versions (xmin). Any DDL writes a new version of a row it
# changes (disabling a trigger, altering a column, a GRANT) and adds or removes the rows of what it
# creates or drops; deleting rows, setval, and ANALYZE's in-place statistics leave them as they are.
_SHAPE = """
WITH r AS (SELECT oid, xmin FROM pg_class WHERE relnamespace = {ns})
SELECT concat_ws(' ',
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM r),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_attribute WHERE attrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_attrdef WHERE adrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_index WHERE indrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_rewrite WHERE ev_class IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_sequence WHERE seqrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_policy WHERE polrelid IN (SELECT oid FROM r)),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_constraint WHERE connamespace = {ns}),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_proc WHERE pronamespace = {ns}),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_type WHERE typnamespace = {ns}),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM pg_namespace WHERE oid = {ns}))
"""


class _PgWorkerSchema:
    """One migrated PostgreSQL schema per test process, handed to each test empty: the template's script
    replayed once, then, before each test, the rows the previous test left deleted (triggers off for the
    session: `session_replication_role = replica`), the template's own rows put back (alembic_version),
    sequences restarted and the planner's statistics counters reset, as one script in one round trip.
    Checking and emptying cost ~10 ms of the server's CPU where building a schema cost ~90 ms (and
    dropping one a synchronous commit with its files unlinked). A schema whose shape (:data:`_SHAPE`) is no longer the
    template's, or that cannot be emptied, is dropped and a fresh one is built from the script."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.engine = sa.create_engine(PG_URL, pool_size=1, connect_args=NO_SYNC)  # one connection, kept
        self.schema: str | None = None
        self.shape: str | None = None
        self.reset: str | None = None
        self.used = False

    def url(self) -> str:
        """The URL of an empty migrated schema (this process's own, emptied; or a new one)."""
        if self.schema is not None and self.used:
            try:
                with self.engine.begin() as conn:
                    if conn.exec_driver_sql(self._shape_sql()).scalar() != self.shape:
                        raise LookupError("the schema's shape changed")
                    conn.exec_driver_sql(self.reset or "")
            except (LookupError, sa.exc.SQLAlchemyError):
                self.drop()
        if self.schema is None:
            self.build()
        self.used = True
        return _pg_schema_url(self.schema or "")

    def _shape_sql(self) -> str:
        return _SHAPE.format(ns=f"'{self.schema}'::regnamespace")

    def build(self) -> None:
        schema = f"w_{uuid.uuid4().hex[:12]}"
        with self.engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        engine = sa.create_engine(_pg_schema_url(schema), poolclass=sa.pool.NullPool)
        with engine.begin() as conn:
            conn.exec_driver_sql(self.script)  # no parameters: psycopg sends it as one simple query
        engine.dispose()
        self.schema, self.used = schema, False
        with self.engine.begin() as conn:
            self.shape = conn.exec_driver_sql(self._shape_sql()).scalar()
            self.reset = self._reset_sql(conn, schema)

    @staticmethod
    def _reset_sql(conn: sa.Connection, schema: str) -> str | None:
        """The script that empties ``schema`` back to what the migration left in it, or None when the
        migration's own rows are not plain text or numbers (then every test gets a new schema)."""
        tables = (
            conn.exec_driver_sql(f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' ORDER BY tablename")
            .scalars()
            .all()
        )
        sql = ["SET LOCAL session_replication_role = replica", "SET LOCAL lock_timeout = '20s'"]
        sql += [f"DELETE FROM {schema}.{t}" for t in tables]
        for t in tables:
            for row in conn.exec_driver_sql(f"SELECT * FROM {schema}.{t}").all():
                if not all(v is None or type(v) in (str, int) for v in row):
                    return None
                values = ", ".join(
                    "NULL" if v is None else str(v) if type(v) is int else "'" + v.replace("'", "''") + "'" for v in row
                )
                sql.append(f"INSERT INTO {schema}.{t} VALUES ({values})")
        for seq, start in conn.exec_driver_sql(
            f"SELECT sequencename, start_value FROM pg_sequences WHERE schemaname = '{schema}'"
        ).all():
            sql.append(f"SELECT setval('{schema}.{seq}', {start}, false)")
        sql.append(
            f"SELECT pg_stat_reset_single_table_counters(oid) FROM pg_class WHERE relnamespace = "
            f"'{schema}'::regnamespace AND relkind = 'r'"
        )
        return ";\n".join(sql)

    def drop(self) -> None:
        schema, self.schema = self.schema, None
        if schema is not None:
            with self.engine.begin() as conn:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '20s'; DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(scope="session")
def _pg_worker_schema(_pg_template: str) -> Iterator[_PgWorkerSchema]:
    worker = _PgWorkerSchema(_pg_template)
    try:
        yield worker
    finally:
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            worker.drop()
        worker.engine.dispose()


@pytest.fixture(params=["duckdb", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a database migrated to head, holding nothing, on each backend: DuckDB, a copy of the
    session's template file; PostgreSQL, this test process's schema emptied (:class:`_PgWorkerSchema`)."""
    if request.param == "duckdb":
        yield _duckdb_copy(request, tmp_path)
        return
    _require_pg()
    yield request.getfixturevalue("_pg_worker_schema").url()


def _duckdb_copy(request: pytest.FixtureRequest, folder: Path) -> str:
    """The URL of a copy of the session's migrated DuckDB template in ``folder``."""
    path = folder / "ledger.duckdb"
    shutil.copyfile(request.getfixturevalue("_duckdb_template"), path)
    return f"duckdb:///{path}"


@pytest.fixture(scope="module", params=["duckdb", "postgresql"])
def module_ledger_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated ledger for the tests of one module that only read what a module fixture built in it
    (built once per module and backend instead of once per test): a copy of the DuckDB template, or a
    PostgreSQL schema of its own, dropped when the module is done."""
    if request.param == "duckdb":
        yield _duckdb_copy(request, tmp_path_factory.mktemp("module-ledger"))
        return
    with _own_pg_schema(request) as url:
        yield url


@contextlib.contextmanager
def _own_pg_schema(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated PostgreSQL schema built for the caller from the template's script (~90 ms), dropped after."""
    _require_pg()
    own = _PgWorkerSchema(request.getfixturevalue("_pg_template"))
    try:
        yield own.url()
    finally:
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            own.drop()
        own.engine.dispose()


@pytest.fixture(params=["duckdb", "postgresql"])
def unwritten_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    """As :func:`ledger`, but on PostgreSQL a schema of its own whose tables no test wrote before, for a
    test that needs the rows in the heap in the order they were inserted (as in a new ledger): in the
    worker's schema the rows an earlier test left were deleted, and once autovacuum has marked their
    space free, later inserts fill it from wherever the free-space map starts, out of insertion order."""
    with contextlib.ExitStack() as stack:
        url = (
            _duckdb_copy(request, tmp_path)
            if request.param == "duckdb"
            else stack.enter_context(_own_pg_schema(request))
        )
        yield stack.enter_context(_thrown_away(Ledger(url)))


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    """A migrated, empty ledger on each backend."""
    with _thrown_away(Ledger(ledger_url)) as led:
        yield led


@contextlib.contextmanager
def _thrown_away(led: Ledger) -> Iterator[Ledger]:
    """``led`` for one test, closed after it without saving what the test wrote: a test's DuckDB file is
    never opened again, and DuckDB's checkpoint at the close (writing the log into the file) took ~7 s of
    a suite run. While the fixture holds the file, the test's own commands share its database instance,
    so they neither start one nor checkpoint at their close (as separate processes would)."""
    try:
        yield led
    finally:
        if led.backend == "duckdb":
            with contextlib.suppress(sa.exc.SQLAlchemyError), led.engine.connect() as conn:  # else: saved
                conn.exec_driver_sql("PRAGMA disable_checkpoint_on_shutdown")
        led.close()


@pytest.fixture
def pg_ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """A migrated, empty PostgreSQL ledger, for a path only PostgreSQL has (its binary COPY)."""
    _require_pg()
    with Ledger(request.getfixturevalue("_pg_worker_schema").url()) as led:
        yield led


@pytest.fixture
def unwritten_pg_ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """As :func:`pg_ledger`, in a schema of its own that no test wrote before (see :func:`unwritten_ledger`)."""
    with _own_pg_schema(request) as url, Ledger(url) as led:
        yield led


def shared_folder(path: Path) -> Path:
    """``path`` inside ../shared, or skip the test (fail with LEDGER_REQUIRE_SAMPLES=1) when absent."""
    if not path.exists():
        if REQUIRE_SAMPLES:
            pytest.fail(f"{path} is absent and LEDGER_REQUIRE_SAMPLES=1: real-sample tests must run")
        pytest.skip(f"{path} is absent (real-sample test; LEDGER_REQUIRE_SAMPLES=1 makes this a failure)")
    return path


@pytest.fixture
def samples() -> Path:
    """The real third-party files of ../shared/samples (MANIFEST.md there)."""
    return shared_folder(SAMPLES)


@pytest.fixture
def case_study_report() -> Path:
    """The reference report as shared (../shared/case-study); the package ships its own copy."""
    return shared_folder(SHARED / "case-study" / "h20-dsv41-flash-report.zh.txt")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist installed (a venv from before it joined the `test` extra), accept its
    options from pyproject.toml's addopts and run in one process, saying so."""
    if pluginmanager.hasplugin("xdist"):
        return
    group = parser.getgroup("xdist (not installed)")
    group.addoption(
        "-n",
        "--numprocesses",
        dest="numprocesses",
        default=None,
        help="ignored: pytest-xdist is not installed (pip install -e '.[test]')",
    )
    group.addoption("--dist", dest="dist", default="no", help="ignored: pytest-xdist is not installed")


def pytest_report_header(config: pytest.Config) -> str | None:
    if not config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses") not in (None, "0"):
        return "pytest-xdist is not installed: running in one process (pip install -e '.[test]' to run in parallel)"
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one process when the command names single tests (file::test), else xdist's default."""
    if config.args and all("::" in arg for arg in config.args):
        return 0
    return None


# Scheduled first under xdist (longest first), so the workers finish at about the same time.
SLOW_FIRST = (
    "demo",  # the group of the tests reading the session's demo run
    "tests/test_structure.py::test_mypy_is_clean_on_the_package",
    "tests/benchmarks/test_run.py::test_quick_benchmark_completes_and_writes_its_report",
    "tests/ledger/seal/test_close_concurrency.py",
    "tests/queries/metrics/test_grouped_equals_evaluate.py",
    "tests/queries/audit/test_casestudy.py",
    "tests/edges/test_fuzz.py",
    "tests/ledger/ingest/test_concurrent_imports.py",
    "tests/queries/check/test_pinned_sample_outputs.py",
)
_GROUPS = pytest.StashKey[Path]()


def _group(item: pytest.Item) -> str | None:
    """The group of a test, run on one worker: "demo" when it reads the session's demo run, its module
    when it uses a fixture of module scope (built once per module), else none."""
    if "_demo_run" in item.fixturenames:
        return "demo"
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames if info else ():
        if any(d.scope in ("module", "package", "class") for d in info.name2fixturedefs.get(name, ())):
            return item.nodeid.split("::")[0]
    return None


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the package's bytecode, once (see sys.dont_write_bytecode above)
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from run import byte_compile  # benchmarks/run.py: the one home of it

        byte_compile()
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.stash[_GROUPS] = Path(tempfile.mkdtemp(prefix="ledger-xdist-groups-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GROUPS in config.stash:
        shutil.rmtree(config.stash[_GROUPS], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Each worker writes the groups of its collection where the controller's scheduler reads them."""
    node.workerinput["ledger_groups"] = str(node.config.stash[_GROUPS] / f"{node.gateway.id}.json")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or "ledger_groups" not in workerinput:
        return  # one process: the collection order, unchanged
    groups = {item.nodeid: g for item in items if (g := _group(item))}

    def rank(item: pytest.Item) -> int:
        for i, prefix in enumerate(SLOW_FIRST):
            if groups.get(item.nodeid) == prefix or item.nodeid.startswith(prefix):
                return i
        return len(SLOW_FIRST)

    items.sort(key=rank)  # stable: the collection order within each rank
    Path(workerinput["ledger_groups"]).write_text(json.dumps(groups))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, with the groups of :func:`_group` (xdist 3.8's own marker-based groups do
    not reach the scheduler under pytest 9): a group is one unit of work, on one worker; units are
    handed out in the collection order the workers sorted (SLOW_FIRST)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    folder = config.stash[_GROUPS]

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once: every worker has finished its collection by now
                self.groups = {}
                for path in folder.glob("*.json"):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per skip reason with its count (instead of one line per test, as -rs would)."""
    reasons: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, n in reasons.items():
        terminalreporter.write_line(f"SKIPPED {n} test(s): {reason}")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def _demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`ledger demo` run once per session (worker), as the README says: no options, in a fresh folder
    as the current directory. Its folder and what it printed."""
    from bench_ledger.cli import main
    from click.testing import CliRunner

    here = tmp_path_factory.mktemp("demo")
    cwd = os.getcwd()
    os.chdir(here)
    try:
        result = CliRunner().invoke(main, ["demo"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return here / "bench-ledger-demo", result.output


@pytest.fixture(scope="session")
def demo_built(_demo_run: tuple[Path, str]) -> Path:
    """`ledger demo` run once (DuckDB): its folder, with ledger.duckdb, data/ and report.html.
    Tests that write copy the ledger file first (:func:`demo_copy`)."""
    return _demo_run[0]


@pytest.fixture(scope="session")
def demo_output(_demo_run: tuple[Path, str]) -> str:
    """What that one `ledger demo` printed (paths relative to the folder it ran in)."""
    return _demo_run[1]


@pytest.fixture
def demo_copy(demo_built: Path, tmp_path: Path) -> str:
    """A private copy of the demo ledger (DuckDB URL) for a test that writes to it."""
    path = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_built / "ledger.duckdb", path)
    return f"duckdb:///{path}"
