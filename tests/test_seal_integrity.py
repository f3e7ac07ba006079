"""Seals that stay trustworthy: the seal rows themselves, the deployment, the guards, no backfill,
atomic seal files, `ledger correct` (R9, R10), on both backends."""

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

import tests.test_books as tb
from tests.test_books import bench_json, cli, raw

closed = tb.closed  # the fixture: batch fx imported and closed with a seal file


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
    art = tb._request_artefact(ledger)
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
    from bench_ledger import books
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
        books.close_batch(ledger, "fx", f)
    monkeypatch.undo()
    assert '"batch": "fx"' in seen[0]  # written (and fsynced) before the commit
    assert f.read_text() == '{"batch": "older"}\n'
    assert json.loads(cli("batches", "--json", "--db", ledger.url).output)[0]["status"] == "open"


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


def test_open_batch_change_found_by_the_import_digest(ledger: Ledger, tmp_path: Path) -> None:
    """Each artefact stores the digest of its rows at import: a raw-SQL change of an open batch is
    found by `verify` (table and rows) and the batch cannot be closed over it."""
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    art = tb._request_artefact(ledger)
    assert (
        "batch fx (open): ok, 1 artefact(s) match their import digests over" in cli("verify", "--db", ledger.url).output
    )
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R9: UPDATE of request"):
            raw(ledger, "UPDATE request SET output_tokens = 21 WHERE idx = 2")
        return
    raw(ledger, "UPDATE request SET output_tokens = 21 WHERE idx = 2")
    res = cli("verify", "--db", ledger.url, code=1)
    assert "batch fx (open): MISMATCH" in res.output
    assert (
        f"artefact {art}, table request: 1 chunk(s) of 4096 rows differ from the import digest: "
        f"rows (artefact_id={art}, idx=0) … (artefact_id={art}, idx=4)"
    ) in res.output
    res = cli("close", "fx", "--db", ledger.url, code=3)
    assert (
        "refused (R10): close batch 'fx'" in res.output
        and "rows changed behind the ledger since their import" in res.output
    )
    raw(ledger, "UPDATE request_gaps SET gaps = gaps[1:2] WHERE request_idx = 4")  # the gap seq 2 of request 4 gone
    res = cli("verify", "fx", "--db", ledger.url, code=1)
    assert f"artefact {art}, table chunk_gap: 15 rows at import, 14 now;" in res.output


def test_import_digest_is_the_documented_encoding(ledger: Ledger, tmp_path: Path) -> None:
    """An independent recomputation (stdlib only, from the rows as Python values) of one part."""
    import hashlib
    import struct

    cli("import", bench_json(tmp_path / "a.json", 3), "--batch", "fx", "--db", ledger.url)
    with ledger.session() as s:
        art = tb._request_artefact(ledger)
        gaps = s.execute(
            sa.select(m.ChunkGap.artefact_id, m.ChunkGap.request_idx, m.ChunkGap.seq, m.ChunkGap.gap_s).order_by(
                m.ChunkGap.artefact_id, m.ChunkGap.request_idx, m.ChunkGap.seq
            )
        ).all()
        stored = s.get(m.ArtefactDigest, (art, "chunk_gap"))
    n = len(gaps)
    h = hashlib.sha256(b"bench-ledger-chunk/3\x00chunk_gap\x00" + struct.pack("<I", n))
    for i, (name, tag) in enumerate((("artefact_id", b"i"), ("request_idx", b"i"), ("seq", b"i"), ("gap_s", b"f"))):
        h.update(name.encode() + b"\x00" + tag + b"\x01" * n)
        h.update(b"".join(struct.pack("<d" if tag == b"f" else "<q", r[i]) for r in gaps))
    assert stored.chunks == h.digest() and stored.row_count == n == 9
    assert stored.root == hashlib.sha256(h.digest()).hexdigest()


def test_import_digest_is_hashed_from_the_rows_handed_to_the_database(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests, chunk gaps and hardware samples are not selected back for the import digest (they
    are hashed from the Arrow tables of the bulk path, dmon's put in key order first), and the
    stored digest equals the one recomputed from the database."""
    import sys

    from bench_ledger import seal3

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gen

    vllm, dmon_txt = tmp_path / "v.jsonl", tmp_path / "d.txt"
    gen.vllm_and_ledger(vllm, 3, 50, 4, None)
    gen.dmon(dmon_txt, tmp_path / "d.csv", 2, 30)
    read = []
    real = seal3._read  # every read of rows for a digest goes through it, on both backends

    def spy(conn, backend, table, sql, with_art):
        read.append(table)
        return real(conn, backend, table, sql, with_art)

    monkeypatch.setattr(seal3, "_read", spy)
    cli("import", vllm, "--batch", "fx", "--db", ledger.url)
    cli("import", dmon_txt, "--batch", "fx", "--node", "n1", "--db", ledger.url)
    assert read and not set(read) & set(seal3.HELD_TABLES), read
    with ledger.session() as s:
        stored = {(d.artefact_id, d.table_name): (d.row_count, d.root) for d in s.scalars(sa.select(m.ArtefactDigest))}
        conn = s.connection()
        again = seal3.artefact_parts(conn, ledger.backend, "SELECT id FROM artefact")
        counts = {t: s.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in seal3.HELD_TABLES}
    assert (
        counts["request"] == 150 and counts["chunk_gap"] > 500 and counts["hardware_sample"] == 60 * len(gen.COUNTERS)
    )
    assert {t: sum(n for (_, tt), (n, _) in stored.items() if tt == t) for t in seal3.HELD_TABLES} == counts
    assert stored == {(a, p.table): (p.count, p.root) for a, ps in again.items() for p in ps}
    assert cli("verify", "fx", "--db", ledger.url).output.count("2 artefact(s) match their import digests") == 1


def test_ledger_correct_launch_and_history(ledger: Ledger) -> None:
    """`ledger correct launch`: a new revision of a declared launch, shown by `ledger history`;
    a value outside the launch's outcomes is refused naming the allowed ones (not a database error)."""
    from bench_ledger import books

    manifest = Path(__file__).parent / "fixtures" / "manifest" / "system.yaml"
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
    current = books.current_ids(ledger, "launch")
    assert new in current and old not in current
    bad = cli("correct", "launch", new, "--set", "outcome=bogus", "--reason", "x", "--db", ledger.url, code=1)
    assert bad.output == "error: --set 'outcome=bogus': launch.outcome is one of ready, failed, unknown, not 'bogus'\n"
    bad = cli("correct", "launch", old, "--set", "outcome=failed", "--reason", "x", "--db", ledger.url, code=1)
    assert f"error: launch {old} is already superseded by {new}; correct the latest revision" in bad.output


def _drop_import_digest(ledger: Ledger, artefact_id: int) -> None:
    """An artefact as imported before migration 0011: no artefact_digest rows (triggers bypassed on PostgreSQL)."""
    sql = f"DELETE FROM artefact_digest WHERE artefact_id = {artefact_id}"
    raw(ledger, "SET LOCAL session_replication_role = replica; " + sql if ledger.backend == "postgresql" else sql)


def test_verify_names_the_artefacts_it_cannot_check(ledger: Ledger, tmp_path: Path) -> None:
    """Fail closed: artefacts of no batch are checked against their import digests too, and an
    artefact without an import digest (imported before migration 0011) is named as not checked,
    with why, and verify exits 1 -- never a silent skip. Close seals it as found and says so."""
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    art = tb._request_artefact(ledger)
    dmon = Path(__file__).parent / "fixtures" / "dmon" / "dt_midnight.txt"
    cli("import", dmon, "--node", "n1", "--db", ledger.url)
    with ledger.session() as s:
        loose = s.scalar(sa.select(m.Artefact.id).where(m.Artefact.batch_id.is_(None)))
        name, at = s.get(m.Artefact, art).file_name, s.get(m.Artefact, art).imported_at
    out = cli("verify", "--db", ledger.url).output.splitlines()
    assert out[1] == "artefacts without a batch: ok, 1 artefact(s) match their import digests over 79 rows"
    if ledger.backend == "duckdb":  # no triggers: a raw change of an artefact of no batch is found
        raw(ledger, f"UPDATE hardware_sample SET value = value + 1 WHERE artefact_id = {loose} AND line = 3")
        res = cli("verify", "--db", ledger.url, code=1)
        assert "artefacts without a batch: MISMATCH" in res.output
        assert (
            f"artefact {loose}, table hardware_sample: 1 chunk(s) of 4096 rows differ from the import digest"
            in res.output
        )
        raw(ledger, f"UPDATE hardware_sample SET value = value - 1 WHERE artefact_id = {loose} AND line = 3")
    _drop_import_digest(ledger, art)
    res = cli("verify", "--db", ledger.url, code=1)
    why = (
        f"artefact {art} ({name}, imported {at:%Y-%m-%d %H:%M:%S} UTC): no import digest is stored for it (artefacts "
        "imported before migration 0011 have none; otherwise its artefact_digest rows were deleted), so its rows "
        "cannot be compared with what was imported"
    )
    assert res.output.splitlines()[:2] == [
        "batch fx (open): NOT VERIFIED, 1 artefact(s) cannot be checked (0 checked, they match their import digests)",
        f"  not checked: {why}",
    ]
    assert "artefacts without a batch: ok, 1 artefact(s)" in res.output
    assert not next(c for c in books_verify(ledger).checks if c.batch == "fx").ok
    out = cli("close", "fx", "--db", ledger.url).output
    assert f"  sealed as found, not compared with its import: {why}" in out.splitlines()
    assert "batch fx: ok, seal " in cli("verify", "--db", ledger.url).output  # from now on the seal covers it


def books_verify(ledger: Ledger):
    from bench_ledger.books import verify

    return verify(ledger)


def _reads_whole(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables that ``seal3.artefact_parts`` reads whole from now on (the spy's list)."""
    from bench_ledger import seal3 as s3

    tables: list[str] = []
    real = s3.artefact_parts

    def spy(conn, backend, artefact_ids, tables_=s3.ARTEFACT_TABLES):  # noqa: ANN001, ANN202
        tables.extend(tables_)
        return real(conn, backend, artefact_ids, tables_)

    monkeypatch.setattr(s3, "artefact_parts", spy)
    return tables


def test_digests_do_not_depend_on_the_stored_order(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts are read back unsorted (stored order is key order after an import) and put in key
    order: rows stored in reverse order give the same digests, seal and verify, and the large tables
    are still hashed a slice at a time, sorted by the database (not read whole)."""
    cli("import", bench_json(tmp_path / "a.json", 30), "--batch", "fx", "--db", ledger.url)
    bypass = "SET LOCAL session_replication_role = replica; " if ledger.backend == "postgresql" else ""
    # PostgreSQL: TRUNCATE gives the table new, empty storage, so the rows are stored in the order inserted
    # (after a DELETE an INSERT may fill free space that vacuum found in earlier pages: not a fixed order)
    empty = "TRUNCATE" if ledger.backend == "postgresql" else "DELETE FROM"
    for table, order in (
        ("request_gaps", "request_idx DESC"),
        ("request", "idx DESC"),
    ):  # chunk_gap: a view of request_gaps
        raw(
            ledger,
            f"{bypass}CREATE TEMP TABLE t_{table} AS SELECT * FROM {table} ORDER BY {order}; "
            f"{empty} {table}; INSERT INTO {table} SELECT * FROM t_{table}",
        )
    with ledger.engine.connect() as conn:
        first = conn.exec_driver_sql("SELECT idx FROM request LIMIT 1").scalar()
        gap = conn.exec_driver_sql("SELECT request_idx FROM chunk_gap LIMIT 1").scalar()
    assert first == 29 and gap == 29  # stored in reverse now
    whole = _reads_whole(monkeypatch)
    assert "batch fx (open): ok, 1 artefact(s) match their import digests" in cli("verify", "--db", ledger.url).output
    cli("close", "fx", "--db", ledger.url)
    assert "batch fx: ok, seal " in cli("verify", "--db", ledger.url).output
    assert not {"request", "chunk_gap"} & set(whole), whole


def test_hardware_samples_are_hashed_as_they_arrive(
    ledger: Ledger, ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dmon file's samples reach the import digest in key order (line by line, each line's counters in
    byte order), chunk after chunk, so they are hashed as they arrive instead of every sample being held
    and sorted at the end (a day of 16 cards: 6.4 GB); the digest equals the rows read back (`verify`)."""
    import sys

    import bench_ledger.importers.dmon as dmon
    from bench_ledger import seal3
    from bench_ledger.cli import main
    from click.testing import CliRunner

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gen

    monkeypatch.setattr(dmon, "_WIDE_BLOCK", 64 << 10)  # many chunks
    lines = gen.dmon(tmp_path / "d.txt", tmp_path / "d.csv", 4, 1500)
    finished: list[tuple[str, bool, int]] = []
    real = seal3._Stream.finish

    def finish(self, artefact_id):  # noqa: ANN001, ANN202
        finished.append((self.table, self.broken, self.count))
        return real(self, artefact_id)

    monkeypatch.setattr(seal3._Stream, "finish", finish)
    for args in (
        ["import", str(tmp_path / "d.txt"), "--batch", "hw", "--node", "n0"],
        ["close", "hw"],
        ["verify", "hw"],
    ):
        res = CliRunner().invoke(main, [*args, "--db", ledger_url])
        assert res.exit_code == 0, res.output
    assert ("hardware_sample", False, lines * len(gen.COUNTERS)) in finished
    assert "batch hw: ok, seal " in res.output


def _part_triples(parts: dict) -> dict[int, list[tuple[str, int, str]]]:
    return {a: [(p.table, p.count, p.root) for p in ps] for a, ps in parts.items()}


def test_verify_hashes_the_large_tables_a_slice_at_a_time(
    unwritten_ledger: Ledger, samples: Path, tmp_path: Path, monkeypatch
) -> None:  # noqa: ANN001
    """`ledger verify` and `close` read requests, chunk gaps, request values and hardware samples a slice at
    a time (DuckDB's record batches; PostgreSQL's ranges of heap pages) and hash them as they come: the same
    counts, roots and seal_part rows as reading every row at once, with slices that cut artefacts and chunks
    anywhere (5 rows, one page on PostgreSQL; chunks of 3), and no streamed table read whole (one day of dmon
    on 16 GPUs: verify 4.5 GB -> 0.53 GB, close 4.5 GB -> 1.0 GB on DuckDB)."""
    from bench_ledger import seal3 as s3

    ledger = unwritten_ledger  # on PostgreSQL too, the rows lie in the heap in the order they were inserted

    cli(
        "import",
        bench_json(tmp_path / "a.json", 12),
        bench_json(tmp_path / "b.json", 9, date="20260707-110000"),
        "--batch",
        "s",
        "--db",
        ledger.url,
    )
    for folder in ("guidellm", "dmon"):
        cli("import", samples / folder, "--batch", "s", "--db", ledger.url)
    with ledger.connection() as conn:
        ids = [a for (a,) in conn.exec_driver_sql("SELECT id FROM artefact ORDER BY id")]
        whole = _part_triples(s3.artefact_parts(conn, ledger.backend, ids))
        real = s3.artefact_parts
        read_whole = _reads_whole(monkeypatch)
        monkeypatch.setattr(s3, "SLICE_ROWS", 5)
        streamed = _part_triples(s3.artefact_digest_parts(conn, ledger.backend, ids))
    assert streamed == whole
    assert set(read_whole) & set(s3.STREAMED_TABLES) == set()
    counts = {t: sum(c for ps in whole.values() for tt, c, _ in ps if tt == t) for t in s3.STREAMED_TABLES}
    assert all(n > 5 for n in counts.values()), counts  # every streamed table spans several slices
    assert (
        "batch s (open): ok, 4 artefact(s) match their import digests over" in cli("verify", "--db", ledger.url).output
    )
    # close keeps each streamed chunk's seal_part fields: the rows a whole part gives, chunks cut by slices
    from bench_ledger import digest as dg

    def rows(parts: dict) -> list[dict]:
        return [r for ps in parts.values() for p in ps for r in s3.seal_part_rows(7, p)]

    with monkeypatch.context() as mp, ledger.connection() as conn:
        mp.setattr(dg, "CHUNK", 3)  # chunks of 3 rows: many per part, cut anywhere by the 5-row slices
        streamed_rows = rows(s3.artefact_digest_parts(conn, ledger.backend, ids, chunks=True))
        assert streamed_rows == rows(real(conn, ledger.backend, ids))
    assert len(streamed_rows) > 40
    cli("close", "s", "--db", ledger.url)  # in 5-row slices too
    assert set(read_whole) & set(s3.STREAMED_TABLES) == set()
    assert "batch s: ok, seal" in cli("verify", "--db", ledger.url).output


def test_a_table_out_of_key_order_is_hashed_again_sorted_by_the_database(
    unwritten_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows not stored in key order break the stream of their table; it is hashed again from the start,
    sorted by the database (DuckDB's sorted result; PostgreSQL a sorted temporary table, read by ranges of
    its pages), a slice at a time: the same parts as reading it whole, and no table read whole. DuckDB:
    a row moved behind the ledger (deleted and inserted again: it comes last in a scan). PostgreSQL: the
    artefacts' rows stored last artefact first, as an import's rows can lie ahead of an earlier import's
    once vacuum has freed the space of a rolled-back one (profile note 41)."""
    from bench_ledger import seal3 as s3

    ledger = unwritten_ledger

    def imported(name: str) -> int:
        cli(
            "import",
            bench_json(tmp_path / f"{name}.json", 400, date=f"2026070{len(list(tmp_path.glob('*.json')))}-100000"),
            "--batch",
            "fx",
            "--db",
            ledger.url,
        )
        with ledger.connection() as conn:
            return conn.exec_driver_sql("SELECT max(id) FROM artefact").scalar()

    arts = [imported("a"), imported("b")]
    if ledger.backend == "duckdb":
        raw(
            ledger,
            f"CREATE TEMP TABLE moved AS SELECT * FROM request WHERE artefact_id = {arts[0]} AND idx = 1; "
            f"DELETE FROM request WHERE artefact_id = {arts[0]} AND idx = 1; INSERT INTO request SELECT * FROM moved",
        )
    else:  # stored last artefact first (TRUNCATE: new storage, rows in the order inserted; a DELETE and a
        # VACUUM would free the space only when no other test's transaction still saw the deleted rows)
        arts.append(imported("c"))
        raw(
            ledger,
            "SET LOCAL session_replication_role = replica; CREATE TEMP TABLE k AS SELECT * FROM request "
            "ORDER BY artefact_id DESC, idx; TRUNCATE request; INSERT INTO request SELECT * FROM k",
        )
    with ledger.connection() as conn:
        stored = [
            tuple(r)
            for r in conn.exec_driver_sql(f"SELECT artefact_id, idx FROM request WHERE artefact_id IN {tuple(arts)}")
        ]
        assert stored != sorted(stored), "the rows are in key order: nothing to test"
        whole = _reads_whole(monkeypatch)
        monkeypatch.setattr(s3, "SLICE_ROWS", 64)  # several slices (PostgreSQL: a page each)
        streamed = _part_triples(s3.artefact_digest_parts(conn, ledger.backend, arts))
        assert whole == []
        monkeypatch.undo()
        assert streamed == _part_triples(s3.artefact_parts(conn, ledger.backend, arts))
        if ledger.backend == "postgresql":  # the sorted copies are dropped, also where the reads stop early
            sorted_copies = "SELECT count(*) FROM pg_class WHERE starts_with(relname, '_ledger_key_order')"
            assert conn.exec_driver_sql(sorted_copies).scalar() == 0
            slices = s3._streamed_slices(conn, ledger.backend, ", ".join(map(str, arts)), ["request"], ordered=True)
            next(slices)
            assert conn.exec_driver_sql(sorted_copies).scalar() == 1
            slices.close()
            assert conn.exec_driver_sql(sorted_copies).scalar() == 0
            slices = s3._streamed_slices(conn, ledger.backend, ", ".join(map(str, arts)), ["request"], ordered=True)
            next(slices)
            with pytest.raises(sa.exc.DBAPIError, match="division by zero"):
                conn.exec_driver_sql("SELECT 1 / 0")  # the transaction fails while the reads are open
            slices.close()  # no second error: the rollback drops the copy
            conn.rollback()
    out = cli("verify", "fx", "--db", ledger.url).output
    assert f"batch fx (open): ok, {len(arts)} artefact(s) match their import digests over" in out, out
    if ledger.backend == "postgresql":  # read-only (a standby, say): no temporary table, so that table is read whole
        with Ledger(ledger.url + "%20-cdefault_transaction_read_only%3Don") as read_only:
            whole = _reads_whole(monkeypatch)
            assert [c.ok for c in books_verify(read_only).checks if c.batch == "fx"] == [True]
            assert "request" in whole


def test_read_ahead_gives_every_slice_in_order_and_stops_its_thread_when_closed() -> None:
    """verify and close read the next slice in a thread while one is hashed (`seal3._read_ahead`): every
    item in order, an error of the reads raised to the caller, and once the caller stops (closes it), no
    read is left running on the connection: at most one item was made ahead."""
    import contextlib
    import threading

    from bench_ledger import seal3 as s3

    made: list[tuple[int, str]] = []

    def items(n: int, fail_at: int | None = None):
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"read {i} failed")
            made.append((i, threading.current_thread().name))
            yield i

    assert list(s3._read_ahead(items(5))) == [0, 1, 2, 3, 4]
    assert {name for _, name in made} != {threading.current_thread().name}  # made in the reading thread
    with pytest.raises(ValueError, match="read 2 failed"):
        list(s3._read_ahead(items(5, fail_at=2)))
    made.clear()
    with contextlib.closing(s3._read_ahead(items(100))) as got:
        assert next(got) == 0
    assert [i for i, _ in made] == [0, 1]  # the one ahead, then nothing more
    assert not any(t.name.startswith("ledger-read") for t in threading.enumerate())
