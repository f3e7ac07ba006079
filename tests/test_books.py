"""Closing the books (R10): seal, verify, tamper detection, corrections and history, on both backends."""

from __future__ import annotations

import hashlib
import json
import random
import time
from datetime import datetime
from pathlib import Path

import pytest
import rfc8785
import sqlalchemy as sa
from bench_ledger import books
from bench_ledger import models as m
from bench_ledger import seal as sl
from bench_ledger.cli import main
from bench_ledger.errors import Refused
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.clirun import run

PG_REQUEST_UPDATE = "refused by R9: UPDATE of request: rows of this table are append-only"


cli = run  # the name the book-keeping tests (and their importers) use


def bench_json(path: Path, n: int = 5, *, date: str = "20260707-100000", rate: float = 2.0) -> Path:
    """A small vLLM-bench-shaped result with per-request arrays."""
    rnd = random.Random(n)
    ttfts = [round(rnd.uniform(0.02, 0.2), 6) for _ in range(n)]
    data = {
        "date": date,
        "backend": "vllm",
        "model_id": "/models/Qwen2.5-7B",
        "num_prompts": n,
        "request_rate": rate,
        "max_concurrency": 4,
        "duration": 3.5,
        "completed": n,
        "failed": 0,
        "total_input_tokens": 100 * n,
        "total_output_tokens": 20 * n,
        "output_throughput": 28.571428571428573,
        "mean_ttft_ms": sum(ttfts) / n * 1000,
        "input_lens": [100] * n,
        "output_lens": [20] * n,
        "ttfts": ttfts,
        "itls": [[0.01, 0.011, 0.0125] for _ in range(n)],
        "latencies": [t + 0.5 for t in ttfts],
        "errors": [""] * n,
        "start_times": [1000.0 + i * 0.25 for i in range(n)],
    }
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def closed(ledger: Ledger, tmp_path: Path) -> tuple[Ledger, Path]:
    """Batch fx: one per-request vLLM file (the same with or without ../shared); closed with a seal file."""
    cli("import", bench_json(tmp_path / "bench.json"), "--batch", "fx", "--db", ledger.url)
    seals = tmp_path / "seals.jsonl"
    out = cli("close", "fx", "--seal-file", seals, "--db", ledger.url).output
    assert "closed batch fx" in out and "appended to" in out
    return ledger, seals


def raw(ledger: Ledger, sql: str) -> None:
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(sql)


def test_close_then_verify_ok(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    line = json.loads(seals.read_text().splitlines()[-1])
    assert line["batch"] == "fx" and line["previous_digest"] == sl.ZERO_DIGEST and line["tables"]["request"] == 5
    out = cli("verify", "--seal-file", seals, "--db", ledger.url).output
    assert f"batch fx: ok, seal {line['digest']}" in out
    with ledger.session() as s:
        batch = Ledger.get_batch(s, "fx")
        assert (batch.status, batch.seal_digest) == ("closed", line["digest"])


def test_raw_sql_update_of_a_request(closed: tuple[Ledger, Path]) -> None:
    ledger, seals = closed
    sql = "UPDATE request SET output_tokens = 21 WHERE idx = 2"
    if ledger.backend == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match=PG_REQUEST_UPDATE):
            raw(ledger, sql)
        return
    raw(ledger, sql)  # DuckDB 1.x has no triggers: the seal detects it
    res = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    art = _request_artefact(ledger)
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
    assert f"table chunk_gap: 1 missing: (artefact_id={_request_artefact(ledger)}, request_idx=4, seq=2)" in res.output


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
    from bench_ledger import books as bk
    from bench_ledger import seal3

    with ledger.session() as s:
        b = Ledger.get_batch(s, "fx")
        declared, arts = bk._batch_parts(s.connection(), ledger.backend, b.id)
        root = seal3.batch_root(declared, arts)
        seal = s.scalar(sa.select(m.Seal))
        digest = sl.seal_digest(sl.ZERO_DIGEST, "fx", root, seal.row_count, b.closed_at, seal3.SCHEME)
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


def test_corrections_history_and_as_of(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", bench_json(tmp_path / "a.json"), "--batch", "open1", "--db", ledger.url)
    with ledger.session() as s:
        run_id = s.scalar(sa.select(m.Run.id))
    imported = datetime.utcnow()
    while datetime.utcnow().replace(microsecond=0) <= imported:  # --as-of has whole seconds
        time.sleep(0.05)
    before = datetime.utcnow().replace(microsecond=0)
    new_id = books.correct_run(ledger, run_id, "concurrency was 8, not 4", concurrency=8)
    chain = books.history(ledger, "run", new_id)
    assert [(r["id"], r["revision"], r["supersedes_id"]) for r in chain] == [(run_id, 0, None), (new_id, 1, run_id)]
    assert chain[1]["correction_reason"] == "concurrency was 8, not 4"
    with ledger.session() as s:
        assert [r.id for r in s.scalars(books.current_runs())] == [new_id]
        assert [r.concurrency for r in s.scalars(books.current_runs(as_of=before))] == [4]
    out = cli("history", "run", run_id, "--db", ledger.url).output
    assert "concurrency was 8, not 4" in out
    asof = cli("runs", "--as-of", before.strftime("%Y-%m-%dT%H:%M:%S"), "--db", ledger.url, "--json").output
    assert [r["id"] for r in json.loads(asof)] == [run_id]
    with ledger.session() as s:
        pv = s.scalar(sa.select(m.PublishedValue.id).where(m.PublishedValue.run_id == run_id).limit(1))
    pv2 = books.correct_published_value(ledger, pv, "typo in the report", text="1,000")
    assert [r["id"] for r in books.history(ledger, "published_value", pv)] == [pv, pv2]
    cli("close", "open1", "--db", ledger.url)
    with pytest.raises(Refused, match="R10"):
        books.correct_run(ledger, new_id, "too late", concurrency=16)


# --------------------------------------------------------------------------- the construction itself


def test_merkle_stream_is_rfc9162_mth() -> None:
    for n in range(0, 40):
        leaves = [sl.leaf_hash(str(i).encode()) for i in range(n)]
        stream = sl.MerkleStream()
        for leaf in leaves:
            stream.add(leaf)
        assert stream.root() == sl.merkle_root(leaves), n
    # RFC 9162 shape for 3 leaves: node(node(l0, l1), l2)
    l0, l1, l2 = (sl.leaf_hash(b) for b in (b"a", b"b", b"c"))
    assert sl.merkle_root([l0, l1, l2]) == sl.node_hash(sl.node_hash(l0, l1), l2)
    assert sl.leaf_hash(b"a") == hashlib.sha256(b"\x00a").digest()


@pytest.mark.parametrize("text", ["plain", "é中文🙂", 'tab\tnl\nquote"back\\', "\x00\x01\x1f\x7f", "\u2028\u2029"])
def test_fast_canonical_form_is_rfc8785(text: str) -> None:
    row = {"b": text, "a": 1, "z": None, "t": True, "f": repr(0.1), "big": str(2**60), "neg": -(2**53 - 1)}
    assert sl.canonical("request", row) == rfc8785.dumps(["request", row])


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
        assert sl.seal_digest(sl.ZERO_DIGEST, "fx", "ab" * 32, 100, at, scheme) == expected
    assert sl.seal_digest(sl.ZERO_DIGEST, "fx", "ab" * 32, 100, at) == sl.seal_digest(
        sl.ZERO_DIGEST, "fx", "ab" * 32, 100, at, "bench-ledger-seal/2"
    )


def _request_artefact(ledger: Ledger) -> int:
    with ledger.session() as s:
        return s.scalar(sa.select(m.Request.artefact_id).limit(1))


def test_a_corrected_run_keeps_its_records_in_metrics_and_listings(ledger_url: str, tmp_path) -> None:
    """Captured rows stay on the first revision (Run.origin_id); queries show the current one."""
    from bench_ledger.books import correct_run
    from bench_ledger.queries.catalog import list_runs, run_detail
    from bench_ledger.queries.metrics.registry import evaluate
    from bench_ledger.queries.values import Scope
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
