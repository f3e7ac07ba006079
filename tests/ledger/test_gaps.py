"""Chunk gaps as one array per request (migration 0014): ``request_gaps`` holds them, the view
``chunk_gap`` gives the old rows, and the seal (scheme 3) hashes the same rows as before."""

from __future__ import annotations

import importlib
import json
import random
import struct
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import guards
from bench_ledger import models as m
from bench_ledger.importers import _vllm_bench_duckdb as vbd  # private: the DuckDB path's own entry and checks
from bench_ledger.importers import vllm_bench as vb
from bench_ledger.store import Ledger, alembic_config

from tests.clirun import run as cli

LENGTHS = (3, 0, 1, 5, 0, 2, 4)  # gaps per request: two requests with an empty itls list


def gap_file(path: Path, *, itls: bool = True, seed: int = 17) -> Path:
    """A small vLLM result whose requests have 3, 0 (empty list), 1, 5, 0, 2 and 4 chunk gaps."""
    rnd = random.Random(seed)
    n = len(LENGTHS)
    gaps = [[round(rnd.uniform(0.001, 0.05), 6) for _ in range(k)] for k in LENGTHS]
    ttfts = [round(rnd.uniform(0.02, 0.2), 6) for _ in range(n)]
    data = {
        "date": "20260707-100000",
        "backend": "vllm",
        "model_id": "/models/Qwen2.5-7B",
        "num_prompts": n,
        "request_rate": 2.0,
        "max_concurrency": 4,
        "duration": 3.5,
        "completed": n,
        "failed": 0,
        "total_input_tokens": 100 * n,
        "total_output_tokens": 20 * n,
        "input_lens": [100] * n,
        "output_lens": [len(g) + 1 for g in gaps],
        "ttfts": ttfts,
        **({"itls": gaps} if itls else {}),
        "latencies": [t + 0.5 for t in ttfts],
        "errors": [""] * n,
        "start_times": [1000.0 + i * 0.25 for i in range(n)],
    }
    path.write_text(json.dumps(data))
    return path


# The artefact digest's parts of gap_file() imported as artefact 1, computed by the code before
# migration 0014 (main at d888ea3, gap rows in the table chunk_gap) on DuckDB and PostgreSQL, by both
# vLLM parse paths: the rows the view gives and their encoding must hash to the same roots.
PINNED = {
    "chunk_gap": (15, "a411f26d0c6cfe541e453febbf9f002adf0f0555293910641721defb2f834e36"),
    "request": (7, "e618a78e04f00ae8d05010a0ee77d162ea4c72267ba12d32611c4813fe04d3b2"),
}


def _parts(ledger: Ledger) -> dict[str, tuple[int, str]]:
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT table_name, row_count, root FROM artefact_digest WHERE artefact_id = 1"
        ).all()
    return {t: (int(n), r) for t, n, r in rows}


@pytest.mark.parametrize("fast", [False, True], ids=["python-path", "fast-path"])
def test_seal_of_gaps_is_the_one_made_before_the_arrays(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    """The import digest of a file with gaps (empty lists included) is byte for byte the one the
    row-per-gap table gave (PINNED), and close + verify recompute it from the database."""
    if fast:
        monkeypatch.setattr(vb, "FAST_MIN_BYTES", 0)
        assert vbd.fast_runs(gap_file(tmp_path / "probe.json")) is not None
    cli("import", gap_file(tmp_path / "gaps.json"), "--batch", "fx", "--db", ledger.url)
    parts = _parts(ledger)
    assert {t: parts[t] for t in PINNED} == PINNED
    with ledger.engine.connect() as conn:
        counts = conn.exec_driver_sql("SELECT idx, chunk_count FROM request ORDER BY idx").all()
        stored = conn.exec_driver_sql("SELECT request_idx FROM request_gaps ORDER BY request_idx").scalars().all()
        rows = conn.exec_driver_sql("SELECT request_idx, seq FROM chunk_gap ORDER BY request_idx, seq").all()
    assert [c for _, c in counts] == [k + 1 for k in LENGTHS]  # an empty list: one chunk, no gap
    assert stored == [i for i, k in enumerate(LENGTHS) if k]  # no array for an empty list
    assert rows == [(i, s) for i, k in enumerate(LENGTHS) for s in range(k)]
    cli("close", "fx", "--db", ledger.url)
    assert "batch fx: ok, seal " in cli("verify", "--db", ledger.url).output


def test_absent_itls_leave_chunk_count_unknown(ledger: Ledger, tmp_path: Path) -> None:
    cli("import", gap_file(tmp_path / "none.json", itls=False), "--batch", "fx", "--db", ledger.url)
    with ledger.engine.connect() as conn:
        assert set(conn.exec_driver_sql("SELECT chunk_count FROM request").scalars()) == {None}
        assert conn.exec_driver_sql("SELECT count(*) FROM request_gaps").scalar() == 0
    assert "chunk_gap" not in _parts(ledger) or _parts(ledger)["chunk_gap"][0] == 0


def _migrate(ledger: Ledger, how: str, revision: str) -> None:
    from alembic import command

    cfg = alembic_config()
    with ledger.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, how)(cfg, revision)


def test_ledger_migrated_from_0013_with_gaps_still_verifies(ledger: Ledger, tmp_path: Path) -> None:
    """A closed batch and an open one with gaps, taken back to revision 0013 (gap rows in the table
    chunk_gap, as the code before 0014 wrote them: the same roots) and migrated to head again: the
    rows, the seal and the import digests are unchanged, `ledger verify` is ok, the guards are in place."""
    cli("import", gap_file(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    cli("close", "fx", "--db", ledger.url)
    cli("import", gap_file(tmp_path / "b.json", seed=18), "--batch", "open", "--db", ledger.url)
    with ledger.engine.connect() as conn:
        before = conn.exec_driver_sql("SELECT * FROM chunk_gap ORDER BY artefact_id, request_idx, seq").all()
    _migrate(ledger, "downgrade", "0013")
    with ledger.engine.connect() as conn:
        assert "chunk_gap" in sa.inspect(conn).get_table_names()
        assert "request_gaps" not in sa.inspect(conn).get_table_names()
        assert conn.exec_driver_sql("SELECT * FROM chunk_gap ORDER BY artefact_id, request_idx, seq").all() == before
        # the old table's rows hash to the roots stored at import
        from bench_ledger.seal import scheme3

        table = scheme3._read(
            conn, ledger.backend, "chunk_gap", scheme3.select_sql("chunk_gap", artefact_ids="1"), True
        )
        part = scheme3.part_of("chunk_gap", 1, table.drop_columns(["_art"]))
        assert (part.count, part.root) == PINNED["chunk_gap"]
    _migrate(ledger, "upgrade", "head")
    assert ledger.revision() == ledger.head_revision()
    with ledger.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT * FROM chunk_gap ORDER BY artefact_id, request_idx, seq").all() == before
        assert guards.trigger_problems(conn, ledger.backend) == []
    # DuckDB: the downgrade took the declared rows' digests (migration 0018) with it: said, not passed in silence
    out = cli("verify", "--db", ledger.url, code=0 if ledger.backend == "postgresql" else 1).output
    assert "batch fx: ok, seal " in out and "batch open (open): ok, 1 artefact(s) match their import digests" in out
    if ledger.backend == "duckdb":
        assert (
            "declared rows: NOT VERIFIED\n  not checked: table batch: 2 row(s) have no digest (the ledger keeps none "
            "from before migration 0018" in out
        )


def test_migration_refuses_gap_rows_with_a_hole(ledger: Ledger, tmp_path: Path) -> None:
    """Rows that are not seq 0, 1, ... per request have no array form: the upgrade fails, naming the
    request, and leaves the ledger at 0013."""
    cli("import", gap_file(tmp_path / "a.json"), "--batch", "fx", "--db", ledger.url)
    _migrate(ledger, "downgrade", "0013")
    bypass = "SET LOCAL session_replication_role = replica; " if ledger.backend == "postgresql" else ""
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(f"{bypass}DELETE FROM chunk_gap WHERE request_idx = 3 AND seq = 1")
    with pytest.raises(sa.exc.DBAPIError, match="chunk_gap rows of artefact 1 request 3 are not numbered 0, 1"):
        _migrate(ledger, "upgrade", "head")
    assert ledger.revision() == "0013"


def test_view_sql_is_the_migration_s() -> None:
    """models.VIEWS (create_schema, a scratch ledger) and migration 0014's frozen copy agree."""
    migration = importlib.import_module("bench_ledger.migrations.versions.0014_request_gaps_arrays")
    assert migration.VIEW_SQL == m.VIEWS["chunk_gap"]


def test_create_schema_builds_the_view(tmp_path: Path) -> None:
    engine = sa.create_engine(f"duckdb:///{tmp_path / 'scratch.duckdb'}")
    m.create_schema(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO request_gaps VALUES (1, 0, [0.5, 0.25]), (1, 2, [0.125])")
        assert conn.exec_driver_sql("SELECT * FROM chunk_gap ORDER BY request_idx, seq").all() == [
            (1, 0, 0, 0.5),
            (1, 0, 1, 0.25),
            (1, 2, 0, 0.125),
        ]
    engine.dispose()


def test_rows_and_arrays_round_trip() -> None:
    lists = pa.array([[0.5, 0.25], None, [], [1e-7], [3.0, 2.0, 1.0]], pa.list_(pa.float64()))
    arrays = gp.arrays(7, pa.array([0, 1, 2, 3, 4], pa.int32()), lists)
    assert arrays.column("request_idx").to_pylist() == [0, 3, 4]  # no row without a gap
    assert gp.count(arrays) == 6
    rows = gp.rows_of(arrays.slice(1))
    assert rows.to_pylist() == [
        {"artefact_id": 7, "request_idx": 3, "seq": 0, "gap_s": 1e-7},
        {"artefact_id": 7, "request_idx": 4, "seq": 0, "gap_s": 3.0},
        {"artefact_id": 7, "request_idx": 4, "seq": 1, "gap_s": 2.0},
        {"artefact_id": 7, "request_idx": 4, "seq": 2, "gap_s": 1.0},
    ]
    assert gp.arrays_of(gp.rows_of(arrays)).to_pylist() == arrays.to_pylist()
    holed = gp.rows_of(arrays).filter(pa.array([False, True, True, True, True, True]))  # seq 0 of request 0 gone
    with pytest.raises(ValueError, match="artefact 7 request 0: seq 1 where 0 was due"):
        gp.arrays_of(holed)


def _behind(ledger: Ledger, sql: str) -> None:
    """A raw write behind the ledger (PostgreSQL: its triggers bypassed)."""
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(
            ("SET LOCAL session_replication_role = replica; " if ledger.backend == "postgresql" else "") + sql
        )


def _view_rows(ledger: Ledger) -> list[tuple]:
    """The view's rows in key order, each double as its bits (so -0.0 and 0.0 differ)."""
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT artefact_id, request_idx, seq, gap_s FROM chunk_gap ORDER BY artefact_id, request_idx, seq"
        ).all()
    return [(a, r, s, None if g is None else struct.pack("<d", g)) for a, r, s, g in rows]


def _read_rows(ledger: Ledger) -> list[tuple] | None:
    with ledger.engine.connect() as conn:
        arrays = gp.read(
            conn,
            ledger.backend,
            "SELECT artefact_id, request_idx, gaps FROM request_gaps",
            ["artefact_id", "request_idx"],
        )
    if arrays is None:
        return None
    rows = sorted(gp.rows_of(arrays).to_pylist(), key=lambda d: (d["artefact_id"], d["request_idx"], d["seq"]))
    return [
        (d["artefact_id"], d["request_idx"], d["seq"], None if d["gap_s"] is None else struct.pack("<d", d["gap_s"]))
        for d in rows
    ]


def test_read_gives_the_view_s_rows(ledger: Ledger, tmp_path: Path) -> None:
    """What close, verify and check read instead of the view (gaps.read, then rows_of) is the view's
    rows exactly: the imported arrays, and arrays written behind the ledger with extreme doubles and
    an empty array (no rows; the column refuses NULL)."""
    cli("import", gap_file(tmp_path / "gaps.json"), "--batch", "fx", "--db", ledger.url)
    arr = "ARRAY[-0.0, 5e-324, 1.7976931348623157e308, 0.1, 2.2250738585072014e-308]"
    empty = "CAST(ARRAY[] AS DOUBLE PRECISION[])" if ledger.backend == "postgresql" else "CAST([] AS DOUBLE[])"
    _behind(ledger, f"INSERT INTO request_gaps VALUES (1, 100, {arr}), (1, 101, {empty}), (2, 0, ARRAY[0.5])")
    view = _view_rows(ledger)
    assert len(view) == sum(LENGTHS) + 5 + 1
    assert _read_rows(ledger) == view


def test_arrays_of_another_form_are_read_through_the_view(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: an array that is not a plain list of doubles (a NULL element; on PostgreSQL also
    a two-dimensional one), written behind the ledger, is read as the view gives it, so verify names
    the change (PostgreSQL: gaps.read gives None and the seal reads the view, without first sorting a copy
    of arrays it cannot read in that copy either)."""
    from bench_ledger.seal import streams

    sorted_copies: list[str] = []
    real = streams._in_key_order

    def spy(conn, backend, source, sql):  # noqa: ANN001, ANN202
        sorted_copies.append(source)
        return real(conn, backend, source, sql)

    monkeypatch.setattr(streams, "_in_key_order", spy)
    cli("import", gap_file(tmp_path / "gaps.json"), "--batch", "fx", "--db", ledger.url)
    cli("close", "fx", "--db", ledger.url)
    forms = ["UPDATE request_gaps SET gaps = ARRAY[0.5, NULL, 0.25] WHERE request_idx = 0"]  # 3 gaps, one NULL
    if ledger.backend == "postgresql":
        forms.append("UPDATE request_gaps SET gaps = ARRAY[ARRAY[0.5, 0.25], ARRAY[0.125, 1.0]] WHERE request_idx = 3")
    for sql in forms:
        _behind(ledger, sql)
        if ledger.backend == "postgresql":
            assert _read_rows(ledger) is None
        else:
            assert _read_rows(ledger) == _view_rows(ledger)
        res = cli("verify", "fx", "--db", ledger.url, code=1)
        assert "batch fx: MISMATCH" in res.output and "table chunk_gap" in res.output
    # DuckDB stores the updated row last (out of key order: the table is sorted by the database and read
    # again); PostgreSQL's arrays it cannot read are not sorted first
    assert sorted_copies == (["request_gaps"] if ledger.backend == "duckdb" else [])


@pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)  # PostgreSQL's binary array form only
def test_pg_doubles_reads_the_binary_array_exactly(ledger: Ledger) -> None:
    """One double precision[] read in binary: every value bit for bit (signed zero, subnormal, extremes,
    infinities); the empty array; any other form refused (a NULL element, two dimensions, integers)."""
    values = [0.1, -0.0, 5e-324, 1.7976931348623157e308, -2.5, float("inf"), float("-inf"), 0.30000000000000004]
    with ledger.connection() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor(binary=True) as cur:

            def got(sql: str, *params: object) -> bytes:
                cur.execute(sql, params)
                assert cur.pgresult is not None
                return cur.pgresult.get_value(0, 0)

            a = gp.pg_doubles(got("SELECT %s::double precision[]", values))
            assert a.dtype == "float64" and [struct.pack("<d", v) for v in a.tolist()] == [
                struct.pack("<d", v) for v in values
            ]
            assert gp.pg_doubles(got("SELECT CAST(ARRAY[] AS double precision[])")).tolist() == []
            for sql, what in (
                ("SELECT ARRAY[1.0, NULL]::double precision[]", "NULLs True"),
                ("SELECT ARRAY[[1.0], [2.0]]::double precision[]", "2 dimensions"),
                ("SELECT ARRAY[1, 2]::bigint[]", "element type 20"),
            ):
                with pytest.raises(ValueError, match=what):
                    gp.pg_doubles(got(sql))


def test_rows_in_slices_are_rows_of_in_order() -> None:
    """The import hashes the gap rows a slice of arrays at a time (memory): the same rows, in order,
    for any bound, an array longer than the bound coming alone."""
    lists = pa.array([[0.5, 0.25], [1e-7], [3.0, 2.0, 1.0, 0.5, 0.25], [7.0], [8.0, 9.0]], pa.list_(pa.float64()))
    arrays = gp.arrays(3, pa.array([0, 2, 5, 6, 9], pa.int32()), lists)
    whole = gp.rows_of(arrays)
    for bound in (1, 2, 3, 4, 100):
        slices = list(gp.rows_in_slices(arrays, bound))
        assert pa.concat_tables(slices).equals(whole)
        assert all(
            s.num_rows <= bound or s.column("request_idx").unique().to_pylist() == [s["request_idx"][0].as_py()]
            for s in slices
        )
    assert [s.num_rows for s in gp.rows_in_slices(arrays, 3)] == [3, 5, 3]
    assert list(gp.rows_in_slices(arrays.slice(0, 0))) == []
