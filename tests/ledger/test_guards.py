"""Session guards and no-backfill (R9, R10) on both backends; the DuckDB trigger probe."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import guards
from bench_ledger import models as m
from bench_ledger.errors import Refused
from bench_ledger.queries.metrics.registry import evaluate, scope_of
from bench_ledger.store import Ledger, now

from tests.batches import bench_json, cli

HEADER = '{"ledger_requests": 1, "run": "r1", "tool": "mytool", "clock": "epoch_s"}\n'


def requests_file(path: Path, n: int, cached: bool) -> Path:
    lines = [HEADER]
    for i in range(n):
        extra = f', "cached_tokens": {i}' if cached else ""
        lines.append(f'{{"status": "ok", "input_tokens": 10, "output_tokens": 5, "send_time": {i}.5{extra}}}\n')
    path.write_text("".join(lines))
    return path


@pytest.fixture
def imported(ledger: Ledger, tmp_path: Path) -> Ledger:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    return ledger


def test_orm_update_of_a_request_refused(imported: Ledger) -> None:
    with pytest.raises(Refused, match=r"refused by R9: update output_tokens of a request row"):
        with imported.session() as s:
            s.scalar(sa.select(m.Request).limit(1)).output_tokens = 99
    with imported.session() as s:
        assert s.scalar(sa.select(sa.func.max(m.Request.output_tokens))) == 20


def test_orm_delete_refused(imported: Ledger) -> None:
    with pytest.raises(Refused, match="R9"):
        with imported.session() as s:
            s.delete(s.scalar(sa.select(m.ChunkGap).limit(1)))
    with pytest.raises(Refused, match="R9"):
        with imported.session() as s:
            s.delete(s.scalar(sa.select(m.Artefact).limit(1)))


def test_bulk_and_textual_writes_through_the_session_refused(imported: Ledger) -> None:
    with pytest.raises(Refused, match="R9.*bulk update of a request row"):
        with imported.session() as s:
            s.execute(sa.update(m.Request).values(cached_tokens=1))
    with pytest.raises(Refused, match="R9.*raw SQL write to a request row"):
        with imported.session() as s:
            s.execute(sa.text("UPDATE request SET cached_tokens = 1"))
    with pytest.raises(Refused, match="R9.*bulk delete of a log_fact row"):
        with imported.session() as s:
            s.execute(sa.delete(m.LogFact))


def test_orm_changes_of_a_closed_batch_refused(imported: Ledger) -> None:
    with imported.session() as s:  # open batch: a run may still be edited
        s.scalar(sa.select(m.Run)).dataset = "sharegpt"
    cli("close", "fx", "--db", imported.url)
    with pytest.raises(Refused, match="R10.*update a run row of batch 'fx'"):
        with imported.session() as s:
            s.scalar(sa.select(m.Run)).dataset = "random"
    with pytest.raises(Refused, match="R10.*delete a published_value row of batch 'fx'"):
        with imported.session() as s:
            s.delete(s.scalar(sa.select(m.PublishedValue).limit(1)))
    with pytest.raises(Refused, match="R10.*change description of batch 'fx'"):
        with imported.session() as s:
            Ledger.get_batch(s, "fx").description = "edited"
    with pytest.raises(Refused, match="R10.*add a run row of batch 'fx'"):
        with imported.session() as s:
            s.add(m.Run(batch_id=Ledger.get_batch(s, "fx").id, label="late", recorded_at=now()))


def test_closing_without_seal_refused(imported: Ledger) -> None:
    with pytest.raises(Refused, match="R10.*without a seal"):
        with imported.session() as s:
            Ledger.get_batch(s, "fx").status = "closed"


def test_linking_a_launch_log_stays_allowed(imported: Ledger) -> None:
    with imported.session() as s:
        dep = m.Deployment(name="d", fingerprint="0" * 64, recorded_at=now())
        s.add(dep)
        s.flush()
        s.add(m.Launch(deployment_id=dep.id, attempt=1, outcome="ready", recorded_at=now()))
    with imported.session() as s:
        s.scalar(sa.select(m.Launch)).log_artefact_id = s.scalar(sa.select(m.Artefact.id))
    with pytest.raises(Refused, match="R10.*update outcome of launch"):
        with imported.session() as s:
            s.scalar(sa.select(m.Launch)).outcome = "failed"


def test_backfill_import_refused(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", requests_file(tmp_path / "a.jsonl", 4, cached=False), "--batch", "b", "--db", ledger.url)
    # the user says it is the same run (a file of another label is another run: test_run_identity)
    res = cli(
        "import",
        requests_file(tmp_path / "b.jsonl", 4, cached=True),
        "--batch",
        "b",
        "--run",
        "r1",
        "--db",
        ledger.url,
        code=3,
    )
    assert "refused (R9): import cached_tokens for the 4 requests of run 'r1'" in res.output
    assert "cached_tokens was not captured by artefact 1 for run r1; later captures are not backfilled" in res.output
    assert "import it as a new run or batch" in res.output
    # as a new run it is fine, and the metric says which run captured the field
    cli("import", tmp_path / "b.jsonl", "--batch", "b", "--run", "r1-reexport", "--db", ledger.url)
    with ledger.session() as s:
        ids = {label: id_ for label, id_ in s.execute(sa.select(m.Run.label, m.Run.id))}
    old = evaluate(ledger, "cache_hit_tokens", scope_of(ledger, ids["r1"]))
    assert (old.flag, old.na_reason) == ("n/a", "cached_tokens not captured")
    assert old.inputs["coverage"] == "0 of 4 requests"
    new = evaluate(ledger, "cache_hit_tokens", scope_of(ledger, ids["r1-reexport"]))
    assert (new.value, new.flag, new.inputs["requests_ok"]) == (0 + 1 + 2 + 3, "derived", 4)


def test_duckdb_trigger_probe() -> None:
    import duckdb

    supported, why = guards.duckdb_triggers_supported()
    assert why.startswith(f"DuckDB {duckdb.__version__}")
    if duckdb.__version__.startswith("1."):
        assert not supported and "CREATE TRIGGER failed" in why  # DuckDB 1.x: no triggers at all
