"""Declared rows of an open batch are tamper-evident (issue 39, R10): raw SQL that changes a source report,
deployment, launch, batch, run or published value is refused by PostgreSQL's triggers, and found by
`ledger verify` on DuckDB (no triggers there: the digests the ledger keeps at each write), where `ledger close`
refuses to seal it. Every workflow of the ledger itself still verifies clean, on both backends."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger.store import Ledger

from tests.clirun import run

MANIFEST = """\
version: 1
source_reports:
  - {slug: rep, title: "a report", file: report.txt}
deployments:
  - name: dep
    gpu_model: H20
    launches:
      - {attempt: 1, outcome: ready, cause: first start, log: server.log}
batches:
  - {name: b, deployment: dep}
runs:
  - {batch: b, label: qps1, request_rate: 1.0, request_count: 150, tool: vllm-bench}
  - {batch: b, label: qps2, request_rate: 2.0, request_count: 150, tool: vllm-bench}
"""
VLLM = (
    "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json",
    "openai-2.0qps-Qwen2.5-Coder-7B-Instruct-20260707-094353.json",
)

# (table, a raw change behind the ledger): one row of each declared table
TAMPER = [
    ("source_report", "UPDATE source_report SET title = 'another report'"),
    ("deployment", "UPDATE deployment SET gpu_model = 'H100'"),
    ("launch", "UPDATE launch SET cause = 'edited'"),
    ("batch", "UPDATE batch SET description = 'edited'"),
    ("run", "UPDATE run SET concurrency = 99 WHERE id = 1"),
    ("published_value", "UPDATE published_value SET text = '999' WHERE id = (SELECT min(id) FROM published_value)"),
    ("published_value", "DELETE FROM published_value WHERE id = (SELECT max(id) FROM published_value)"),
]
SEALED = {"deployment", "batch", "run", "published_value"}  # what `ledger close` seals (the batch's rows)


def _build(url: str, samples: Path, tmp_path: Path) -> None:
    """A declared system (source report, deployment, launch with its real server log, batch, runs), the real
    vLLM results attached to the declared runs, one run corrected: every kind of declared row, as the ledger
    writes them (declare, import, the learning of a declared run, a correction)."""
    (tmp_path / "report.txt").write_text("a report\n", encoding="utf-8")
    shutil.copyfile(samples / "vllm-server-log" / "vllm-7B-1gpuA10080GB-0.5GRAM.log", tmp_path / "server.log")
    (tmp_path / "m.yaml").write_text(MANIFEST, encoding="utf-8")
    run("declare", tmp_path / "m.yaml", "--db", url)
    run("import", *(samples / "vllm" / f for f in VLLM), "--batch", "b", "--db", url)
    run("correct", "run", 2, "--set", "seed=7", "--reason", "the seed was 7", "--db", url)


def _raw(url: str, sql: str) -> None:
    """``sql`` from another client: a connection of its own, not the ledger's."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def test_the_ledgers_own_writes_verify_clean(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    _build(ledger_url, samples, tmp_path)
    # an artefact of a run attached to another run afterwards (a correction), and a group import
    run(
        "import",
        samples / "vllm" / "openai-4.0qps-Qwen2.5-Coder-7B-Instruct-20260707-094620.json",
        "--batch",
        "b",
        "--run",
        "spare",
        "--db",
        ledger_url,
    )
    run("import", samples / "llmperf", "--batch", "lp", "--db", ledger_url)
    run("declare", tmp_path / "m.yaml", "--db", ledger_url)  # declaring again changes nothing
    out = run("verify", "--db", ledger_url).output
    if ledger_url.startswith("duckdb"):
        assert "\ndeclared rows: ok, " in out and "rows match the digests the ledger kept at its writes" in out
    run("close", "lp", "--db", ledger_url)  # the first seal of the chain: its export loads into a fresh ledger
    run("close", "b", "--db", ledger_url)
    run("verify", "--db", ledger_url)
    folder = tmp_path / "export"
    run("export", "lp", "--to", folder, "--db", ledger_url)
    other = f"duckdb:///{tmp_path / 'other.duckdb'}"
    run("init", "--db", other)
    run("import-export", folder, "--db", other)
    assert "declared rows: ok" in run("verify", "--db", other).output


@pytest.mark.parametrize(("table", "sql"), TAMPER, ids=[f"{t}-{s.split()[0].lower()}" for t, s in TAMPER])
def test_duckdb_verify_names_a_declared_row_changed_behind_the_ledger(
    samples: Path, tmp_path: Path, table: str, sql: str
) -> None:
    url = f"duckdb:///{tmp_path / 'l.duckdb'}"
    run("init", "--db", url)
    _build(url, samples, tmp_path)
    run("verify", "--db", url)
    _raw(url, sql)
    out = run("verify", "--db", url, code=1).output
    what = "deleted behind the ledger" if sql.startswith("DELETE") else "changed behind the ledger since it wrote them"
    assert "declared rows: MISMATCH" in out and f"  table {table}: 1 row(s) {what}: id=" in out
    if table in SEALED and not sql.startswith("DELETE"):
        out = run("close", "b", "--db", url, code=3).output
        assert out.startswith("refused (R10): close batch 'b'\n") and f"table {table}: 1 row(s) {what}: id=" in out
        assert "batch b: " not in run("verify", "--db", url, code=1).output  # nothing was sealed


@pytest.mark.parametrize(
    ("table", "sql"),
    [*TAMPER, ("run", "TRUNCATE run CASCADE"), ("launch", "DELETE FROM launch")],
    ids=lambda x: x.split()[0].lower(),
)
def test_postgresql_refuses_raw_changes_of_declared_rows(
    pg_ledger: Ledger, samples: Path, tmp_path: Path, table: str, sql: str
) -> None:
    url = pg_ledger.url
    _build(url, samples, tmp_path)
    with pytest.raises(sa.exc.DBAPIError, match=rf"refused by R10: (UPDATE|DELETE|TRUNCATE) of {table}"):
        _raw(url, sql)
    run("verify", "--db", url)
    run("close", "b", "--db", url)


def test_a_disabled_trigger_is_named_by_verify(pg_ledger: Ledger, samples: Path, tmp_path: Path) -> None:
    _build(pg_ledger.url, samples, tmp_path)
    _raw(pg_ledger.url, "ALTER TABLE run DISABLE TRIGGER ledger_writer_only")
    out = run("verify", "--db", pg_ledger.url, code=1).output
    assert (
        "database guards: trigger ledger_writer_only on run is disabled (tgenabled 'D'): "
        "ALTER TABLE run ENABLE TRIGGER ledger_writer_only" in out
    )


def test_an_upgraded_ledger_says_which_declared_rows_it_could_not_check(ledger_url: str, tmp_path: Path) -> None:
    """Rows written before migration 0018 have no digest: `ledger init` upgrades, and verify (DuckDB) says
    they were not checked and why, exit 1; PostgreSQL's triggers guard them from the upgrade on."""
    from alembic import command
    from bench_ledger.store import alembic_config

    with Ledger(ledger_url) as led:
        cfg = alembic_config()
        with led.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0017")
    _raw(ledger_url, "INSERT INTO batch (name, status, created_at) VALUES ('old', 'open', '2026-01-01 00:00:00')")
    assert run("init", "--db", ledger_url).output.endswith(": schema 0017 -> 0018\n")
    if ledger_url.startswith("postgresql"):
        run("verify", "--db", ledger_url)
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of batch"):
            _raw(ledger_url, "UPDATE batch SET description = 'x'")
        return
    out = run("verify", "--db", ledger_url, code=1).output
    assert (
        "declared rows: NOT VERIFIED\n  not checked: table batch: 1 row(s) have no digest (the ledger keeps none "
        "from before migration 0018: these rows were written before it), so they cannot be compared with what "
        "the ledger wrote: id=1\n"
    ) in out
    assert json.loads(run("status", "--db", ledger_url, "--json").output)["revision"] == "0018"
