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
