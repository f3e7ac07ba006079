from __future__ import annotations

import gc
import subprocess
import sys

import duckdb_sqlalchemy.alembic_impl  # noqa: F401  (registers DuckDB with Alembic; the store imports it only to migrate)
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from bench_ledger import models as m
from bench_ledger.errors import LedgerLocked, SchemaOutOfDate
from bench_ledger.store import Ledger, now, resolve_url


def test_migrations_build_exactly_the_models(empty_ledger_url: str) -> None:
    with Ledger(empty_ledger_url) as led:
        before, after = led.init()
        assert before is None and after == led.head_revision()
        with led.engine.connect() as conn:
            # the views (models.VIEWS: chunk_gap) are mapped as tables; Alembic reflects tables only
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"include_object": m.include_object}), m.Base.metadata
            )
        assert diff == []
        assert set(sa.inspect(led.engine).get_view_names()) >= set(m.VIEWS)
        # compare_metadata does not compare primary keys: hardware_sample's key is logical only
        # (models.HardwareSample, migration 0007), so check that the database has none.
        insp = sa.inspect(led.engine)
        assert insp.get_pk_constraint("hardware_sample")["constrained_columns"] == []
        assert insp.get_foreign_keys("hardware_sample") == []
        # request and request_gaps: the same since migrations 0008 and 0014 (models.Request, models.RequestGaps)
        for table in ("request", "request_gaps"):
            assert insp.get_pk_constraint(table)["constrained_columns"] == [], table
            assert insp.get_foreign_keys(table) == [], table
        # ix_request_run_id is PostgreSQL's only (migration 0015; include_object leaves it to this check)
        expected = [["run_id"]] if led.backend == "postgresql" else []
        assert [ix["column_names"] for ix in insp.get_indexes("request")] == expected
        assert {ix["name"] for ix in insp.get_indexes("request")} == ({"ix_request_run_id"} if expected else set())
        assert insp.get_pk_constraint("log_fact")["constrained_columns"] == ["artefact_id", "line", "kind"]
        assert led.init() == (after, after)  # idempotent


def test_status_counts_every_table(ledger: Ledger) -> None:
    st = ledger.status()
    assert st.revision == st.head
    assert set(st.counts) == {t.name for t in m.Base.metadata.sorted_tables}
    assert all(n == 0 for n in st.counts.values())


def test_session_rolls_back_on_error(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError):
        with ledger.session() as s:
            s.add(m.Batch(name="fx", status="open", created_at=now()))
            s.flush()
            raise RuntimeError("boom")
    assert ledger.status().counts["batch"] == 0


def test_check_constraints_hold(ledger: Ledger) -> None:
    from bench_ledger.errors import StoreError

    with pytest.raises(StoreError):
        with ledger.session() as s:
            s.add(m.Batch(name="fx", status="half-open", created_at=now()))


def test_template_copy_is_the_migrated_schema(ledger_url: str) -> None:
    """The fixtures' per-session template (tests/conftest.py) is what the migrations build."""
    with Ledger(ledger_url) as led:
        assert led.revision() == led.head_revision()
        with led.engine.connect() as conn:
            assert (
                compare_metadata(
                    MigrationContext.configure(conn, opts={"include_object": m.include_object}), m.Base.metadata
                )
                == []
            )
        assert led.init() == (led.head_revision(), led.head_revision())


def test_head_and_stored_revision_without_alembic_are_alembics(ledger_url: str, empty_ledger_url: str) -> None:
    """The store finds the head and the stored revision without importing Alembic (issue 17: start-up
    of `ledger import`); both agree with Alembic's own answers, and no command but a migration
    imports Alembic."""
    from alembic.script import ScriptDirectory
    from bench_ledger import store

    assert store._chain_head() == ScriptDirectory.from_config(store.alembic_config()).get_current_head()
    for url in (ledger_url, empty_ledger_url):
        with Ledger(url) as led, led.engine.connect() as conn:
            assert store.stored_revision(conn) == MigrationContext.configure(conn).get_current_revision()
    code = (
        "import sys\n"
        "from bench_ledger.store import Ledger\n"
        f"led = Ledger({ledger_url!r}, create=False)\n"
        "led.require_schema()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_unmigrated_ledger_asks_for_init(empty_ledger_url: str) -> None:
    with Ledger(empty_ledger_url) as led:
        with pytest.raises(SchemaOutOfDate, match=r"has no schema: run `ledger init`"):
            led.require_schema()


def test_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_DB", raising=False)
    assert resolve_url(None) == "duckdb:///ledger.duckdb"
    monkeypatch.setenv("LEDGER_DB", "duckdb:///other.duckdb")
    assert resolve_url(None) == "duckdb:///other.duckdb"
    assert resolve_url("x.duckdb") == "duckdb:///x.duckdb"


def test_duckdb_file_held_by_another_process(tmp_path) -> None:
    path = tmp_path / "held.duckdb"
    with Ledger(f"duckdb:///{path}") as led:
        led.init()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,sys,time; c=duckdb.connect({str(path)!r}); print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LedgerLocked) as info:
            Ledger(f"duckdb:///{path}")
        msg = str(info.value)
        assert msg.startswith(f"{path} is held by another process")
        assert "close that process" in msg and "Traceback" not in msg
    finally:
        holder.kill()
        holder.wait()


def test_ledgers_open_on_one_url_share_an_engine_and_the_last_close_releases_the_database(ledger_url: str) -> None:
    """A ledger opened again in one process reuses the engine (its dialect set up, its statements
    compiled); the connections close with the last ledger open on the URL, not with the first."""

    gc.collect()  # ledgers earlier tests of this process left open (on this worker's one PostgreSQL URL) are released
    first = Ledger(ledger_url)
    second = Ledger(ledger_url)
    assert second.engine is first.engine
    first.status()
    second.close()
    assert first.engine.pool.checkedin() == 1  # still first's: its next operation needs no new connection
    first.close()
    first.close()  # closing twice releases once
    assert first.engine.pool.checkedin() == 0 and first.engine.pool.checkedout() == 0
    if first.backend == "duckdb":  # the file is free for another process's writer
        path = ledger_url.removeprefix("duckdb:///")
        code = f"import duckdb; duckdb.connect({path!r}).execute('CHECKPOINT')"
        assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).returncode == 0
    third = Ledger(ledger_url)
    assert third.engine is first.engine and third.status().revision == first.status().revision
    third.close()


def test_eight_engines_are_kept_and_a_ledger_never_closed_is_released_when_collected(ledger_url: str) -> None:
    """Eight engines in all: one in use whatever its age, then the most recently used."""
    from bench_ledger import store

    gc.collect()  # ledgers earlier tests of this process left open are released
    held = Ledger(ledger_url)
    others = [f"duckdb:///{i}.duckdb" for i in range(store._ENGINES_KEPT + 2)]
    for url in others:  # an engine made and released (none of them connects)
        store._acquire_engine((url, False, True))
        store._release_engine((url, False, True))
    in_use = sum(e.users > 0 for e in store._ENGINES.values())  # held's, and other open ledgers'
    kept = [k[0] for k in store._ENGINES if k[0] in others]
    assert (ledger_url, False, True) in store._ENGINES and len(store._ENGINES) == store._ENGINES_KEPT
    assert kept == others[len(others) - (store._ENGINES_KEPT - in_use) :], (kept, in_use)
    held.close()
    forgotten = Ledger(ledger_url)  # never closed: released when collected
    forgotten.status()
    engine = forgotten.engine
    del forgotten
    gc.collect()
    assert engine.pool.checkedin() == 0 and store._ENGINES[(ledger_url, False, True)].users == 0


def test_fingerprint_index_exists(ledger: Ledger) -> None:
    names = {ix["name"] for ix in sa.inspect(ledger.engine).get_indexes("deployment")}
    assert "ix_deployment_fingerprint" in names


def test_refresh_statistics_analyzes_on_postgresql(ledger: Ledger) -> None:
    ledger.refresh_statistics(("request", "request_gaps"))  # a no-op on DuckDB, ANALYZE on PostgreSQL
    if ledger.backend == "postgresql":
        with ledger.engine.connect() as conn:
            analyzed = (
                conn.exec_driver_sql(
                    "SELECT relname FROM pg_stat_user_tables WHERE relname IN ('request', 'request_gaps') "
                    "AND last_analyze IS NOT NULL AND schemaname = current_schema()"
                )
                .scalars()
                .all()
            )
        assert sorted(analyzed) == ["request", "request_gaps"]


def test_request_run_index_is_postgresqls_only(ledger: Ledger) -> None:
    """Migration 0015 drops ix_request_run_id on DuckDB (issue 17: its ART index cost 0.3-0.6 s of a 1M-request
    commit) and leaves PostgreSQL's btree; its downgrade brings DuckDB's back. Migration 0017 makes
    PostgreSQL's a block-range index (a btree entry per row was the largest share of the server's import
    after the heap); its downgrade brings the btree back."""
    from alembic import command
    from bench_ledger.store import alembic_config

    def names() -> set[str]:
        return {ix["name"] for ix in sa.inspect(ledger.engine).get_indexes("request")}

    def migrate(how: str, revision: str) -> None:
        cfg = alembic_config()
        with ledger.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            getattr(command, how)(cfg, revision)

    def method() -> str | None:  # PostgreSQL's index access method
        if ledger.backend != "postgresql":
            return None
        with ledger.engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
                "WHERE c.oid = 'ix_request_run_id'::regclass"
            ).scalar()

    on_pg = ledger.backend == "postgresql"
    assert names() == ({"ix_request_run_id"} if on_pg else set()) and method() == ("brin" if on_pg else None)
    migrate("downgrade", "0016")
    assert names() == ({"ix_request_run_id"} if on_pg else set()) and method() == ("btree" if on_pg else None)
    migrate("downgrade", "0014")
    assert names() == {"ix_request_run_id"}
    migrate("upgrade", "head")
    assert names() == ({"ix_request_run_id"} if on_pg else set()) and method() == ("brin" if on_pg else None)


SUPERSEDED = {f"ix_{t}_supersedes_id": t for t in ("run", "published_value", "launch")}


def test_superseding_rows_are_indexed_on_postgresql_only(ledger: Ledger) -> None:
    """Migration 0016: a partial index of supersedes_id on run, published_value and launch on PostgreSQL
    (the current-revision anti-join); none on DuckDB; the downgrade drops them, the upgrade brings them back."""
    from alembic import command
    from bench_ledger.store import alembic_config

    def indexes() -> dict[str, str]:
        insp = sa.inspect(ledger.engine)
        return {
            ix["name"]: str(ix.get("dialect_options", {}).get("postgresql_where"))
            for t in set(SUPERSEDED.values())
            for ix in insp.get_indexes(t)
            if ix["name"] in SUPERSEDED
        }

    def migrate(how: str, revision: str) -> None:
        cfg = alembic_config()
        with ledger.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            getattr(command, how)(cfg, revision)

    expected = dict.fromkeys(SUPERSEDED, "(supersedes_id IS NOT NULL)") if ledger.backend == "postgresql" else {}
    assert indexes() == expected
    migrate("downgrade", "0015")
    assert indexes() == {}
    migrate("upgrade", "head")
    assert indexes() == expected


def test_current_values_are_found_by_index_on_fresh_statistics(pg_ledger: Ledger, samples) -> None:  # noqa: ANN001
    """`ledger check` reads a batch's current published values (3,645 for one guidellm file) right after the
    import (fewer than 100k rows: no ANALYZE, so the planner estimates one row per table). Its statement's
    probe for a superseding row is an index lookup, not a sequential scan of the table per value (a nested
    loop of 12.3M comparisons, 1.7 s, before migration 0016; 8 ms after)."""
    from bench_ledger.queries.check.checker import check
    from sqlalchemy import event

    from tests.clirun import run
    from tests.queries.check.test_tool_definitions_on_samples import GUIDELLM

    run("import", "--db", pg_ledger.url, "-q", "--batch", "g", samples / GUIDELLM)
    seen: list[tuple[str, object]] = []

    def keep(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        if "artefact_format" in statement:
            seen.append((statement, parameters))

    event.listen(pg_ledger.engine, "before_cursor_execute", keep)
    try:
        check(pg_ledger, batch="g")
    finally:
        event.remove(pg_ledger.engine, "before_cursor_execute", keep)
    assert len(seen) == 1
    with pg_ledger.engine.connect() as conn:
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + seen[0][0], seen[0][1]))  # type: ignore[arg-type]
    assert "ix_published_value_supersedes_id" in plan, plan
    assert "Seq Scan on published_value published_value_1" not in plan, plan


def test_a_command_keeps_one_connection(ledger_url: str, tmp_path) -> None:
    """Each `ledger` command opens the database once and runs its operations on that connection (the
    pool); on PostgreSQL every new connection is a new server process."""
    from sqlalchemy.pool import Pool

    from tests.clirun import run
    from tests.queries.metrics.test_evaluate import write_requests

    path = write_requests(
        tmp_path / "r.jsonl",
        {"run": "r", "tool": "t"},
        [{"status": "ok", "input_tokens": 3, "output_tokens": 2, "ttft_s": 0.1, "latency_s": 0.2}],
    )
    opened: list[object] = []

    def connected(dbapi: object, record: object) -> None:
        opened.append(dbapi)

    sa.event.listen(Pool, "connect", connected)
    try:
        for args in (
            ["import", str(path), "--batch", "b"],
            ["metrics", "--batch", "b"],
            ["status"],
            ["batches"],
            ["verify"],
            ["close", "b"],
        ):
            opened.clear()
            run(args[0], "--db", ledger_url, *args[1:])
            assert len(opened) == 1, (args, len(opened))
    finally:
        sa.event.remove(Pool, "connect", connected)
