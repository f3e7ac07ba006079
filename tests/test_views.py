"""The SQL views of migration 0003: same figures as the registry, per run, never across batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger.cli import main
from bench_ledger.queries.metrics.registry import run_metrics
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.test_metrics import RUN_A, write_requests


def test_views_match_the_registry(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    a = write_requests(tmp_path / "a.jsonl", {"run": "A", "tool": "t", "clock": "epoch_s"}, RUN_A)
    a2 = write_requests(tmp_path / "a2.jsonl", {"run": "A", "tool": "t", "clock": "epoch_s"}, RUN_A[:2])
    for f, b in ((a, "b1"), (a2, "b2")):
        res = CliRunner().invoke(main, ["import", "--db", ledger_url, str(f), "--batch", b])
        assert res.exit_code == 0, res.output
    with ledger.connection() as conn:
        rows = {r.batch: r for r in conn.execute(sa.text("SELECT * FROM v_run_metrics ORDER BY batch"))}
        fields = conn.execute(sa.text("SELECT COUNT(*) FROM v_capture_fields WHERE batch = 'b1'")).scalar()
    assert set(rows) == {"b1", "b2"}  # one row per run, each in its batch
    r = rows["b1"]
    assert (r.requests, r.requests_ok, r.requests_failed, r.input_tokens_ok, r.output_tokens_ok) == (4, 3, 1, 60, 6)
    assert r.wall_clock_s == 3.0 and r.total_tpm == 1320.0 and r.output_tpm == 120.0
    b2 = rows["b2"]  # 100.0 -> 102.5 with 2 requests: b2 is not pooled with b1
    assert (b2.requests_ok, b2.wall_clock_s, b2.output_tpm) == (2, 2.5, 60 * 6 / 2.5)
    assert fields == 9  # status, input/output tokens, send/first-token/end times, ttft, latency, chunk gaps
    # every figure of the view is the registry's metric of the same run (one definition)
    view_to_metric = {
        "requests_ok": "requests_ok",
        "requests_failed": "requests_failed",
        "input_tokens_ok": "input_tokens",
        "output_tokens_ok": "output_tokens",
        "wall_clock_s": "wall_clock_s",
        "total_tpm": "total_tpm",
        "output_tpm": "output_tpm",
    }
    for rm in run_metrics(ledger, metrics=tuple(view_to_metric.values())):
        view = rows[rm.batch]
        for column, metric in view_to_metric.items():
            mv = rm.values[metric]
            assert mv.value is not None and getattr(view, column) == pytest.approx(float(mv.value), rel=1e-12), (
                column,
                mv,
            )


def test_views_are_null_without_times(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    f = write_requests(
        tmp_path / "b.jsonl",
        {"run": "B", "tool": "t", "duration_s": 10.0},
        [{"status": "ok", "input_tokens": 1, "output_tokens": 2}],
    )
    assert CliRunner().invoke(main, ["import", "--db", ledger_url, str(f), "--batch", "b"]).exit_code == 0
    with ledger.connection() as conn:
        r = conn.execute(sa.text("SELECT wall_clock_s, total_tpm FROM v_run_metrics")).one()
    assert r.wall_clock_s is None and r.total_tpm is None
