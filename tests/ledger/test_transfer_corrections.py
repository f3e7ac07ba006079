"""An exported batch with a corrected run loads into another ledger (ledger.transfer): on DuckDB it stopped
with an internal error, the correction's reference to the run it supersedes checked before that run was in."""

from __future__ import annotations

from pathlib import Path

from tests.batches import bench_json, cli


def test_a_closed_batch_with_a_corrected_run_is_exported_and_loaded_with_its_history(
    ledger_url: str, tmp_path: Path
) -> None:
    cli("import", bench_json(tmp_path / "bench.json"), "--batch", "fx", "--db", ledger_url)
    cli("correct", "run", 1, "--set", "seed=7", "--reason", "the seed was 7", "--db", ledger_url)
    cli("correct", "run", 2, "--set", "seed=8", "--reason", "the seed was 8", "--db", ledger_url)
    cli("close", "fx", "--db", ledger_url)
    cli("export", "fx", "--to", tmp_path / "export", "--db", ledger_url)
    other = f"duckdb:///{tmp_path / 'other.duckdb'}"
    cli("init", "--db", other)
    out = cli("import-export", tmp_path / "export", "--db", other).output
    assert "seal verified and batch fx loaded" in out
    assert "batch fx: ok, seal" in cli("verify", "--db", other).output
    history = cli("history", "run", 3, "--db", other).output.splitlines()
    assert [line.split()[:2] for line in history[1:]] == [["1", "0"], ["2", "1"], ["3", "2"]]  # id, revision
    assert [line.split()[2] for line in history[2:]] == ["1", "2"]  # the run each correction supersedes
