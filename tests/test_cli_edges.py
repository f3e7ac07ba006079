"""Surprising defaults at the edges of the CLI (issue 13): nothing created, destroyed or dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

from bench_ledger.cli import main
from click.testing import CliRunner

NATIVE = Path(__file__).resolve().parent / "fixtures" / "ledger_requests" / "native.jsonl"
CSV = Path(__file__).resolve().parent / "fixtures" / "ledger_requests" / "native.csv"


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    return result


def test_import_into_a_new_batch_says_it_created_it(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    first = run("import", "--db", ledger_url, "--batch", "fx", str(NATIVE))
    assert first.stderr == (f"note: batch 'fx' did not exist: created it (open) for {NATIVE.name}; "
                            "`ledger batches` lists them\n")  # fmt: skip
    again = run("import", "--db", ledger_url, "--batch", "fx", str(CSV))  # an existing batch: no note
    assert again.stderr == ""
    typo = run("import", "--db", ledger_url, "--batch", "fxx", "--run", "other", str(CSV.with_name("epoch_ns.csv")))
    assert "note: batch 'fxx' did not exist: created it (open)" in typo.stderr
    names = [b["name"] for b in json.loads(run("batches", "--db", ledger_url, "--json").output)]
    assert names == ["fx", "fxx"]


def test_no_command_but_init_creates_a_ledger_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    res = run("status", code=1)
    assert res.output == ("error: no ledger at ledger.duckdb (no such file): "
                          "`ledger init --db duckdb:///ledger.duckdb` creates one\n")  # fmt: skip
    res = run("import", "--db", "foo", "--batch", "b", str(NATIVE), code=1)  # no scheme: a DuckDB file, not created
    assert res.output == "error: no ledger at foo (no such file): `ledger init --db duckdb:///foo` creates one\n"
    assert list(tmp_path.iterdir()) == []
    run("init", "--db", "foo")  # init is the one that creates it
    assert (tmp_path / "foo").is_file()
    assert "schema:   0" in run("status", "--db", "foo").output


def test_a_bad_db_url_is_a_usage_error(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run("status", "--db", "mysql://u@h/db", code=2)
    assert res.output == ("Error: Invalid value for '--db' / $LEDGER_DB: unsupported database 'mysql' in mysql://u@h/db: "
                          "use duckdb:///FILE or postgresql+psycopg://USER@HOST/DB\n")  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_duckdb_url_settings_are_a_documented_few(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_DB", "duckdb:///l.duckdb?allow_unsigned_extensions=true")
    res = run("init", code=2)
    assert res.output == ("Error: Invalid value for '--db' / $LEDGER_DB: DuckDB setting(s) allow_unsigned_extensions "
                          "not allowed in a ledger URL; allowed: threads, memory_limit, temp_directory, "
                          "max_temp_directory_size\n")  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("LEDGER_DB", "duckdb:///l.duckdb?threads=1&memory_limit=1GB")
    run("init")
    assert "backend:  duckdb" in run("status").output


def test_demo_refuses_a_folder_it_did_not_make(tmp_path) -> None:
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "ledger.duckdb").write_text("a user's ledger")
    (mine / "data" / "keep.txt").write_text("a user's file")
    res = run("demo", "--out", str(mine), code=1)
    assert res.output == (f"error: {mine} is not empty and was not made by `ledger demo` (no .bench-ledger-demo in it): "
                          "nothing deleted; give a new or empty folder with --out\n")  # fmt: skip
    assert (mine / "ledger.duckdb").read_text() == "a user's ledger"
    assert (mine / "data" / "keep.txt").read_text() == "a user's file"
    assert sorted(p.name for p in mine.iterdir()) == ["data", "ledger.duckdb"]
