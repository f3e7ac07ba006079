"""Tables fit the terminal (issue 39): `ledger runs`, `metrics`, `check`, `hardware` in 80 columns on real
files, long labels cut in the middle so two sweep runs stay apart, columns folded under each row with a
note, `--wide` for everything."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger.cli.app import display_width, elide

from tests.clirun import run
from tests.conftest import SHARED, shared_folder

SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


def test_elide_keeps_the_head_and_the_tail_in_display_columns() -> None:
    assert elide("abcdefghij", 10) == "abcdefghij"
    assert elide("abcdefghijkl", 7) == "abc…jkl"
    assert display_width("并发数") == 6 and elide("并发数量对比表", 7) == "并发…表"


@pytest.fixture
def sweep_ledger(ledger_url: str, samples: Path) -> str:
    dmon = samples / "dmon"
    run("import", "--db", ledger_url, "--batch", "sweep", "-q", samples / SWEEP, *sorted(dmon.iterdir()))
    return ledger_url


@pytest.mark.parametrize(
    "command",
    [["runs"], ["metrics", "--batch", "sweep"], ["check", "--batch", "sweep"], ["hardware", "--batch", "sweep"]],
)
def test_tables_fit_80_columns_and_wide_shows_everything(
    sweep_ledger: str, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = run(*command, "--db", sweep_ledger).output
    table = out.split("\n== across cards")[0]  # hardware's per-statistic notes below are sentences, not a table
    lines = [line for line in table.splitlines() if not line.startswith(("d = derived", "note:", "(fitted"))]
    assert max(map(display_width, lines)) <= 80
    assert "--wide shows everything)" in " ".join(out.split())  # the note wraps too
    wide = run(*command, "--db", sweep_ledger, "--wide").output
    assert "--wide shows everything" not in wide and max(map(display_width, wide.splitlines())) > 80


def test_two_sweep_runs_stay_apart_in_80_columns(sweep_ledger: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = run("runs", "--db", sweep_ledger).output.splitlines()
    assert out == [
        "id  batch  label                     tool        concurrency  request_  requests",
        "                                                              count",
        "1   sweep  vllm-sweep …mpts=8 run=0  vllm-bench  2            8         0",
        "    artefacts: 2",
        "2   sweep  vllm-sweep …mpts=8 run=1  vllm-bench  2            8         0",
        "    artefacts: 2",
        "(fitted to 80 columns: 2 cell(s) cut in the middle ('…'); under each row:",
        "artefacts; left out, empty: input_target_tokens, output_cap_tokens; --wide shows",
        "everything)",
    ]
    wide = run("runs", "--db", sweep_ledger, "--wide").output
    assert f"vllm-sweep {SWEEP.split('/', 1)[1]} run=1" in wide


def test_piped_tables_keep_their_rows_whole(sweep_ledger: str) -> None:
    """No $COLUMNS and no terminal (CliRunner's stdout): one line per row, as before (stable for pipes)."""
    out = run("runs", "--db", sweep_ledger).output.splitlines()
    assert out[-1] == "(2 cell(s) cut in the middle ('…'); --wide shows everything)"
    assert len(out) == 4 and out[0].split() == [
        "id",
        "batch",
        "label",
        "tool",
        "input_target_tokens",
        "output_cap_tokens",
        "concurrency",
        "request_count",
        "requests",
        "artefacts",
    ]


def test_a_real_h100_console_sweep_fits(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = shared_folder(SHARED / Path("real-reports/wentao274-vllm-h100-concurrency-zh/reports/benchmark/nvidia_h100"))
    run("import", "--db", ledger_url, "--batch", "h100", "-q", logs)
    monkeypatch.setenv("COLUMNS", "80")
    out = run("metrics", "--db", ledger_url, "--batch", "h100").output.splitlines()
    table = [line for line in out if not line.startswith(("d = derived", "(fitted"))]
    assert max(map(display_width, table)) <= 80
    assert sum(line.startswith("h100 ") for line in table) == 10
