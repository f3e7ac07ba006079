"""The column-wise chunk encoding (seal scheme 3) gives the same bytes on both backends, for the
values that are easy to get wrong: NULL vs empty text, newlines, non-ASCII, exact floats, -0.0,
64-bit integers, timestamps, booleans."""

from __future__ import annotations

import hashlib
import struct
from datetime import datetime

from bench_ledger.encoding import chunks as dg
from bench_ledger.seal import import_digests, scheme3
from bench_ledger.store import Ledger

ROWS = [  # (i, s, f, t, b)
    (1, 'a\nb,"c"', 0.1, datetime(2026, 7, 7, 9, 39, 20, 123456), True),
    (2, "", -0.0, datetime(1969, 12, 31, 23, 59, 59), False),
    (2**62, None, 2.7671128393945798e17, None, None),
    (-5, "é中🙂", 5e-324, datetime(2026, 1, 1), True),
]
TAGS = ["i", "s", "f", "t", "b"]


def _sql(backend: str) -> str:
    def lit(v, tag):
        if v is None:
            return {
                "i": "CAST(NULL AS BIGINT)",
                "s": "CAST(NULL AS VARCHAR)",
                "f": "CAST(NULL AS DOUBLE PRECISION)",
                "t": "CAST(NULL AS TIMESTAMP)",
                "b": "CAST(NULL AS BOOLEAN)",
            }[tag]
        if tag == "s":
            return "'" + v.replace("'", "''") + "'"
        if tag == "f":
            return f"CAST('{v!r}' AS DOUBLE PRECISION)"
        if tag == "t":
            return f"CAST('{v.isoformat(sep=' ')}' AS TIMESTAMP)"
        if tag == "b":
            return "TRUE" if v else "FALSE"
        return f"CAST({v} AS BIGINT)"

    rows = " UNION ALL ".join(
        "SELECT " + ", ".join(f"{lit(v, t)} AS c{k}" for k, (v, t) in enumerate(zip(r, TAGS, strict=True)))
        for r in ROWS
    )
    return f"SELECT * FROM ({rows}) x ORDER BY c0, c1"


def _expected() -> bytes:
    rows = sorted(ROWS, key=lambda r: (r[0], r[1] or ""))
    n = len(rows)
    h = hashlib.sha256(b"bench-ledger-chunk/3\x00probe\x00" + struct.pack("<I", n))
    epoch = datetime(1970, 1, 1)
    for k, tag in enumerate(TAGS):
        vals = [r[k] for r in rows]
        h.update(f"c{k}".encode() + b"\x00" + tag.encode() + bytes(0 if v is None else 1 for v in vals))
        if tag == "s":
            enc = [(v or "").encode() for v in vals]
            h.update(b"".join(struct.pack("<I", len(e)) for e in enc) + b"".join(enc))
        elif tag == "f":
            h.update(b"".join(struct.pack("<d", 0.0 if v is None else v) for v in vals))
        elif tag == "t":
            h.update(
                b"".join(
                    struct.pack("<q", 0 if v is None else (v - epoch) // (datetime(1970, 1, 1, 0, 0, 0, 1) - epoch))
                    for v in vals
                )
            )
        else:
            h.update(b"".join(struct.pack("<q", int(v or 0)) for v in vals))
    return h.digest()


def test_chunk_digest_is_the_same_on_both_backends(ledger: Ledger) -> None:
    with ledger.connection() as conn:
        data = dg.read_rows(conn, ledger.backend, _sql(ledger.backend), [f"c{k}" for k in range(5)], TAGS)
    assert data.column("c1").to_pylist() == ["é中🙂", 'a\nb,"c"', "", None]
    digests = dg.chunk_digests("probe", dg.columns(data, TAGS), data.num_rows)
    assert digests == [_expected()]
    assert dg.root_of(digests) == hashlib.sha256(_expected()).hexdigest()


def test_postgresql_aggregated_read_gives_the_same_rows_and_digest(ledger: Ledger, monkeypatch) -> None:
    """PostgreSQL reads a part column-wise (``read_pg_columns``: one bytea per column and group,
    scan order), the caller sorts by key: the same rows, types and chunk digest as the ordered
    general path, with every NULL kind, a date, 3,000 rows out of key order, and the CSV fallback
    taken when a value would exceed PostgreSQL's 1 GB limit."""
    import datetime as dt

    import psycopg
    import pyarrow as pa

    if ledger.backend != "postgresql":
        return  # DuckDB hands Arrow over natively: no such path
    names, tags = [f"c{k}" for k in range(5)], TAGS
    with ledger.connection() as conn:
        unordered = _sql(ledger.backend).rsplit(" ORDER BY ", 1)[0]
        data = dg.sorted_by_key(dg.read_pg_columns(conn, unordered, names, tags, [True] * 5), ["c0", "c1"])
        assert data.equals(dg.read_rows(conn, ledger.backend, _sql(ledger.backend), names, tags))
        assert dg.chunk_digests("probe", dg.columns(data, TAGS), data.num_rows) == [_expected()]
        many_sql = (
            "SELECT CAST(g % 2 AS BIGINT) AS k, CAST(g AS BIGINT) AS a, CAST(g AS DOUBLE PRECISION) / 3 AS b, "
            "DATE '1969-12-30' + g AS d, CASE WHEN g % 7 = 0 THEN NULL ELSE DATE '2026-01-01' END AS e "
            "FROM generate_series(1, 3000) g"
        )
        cols, ts = ["k", "a", "b", "d", "e"], ["i", "i", "f", "d", "d"]
        many = dg.read_pg_columns(conn, many_sql, cols, ts, [False, False, False, False, True])
        many = dg.sorted_by_key(many, ["k", "a"])
        assert many.equals(dg.read_rows(conn, ledger.backend, many_sql + " ORDER BY k, a", cols, ts))
        assert many.column("d").type == pa.date32() and many.column("e").null_count == 3000 // 7
        assert many.column("d")[0].as_py() == dt.date(1969, 12, 31) + dt.timedelta(days=1)  # g = 2, the first even
        empty = dg.read_pg_columns(conn, many_sql + " WHERE false", cols, ts, [False] * 5)
        assert empty.num_rows == 0 and empty.schema == many.schema

        def too_big(*_a):
            raise psycopg.errors.ProgramLimitExceeded("out of memory")

        monkeypatch.setattr(dg, "pg_copy", too_big)
        fallback = dg.sorted_by_key(dg.read_pg_columns(conn, many_sql, cols, ts, [False] * 4 + [True]), ["k", "a"])
        assert fallback.equals(many)


def test_fingerprints_keep_their_values() -> None:
    """Row fingerprints are stored in every scheme-3 seal (seal_part) and compared at verify: the
    values must not change between versions (these are those of the first, Arrow-kernel version)."""
    import random

    import pyarrow as pa

    rnd = random.Random(7)
    n = 5000
    data = pa.table(
        {
            "a": pa.array([rnd.randint(-(2**63), 2**63 - 1) if i % 11 else None for i in range(n)], pa.int64()),
            "s": pa.array([rnd.choice(["x", "", "é中", None, "n/a"]) for i in range(n)], pa.large_string()),
            "f": pa.array([rnd.random() * 1e10 if i % 7 else None for i in range(n)], pa.float64()),
            "b": pa.array([rnd.choice([True, False, None]) for i in range(n)], pa.bool_()),
            "t": pa.array([rnd.randint(0, 2**50) if i % 5 else None for i in range(n)], pa.timestamp("us")),
            "d": pa.array([rnd.randint(-1000, 30000) if i % 3 else None for i in range(n)], pa.date32()),
        }
    )
    fp = dg.fingerprints(dg.columns(data, ["i", "s", "f", "b", "t", "d"]), n).to_pylist()
    assert fp[:3] == [9180061474634216120, 2077015399613755608, 1755011580098027426]
    assert (sum(fp) % 2**64, fp[-1]) == (17482826473284461877, 17729518886751019873)
    assert dg.fingerprints([], 0).to_pylist() == []


def _gaps(lo: int, hi: int, artefact_id: int = 7):
    import pyarrow as pa

    n = hi - lo
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * n, pa.int32()),
            "request_idx": pa.array([i // 3 for i in range(lo, hi)], pa.int32()),
            "seq": pa.array([i % 3 for i in range(lo, hi)], pa.int32()),
            "gap_s": pa.array([i / 7 for i in range(lo, hi)], pa.float64()),
        }
    )


def test_pooled_rows_hashed_as_they_arrive_give_the_part_of_all_of_them() -> None:
    """Pieces of any size (chunks cut across them) hash to the part of their concatenation."""
    import pyarrow as pa

    cuts = [0, 1, dg.CHUNK - 1, dg.CHUNK + 5, 3 * dg.CHUNK + 5, 3 * dg.CHUNK + 6, 5 * dg.CHUNK + 100]
    pooled = import_digests.PooledRows()
    for lo, hi in zip(cuts, cuts[1:]):
        pooled.add("chunk_gap", _gaps(lo, hi))
    parts = pooled.parts([7])[0]["chunk_gap"]
    assert parts is not None
    got = parts[7]
    want = scheme3.part_of("chunk_gap", 7, pa.concat_tables([_gaps(0, cuts[-1])]))
    assert isinstance(got, scheme3.HeldPart)
    assert (got.count, got.digests, got.root) == (want.count, want.digests, want.root)


def test_pooled_rows_out_of_key_order_are_not_hashed_from_memory() -> None:
    """A piece that starts before the end of the last one: the part must come from the database."""

    pooled = import_digests.PooledRows()
    pooled.add("chunk_gap", _gaps(100, 200))
    pooled.add("chunk_gap", _gaps(0, 100))
    assert pooled.parts([7])[0]["chunk_gap"] is None


def test_import_digest_of_rows_out_of_key_order_is_read_back(ledger: Ledger, monkeypatch) -> None:
    """Where the held rows are not in key order, the import digest is that of the stored rows."""
    from pathlib import Path

    from bench_ledger import ingest
    from bench_ledger.importers import vllm_bench

    fed: list[str] = []

    def broken(self, table, data) -> None:
        fed.append(table)
        self.broken.add(table)

    monkeypatch.setattr(import_digests.PooledRows, "_feed", broken)
    path = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_bench" / "detailed_start_times.json"
    r = ingest.import_file(ledger, path, vllm_bench.IMPORTER, ingest.ImportTarget(batch="b"))
    assert "request" in fed and "chunk_gap" in fed
    with ledger.engine.connect() as c:
        stored = dict(
            c.exec_driver_sql(f"SELECT table_name, root FROM artefact_digest WHERE artefact_id = {r.artefact_id}").all()
        )
        parts = scheme3.artefact_parts(c, ledger.backend, [r.artefact_id])[r.artefact_id]
    assert stored == {p.table: p.root for p in parts}
