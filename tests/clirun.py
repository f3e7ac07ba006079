"""The one way tests run the `ledger` command in-process: exit code checked, output on failure."""

from __future__ import annotations

from bench_ledger.cli import main
from click.testing import CliRunner, Result


def run(*args: object, code: int = 0) -> Result:
    """`ledger ARGS...` (each argument as text); fails the test unless it exits with ``code``."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result
