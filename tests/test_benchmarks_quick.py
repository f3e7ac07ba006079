"""The benchmark keeps working (`benchmarks/run.py --quick`), and the dmon fast path it measures gives
exactly the rows of the line-by-line reader. No timing is asserted anywhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import bench_ledger.importers.dmon as dmon
import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers.base import ParseOptions
from bench_ledger.records import WideSamples

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dmon"


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


def test_generated_claims_file_is_valid_and_counts_its_claims(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen
    from bench_ledger.queries.claims import load_claims

    vllm = tmp_path / "v.jsonl"
    gen.vllm_and_ledger(vllm, 3, 20, 2, None)
    for n in (7, 100, 1000):
        out = tmp_path / f"c{n}.yaml"
        counts = gen.claims(vllm, out, n)
        claims = load_claims(out).claims  # the documented format; every referenced claim exists
        assert len(claims) == n == counts["metric"] + counts["derived"]
        assert counts["metric"] == sum(c.basis == "metric" for c in claims)
    assert (counts["metric"], counts["derived"], counts["evaluate_calls"]) == (600, 400, 700)


def _long(chunks) -> list[tuple]:
    out: list[tuple] = []
    for c in chunks:
        if isinstance(c, WideSamples):
            d = c.table.to_pydict()
            for name, unit in zip(c.counters, c.units, strict=True):
                out += [
                    (d["line"][i], c.node, d["gpu"][i], d["tick"][i], d["ts"][i], name, d[name][i], unit)
                    for i in range(c.table.num_rows)
                ]
        else:
            out += list(zip(c.line, c.node, c.gpu, c.tick, c.ts, c.counter, c.value, c.unit, strict=True))
    return sorted(out, key=lambda r: (r[0], r[5]))


def _both(path: Path) -> tuple[object, object]:
    res = []
    for chunks in (
        lambda: dmon._Reader(path, "n").chunks(),  # the readers, without the importer's
        lambda: dmon._wide_chunks(path, "n"),
    ):  # refusal of a cut last line
        try:
            res.append(_long(chunks()))
        except ParseError as exc:
            res.append(str(exc))
    return res[0], res[1]


def _big(path: Path, ticks: int = 2500, gpus: int = 16) -> list[str]:
    lines = []
    for t in range(ticks):
        if t % 20 == 0:
            lines += [
                "#Date       Time        gpu    pwr     sm    mem     fb",
                "#YYYYMMDD   HH:MM:SS    Idx      W      %      %     MB",
            ]
        day, rest = 4 + (t + 86_000) // 86_400, (t + 86_000) % 86_400
        hh, mm, ss = rest // 3600, rest // 60 % 60, rest % 60
        for g in range(gpus):
            lines.append(
                f" 202401{day:02d}   {hh:02d}:{mm:02d}:{ss:02d}    {g:3d}  {100 + g:5d}  {t % 101:5d}      -  {t:5d}"
            )
    return lines


@pytest.mark.parametrize("edit", ["none", "header_change", "gpu_repeat", "bad_value", "blank", "no_units", "no_eol"])
def test_dmon_wide_path_matches_the_line_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    monkeypatch.setattr(dmon, "_WIDE_BLOCK", 64 << 10)  # many blocks: the irregular one is not the first
    lines = _big(tmp_path / "x")
    at = 30_000
    if edit == "header_change":
        lines[at:at] = ["# gpu    pwr     sm", "# Idx      W      %"] + [f" {g} 1 2" for g in range(3)]
    elif edit == "gpu_repeat":
        lines.insert(at + 1, lines[at])
    elif edit == "bad_value":
        lines[at] = lines[at][:-5] + "  N/A"
    elif edit == "blank":
        lines.insert(at, "")
    elif edit == "no_units":
        lines.insert(at, lines[0])
    path = tmp_path / "d.txt"
    path.write_text("\n".join(lines) + ("" if edit == "no_eol" else "\n"))
    slow, fast = _both(path)
    assert fast == slow
    if edit == "no_eol":  # the importer refuses a last line without its line end (issue 13)
        with pytest.raises(ParseError, match="the last line has no line end"):
            dmon.IMPORTER.parse(path, ParseOptions(node="n"))


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.txt")))
def test_dmon_wide_path_matches_on_fixtures(name: str) -> None:
    slow, fast = _both(FIXTURES / name)
    assert fast == slow


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
