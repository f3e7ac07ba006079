"""Closing a batch and verifying its seal (R10): tamper detection, the seal file, the chain, on both backends."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import Refused
from bench_ledger.seal import scheme2, scheme3
from bench_ledger.seal.close import batch_parts
from bench_ledger.store import Ledger

from tests.batches import bench_json, cli, raw, request_artefact

PG_REQUEST_UPDATE = "refused by R9: UPDATE of request: rows of this table are append-only"


def test_close_then_verify_ok(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    line = json.loads(seals.read_text().splitlines()[-1])
    assert line["batch"] == "fx" and line["previous_digest"] == scheme2.ZERO_DIGEST and line["tables"]["request"] == 5
    out = cli("verify", "--seal-file", seals, "--db", ledger.url).output
    assert f"batch fx: ok, seal {line['digest']}" in out
    with ledger.session() as s:
        batch = Ledger.get_batch(s, "fx")
        assert (batch.status, batch.seal_digest) == ("closed", line["digest"])


def test_the_seal_file_names_the_scheme_of_the_seal(closed: tuple[Ledger, Path]) -> None:
    """The seal file said scheme 2 for every seal: with the seal row gone, verify recomputed a scheme-3 seal
    by scheme 2 and reported the file's digest as wrong, not the missing row."""
    ledger, seals = closed
    assert json.loads(seals.read_text().splitlines()[-1])["scheme"] == scheme3.SCHEME
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: DELETE of seal"):
            raw(ledger, "DELETE FROM seal")
        return
    raw(ledger, "DELETE FROM seal_part")
    raw(ledger, "DELETE FROM seal")
    out = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1).output
    assert "batch fx: MISMATCH" in out and "closed but has no seal row" in out and "seal file has" not in out


def test_raw_sql_update_of_a_request(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    sql = "UPDATE request SET output_tokens = 21 WHERE idx = 2"
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match=PG_REQUEST_UPDATE):
            raw(ledger, sql)
        return
    raw(ledger, sql)  # DuckDB 1.x has no triggers: the seal detects it
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    art = request_artefact(ledger)
    assert "batch fx: MISMATCH" in res.output
    assert f"table request: 1 changed: (artefact_id={art}, idx=2)" in res.output
    assert "seal file has" in res.output


def test_raw_sql_delete_of_a_request(closed: tuple[Ledger, Path]) -> None:
    ledger, _ = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R9: DELETE of request_gaps"):
            raw(ledger, "DELETE FROM request_gaps")
        with pytest.raises(sa.exc.DBAPIError, match="refused by R9: UPDATE of request_gaps"):
            raw(ledger, "UPDATE request_gaps SET gaps = gaps[1:2] WHERE request_idx = 4")
        with pytest.raises(sa.exc.DBAPIError, match="cannot delete from view"):  # a view of request_gaps (0014)
            raw(ledger, "DELETE FROM chunk_gap")
        with pytest.raises(sa.exc.DBAPIError, match="refused by R9: TRUNCATE of request"):
            raw(ledger, "TRUNCATE request CASCADE")
        return
    with pytest.raises(sa.exc.ProgrammingError, match="Can only delete from base table"):  # a view (0014)
        raw(ledger, "DELETE FROM chunk_gap WHERE request_idx = 4 AND seq = 2")
    raw(ledger, "UPDATE request_gaps SET gaps = gaps[1:2] WHERE request_idx = 4")  # its last gap (seq 2) gone
    res = cli("verify", "fx", "--db", ledger.url, code=1)
    assert f"table chunk_gap: 1 missing: (artefact_id={request_artefact(ledger)}, request_idx=4, seq=2)" in res.output


def test_raw_sql_on_declared_rows_of_a_closed_batch(closed: tuple[Ledger, Path]) -> None:
    ledger, _ = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of run in a closed batch"):
            raw(ledger, "UPDATE run SET concurrency = 8")
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of batch fx"):
            raw(ledger, "UPDATE batch SET status = 'open'")
        return
    raw(ledger, "UPDATE run SET concurrency = 8 WHERE id = 1")
    res = cli("verify", "--db", ledger.url, code=1)
    assert "table run: 1 changed: (id=1)" in res.output


def test_seal_no_longer_matches_the_seal_file(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    line = json.loads(seals.read_text())
    line["digest"] = "f" * 64
    seals.write_text(json.dumps(line) + "\n")
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    assert "batch fx: MISMATCH" in res.output and "seal file has ffffffffffffffff…" in res.output


def test_rewritten_seal_row_is_caught_by_the_file(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="refused by R10: UPDATE of seal"):
            raw(ledger, "UPDATE seal SET digest = 'x'")
        return
    raw(ledger, "UPDATE request SET ttft_s = 0.5 WHERE idx = 0")
    # an attacker with write access re-seals the batch in the database: the seal row agrees again
    with ledger.session() as s:
        b = Ledger.get_batch(s, "fx")
        declared, arts = batch_parts(s.connection(), ledger.backend, b.id)
        root = scheme3.batch_root(declared, arts)
        seal = s.scalar(sa.select(m.Seal))
        digest = scheme2.seal_digest(scheme2.ZERO_DIGEST, "fx", root, seal.row_count, b.closed_at, scheme3.SCHEME)
    raw(ledger, "DELETE FROM seal_part")  # DuckDB cannot update a key referenced by a foreign key
    raw(ledger, f"UPDATE seal SET digest = '{digest}', merkle_root = '{root}'")
    raw(ledger, f"UPDATE batch SET seal_digest = '{digest}'")
    # ...but its own stored parts no longer rebuild it, and the seal file disagrees
    res = cli("verify", "--db", ledger.url, code=1)
    assert "seal_part rows of request of artefact" in res.output and "do not rebuild the seal's root" in res.output
    assert "the seal row's per-part roots do not rebuild its merkle_root (seal row rewritten)" in res.output
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    assert "seal file has" in res.output


def test_import_into_closed_batch_refused(closed: tuple[Ledger, Path], tmp_path: Path) -> None:
    ledger, _ = closed
    res = cli(
        "import",
        bench_json(tmp_path / "more.json", 3, date="20260707-110000"),
        "--batch",
        "fx",
        "--db",
        ledger.url,
        code=3,
    )
    assert "refused (R10): import into batch 'fx'" in res.output


def test_reopening_and_closing_twice_refused(closed: tuple[Ledger, Path]) -> None:
    ledger, _ = closed
    with pytest.raises(Refused, match="R10.*reopen batch 'fx'"):
        with ledger.session() as s:
            Ledger.get_batch(s, "fx").status = "open"
    assert "refused (R10): close batch 'fx' again" in cli("close", "fx", "--db", ledger.url, code=3).output


def test_seals_chain(closed: tuple[Ledger, Path], tmp_path: Path) -> None:
    ledger, seals = closed
    first = json.loads(seals.read_text())["digest"]
    cli("import", bench_json(tmp_path / "b2.json", 3, date="20260707-120000"), "--batch", "g", "--db", ledger.url)
    cli("close", "g", "--seal-file", seals, "--db", ledger.url)
    second = json.loads(seals.read_text().splitlines()[1])
    assert second["previous_digest"] == first
    out = cli("verify", "--seal-file", seals, "--db", ledger.url).output
    assert "batch fx: ok" in out and "batch g: ok" in out


def test_seal_digest_vector() -> None:
    at = datetime(2026, 7, 7, 9, 39, 20)
    for scheme in ("bench-ledger-seal/2", "bench-ledger-seal/1"):
        expected = hashlib.sha256(
            b'["'
            + scheme.encode()
            + b'","'
            + b"0" * 64
            + b'","fx","'
            + b"ab" * 32
            + b'",100,"2026-07-07T09:39:20.000000"]'
        ).hexdigest()
        assert scheme2.seal_digest(scheme2.ZERO_DIGEST, "fx", "ab" * 32, 100, at, scheme) == expected
    assert scheme2.seal_digest(scheme2.ZERO_DIGEST, "fx", "ab" * 32, 100, at) == scheme2.seal_digest(
        scheme2.ZERO_DIGEST, "fx", "ab" * 32, 100, at, "bench-ledger-seal/2"
    )
