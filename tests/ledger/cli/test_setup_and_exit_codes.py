from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bench_ledger.cli import main
from bench_ledger.store import Ledger
from click.testing import CliRunner

MANIFEST = Path(__file__).resolve().parents[2] / "fixtures" / "manifest" / "system.yaml"


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def test_init_then_status(empty_ledger_url: str) -> None:
    ledger_url = empty_ledger_url
    out = run("init", "--db", ledger_url).output
    assert "schema empty -> 0002" in out or "->" in out
    again = run("init", "--db", ledger_url).output
    assert "schema already at revision" in again
    st = json.loads(run("status", "--db", ledger_url, "--json").output)
    assert st["revision"] == st["head"]
    assert st["counts"]["request"] == 0


def test_commands_on_uninitialised_ledger_say_what_to_do(empty_ledger_url: str) -> None:
    ledger_url = empty_ledger_url
    res = run("batches", "--db", ledger_url, ok=False)
    assert res.exit_code == 1
    if ledger_url.startswith("duckdb"):  # no file: none is created (issue 13)
        file = ledger_url.removeprefix("duckdb:///")
        assert res.output == f"error: no ledger at {file} (no such file): `ledger init --db {ledger_url}` creates one\n"
        assert not Path(file).exists()
    else:
        assert "has no schema: run `ledger init`" in res.output


def test_default_db_is_ledger_duckdb_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    run("init")
    assert (tmp_path / "ledger.duckdb").exists()
    assert "duckdb:///ledger.duckdb" in run("status").output


def test_declare_records_everything_once(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    out = run("declare", "--db", ledger_url, str(MANIFEST)).output
    assert "deployment: 2 declared, 0 already there" in out
    assert "launch: 2 declared" in out and "run: 1 declared" in out
    again = run("declare", "--db", ledger_url, str(MANIFEST)).output
    assert "deployment: 0 declared, 2 already there" in again
    batches = json.loads(run("batches", "--db", ledger_url, "--json").output)
    assert [(b["name"], b["status"], b["deployment"], b["runs"]) for b in batches] == [("fx", "open", "h20-1017", 1)]
    runs = json.loads(run("runs", "--db", ledger_url, "--batch", "fx", "--json").output)
    assert runs[0]["label"] == "50k-200-c4n8" and runs[0]["concurrency"] == 4
    shown = run("show", "run", str(runs[0]["id"]), "--db", ledger_url).output
    assert "warm state: prefix_cache cold, process warm, compile warm, file_cache warm" in shown
    with Ledger(ledger_url) as led, led.session() as s:
        from bench_ledger import models as m

        deps = {d.name: d for d in s.query(m.Deployment)}
        assert deps["h20-1017"].gpu_memory_unit == "MiB" and str(deps["h20-1017"].size_on_disk) == "510.31"
        assert deps["h20-1017"].fingerprint != deps["h20-old"].fingerprint
        assert len(deps["h20-1017"].fingerprint) == 64


def test_redeclaring_with_different_content_is_refused(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    run("declare", "--db", ledger_url, str(MANIFEST))
    changed = tmp_path / "system.yaml"
    shutil.copy(MANIFEST.parent / "report.txt", tmp_path / "report.txt")
    changed.write_text(MANIFEST.read_text().replace("max_num_seqs: 32\n    launches", "max_num_seqs: 16\n    launches"))
    res = run("declare", "--db", ledger_url, str(changed), ok=False)
    assert res.exit_code == 3
    assert "refused (R10): redeclare deployment 'h20-1017' with different fingerprint, max_num_seqs" in res.output


def test_bad_manifest_names_the_field(tmp_path: Path, ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    bad = tmp_path / "bad.yaml"
    bad.write_text("deployments:\n  - name: x\n    tp: eight\n")
    res = run("declare", "--db", ledger_url, str(bad), ok=False)
    assert res.exit_code == 1
    assert (
        res.output
        == f"error: {bad}, line 3: deployments.0.tp: Input should be a valid integer, unable to parse string as an integer\n"
    )


def test_unknown_run_and_batch(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    res = run("show", "run", "42", "--db", ledger_url, ok=False)
    assert res.exit_code == 1 and "no run with id 42; `ledger runs` lists them" in res.output
    res = run("runs", "--batch", "nope", "--db", ledger_url, ok=False)
    assert "no batch named 'nope'" in res.output


def test_usage_error_exits_2() -> None:
    assert run("show", "run", "notanumber", ok=False).exit_code == 2


def test_every_command_help_has_an_example() -> None:
    for name, cmd in main.commands.items():
        if hasattr(cmd, "commands"):
            continue
        assert "Example:" in (cmd.help or ""), name


def test_manifest_schema_is_published_and_documents_every_field() -> None:
    from bench_ledger.declare import manifest_schema

    published = Path(__file__).resolve().parents[3] / "docs" / "manifest.schema.json"
    assert published.read_text(encoding="utf-8") == manifest_schema(), (
        "docs/manifest.schema.json is stale: run `python -m ledger.declare --schema > docs/manifest.schema.json`"
    )
    schema = json.loads(manifest_schema())
    for name, node in [("Manifest", schema), *schema["$defs"].items()]:
        for field, spec in node.get("properties", {}).items():
            assert "description" in spec, f"{name}.{field} has no description"


def test_a_bug_reaches_the_user_as_one_line_and_exit_70(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No traceback reaches a user: an exception that is none of the ledger's own (a bug) prints one line
    naming it, and exit 70; LEDGER_DEBUG=1 (which the suite sets) lets it propagate with its traceback."""

    def boom(self) -> None:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(Ledger, "require_schema", boom)
    monkeypatch.delenv("LEDGER_DEBUG")
    res = CliRunner().invoke(main, ["batches", "--db", ledger_url])
    assert res.exit_code == 70
    assert isinstance(res.exception, SystemExit)
    assert res.output == (
        "internal error: ZeroDivisionError: division by zero\n"
        "  this is a bug in bench-ledger, not a verdict on your input; run the command again with\n"
        "  LEDGER_DEBUG=1 to print the traceback, and report it\n"
    )
    monkeypatch.setenv("LEDGER_DEBUG", "1")
    res = CliRunner().invoke(main, ["batches", "--db", ledger_url])
    assert isinstance(res.exception, ZeroDivisionError)


def test_click_usage_errors_keep_their_own_exit_code(ledger_url: str) -> None:
    res = CliRunner().invoke(main, ["metrics", "--db", ledger_url, "--no-such-option"])
    assert res.exit_code == 2 and "Error: No such option '--no-such-option'." in res.output


def test_a_listing_piped_to_a_reader_that_leaves_exits_quietly(tmp_path: Path) -> None:
    """`ledger formats | head -0`: the reader closes the pipe before the command writes. It was an
    internal error (exit 70, or with LEDGER_DEBUG=1 a BrokenPipeError traceback); now nothing is printed
    and the command exits 1, as click's main does for a broken pipe (issue 39)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DEBUG"}
    for debug in ({}, {"LEDGER_DEBUG": "1"}):
        proc = subprocess.Popen(
            [sys.executable, "-c", "from bench_ledger.cli import run; run()", "formats"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, **debug},
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the interpreter has started: every write of the command fails
        err = proc.stderr.read()
        assert (proc.wait(timeout=60), err) == (1, b"")
