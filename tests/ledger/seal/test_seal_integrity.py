"""Seals that stay trustworthy: the seal rows themselves, the deployment, the guards, no backfill,
atomic seal files (R9, R10), on both backends."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import Refused
from bench_ledger.store import Ledger

from tests.batches import bench_json, cli, raw, request_artefact


def test_rewritten_merkle_root_is_reported(closed: tuple[Ledger, Path]) -> None:
    ledger, _ = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of seal"):
            raw(ledger, "UPDATE seal SET merkle_root = '" + "0" * 64 + "'")
        return
    raw(ledger, "UPDATE seal SET merkle_root = '" + "0" * 64 + "'")
    res = cli("verify", "--db", ledger.url, code=1)
    assert "the seal row disagrees with itself" in res.output
    assert "recomputed Merkle root" in res.output and "differs from the stored 0000000000000000…" in res.output


def test_deleted_seal_parts_are_reported(closed: tuple[Ledger, Path]) -> None:
    ledger, _ = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: DELETE of seal_part"):
            raw(ledger, "DELETE FROM seal_part")
        return
    art = request_artefact(ledger)
    raw(ledger, "DELETE FROM seal_part WHERE table_name = 'request'")
    res = cli("verify", "fx", "--db", ledger.url, code=1)
    assert (
        f"seal_part rows of request of artefact {art} do not rebuild the seal's root for it: deleted or rewritten"
    ) in res.output


def test_batch_reopened_by_raw_sql_is_reported(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of batch fx"):
            raw(ledger, "UPDATE batch SET status = 'open', closed_at = NULL, seal_digest = NULL")
        return
    raw(ledger, "UPDATE batch SET status = 'open', closed_at = NULL, seal_digest = NULL")
    res = cli("verify", "--db", ledger.url, code=1)
    assert "batch fx: MISMATCH" in res.output
    assert "is open in the ledger (status 'open'), but has a seal row: reopened behind the ledger" in res.output
    # every trace removed from the database: the seal file still names the batch
    raw(ledger, "DELETE FROM seal_part")
    raw(ledger, "DELETE FROM seal")
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    assert "the seal file has a seal for it: reopened behind the ledger" in res.output
    assert "no closed batches" not in res.output


def test_the_deployment_is_sealed(ledger: Ledger, tmp_path: Path) -> None:

    with ledger.session() as s:
        dep = m.Deployment(name="h20", gpu_model="H20", fingerprint="1" * 64, recorded_at=datetime(2026, 1, 1))
        s.add(dep)
        s.flush()
        s.add(m.Batch(name="fx", deployment_id=dep.id, created_at=datetime(2026, 1, 1)))
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    seals = tmp_path / "seals.jsonl"
    cli("close", "fx", "--seal-file", seals, "--db", ledger.url)
    assert json.loads(seals.read_text())["tables"]["deployment"] == 1
    with pytest.raises(Refused, match=r"R10.*update gpu_model of a deployment row of batch 'fx'"):
        with ledger.session() as s:
            s.scalar(sa.select(m.Deployment)).gpu_model = "H100"
    if ledger.backend == "postgresql":
        with pytest.raises(
            sa.exc.DBAPIError, match="refused by R10: UPDATE of deployment h20: closed batch fx names it"
        ):
            raw(ledger, "UPDATE deployment SET gpu_model = 'H100'")
        return
    raw(ledger, "UPDATE deployment SET gpu_model = 'H100'")
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    dep_id = json.loads(cli("batches", "--json", "--db", ledger.url).output)[0]["id"]
    assert f"table deployment: 1 changed: (id={dep_id})" in res.output


def test_no_backfill_through_the_orm(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    with ledger.session() as s:
        art = s.scalar(sa.select(m.Request.artefact_id).limit(1))
        cap = s.scalar(sa.select(m.Capture.id).where(m.Capture.artefact_id == art))
        run = s.scalar(sa.select(m.Request.run_id).limit(1))
    with pytest.raises(Refused) as exc:
        with ledger.session() as s:
            s.add(m.CaptureField(capture_id=cap, field="cached_tokens"))
    assert (exc.value.rule, exc.value.asked) == ("R9", f"add a capture_field row to capture {cap}")
    assert "imported earlier" in exc.value.why
    with pytest.raises(Refused, match=f"R9.*add a request row to artefact {art}"):
        with ledger.session() as s:
            s.add(m.Request(artefact_id=art, idx=99, run_id=run, status="ok"))
    with ledger.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(m.Request)) == 5
        assert s.scalar(sa.select(sa.func.count()).where(m.CaptureField.field == "cached_tokens")) == 0


def test_no_backfill_by_raw_sql_on_postgresql(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    with ledger.session() as s:
        art, run = s.execute(sa.select(m.Request.artefact_id, m.Request.run_id).limit(1)).one()
        cap = s.scalar(sa.select(m.Capture.id).where(m.Capture.artefact_id == art))
    if ledger.backend != "postgresql":
        pytest.skip("DuckDB 1.x has no triggers: the session guards and the seal are the guards there")
    with pytest.raises(sa.exc.DBAPIError, match=f"refused by R9: INSERT into capture_field for capture {cap}"):
        raw(ledger, f"INSERT INTO capture_field VALUES ({cap}, 'cached_tokens')")
    with pytest.raises(sa.exc.DBAPIError, match=f"refused by R9: INSERT into request for artefact {art}"):
        raw(ledger, f"INSERT INTO request (artefact_id, idx, run_id, status) VALUES ({art}, 99, {run}, 'ok')")


def test_disabled_or_dropped_trigger_is_reported(ledger: Ledger) -> None:
    if ledger.backend != "postgresql":
        assert "session guards only (DuckDB 1.x has no triggers" in cli("status", "--db", ledger.url).output
        return
    assert "triggers present and enabled" in cli("status", "--db", ledger.url).output
    raw(ledger, "ALTER TABLE request DISABLE TRIGGER ledger_append_only")
    raw(ledger, "DROP TRIGGER ledger_closed_batch ON run")
    res = cli("status", "--db", ledger.url, code=1)
    assert (
        "guard problem: trigger ledger_append_only on request is disabled (tgenabled 'D'): "
        "ALTER TABLE request ENABLE TRIGGER ledger_append_only"
    ) in res.output
    assert "guard problem: trigger ledger_closed_batch on run is missing" in res.output
    res = cli("verify", "--db", ledger.url, code=1)
    assert "database guards: trigger ledger_append_only on request is disabled" in res.output


def test_close_with_a_missing_folder_closes_nothing(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    res = cli("close", "fx", "--seal-file", tmp_path / "nope" / "seals.jsonl", "--db", ledger.url, code=1)
    assert f"error: {tmp_path / 'nope' / 'seals.jsonl'}: no such folder {tmp_path / 'nope'}" in res.output
    assert not (tmp_path / "nope").exists()
    assert json.loads(cli("batches", "--json", "--db", ledger.url).output)[0]["status"] == "open"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_close_with_an_unwritable_seal_file_closes_nothing(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    f = tmp_path / "seals.jsonl"
    f.write_text("")
    f.chmod(0o444)
    res = cli("close", "fx", "--seal-file", f, "--db", ledger.url, code=1)
    assert f"error: {f}: not a writable file" in res.output
    assert json.loads(cli("batches", "--json", "--db", ledger.url).output)[0]["status"] == "open"


def test_a_failed_commit_puts_the_seal_file_back(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """The seal line is written before the commit; if the commit fails, the file is as before."""
    from bench_ledger.seal import close_batch
    from sqlalchemy.orm import Session

    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    f = tmp_path / "seals.jsonl"
    f.write_text('{"batch": "older"}\n')
    seen = []

    def commit_fails(self) -> None:
        seen.append(f.read_text())
        raise OSError("disk went away")

    monkeypatch.setattr(Session, "commit", commit_fails)
    with pytest.raises(OSError, match="disk went away"):
        close_batch(ledger, "fx", f)
    monkeypatch.undo()
    assert '"batch": "fx"' in seen[0]  # written (and fsynced) before the commit
    assert f.read_text() == '{"batch": "older"}\n'
    assert json.loads(cli("batches", "--json", "--db", ledger.url).output)[0]["status"] == "open"
