"""One current revision: a corrected run (and value) goes through every query and CLI listing.

Each assertion names the exact ids: the correction everywhere, the superseded revision nowhere
(except `--as-of` a time before the correction, where it is the current one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import revisions
from bench_ledger.errors import NotFound
from bench_ledger.queries.catalog import list_batches, list_runs, run_detail
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.compare import side
from bench_ledger.queries.metrics.registry import evaluate, run_metrics
from bench_ledger.queries.values import Scope
from bench_ledger.store import Ledger, now

from tests.batches import bench_json, cli


@pytest.fixture(scope="module")
def _corrected_ids(module_ledger_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The corrected ledger built once per module and backend (every test here only reads it)."""
    with Ledger(module_ledger_url) as led:
        built = build_corrected(led, tmp_path_factory.mktemp("corrected"))
    del built["ledger"]
    return built


@pytest.fixture
def corrected(_corrected_ids: dict, module_ledger_url: str) -> Iterator[dict]:
    """:func:`build_corrected`'s ids, with a ledger of the test's own open on it."""
    with Ledger(module_ledger_url) as led:
        yield {**_corrected_ids, "ledger": led}


def build_corrected(ledger: Ledger, tmp_path: Path) -> dict:
    """Batch fx with one vLLM run of 5 requests, corrected once (concurrency 4 -> 8), and its
    tool-reported `duration` corrected once; ``before`` is a whole second between import and correction."""
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    with ledger.session() as s:
        old = s.scalar(sa.select(m.Run.id))
        pv = s.scalar(
            sa.select(m.PublishedValue.id).where(m.PublishedValue.run_id == old, m.PublishedValue.key == "duration")
        )
    imported = now()
    while now().replace(microsecond=0) <= imported:
        time.sleep(0.05)
    before = now().replace(microsecond=0)
    new = revisions.correct_run(ledger, old, "concurrency was 8, not 4", concurrency=8)
    pv2 = revisions.correct_published_value(ledger, pv, "the report printed 3.50", text="3.50")
    return {"ledger": ledger, "old": old, "new": new, "pv": pv, "pv2": pv2, "before": before}


def test_queries_see_only_the_current_revision(corrected: dict) -> None:
    led, old, new = corrected["ledger"], corrected["old"], corrected["new"]
    assert [(r.id, r.concurrency, r.requests) for r in list_runs(led)] == [(new, 8, 5)]
    assert [(r.id, r.concurrency) for r in list_runs(led, "fx", corrected["before"])] == [(old, 4)]
    assert [(b.name, b.runs, b.requests) for b in list_batches(led)] == [("fx", 1, 5)]
    detail = run_detail(led, new)
    assert [(p.key, p.text) for p in detail.published if p.key == "duration"] == [("duration", "3.50")]
    with pytest.raises(NotFound, match=f"run {old} is superseded by a correction: the current revision is run {new}"):
        run_detail(led, old)
    assert side(led, "batch:fx").run_ids == [new]
    with pytest.raises(NotFound, match=f"run {old} is superseded"):
        side(led, f"run:{old}")
    assert side(led, f"run:{new}").factors["workload"].endswith("C 8 / N 5 / dataset ?")
    assert [r.run_id for r in run_metrics(led, ["fx"])] == [new]
    assert evaluate(led, "requests_ok", Scope(batch="fx")).value == 5
    with pytest.raises(NotFound, match=f"run {old} is superseded"):
        evaluate(led, "requests_ok", Scope(batch="fx", run=f"#{old}"))
    rows = check(led, "fx")
    assert {r.run_id for r in rows} == {new}
    assert [r.reported for r in rows if r.key == "duration"] == ["3.50"]
    assert revisions.current_ids(led, "run") == {new}
    assert revisions.current_ids(led, "run", corrected["before"]) == {old}
    assert revisions.current_ids(led, "published_value", corrected["before"]) >= {corrected["pv"]}
    assert corrected["pv2"] not in revisions.current_ids(led, "published_value", corrected["before"])


def test_views_see_only_the_current_revision(corrected: dict) -> None:
    led, new = corrected["ledger"], corrected["new"]
    with led.connection() as conn:
        req = conn.execute(sa.text("SELECT run_id, run_revision, requests FROM v_run_requests")).all()
        met = conn.execute(sa.text("SELECT run_id, requests_ok FROM v_run_metrics")).all()
        fields = conn.execute(sa.text("SELECT DISTINCT run_id FROM v_capture_fields")).all()
    assert [tuple(r) for r in req] == [(new, 1, 5)]
    assert [tuple(r) for r in met] == [(new, 5)]
    assert [tuple(r) for r in fields] == [(new,)]


def test_cli_listings_see_only_the_current_revision(corrected: dict) -> None:
    led, old, new = corrected["ledger"], corrected["old"], corrected["new"]
    db = ("--db", led.url)
    assert [r["id"] for r in json.loads(cli("runs", "--json", *db).output)] == [new]
    asof = corrected["before"].strftime("%Y-%m-%dT%H:%M:%S")
    assert [r["id"] for r in json.loads(cli("runs", "--as-of", asof, "--json", *db).output)] == [old]
    assert [(b["name"], b["runs"]) for b in json.loads(cli("batches", "--json", *db).output)] == [("fx", 1)]
    shown = json.loads(cli("show", "run", new, "--json", *db).output)
    assert [p["text"] for p in shown["published"] if p["key"] == "duration"] == ["3.50"]
    assert f"run {old} is superseded" in cli("show", "run", old, *db, code=1).output
    assert [r["run_id"] for r in json.loads(cli("metrics", "--json", *db).output)] == [new]
    assert {r["run_id"] for r in json.loads(cli("check", "--json", *db).output)} == {new}
    out = cli("compare", f"run:{new}", "batch:fx", *db).output
    assert "no recorded factor differs" not in out and "attributable to: none" in out
    assert f"run {old} is superseded" in cli("compare", f"run:{old}", "batch:fx", *db, code=1).output


def test_current_predicate_as_of_needs_the_row_recorded_by_then(corrected: dict) -> None:
    led = corrected["ledger"]
    assert revisions.current_ids(led, "run", datetime(2000, 1, 1)) == set()
