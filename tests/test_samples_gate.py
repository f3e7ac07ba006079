"""Real-sample tests on a clone without ../shared: one clear skip line, or a failure under CI's flag."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ONE_TEST = "tests/ledger/cli/test_import_command.py::test_same_bytes_twice_is_a_no_op"  # reads ../shared/samples


def pytest_run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("LEDGER_REQUIRE_SAMPLES", "LEDGER_SHARED")}
    environ.update(env, LEDGER_SHARED=str(tmp_path / "no-shared"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "duckdb", ONE_TEST],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_absent_samples_skip_with_one_line(tmp_path: Path) -> None:
    res = pytest_run(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [line for line in res.stdout.splitlines() if "SKIPPED" in line]
    assert lines == [
        f"SKIPPED 1 test(s): {tmp_path / 'no-shared' / 'samples'} is absent "
        "(real-sample test; LEDGER_REQUIRE_SAMPLES=1 makes this a failure)"
    ]


def test_ci_flag_turns_the_skip_into_a_failure(tmp_path: Path) -> None:
    res = pytest_run(tmp_path, LEDGER_REQUIRE_SAMPLES="1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        f"Failed: {tmp_path / 'no-shared' / 'samples'} is absent and LEDGER_REQUIRE_SAMPLES=1: "
        "real-sample tests must run"
    ) in res.stdout
