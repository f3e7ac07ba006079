"""ledger.ingest.bulk: on PostgreSQL the binary COPY stores exactly what the CSV COPY stores, and is used only
where every column's Arrow type is its column's binary form; on DuckDB an insert holds no rows after it."""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest
import sqlalchemy as sa
from bench_ledger.ingest import bulk  # its encoders, private, are what it tests
from bench_ledger.store import Ledger

I32, I64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
FLOATS = [-0.0, 5e-324, 1e-300, 0.1, 1 / 3, 1.7976931348623157e308, 12345.678901234567]
TEXTS = ["ok", 'a, "quoted"\nline', "ünïcödé ✓ 漢字", "", "\\N", "NULL"]


def ints(lo_hi: tuple[int, int], k: int) -> list[int | None]:
    """Seven values of an integer column: its least and greatest, and NULL among them."""
    return [lo_hi[0], lo_hi[1], 0, -1, None, 7, k]


def _requests(artefact_id: int) -> pa.Table:
    """Request rows with every column's extremes, and a NULL in each nullable column."""
    n = 7
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * n, pa.int32()),
            "idx": pa.array(range(n), pa.int32()),
            "run_id": pa.array([1] * n, pa.int32()),
            "line": pa.array(ints(I32, 3), pa.int32()),
            "status": pa.array(["ok", "failed", "unknown", "ok", "ok", "failed", "ok"]),
            "error": pa.array([None, *TEXTS]),
            "retries": pa.array(ints(I32, 1), pa.int32()),
            "input_tokens": pa.array(ints(I32, 2), pa.int32()),
            "output_tokens": pa.array([None] * n, pa.int32()),
            "clock": pa.array(["epoch_s", None, "monotonic_s", "epoch_ns", "x", "", "é"]),
            "send_ns": pa.array(ints(I64, 9), pa.int64()),
            "first_token_ns": pa.array(ints(I64, 8), pa.int64()),
            "end_ns": pa.array([None, *ints(I64, 1)[:-1]], pa.int64()),
            "ttft_s": pa.array(FLOATS, pa.float64()),
            "latency_s": pa.array([None, *FLOATS[1:]], pa.float64()),
            "queue_s": pa.array([None] * n, pa.float64()),
            "itl_mean_s": pa.array(FLOATS[::-1], pa.float64()),
            "chunk_count": pa.array(ints(I32, 5), pa.int32()),
            "cached_tokens": pa.array(ints(I32, 6), pa.int32()),
        }
    )


def _gaps(artefact_id: int) -> pa.Table:
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * 4, pa.int32()),
            "request_idx": pa.array(range(4), pa.int32()),
            "gaps": pa.array([[], FLOATS, [0.5] * 1000, [-0.0]], pa.list_(pa.float64())),
        }
    )


def _samples(artefact_id: int) -> pa.Table:
    ts = [
        dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2000, 1, 1),
        None,
        dt.datetime(2026, 12, 2, 15, 4, 5, 123456),
        dt.datetime(1970, 1, 1),
    ]
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * 5, pa.int32()),
            "line": pa.array(range(5), pa.int32()),
            "counter": pa.array(["pwr", "sm", "mem", "pwr", "fb"]),
            "node": pa.array(["n0", None, "n1", "", "n0"]),
            "gpu": pa.array([0, 1, 2, 3, 4], pa.int32()),
            "tick": pa.array([0, 1, 2, 3, 4], pa.int32()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "value": pa.array([250.5, None, -0.0, 1e300, 5e-324], pa.float64()),
            "unit": pa.array(["W", "%", "MiB", "W", "MiB"]),
        }
    )


def _stored(conn: sa.Connection, table: str, artefact_id: int) -> list[tuple]:
    rows = conn.exec_driver_sql(f"SELECT * FROM {table} WHERE artefact_id = {artefact_id}").all()
    return sorted((tuple(v for k, v in r._mapping.items() if k != "artefact_id") for r in rows), key=repr)


@pytest.mark.parametrize(("table", "make"), [("request", _requests), ("hardware_sample", _samples)])
def test_binary_copy_stores_what_csv_copy_stores(
    pg_ledger: Ledger, table: str, make, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bulk.pg_binary_encodable(table, make(1).schema)
    calls: list[int] = []
    real = bulk.pg_binary_rows
    monkeypatch.setattr(bulk, "pg_binary_rows", lambda data: calls.append(data.num_rows) or real(data))
    with pg_ledger.engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")  # no guard triggers: rows without parents
        bulk.bulk_insert(conn, "postgresql", table, make(1))
        assert calls == [make(1).num_rows]
        monkeypatch.setattr(bulk, "pg_binary_encodable", lambda *_: False)  # the CSV COPY
        bulk.bulk_insert(conn, "postgresql", table, make(2))
        assert calls == [make(1).num_rows]
        binary, csv = _stored(conn, table, 1), _stored(conn, table, 2)
        conn.rollback()
    assert binary == csv and len(binary) == make(1).num_rows


def test_binary_copy_of_the_gap_arrays_stores_each_float_as_it_is(pg_ledger: Ledger) -> None:
    """The arrays (CSV has no form for them): each list back as given, bit for bit (-0.0 keeps its sign)."""
    with pg_ledger.engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        bulk.bulk_insert(conn, "postgresql", "request_gaps", _gaps(1))
        stored = conn.exec_driver_sql("SELECT request_idx, gaps FROM request_gaps ORDER BY request_idx").all()
        conn.rollback()
    bits = [[struct.pack(">d", x) for x in gaps] for _, gaps in stored]
    assert bits == [[struct.pack(">d", x) for x in gaps] for gaps in _gaps(1).column("gaps").to_pylist()]
    assert [len(g) for _, g in stored] == [0, len(FLOATS), 1000, 1]


def _reference_rows(data: pa.Table) -> bytes:
    """The binary COPY rows of ``data`` field by field in Python, from the COPY page of PostgreSQL's manual
    (fixed-width and text columns only): the oracle of pg_binary_rows."""
    packs = {pa.int32(): ">i", pa.int64(): ">q", pa.float64(): ">d"}
    out = bytearray()
    for row in data.to_pylist():
        out += struct.pack(">h", data.num_columns)
        for f in data.schema:
            v = row[f.name]
            if v is None:
                out += struct.pack(">i", -1)
            elif f.type == pa.string():
                out += struct.pack(">i", len(v.encode())) + v.encode()
            else:
                out += struct.pack(">i", struct.calcsize(packs[f.type])) + struct.pack(packs[f.type], v)
    return bytes(out)


@pytest.mark.parametrize("order", ["as given", "same layout first"])
def test_binary_rows_are_the_manuals_rows_whatever_leads(order: str) -> None:
    """The columns of one layout on every row (no NULL, or only NULLs) are written as one block of
    records; the others field by field: both the manual's form, in the order given (the block may be
    empty, or every column)."""
    table = _requests(1).drop_columns(["chunk_count"]).append_column("chunk_count", pa.array([None] * 7, pa.int32()))
    fixed = pa.table(
        {
            "a": pa.array(range(7), pa.int32()),
            "b": pa.array([None] * 7, pa.int64()),
            "c": pa.array(FLOATS, pa.float64()),
            "d": pa.array(ints(I64, 1), pa.int64()).fill_null(5),
        }
    )
    for data in (table, fixed, fixed.select(["a", "c"]), table.select(["status", "artefact_id"])):
        if order == "same layout first":
            data = data.select(bulk._same_layout_first(data))
        assert bytes(bulk.pg_binary_rows(data)) == _reference_rows(data)
    same = ["artefact_id", "idx", "run_id", "output_tokens", "ttft_s", "queue_s", "itl_mean_s", "chunk_count"]
    assert bulk._same_layout_first(table) == same + [c for c in table.column_names if c not in same]


def test_binary_copy_only_where_each_arrow_type_is_the_columns_binary_form() -> None:
    schema = _requests(1).schema
    assert bulk.pg_binary_encodable("request", schema)
    wide = schema.set(schema.get_field_index("idx"), pa.field("idx", pa.int64()))  # an int64 for an integer column
    assert not bulk.pg_binary_encodable("request", wide)
    assert not bulk.pg_binary_encodable("no_such_table", schema)
    assert not bulk.pg_binary_encodable("request", schema.append(pa.field("no_such_column", pa.int32())))
    seconds = _samples(1).schema
    assert not bulk.pg_binary_encodable("hardware_sample", seconds.set(6, pa.field("ts", pa.timestamp("ns"))))
    assert not bulk.pg_binary_encodable("capture", pa.schema([("sampled", pa.bool_())]))
    # every Arrow type the model's columns map to has its encoder
    from bench_ledger import models as m

    mapped = {bulk._pg_binary_type(c.type) for t in m.Base.metadata.tables.values() for c in t.c} - {None}
    assert mapped == set(bulk._ENCODERS)
    # exact column types only: a real, a timestamp with zone, a decimal kept as text go as CSV
    for ctype in (sa.Float(precision=10), sa.REAL(), sa.DateTime(timezone=True), sa.Numeric(), sa.ARRAY(sa.Integer)):
        assert bulk._pg_binary_type(ctype) is None, ctype


def test_an_int64_column_for_an_integer_column_goes_as_csv_and_lands(pg_ledger: Ledger) -> None:
    data = _requests(3)
    data = data.set_column(1, "idx", data.column("idx").cast(pa.int64()))
    with pg_ledger.engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        bulk.bulk_insert(conn, "postgresql", "request", data)
        bulk.bulk_insert(conn, "postgresql", "request", _requests(4))
        assert _stored(conn, "request", 3) == _stored(conn, "request", 4)
        conn.rollback()


def test_duckdb_holds_no_rows_of_a_bulk_insert_before_the_commit(tmp_path) -> None:  # noqa: ANN001
    """An import is one transaction of many bulk inserts (a day of dmon: 16.6M samples in ~100 chunks): each
    insert's Arrow table is freed once the INSERT has read it, not held by DuckDB until the commit (a view
    of it registered and dropped inside the transaction kept it: 1.1 GB of Arrow at the end of that import,
    peak RSS 1.64 -> 0.89 GB)."""
    import gc

    with Ledger(f"duckdb:///{tmp_path / 'l.duckdb'}") as led:
        led.init()
        with led.engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (a BIGINT, s VARCHAR, v DOUBLE)")
            gc.collect()
            before = pa.total_allocated_bytes()
            for _ in range(3):
                n = 500_000
                rows = pa.table(
                    {"a": pa.array(range(n), pa.int64()), "s": pa.array(["util"] * n), "v": pa.array([1.5] * n)}
                )
                size = rows.nbytes
                bulk.bulk_insert(conn, "duckdb", "t", rows)
                del rows
                gc.collect()
                assert pa.total_allocated_bytes() - before < size / 10  # nothing of it left (12 MB a table)
            assert conn.exec_driver_sql("SELECT count(*), count(DISTINCT s) FROM t").one() == (1_500_000, 1)
