"""The column-wise chunk encoding (seal scheme 3) gives the same bytes on both backends, for the
values that are easy to get wrong: NULL vs empty text, newlines, non-ASCII, exact floats, -0.0,
64-bit integers, timestamps, booleans."""

from __future__ import annotations

import hashlib
import struct
from datetime import datetime

from bench_ledger import digest as dg
from bench_ledger.store import Ledger

ROWS = [  # (i, s, f, t, b)
    (1, "a\nb,\"c\"", 0.1, datetime(2026, 7, 7, 9, 39, 20, 123456), True),
    (2, "", -0.0, datetime(1969, 12, 31, 23, 59, 59), False),
    (2**62, None, 2.7671128393945798e17, None, None),
    (-5, "é中🙂", 5e-324, datetime(2026, 1, 1), True),
]
TAGS = ["i", "s", "f", "t", "b"]


def _sql(backend: str) -> str:
    def lit(v, tag):
        if v is None:
            return {"i": "CAST(NULL AS BIGINT)", "s": "CAST(NULL AS VARCHAR)", "f": "CAST(NULL AS DOUBLE PRECISION)",
                    "t": "CAST(NULL AS TIMESTAMP)", "b": "CAST(NULL AS BOOLEAN)"}[tag]  # fmt: skip
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
            h.update(b"".join(struct.pack("<q", 0 if v is None else (v - epoch) // (datetime(1970, 1, 1, 0, 0, 0, 1) - epoch))
                              for v in vals))  # fmt: skip
        else:
            h.update(b"".join(struct.pack("<q", int(v or 0)) for v in vals))
    return h.digest()


def test_chunk_digest_is_the_same_on_both_backends(ledger: Ledger) -> None:
    with ledger.connection() as conn:
        data = dg.read_rows(conn, ledger.backend, _sql(ledger.backend), [f"c{k}" for k in range(5)], TAGS)
    assert data.column("c1").to_pylist() == ["é中🙂", "a\nb,\"c\"", "", None]
    digests = dg.chunk_digests("probe", dg.columns(data, TAGS), data.num_rows)
    assert digests == [_expected()]
    assert dg.root_of(digests) == hashlib.sha256(_expected()).hexdigest()


def test_eight_byte_columns_read_through_binary_copy_give_the_same_values(ledger: Ledger, monkeypatch) -> None:
    """PostgreSQL reads BIGINT/DOUBLE-only rows with binary COPY (parsed in blocks: a small block
    here, so rows straddle block edges), and falls back to text for a NULL; same values as Python's."""
    monkeypatch.setattr(dg, "_BLOCK", 1000)
    used = []
    real = dg._pg_binary_fixed
    monkeypatch.setattr(dg, "_pg_binary_fixed", lambda *a: used.append(real(*a)) or used[-1])
    series = "range(1, 3001)" if ledger.backend == "duckdb" else "generate_series(1, 3000)"
    g = "g.range" if ledger.backend == "duckdb" else "g"
    edge = ("SELECT CAST(v AS BIGINT) AS a, CAST(f AS DOUBLE PRECISION) AS b FROM (VALUES "
            "(4611686018427387904, '-0.0'), (-5, '5e-324'), (0, '2.7671128393945798e17'), (7, '-1e308')) t(v, f)")  # fmt: skip
    with ledger.connection() as conn:
        many = dg.read_rows(conn, ledger.backend, f"SELECT CAST({g} AS BIGINT) AS a, CAST({g} AS DOUBLE PRECISION) / 3 AS b "
                            f"FROM {series} g ORDER BY 1", ["a", "b"], ["i", "f"])  # fmt: skip
        few = dg.read_rows(conn, ledger.backend, edge + " ORDER BY 1", ["a", "b"], ["i", "f"])
        null = dg.read_rows(conn, ledger.backend, "SELECT CAST(NULL AS BIGINT) AS a, CAST(1.5 AS DOUBLE PRECISION) AS b",
                            ["a", "b"], ["i", "f"])  # fmt: skip
    assert many.column("a").to_pylist() == list(range(1, 3001))
    assert many.column("b").to_pylist() == [i / 3 for i in range(1, 3001)]
    assert [struct.pack("<qd", *r) for r in zip(*few.to_pydict().values(), strict=True)] == [
        struct.pack("<qd", *r) for r in [(-5, 5e-324), (0, 2.7671128393945798e17), (7, -1e308), (2**62, -0.0)]]
    assert null.to_pylist() == [{"a": None, "b": 1.5}]
    if ledger.backend == "postgresql":
        assert [u is not None for u in used] == [True, True, False]
