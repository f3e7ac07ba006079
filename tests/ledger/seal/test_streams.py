"""The large tables of a seal hashed a slice at a time (ledger.seal.streams): at import as they arrive,
at verify and close read back by slices, in key order whatever the stored order."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger.encoding import chunks
from bench_ledger.seal import part_rows, scheme3, streams, verify
from bench_ledger.store import Ledger

from tests.batches import bench_json, cli, raw

ROOT = Path(__file__).resolve().parents[3]


def _reads_whole(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables that ``scheme3.artefact_parts`` reads whole from now on (the spy's list)."""

    tables: list[str] = []
    real = scheme3.artefact_parts

    def spy(conn, backend, artefact_ids, tables_=scheme3.ARTEFACT_TABLES):  # noqa: ANN001, ANN202
        tables.extend(tables_)
        return real(conn, backend, artefact_ids, tables_)

    monkeypatch.setattr(scheme3, "artefact_parts", spy)
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

    import bench_ledger.importers._dmon_arrow as dmon_arrow  # private: its block size, for many chunks
    from bench_ledger.cli import main
    from click.testing import CliRunner

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen

    monkeypatch.setattr(dmon_arrow, "_WIDE_BLOCK", 64 << 10)  # many chunks
    lines = gen.dmon(tmp_path / "d.txt", tmp_path / "d.csv", 4, 1500)
    finished: list[tuple[str, bool, int]] = []
    real = streams.Stream.finish

    def finish(self, artefact_id):  # noqa: ANN001, ANN202
        finished.append((self.table, self.broken, self.count))
        return real(self, artefact_id)

    monkeypatch.setattr(streams.Stream, "finish", finish)
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
        whole = _part_triples(scheme3.artefact_parts(conn, ledger.backend, ids))
        real = scheme3.artefact_parts
        read_whole = _reads_whole(monkeypatch)
        monkeypatch.setattr(streams, "SLICE_ROWS", 5)
        streamed = _part_triples(streams.artefact_digest_parts(conn, ledger.backend, ids))
    assert streamed == whole
    assert set(read_whole) & set(streams.STREAMED_TABLES) == set()
    counts = {t: sum(c for ps in whole.values() for tt, c, _ in ps if tt == t) for t in streams.STREAMED_TABLES}
    assert all(n > 5 for n in counts.values()), counts  # every streamed table spans several slices
    assert (
        "batch s (open): ok, 4 artefact(s) match their import digests over" in cli("verify", "--db", ledger.url).output
    )
    # close keeps each streamed chunk's seal_part fields: the rows a whole part gives, chunks cut by slices

    def rows(parts: dict) -> list[dict]:
        return [r for ps in parts.values() for p in ps for r in part_rows.seal_part_rows(7, p)]

    with monkeypatch.context() as mp, ledger.connection() as conn:
        mp.setattr(chunks, "CHUNK", 3)  # chunks of 3 rows: many per part, cut anywhere by the 5-row slices
        streamed_rows = rows(streams.artefact_digest_parts(conn, ledger.backend, ids, chunks=True))
        assert streamed_rows == rows(real(conn, ledger.backend, ids))
    assert len(streamed_rows) > 40
    cli("close", "s", "--db", ledger.url)  # in 5-row slices too
    assert set(read_whole) & set(streams.STREAMED_TABLES) == set()
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
        monkeypatch.setattr(streams, "SLICE_ROWS", 64)  # several slices (PostgreSQL: a page each)
        streamed = _part_triples(streams.artefact_digest_parts(conn, ledger.backend, arts))
        assert whole == []
        monkeypatch.undo()
        assert streamed == _part_triples(scheme3.artefact_parts(conn, ledger.backend, arts))
        if ledger.backend == "postgresql":  # the sorted copies are dropped, also where the reads stop early
            sorted_copies = "SELECT count(*) FROM pg_class WHERE starts_with(relname, '_ledger_key_order')"
            assert conn.exec_driver_sql(sorted_copies).scalar() == 0
            slices = streams._streamed_slices(
                conn, ledger.backend, ", ".join(map(str, arts)), ["request"], ordered=True
            )
            next(slices)
            assert conn.exec_driver_sql(sorted_copies).scalar() == 1
            slices.close()
            assert conn.exec_driver_sql(sorted_copies).scalar() == 0
            slices = streams._streamed_slices(
                conn, ledger.backend, ", ".join(map(str, arts)), ["request"], ordered=True
            )
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
            assert [c.ok for c in verify(read_only).checks if c.batch == "fx"] == [True]
            assert "request" in whole


def test_read_ahead_gives_every_slice_in_order_and_stops_its_thread_when_closed() -> None:
    """verify and close read the next slice in a thread while one is hashed (`streams._read_ahead`): every
    item in order, an error of the reads raised to the caller, and once the caller stops (closes it), no
    read is left running on the connection: at most one item was made ahead."""
    import contextlib
    import threading

    made: list[tuple[int, str]] = []

    def items(n: int, fail_at: int | None = None):
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"read {i} failed")
            made.append((i, threading.current_thread().name))
            yield i

    assert list(streams._read_ahead(items(5))) == [0, 1, 2, 3, 4]
    assert {name for _, name in made} != {threading.current_thread().name}  # made in the reading thread
    with pytest.raises(ValueError, match="read 2 failed"):
        list(streams._read_ahead(items(5, fail_at=2)))
    made.clear()
    with contextlib.closing(streams._read_ahead(items(100))) as got:
        assert next(got) == 0
    assert [i for i, _ in made] == [0, 1]  # the one ahead, then nothing more
    assert not any(t.name.startswith("ledger-read") for t in threading.enumerate())
