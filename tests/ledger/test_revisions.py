"""Corrections (R10): a new revision supersedes the old, history shows the chain, queries see the current one."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import revisions
from bench_ledger.cli import main
from bench_ledger.errors import Refused
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.batches import bench_json, cli


def test_corrections_history_and_as_of(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "open1", "--db", ledger.url)
    with ledger.session() as s:
        run_id = s.scalar(sa.select(m.Run.id))
    imported = datetime.utcnow()
    while datetime.utcnow().replace(microsecond=0) <= imported:  # --as-of has whole seconds
        time.sleep(0.05)
    before = datetime.utcnow().replace(microsecond=0)
    new_id = revisions.correct_run(ledger, run_id, "concurrency was 8, not 4", concurrency=8)
    chain = revisions.history(ledger, "run", new_id)
    assert [(r["id"], r["revision"], r["supersedes_id"]) for r in chain] == [(run_id, 0, None), (new_id, 1, run_id)]
    assert chain[1]["correction_reason"] == "concurrency was 8, not 4"
    with ledger.session() as s:
        assert [r.id for r in s.scalars(revisions.current_runs())] == [new_id]
        assert [r.concurrency for r in s.scalars(revisions.current_runs(as_of=before))] == [4]
    out = cli("history", "run", run_id, "--db", ledger.url).output
    assert "concurrency was 8, not 4" in out
    asof = cli("runs", "--as-of", before.strftime("%Y-%m-%dT%H:%M:%S"), "--db", ledger.url, "--json").output
    assert [r["id"] for r in json.loads(asof)] == [run_id]
    with ledger.session() as s:
        pv = s.scalar(sa.select(m.PublishedValue.id).where(m.PublishedValue.run_id == run_id).limit(1))
    pv2 = revisions.correct_published_value(ledger, pv, "typo in the report", text="1,000")
    assert [r["id"] for r in revisions.history(ledger, "published_value", pv)] == [pv, pv2]
    cli("close", "open1", "--db", ledger.url)
    with pytest.raises(Refused, match="R10"):
        revisions.correct_run(ledger, new_id, "too late", concurrency=16)


def test_a_corrected_run_keeps_its_records_in_metrics_and_listings(ledger_url: str, tmp_path) -> None:
    """Captured rows stay on the first revision (Run.origin_id); queries show the current one."""
    from bench_ledger.queries.catalog import list_runs, run_detail
    from bench_ledger.queries.metrics.registry import evaluate
    from bench_ledger.queries.values import Scope
    from bench_ledger.revisions import correct_run
    from bench_ledger.store import Ledger

    f = tmp_path / "r.jsonl"
    f.write_text(
        '{"ledger_requests": 1, "run": "r1", "tool": "t", "clock": "epoch_s"}\n'
        '{"status": "ok", "input_tokens": 100, "output_tokens": 10, "send_time": 1700000000, "end_time": 1700000002}\n'
        '{"status": "ok", "input_tokens": 100, "output_tokens": 20, "send_time": 1700000001, "end_time": 1700000004}\n'
    )
    runner = CliRunner()
    assert runner.invoke(main, ["init", "--db", ledger_url]).exit_code == 0
    res = runner.invoke(main, ["import", "--db", ledger_url, "--batch", "b", "--run", "r1", str(f)])
    assert res.exit_code == 0, res.output
    with Ledger(ledger_url) as led:
        first = list_runs(led, "b")[0]
        new_id = correct_run(led, first.id, "concurrency was 2, not unknown", concurrency=2)
        rows = list_runs(led, "b")
        assert [(r.id, r.concurrency, r.requests) for r in rows] == [(new_id, 2, 2)]
        assert run_detail(led, new_id).status_counts["ok"] == 2
        total = evaluate(led, "total_tpm", Scope(batch="b", run="r1"))
        assert total.flag == "derived" and total.value == 60 * 230 / 4  # 230 tokens over 4 s


def test_ledger_correct_and_history(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    run = json.loads(cli("runs", "--json", "--db", ledger.url).output)[0]["id"]
    out = cli(
        "correct",
        "run",
        run,
        "--set",
        "concurrency=8",
        "--set",
        "seed=7",
        "--reason",
        "sweep ran at C8",
        "--db",
        ledger.url,
    ).output
    new = json.loads(cli("runs", "--json", "--db", ledger.url).output)[0]["id"]
    assert out.splitlines() == [
        f"run {run} superseded by run {new}: concurrency=8, seed=7",
        "  reason: sweep ran at C8",
    ]
    hist = cli("history", "run", new, "--db", ledger.url).output
    assert "concurrency=8, seed=7" in hist and "sweep ran at C8" in hist
    with ledger.session() as s:
        pv = s.scalar(sa.select(m.PublishedValue.id).where(m.PublishedValue.key == "duration"))
    out = cli(
        "correct",
        "published_value",
        pv,
        "--set",
        "value=3.50",
        "--set",
        "text=3.50",
        "--reason",
        "as printed",
        "--db",
        ledger.url,
    ).output
    assert out.startswith(f"published_value {pv} superseded by published_value ")
    bad = cli("correct", "run", new, "--set", "concurrency=eight", "--reason", "x", "--db", ledger.url, code=1)
    assert "error: --set 'concurrency=eight': 'eight' is not a valid integer for run.concurrency" in bad.output
    bad = cli("correct", "run", new, "--set", "revision=3", "--reason", "x", "--db", ledger.url, code=1)
    assert "error: --set 'revision=3': run has no correctable field 'revision'" in bad.output
    bad = cli("correct", "run", run, "--set", "seed=1", "--reason", "x", "--db", ledger.url, code=1)
    assert f"error: run {run} is already superseded by {new}; correct the latest revision" in bad.output
    cli("close", "fx", "--db", ledger.url)
    res = cli("correct", "run", new, "--set", "seed=1", "--reason", "late", "--db", ledger.url, code=3)
    assert f"refused (R10): correct run {new} of batch 'fx'" in res.output


def test_ledger_correct_launch_and_history(ledger: Ledger) -> None:
    """`ledger correct launch`: a new revision of a declared launch, shown by `ledger history`;
    a value outside the launch's outcomes is refused naming the allowed ones (not a database error)."""

    manifest = Path(__file__).resolve().parents[1] / "fixtures" / "manifest" / "system.yaml"
    cli("declare", "--db", ledger.url, manifest)
    with ledger.session() as s:
        old = s.scalar(sa.select(m.Launch.id).where(m.Launch.attempt == 2))
    out = cli(
        "correct",
        "launch",
        old,
        "--set",
        "seconds_to_ready=395",
        "--set",
        "cause=ready after 395 s",
        "--reason",
        "the server log says 395 s",
        "--db",
        ledger.url,
    ).output
    with ledger.session() as s:
        new = s.scalar(sa.select(m.Launch.id).where(m.Launch.supersedes_id == old))
        row = s.get(m.Launch, new)
        assert (row.attempt, row.outcome, str(row.seconds_to_ready), row.revision) == (2, "ready", "395", 1)
    assert out.splitlines() == [
        f"launch {old} superseded by launch {new}: seconds_to_ready=395, cause=ready after 395 s",
        "  reason: the server log says 395 s",
    ]
    hist = cli("history", "launch", new, "--db", ledger.url).output.splitlines()
    assert (hist[1].split()[:2], hist[2].split()[:3]) == ([str(old), "0"], [str(new), "1", str(old)]) and len(hist) == 3
    assert "seconds_to_ready=395, cause=ready after 395 s" in hist[2] and "the server log says 395 s" in hist[2]
    current = revisions.current_ids(ledger, "launch")
    assert new in current and old not in current
    bad = cli("correct", "launch", new, "--set", "outcome=bogus", "--reason", "x", "--db", ledger.url, code=1)
    assert bad.output == "error: --set 'outcome=bogus': launch.outcome is one of ready, failed, unknown, not 'bogus'\n"
    bad = cli("correct", "launch", old, "--set", "outcome=failed", "--reason", "x", "--db", ledger.url, code=1)
    assert f"error: launch {old} is already superseded by {new}; correct the latest revision" in bad.output
