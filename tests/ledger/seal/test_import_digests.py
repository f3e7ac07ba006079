"""Artefact digests (seal scheme 3): stored at import from the rows handed to the database, the
documented encoding, compared by `verify` and `close`, and the artefacts that cannot be checked."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.seal import import_digests, scheme3, verify
from bench_ledger.store import Ledger

from tests.batches import bench_json, cli, raw, request_artefact

ROOT = Path(__file__).resolve().parents[3]


def test_open_batch_change_found_by_the_import_digest(ledger: Ledger, tmp_path: Path) -> None:
    """Each artefact stores the digest of its rows at import: a raw-SQL change of an open batch is
    found by `verify` (table and rows) and the batch cannot be closed over it."""
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    art = request_artefact(ledger)
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
        art = request_artefact(ledger)
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

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen

    vllm, dmon_txt = tmp_path / "v.jsonl", tmp_path / "d.txt"
    gen.vllm_and_ledger(vllm, 3, 50, 4, None)
    gen.dmon(dmon_txt, tmp_path / "d.csv", 2, 30)
    read = []
    real = scheme3._read  # every read of rows for a digest goes through it, on both backends

    def spy(conn, backend, table, sql, with_art):
        read.append(table)
        return real(conn, backend, table, sql, with_art)

    monkeypatch.setattr(scheme3, "_read", spy)
    cli("import", vllm, "--batch", "fx", "--db", ledger.url)
    cli("import", dmon_txt, "--batch", "fx", "--node", "n1", "--db", ledger.url)
    assert read and not set(read) & set(import_digests.HELD_TABLES), read
    with ledger.session() as s:
        stored = {(d.artefact_id, d.table_name): (d.row_count, d.root) for d in s.scalars(sa.select(m.ArtefactDigest))}
        conn = s.connection()
        again = scheme3.artefact_parts(conn, ledger.backend, "SELECT id FROM artefact")
        counts = {t: s.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in import_digests.HELD_TABLES}
    assert (
        counts["request"] == 150 and counts["chunk_gap"] > 500 and counts["hardware_sample"] == 60 * len(gen.COUNTERS)
    )
    assert {t: sum(n for (_, tt), (n, _) in stored.items() if tt == t) for t in import_digests.HELD_TABLES} == counts
    assert stored == {(a, p.table): (p.count, p.root) for a, ps in again.items() for p in ps}
    assert cli("verify", "fx", "--db", ledger.url).output.count("2 artefact(s) match their import digests") == 1


def _drop_import_digest(ledger: Ledger, artefact_id: int) -> None:
    """An artefact as imported before migration 0011: no artefact_digest rows (triggers bypassed on PostgreSQL)."""
    sql = f"DELETE FROM artefact_digest WHERE artefact_id = {artefact_id}"
    raw(ledger, "SET LOCAL session_replication_role = replica; " + sql if ledger.backend == "postgresql" else sql)


def test_verify_names_the_artefacts_it_cannot_check(ledger: Ledger, tmp_path: Path) -> None:
    """Fail closed: artefacts of no batch are checked against their import digests too, and an
    artefact without an import digest (imported before migration 0011) is named as not checked,
    with why, and verify exits 1 -- never a silent skip. Close seals it as found and says so."""
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    art = request_artefact(ledger)
    dmon = ROOT / "tests" / "fixtures" / "dmon" / "dt_midnight.txt"
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
    assert not next(c for c in verify(ledger).checks if c.batch == "fx").ok
    out = cli("close", "fx", "--db", ledger.url).output
    assert f"  sealed as found, not compared with its import: {why}" in out.splitlines()
    assert "batch fx: ok, seal " in cli("verify", "--db", ledger.url).output  # from now on the seal covers it
