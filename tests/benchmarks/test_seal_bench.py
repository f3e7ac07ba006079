"""`benchmarks/seal_bench.py`: its ratios are those of its own run's figures, and `--repeat` runs whole runs.
No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_run import ROOT, _backends


def _check_seal_output(stdout: str, backends: list[str], runs: int) -> None:
    """What seal_bench.py printed: each ratio is the quotient of figures of the same run and backend (its
    JSON), the table shows exactly those, and every run covers the same rows."""
    import json

    lines = stdout.splitlines()
    out = json.loads(lines[-1])
    assert out["sizes"] == {"runs": 10, "per_run": 200, "gaps": 16}
    assert len(out["runs"]) == runs
    rows = {r["rows"] for run in out["runs"] for r in run["results"]}
    assert len(rows) == 1 and rows.pop() > 10 * 200 * 16  # the same batch every time, requests and gaps at least
    text = "\n".join(lines[:-1])
    for n, run in enumerate(out["runs"], 1):
        assert [r["backend"] for r in run["results"]] == backends
        block = text.split(f"**Run {n} of {runs} (started {run['started']})**")[1].split("**Run")[0]
        for r in run["results"]:
            assert 0 < r["digest_s"] < r["import_s"] and r["close_s"] > 0 and r["verify_s"] > 0 and r["close_mb"] > 0
            assert r["close_ratio"] == r["close_s"] / r["import_s"]
            assert r["verify_ratio"] == r["verify_s"] / r["import_s"]
            assert r["digest_share"] == r["digest_s"] / (r["import_s"] - r["digest_s"])
            line = next(ln for ln in block.splitlines() if ln.startswith(f"| {r['backend']} |"))
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells == [
                r["backend"],
                f"{r['import_s']:.2f} s",
                f"{r['digest_s']:.2f} s",
                f"{r['digest_share']:.1%}",
                f"{r['close_s']:.2f} s",
                f"{r['close_ratio']:.2f}x",
                f"{r['close_mb']:,.0f} MB",
                f"{r['verify_s']:.2f} s",
                f"{r['verify_ratio']:.2f}x",
            ]


def test_quick_seal_benchmark_reports_ratios_of_its_own_run() -> None:
    """`benchmarks/seal_bench.py --quick` imports, closes and verifies on each backend the suite runs on,
    every command a subprocess of its own (:func:`_check_seal_output`). One run: `--repeat` runs the same
    code again (its loop and tables: the next test), at ~1 s of CPU per command. No timing is asserted."""
    import os

    from tests.conftest import PG_URL

    backends = _backends()
    env = {**os.environ, "LEDGER_BENCH_PG_URL": PG_URL}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "seal_bench.py"),
            "--quick",
            "--repeat",
            "1",
            *(a for b in backends for a in ("--backend", b)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check_seal_output(proc.stdout, backends, 1)


def test_seal_benchmark_repeats_whole_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """`--repeat 2`: two whole runs one after the other over the same generated file, each backend's
    ledger in the run's own folder, one table per run. The commands are the previous test's; here each
    backend's figures are the arithmetic of `ratios` over a run's figures, not subprocesses."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import seal_bench

    calls: list[tuple[str, str, str]] = []

    def one_backend(backend: str, data: Path, tmp: Path) -> dict:
        assert data.stat().st_size > 0
        calls.append((backend, data.name, tmp.name))
        k = len(calls)
        return {
            "backend": backend,
            "rows": 32_001,
            "import_s": 2.0 * k,
            "import_mb": 100.0,
            "digest_s": 0.25 * k,
            "close_s": 1.5 * k,
            "close_mb": 200.0 + k,
            "verify_s": 1.25 * k,
            "verify_mb": 90.0,
        }

    monkeypatch.setattr(seal_bench, "one_backend", one_backend)
    monkeypatch.setattr(seal_bench.gen, "vllm_and_ledger", lambda path, *a, **k: path.write_text("{}\n"))
    assert seal_bench.main(["--quick", "--repeat", "2", "--backend", "duckdb", "--backend", "postgresql"]) == 0
    assert [c[0] for c in calls] == ["duckdb", "postgresql"] * 2
    assert {c[1] for c in calls} == {"vllm_gaps16.jsonl"}  # generated once, read by every run
    assert [c[2] for c in calls] == ["r0", "r0", "r1", "r1"]  # each run's ledgers in a folder of its own
    _check_seal_output(capsys.readouterr().out, ["duckdb", "postgresql"], 2)
