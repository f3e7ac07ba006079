"""Open a ledger, own its transactions, migrate it, and write what importers parsed.

A ledger is a database URL: ``duckdb:///ledger.duckdb`` (the embedded default, in the current
folder) or ``postgresql+psycopg://user@host/db`` (the team server). Everything that writes goes
through :class:`Ledger`, one transaction per unit of work; models never commit.

Bulk rows (requests, chunk gaps, hardware samples) are written as Arrow tables that the database
ingests itself: DuckDB scans the Arrow table in place, PostgreSQL receives it through ``COPY``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from bench_ledger import guards
from bench_ledger import models as m
from bench_ledger.errors import BadURL, LedgerLocked, NotFound, SchemaOutOfDate, StoreError, WriteConflict, close_names
from sqlalchemy.dialects import registry
from sqlalchemy.orm import Session

__all__ = [
    "STATISTICS_TARGET",
    "Ledger",
    "alembic_config",
    "known_names",
    "now",
    "on_one_snapshot",
    "pg_parallel_workers",
    "resolve_url",
    "stored_revision",
    "unknown",
]

T = TypeVar("T")

# DuckDB's Python client tries `import pandas` on every execute() with parameters. Where pandas is
# not installed that import fails, is not cached, and re-scans sys.path each time, a large share of an
# import and of an audit (benchmarks/profile_notes.md, note 1). A finder placed first on sys.meta_path answers
# "no such module" at once instead. (A None entry in sys.modules did the same for CPython's import,
# but Cython-compiled callers such as pyarrow's pandas shim, active once numpy is installed, read
# that None back as the module and fail with AttributeError.)


class _NoPandas:
    """Fail ``import pandas`` immediately (pandas is not installed: nothing is hidden)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("No module named 'pandas'", name=name)
        return None


if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
    if not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


# The DuckDB dialect named directly: SQLAlchemy otherwise finds `duckdb://` by scanning every installed
# distribution's entry points (importlib.metadata), in every command that opens a ledger. The
# same class the driver's entry point names (duckdb-sqlalchemy's `duckdb = duckdb_sqlalchemy:Dialect`).
registry.register("duckdb", "duckdb_sqlalchemy", "Dialect")

DEFAULT_URL = "duckdb:///ledger.duckdb"
ENV_VAR = "LEDGER_DB"
# DuckDB settings a ledger URL may carry (``duckdb:///l.duckdb?threads=2``). The DuckDB driver turns
# every query parameter into connection configuration, including ones that load unsigned
# extensions or open the file system to SQL; only these resource settings are let through.
DUCKDB_URL_SETTINGS = ("threads", "memory_limit", "temp_directory", "max_temp_directory_size")


def now() -> datetime:
    """Naive UTC: every timestamp the ledger itself records is UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def resolve_url(url: str | None) -> str:
    """--db beats $LEDGER_DB beats the embedded default; a bare path means a DuckDB file."""
    url = url or os.environ.get(ENV_VAR) or DEFAULT_URL
    if "://" not in url:
        url = f"duckdb:///{url}"
    return url


def _duckdb_file(url: str) -> str | None:
    u = sa.engine.make_url(url)
    return u.database if u.get_backend_name() == "duckdb" else None


# PostgreSQL's SQLSTATEs for a write that lost a race with another transaction: unique_violation
# (the other process committed the same batch name, artefact hash or run label first),
# deadlock_detected, serialization_failure. The importer retries on these (ledger.ingest).
CONFLICT_SQLSTATES = frozenset({"23505", "40P01", "40001"})
STATISTICS_TARGET = 30  # PostgreSQL: the statistics target of the ANALYZE after a bulk load (refresh_statistics)


def driver_errors() -> tuple[type[BaseException], ...]:
    """The drivers' own exception bases: the bulk path (COPY, Arrow scans) runs on the raw driver
    connection, so its errors arrive unwrapped by SQLAlchemy."""
    import duckdb

    found: list[type[BaseException]] = [sa.exc.SQLAlchemyError, duckdb.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - PostgreSQL support not installed
        pass
    else:
        found.append(psycopg.Error)
    return tuple(found)


def _driver_errors(backend: str) -> tuple[type[Exception], ...]:
    """The exceptions a connection attempt raises for a database-side reason (not a bug of ours)."""
    if backend == "duckdb":
        import duckdb

        return (sa.exc.SQLAlchemyError, duckdb.Error)
    return (sa.exc.SQLAlchemyError,)


def translate(exc: Exception, url: str) -> StoreError:
    """Turn a driver error into one sentence a user can act on."""
    orig = getattr(exc, "orig", exc)
    text = str(orig)
    if getattr(orig, "sqlstate", None) in CONFLICT_SQLSTATES:
        first = text.strip().splitlines()[0] if text.strip() else type(orig).__name__
        return WriteConflict(f"another process wrote the same rows at the same time ({first})")
    if "Could not set lock on file" in text or "Conflicting lock" in text:
        path = _duckdb_file(url) or url
        pid = re.search(r"PID (\d+)", text)
        holder = f" (PID {pid.group(1)})" if pid else ""
        return LedgerLocked(
            f"{path} is held by another process{holder}; DuckDB allows one writer per file: "
            "close that process (another `ledger` command, a duckdb shell or notebook) and retry"
        )
    if isinstance(exc, sa.exc.OperationalError) and "connection" in text.lower():
        return StoreError(
            f"cannot connect to {sa.engine.make_url(url).render_as_string(hide_password=True)}: {text.strip()}"
        )
    return StoreError(text.strip().splitlines()[0] if text.strip() else type(exc).__name__)


def known_names(conn: sa.Connection | Session, what: str, batch: str | None = None) -> list[str]:
    """The names of every ``batch`` or ``deployment``, or the run labels of ``batch`` (``run``)."""
    if what == "run":
        stmt = (
            sa.select(m.Run.label).join(m.Batch, m.Batch.id == m.Run.batch_id).where(m.Batch.name == batch).distinct()
        )
    else:
        stmt = sa.select(m.Batch.name if what == "batch" else m.Deployment.name)
    return list(conn.execute(stmt).scalars())


def unknown(conn: sa.Connection | Session, what: str, name: str, batch: str | None = None) -> NotFound:
    """The error for a name no row has: a ``batch``, a ``deployment`` or a ``run`` label (of ``batch``), with
    the closest names the ledger holds ("did you mean", `errors.close_names`). Every such error is made here."""
    near = close_names(name, known_names(conn, what, batch))
    if what == "batch":
        return NotFound(f"no batch named {name!r}{near}; `ledger batches` lists them")
    if what == "deployment":
        return NotFound(f"no deployment named {name!r}{near}; declare it first (`ledger declare FILE.yaml`)")
    return NotFound(f"no run {name!r} in batch {batch!r}{near}; `ledger runs --batch {batch}` lists them")


@dataclass(frozen=True)
class Status:
    url: str
    backend: str
    revision: str | None
    head: str
    counts: dict[str, int]
    guard_problems: list[str]  # missing or disabled PostgreSQL triggers (ledger.guards.trigger_problems)


URL_DRIVERS = ("duckdb", "postgresql", "postgresql+psycopg")  # a URL's scheme: the drivers the package installs


def check_url(url: str) -> sa.engine.URL:
    """Parse a ledger URL; :class:`BadURL` for another database or a DuckDB setting not allowed."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise BadURL(
            f"--db / $LEDGER_DB: {url!r} is not a database URL: use duckdb:///FILE or postgresql+psycopg://USER@HOST/DB"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("duckdb", "postgresql"):
        raise BadURL(
            f"--db / $LEDGER_DB: unsupported database {backend!r} in {parsed.render_as_string(hide_password=True)}: "
            "use duckdb:///FILE or postgresql+psycopg://USER@HOST/DB"
        )
    if parsed.drivername not in URL_DRIVERS:  # the driver is imported when the engine is made: refused before
        raise BadURL(
            f"--db / $LEDGER_DB: driver {parsed.drivername.partition('+')[2]!r} in "
            f"{parsed.render_as_string(hide_password=True)} is not supported: the ledger uses DuckDB's "
            "(duckdb:///FILE) and PostgreSQL's psycopg 3 (postgresql+psycopg://USER@HOST/DB, or postgresql://)"
        )
    refused = sorted(k for k in parsed.query if k not in DUCKDB_URL_SETTINGS) if backend == "duckdb" else []
    if refused:
        raise BadURL(
            f"--db / $LEDGER_DB: DuckDB setting(s) {', '.join(refused)} not allowed in a ledger URL; "
            f"allowed: {', '.join(DUCKDB_URL_SETTINGS)}"
        )
    return parsed


def alembic_config():
    """The Alembic configuration of the package's migrations, DuckDB registered as a dialect."""
    import duckdb_sqlalchemy.alembic_impl  # noqa: F401  (registers DuckDB with Alembic)
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("bench_ledger.migrations")))
    return cfg


# Alembic is imported only to migrate (issue 17: every command paid for importing it, `ledger import`
# too, which only checks that the schema is at head). The head and the stored
# revision are read without it: the head from the revision files' own `revision` / `down_revision`
# lines (a plain chain; anything else asks Alembic), the stored one from alembic_version, as
# Alembic's MigrationContext.get_current_revision reads it. tests/ledger/test_store.py checks both against
# Alembic's answers.
_REVISION_LINE = re.compile(
    r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(?:'([^'\n]*)'|\"([^\"\n]*)\"|(None))\s*(?:#.*)?$", re.MULTILINE
)


def _chain_head() -> str | None:
    """The one head of the shipped revisions when they form a plain chain (each file one
    ``revision`` and one ``down_revision``, a string or None), else None."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for file in resources.files("bench_ledger.migrations").joinpath("versions").iterdir():
        if not file.name.endswith(".py") or file.name.startswith("_"):
            continue
        found: dict[str, list[str | None]] = {"revision": [], "down_revision": []}
        for m_ in _REVISION_LINE.finditer(file.read_text(encoding="utf-8")):
            value = m_.group(2) if m_.group(2) is not None else m_.group(3)
            found[m_.group(1)].append(value)
        if len(found["revision"]) != 1 or len(found["down_revision"]) != 1 or found["revision"][0] is None:
            return None
        revisions.add(found["revision"][0])
        if (down := found["down_revision"][0]) is not None:
            downs.add(down)
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 and downs <= revisions else None


@functools.cache
def _head_revision() -> str:
    """The newest revision the installed package ships. Read once per process, and without Alembic
    where the revisions form a plain chain (Alembic compiles and runs every revision file to find
    it, after its own import; every command asks, :meth:`Ledger.require_schema`)."""
    head = _chain_head()
    if head is not None:
        return head
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StoreError("the installed package has no migration revisions")
    return head


def stored_revision(conn: sa.Connection) -> str | None:
    """The revision the database is at (None: no schema), read as Alembic reads it: the one row of
    ``alembic_version``. Whether that table exists is asked of ``information_schema`` (both backends, the
    current schema, as Alembic's ``has_table``): the driver's reflection query cost DuckDB more at
    the first call of a process, in every command (:meth:`Ledger.require_schema`)."""
    present = conn.exec_driver_sql(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = 'alembic_version'"
    ).scalar_one()
    if not present:
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    if len(rows) > 1:
        raise StoreError(
            f"the ledger's alembic_version holds {len(rows)} revisions ({', '.join(sorted(rows))}); it should hold one"
        )
    return rows[0] if rows else None


def pg_parallel_workers(conn: sa.Connection) -> int:
    """How many connections one read may use at once on PostgreSQL: as many processes as the server lets
    one parallel query use, its leader and ``max_parallel_workers_per_gather`` workers (1 where that is 0)."""
    return 1 + int(conn.exec_driver_sql("SHOW max_parallel_workers_per_gather").scalar_one())


def on_one_snapshot(conn: sa.Connection, tasks: list[Callable[[sa.Connection], T]]) -> list[T]:
    """PostgreSQL: each task's result, the tasks run at once (threads), each on its own connection of
    ``conn``'s engine in a REPEATABLE READ transaction on the snapshot ``conn`` exports
    (``pg_export_snapshot``, as ``pg_dump --jobs`` does), rolled back after: every task sees the same
    rows, those one statement on ``conn`` would have seen at the export. For reads that PostgreSQL
    cannot run in parallel itself (one statement per task). A single task runs on ``conn`` itself."""
    if len(tasks) == 1:
        return [tasks[0](conn)]
    from concurrent.futures import ThreadPoolExecutor

    snapshot = conn.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one()

    def run(task: Callable[[sa.Connection], T]) -> T:
        with conn.engine.connect() as other:
            other = other.execution_options(isolation_level="REPEATABLE READ")
            other.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            try:
                return task(other)
            finally:
                other.rollback()  # read only: nothing to keep

    with ThreadPoolExecutor(len(tasks)) as pool:
        return list(pool.map(run, tasks))


# One engine per URL and way of opening, shared by the ledgers open on it in this process and kept
# after the last of them closes (its pool disposed then: no connection stays open, no DuckDB file
# stays held). A new engine costs its creation, the dialect's first-connect queries and the compiling of
# every statement again (SQLAlchemy caches compiled SQL per engine): in-process callers that open a
# ledger again (the Python API's facade calls) skip those. A CLI command opens one ledger and exits.
_EngineKey = tuple[str, bool, bool]  # url, DuckDB read-only mode, pooled


@dataclass
class _Shared:
    engine: sa.Engine
    users: int = 0  # the ledgers open on it


_ENGINES: dict[_EngineKey, _Shared] = {}  # the most recently used last
_ENGINES_KEPT = 8  # engines kept in all: beyond it unused ones go, the least recently used first
_ENGINES_LOCK = threading.Lock()


def _acquire_engine(key: _EngineKey) -> sa.Engine:
    url, read_only, pooled = key
    with _ENGINES_LOCK:
        entry = _ENGINES.pop(key, None)
        if entry is None:
            kwargs: dict = {"connect_args": {"read_only": True}} if read_only else {}
            if not pooled:
                kwargs["poolclass"] = sa.pool.NullPool
            entry = _Shared(sa.create_engine(url, **kwargs))
        entry.users += 1
        _ENGINES[key] = entry
        unused = [k for k, e in _ENGINES.items() if e.users == 0]
        for k in unused[: max(0, len(_ENGINES) - _ENGINES_KEPT)]:
            del _ENGINES[k]
        return entry.engine


def _release_engine(key: _EngineKey) -> None:
    """One ledger less on the engine; the last one out closes its pooled connections."""
    with _ENGINES_LOCK:
        entry = _ENGINES.get(key)
        if entry is None or entry.users == 0:
            return
        entry.users -= 1
        if entry.users == 0:
            entry.engine.dispose()


def _rolled_back(session: Session) -> None:
    """Roll back, forgetting the declared rows the transaction noted (kept on its pooled connection)."""
    conn = None
    if session.in_transaction():
        with contextlib.suppress(sa.exc.SQLAlchemyError):  # a transaction a failed flush left inactive
            conn = session.connection()
    guards.take_declared_written(session, conn)
    session.rollback()


class Ledger:
    """An open ledger. Use as a context manager, or call :meth:`close`.

    ``create=False`` refuses a DuckDB file that does not exist yet instead of creating it: every
    command but ``ledger init`` (and the demo) opens that way, so a typo in --db or a command run in
    the wrong folder leaves no empty ledger file behind."""

    def __init__(self, url: str | None = None, *, create: bool = True, read_only: bool = False) -> None:
        """``read_only`` (DuckDB): open the file in DuckDB's read-only mode, one connection per
        operation (no pool), so the file is held only while a query runs (the notebook API)."""
        self.url = resolve_url(url)
        self.read_only = read_only
        self.backend = check_url(self.url).get_backend_name()
        file = _duckdb_file(self.url)
        if not create and file and file != ":memory:" and not Path(file).exists():
            raise NotFound(f"no ledger at {file} (no such file): `ledger init --db {self.url}` creates one")
        try:
            # pooled on both backends but a read-only DuckDB one: a command's operations share one
            # connection; on PostgreSQL each new one is a server process started and its catalog caches
            # filled again (docs/decisions/0008-connection-pool-and-shared-engine.md)
            per_operation = read_only and self.backend == "duckdb"
            key: _EngineKey = (self.url, per_operation, not per_operation)
            self.engine = _acquire_engine(key)
            # released once: by close(), or when a ledger never closed is collected
            self._release = weakref.finalize(self, _release_engine, key)
            with self.engine.connect():
                pass
        except _driver_errors(self.backend) as exc:  # DuckDB raises its own errors before SQLAlchemy wraps them
            self.close()
            raise translate(exc, self.url) from None
        self._holding = False

    # ------------------------------------------------------------------ lifecycle

    @contextmanager
    def held(self) -> Iterator[None]:
        """A read-only DuckDB ledger (one connection per operation) keeps its connections for the block
        and releases the file when it ends: the operations of one facade call share them instead of
        opening the file again each (docs/decisions/0030-python-api-connections.md). Any other ledger, or a block inside another, is left as it is."""
        if not self.read_only or self.backend != "duckdb" or self._holding:
            yield
            return
        per_operation, key = self.engine, (self.url, True, True)
        self.engine = _acquire_engine(key)
        self._holding = True
        try:
            yield
        finally:
            _release_engine(key)
            self.engine, self._holding = per_operation, False

    def close(self) -> None:
        """Release the database: the last ledger open on its URL in this process closes the connections."""
        if hasattr(self, "_release"):
            self._release()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def display_url(self) -> str:
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    def artefact_folder(self) -> Path:
        """The content-addressed folder for stored copies: next to a DuckDB file, else here."""
        file = _duckdb_file(self.url)
        base = Path(file).resolve().parent if file and file != ":memory:" else Path.cwd()
        return base / "ledger-artefacts"

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back on any error."""
        session = guards.install(Session(self.engine, expire_on_commit=False, autoflush=True))
        try:
            yield session
            session.flush()
            written = guards.take_declared_written(session, session.connection() if session.in_transaction() else None)
            if written and self.backend == "duckdb":  # no triggers there: the rows' digests (ledger.declared)
                from bench_ledger.declared import keep

                keep(session.connection(), written)
            session.commit()
        except driver_errors() as exc:
            _rolled_back(session)
            raise translate(exc, self.url) from exc  # type: ignore[arg-type]  # driver errors are Exceptions
        except BaseException:
            _rolled_back(session)
            raise
        finally:
            session.close()

    @contextmanager
    def connection(self) -> Iterator[sa.Connection]:
        """A read connection (no transaction kept)."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise translate(exc, self.url) from exc

    # ------------------------------------------------------------------ schema

    def head_revision(self) -> str:
        return _head_revision()

    def revision(self) -> str | None:
        with self.connection() as conn:
            return stored_revision(conn)

    def init(self) -> tuple[str | None, str]:
        """Create or upgrade the schema to head; returns (revision before, revision after)."""
        from alembic import command

        before = self.revision()
        if before == self.head_revision():
            return before, before  # at head: Alembic's upgrade would run no revision
        cfg = alembic_config()
        try:
            with self.engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except sa.exc.SQLAlchemyError as exc:
            raise translate(exc, self.url) from exc
        return before, self.revision() or ""

    def require_schema(self) -> None:
        rev, head = self.revision(), self.head_revision()
        if rev != head:
            where = "has no schema" if rev is None else f"is at revision {rev}, the code needs {head}"
            raise SchemaOutOfDate(f"the ledger at {self.display_url} {where}: run `ledger init`")

    def refresh_statistics(self, tables: tuple[str, ...]) -> None:
        """Refresh the planner's statistics after a bulk load (PostgreSQL; DuckDB keeps its own), and
        summarise the block ranges of ``request``'s run index the load filled (migration 0017)."""
        if self.backend != "postgresql" or not tables:
            return
        with self.engine.begin() as conn:
            # a sample of 300 x STATISTICS_TARGET rows per table, not the server's 300 x 100: right after a bulk
            # load the planner needs the row counts and how rows spread over runs, not fine histograms
            # (benchmarks/profile_notes.md, note 35); autovacuum's later ANALYZE takes the
            # server's own target
            conn.exec_driver_sql(f"SET LOCAL default_statistics_target = {STATISTICS_TARGET}")
            conn.exec_driver_sql(f"ANALYZE {', '.join(tables)}")
            if "request" in tables:
                # until summarised, a new range is read by every query of a run (a BRIN index matches it
                # whatever it holds); autovacuum would summarise it later (autosummarize), a reader now.
                # Outside the import's transaction, like ANALYZE: its lock (SHARE UPDATE EXCLUSIVE) waits for
                # another import's same step or a vacuum of the table, never for a COPY
                conn.exec_driver_sql("SELECT brin_summarize_new_values('ix_request_run_id')")

    def require_empty(self) -> None:
        """Refuse to build something (the demo) into a ledger that already holds data."""
        used = {t: n for t, n in self.status().counts.items() if n and t != "alembic_version"}
        if used:
            raise StoreError(
                f"the ledger at {self.display_url} is not empty ({', '.join(sorted(used))}); give a fresh one"
            )

    def status(self) -> Status:
        rev = self.revision()
        counts: dict[str, int] = {}
        problems: list[str] = []
        if rev is not None:
            tables = m.Base.metadata.sorted_tables
            with self.connection() as conn:  # one statement, not a count per table
                row = conn.execute(
                    sa.select(
                        *(sa.select(sa.func.count()).select_from(t).scalar_subquery().label(t.name) for t in tables)
                    )
                ).one()
                counts = dict(zip([t.name for t in tables], row, strict=True))
                if rev == self.head_revision():
                    problems = guards.trigger_problems(conn, self.backend)
        return Status(self.display_url, self.backend, rev, self.head_revision(), counts, problems)

    # ------------------------------------------------------------------ lookups

    @staticmethod
    def find_batch(session: Session, name: str, lock: str | None = None) -> m.Batch | None:
        """The batch named ``name`` or None. ``lock`` (PostgreSQL; DuckDB has one writer per file
        anyway): "share" for writes into the batch (imports, corrections), "update" for closing it;
        held until the transaction ends, and the row is (re)read after the lock is granted."""
        stmt = sa.select(m.Batch).where(m.Batch.name == name)
        if lock is not None and session.get_bind().dialect.name == "postgresql":
            stmt = stmt.with_for_update(read=lock == "share").execution_options(populate_existing=True)
        return session.scalar(stmt)

    @staticmethod
    def get_batch(session: Session, name: str, lock: str | None = None) -> m.Batch:
        batch = Ledger.find_batch(session, name, lock)
        if batch is None:
            raise unknown(session, "batch", name)
        return batch

    @staticmethod
    def get_deployment(session: Session, name: str) -> m.Deployment:
        dep = session.scalar(sa.select(m.Deployment).where(m.Deployment.name == name))
        if dep is None:
            raise unknown(session, "deployment", name)
        return dep

    @staticmethod
    def get_run(session: Session, run_id: int) -> m.Run:
        run = session.get(m.Run, run_id)
        if run is None:
            raise NotFound(f"no run with id {run_id}; `ledger runs` lists them")
        return run
