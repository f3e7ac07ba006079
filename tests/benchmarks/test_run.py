"""`benchmarks/run.py --quick` keeps working: every part of the script runs once and writes its report.
No timing is asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _backends() -> list[str]:
    """The backends the benchmark smoke tests run on: DuckDB, and PostgreSQL when it answers (required
    with LEDGER_REQUIRE_PG=1)."""
    from tests.conftest import REQUIRE_PG, pg_problem

    if pg_problem() is not None and REQUIRE_PG:
        pytest.fail(f"PostgreSQL is required (LEDGER_REQUIRE_PG=1): {pg_problem()}")
    return ["duckdb"] + (["postgresql"] if pg_problem() is None else [])


def test_quick_benchmark_completes_and_writes_its_report(tmp_path: Path) -> None:
    """`run.py --quick` runs every part of the script once: every input on the first backend, the vLLM
    import with its metrics and audit on the other."""
    import os

    from tests.conftest import PG_URL

    backends = _backends()
    out = tmp_path / "BENCHMARKS.quick.md"
    raw = tmp_path / "not-yet" / "figures.json"  # its folder made by the script
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--out",
            str(out),
            "--json",
            str(raw),
            "--backends",
            ",".join(backends),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LEDGER_BENCH_PG_URL": PG_URL},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = out.read_text()
    assert {"figures", "baselines"} <= set(json.loads(raw.read_text()))
    assert "## Import" in text and "## Machine" in text and "## Baselines" in text
    assert re.search(
        r"^- python speed: \d+\.\d{3} s for 2,000,000 integer additions in a loop \(best of 5\)$", text, re.M
    ), text
    assert "exit " not in text, text  # every `ledger import` of the benchmark succeeded
    imported = [
        tuple(c.strip() for c in line.split("|")[1:3])
        for line in text.split("## Import")[1].split("\n## ")[0].splitlines()
        if line.startswith(("| duckdb |", "| postgresql |"))
    ]
    assert imported == [
        ("duckdb", "vLLM detailed JSON Lines"),
        ("duckdb", "ledger JSON Lines (one file per run)"),
        ("duckdb", "nvidia-smi dmon -o DT (long rows)"),
    ] + [(b, "vLLM detailed JSON Lines") for b in backends[1:]]
    for b in backends:  # the metrics and audit timings ran (quick: 100 claims) on every backend
        assert f"- {b}: every run's metrics for 10 runs:" in text and f"- {b}: audit of 100 claims:" in text, text
    assert "- duckdb: ledger check of one run of 5,000 requests:" in text, text
    if "postgresql" in backends:  # each PostgreSQL figure timed on a server done vacuuming the earlier ones
        assert re.search(
            r"^- postgresql: before its figures the benchmark waited \d+\.\d s in all for autovacuum "
            r"workers to finish \(`Pg\.settle`\)$",
            text,
            re.M,
        ), text
    assert "- duckdb: ledger hardware of the dmon batch (57,600 samples): " in text, text
    # the fixed cost of a command that opens a ledger, next to the interpreter's own start-up
    for what in ("start-up: ledger --help", "start-up: ledger status", "start-up: ledger import of one vLLM result"):
        assert f"- {what}" in text, text
    assert text.count("(interpreter alone: ") >= 3, text  # --help's target row and the two commands' lines
