"""Declaring a manifest again (R10): a declared run or launch that was corrected since is matched to its first
declaration or its current revision, whichever order the database returns its revisions in."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from bench_ledger.store import Ledger

from tests.clirun import run

MANIFEST = """\
version: 1
deployments:
  - name: dep
    gpu_model: H20
    launches:
      - {{attempt: 1, outcome: ready, cause: {cause}}}
batches:
  - {{name: b, deployment: dep}}
runs:
  - {{batch: b, label: qps1, request_rate: 1.0, request_count: 150, tool: vllm-bench, seed: {seed}}}
"""


def _declare(url: str, tmp_path: Path, *, seed: int = 1, cause: str = "first start", code: int = 0) -> str:
    (tmp_path / "m.yaml").write_text(MANIFEST.format(seed=seed, cause=cause), encoding="utf-8")
    return run("declare", tmp_path / "m.yaml", "--db", url, code=code).output


def _corrected(url: str, tmp_path: Path) -> None:
    """The run and the launch declared, then each corrected: two revisions of each."""
    _declare(url, tmp_path)
    run("correct", "run", 1, "--set", "seed=7", "--reason", "the seed was 7", "--db", url)
    run("correct", "launch", 1, "--set", "cause=a restart", "--reason", "it was a restart", "--db", url)


def test_a_corrected_run_declared_again_is_unchanged_when_postgresql_returns_the_correction_first(
    pg_ledger: Ledger, tmp_path: Path
) -> None:
    url = pg_ledger.url
    _corrected(url, tmp_path)
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:  # the rows stored in descending revision: a scan meets the correction first
            for table in ("run", "launch"):
                conn.exec_driver_sql(f"CREATE INDEX ix_{table}_revision_desc ON {table} (revision DESC)")
                conn.exec_driver_sql(f"CLUSTER {table} USING ix_{table}_revision_desc")
            assert conn.exec_driver_sql("SELECT revision FROM run LIMIT 1").scalar() == 1
    finally:
        engine.dispose()
    out = _declare(url, tmp_path)
    assert "launch: 0 declared, 1 already there" in out and "run: 0 declared, 1 already there" in out


def test_a_run_declared_again_as_corrected_is_unchanged_and_a_third_value_is_refused(
    ledger_url: str, tmp_path: Path
) -> None:
    _corrected(ledger_url, tmp_path)
    assert "run: 0 declared, 1 already there" in _declare(ledger_url, tmp_path, seed=7, cause="a restart")
    out = _declare(ledger_url, tmp_path, seed=9, code=3)
    assert out.startswith("refused (R10): redeclare run 'qps1' with different seed\n")
