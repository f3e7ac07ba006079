"""Importing real samples for the `check` tests of one tool, and tallying the rows `check` gives."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench_ledger.cli import main
from click.testing import CliRunner


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, "-q", *args])
    assert res.exit_code == 0, res.output


def files(samples: Path, folder: str) -> list[str]:
    return sorted(str(p) for p in (samples / folder).rglob("*") if p.is_file())


def tally(rows) -> Counter:
    return Counter((r.section, r.status) for r in rows)
