"""The SQL views of migration 0003: same figures as the registry, per run, never across batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger.cli import main
from bench_ledger.queries.metrics.registry import run_metrics
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.queries.metrics.test_evaluate import RUN_A, write_requests


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


# v_run_metrics's columns and the registry's metric of each (the views are SQL of their own, frozen in
# their migrations: this test holds them to the metric definitions, run by run)
VIEW_METRIC = {
    "requests_ok": "requests_ok",
    "requests_failed": "requests_failed",
    "requests_unknown": "requests_unknown",
    "input_tokens_ok": "input_tokens",
    "output_tokens_ok": "output_tokens",
    "wall_clock_s": "wall_clock_s",
    "total_tpm": "total_tpm",
    "output_tpm": "output_tpm",
    "output_tokens_per_s": "output_tokens_per_s",
}
# the view's figures it leaves NULL unless the records give them (no fallback to the tool's duration)
NULL_UNLESS_DERIVED = ("wall_clock_s", "total_tpm", "output_tpm", "output_tokens_per_s")
OUTPUT_RATES = ("output_tpm", "output_tokens_per_s")


def test_views_equal_the_registry_run_by_run_on_a_generated_ledger(
    ledger: Ledger, ledger_url: str, tmp_path: Path
) -> None:
    """Each metric both ways over the same ledger: every value the registry derives from the records is the
    view's figure of that run; the view shows a wall clock or rate only where the registry derives it
    (never from the tool's duration, never over a sample, mixed clocks or missing tokens)."""
    import random

    from tests.queries.metrics.test_grouped_equals_evaluate import _run_records

    rng = random.Random(11)
    files = []
    for i in range(12):
        drop: set[str] = set()
        if i % 3 == 1:
            drop |= set(rng.sample(["cached_tokens", "ttft_s", "latency_s", "input_tokens", "output_tokens"], 2))
        if i % 4 == 2:
            drop |= {"send_time", "first_token_time", "end_time"}
        head: dict = {"run": f"r{i}", "tool": "gen"}
        if not drop >= {"send_time"}:
            head["clock"] = "epoch_s"
        if i % 2:
            head["duration_s"] = round(rng.uniform(10, 40), 3)
        if i == 5:
            head |= {"sampled": True, "sample_note": "every 10th request"}
        recs = _run_records(rng, rng.choice([1, 2, 7, 60]) if i != 3 else 0, drop, 1000.0 * i)
        files.append(str(write_requests(tmp_path / f"r{i}.jsonl", head, recs)))
    for batch, part in (("g0", files[:6]), ("g1", files[6:])):
        res = CliRunner().invoke(main, ["import", "--db", ledger_url, "-q", *part, "--batch", batch])
        assert res.exit_code == 0, res.output
    with ledger.connection() as conn:
        view = {r.run_id: r for r in conn.execute(sa.text("SELECT * FROM v_run_metrics"))}
    rows = run_metrics(ledger, metrics=tuple(VIEW_METRIC.values()))
    assert sorted(view) == sorted(r.run_id for r in rows)
    flags: set[str] = set()
    stricter = 0
    for rm in rows:
        v = view[rm.run_id]
        assert (v.batch, v.run_label) == (rm.batch, rm.label)
        for column, metric in VIEW_METRIC.items():
            mv, got = rm.values[metric], getattr(v, column)
            flags.add(mv.flag)
            where = (rm.label, column, mv.flag, mv.na_reason, got)
            if mv.flag == "derived" and column in OUTPUT_RATES and rm.values["input_tokens"].flag == "n/a":
                # the one difference: the view's rates ask both token totals complete, even over output
                # tokens alone; the registry's output rates need only the output tokens
                assert got is None, where
                stricter += 1
            elif mv.flag == "derived":
                assert got is not None and got == pytest.approx(float(mv.value), rel=1e-12), where
            elif column in NULL_UNLESS_DERIVED:
                assert got is None, where
    assert flags == {"derived", "reported", "n/a"}  # the ledger reaches every kind of value
    assert stricter  # and the one difference
