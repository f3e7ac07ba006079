"""Per-request rows: the ``request``, ``request_gaps`` and ``request_value`` tables of runs as Arrow
tables (one conversion for every importer), and the pool that writes them a bulk statement per table."""

from __future__ import annotations

import bisect
import itertools
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import records as rec
from bench_ledger import seal
from bench_ledger.ingest.artefacts import WrittenArtefact
from bench_ledger.ingest.bulk import bulk_insert
from bench_ledger.ingest.refusals import refuse_gap_outside_domain, refuse_outside_domain

__all__ = [
    "PendingRows",
    "arrow_requests",
    "artefacts_request_tables",
    "bulk_insert",
    "request_tables",
    "request_value_table",
]

_REQUEST_SCHEMA = pa.schema(
    [
        ("artefact_id", pa.int32()),
        ("idx", pa.int32()),
        ("run_id", pa.int32()),
        ("line", pa.int32()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("retries", pa.int32()),
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("clock", pa.string()),
        ("send_ns", pa.int64()),
        ("first_token_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("ttft_s", pa.float64()),
        ("latency_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("itl_mean_s", pa.float64()),
        ("chunk_count", pa.int32()),
        ("cached_tokens", pa.int32()),
    ]
)


class PendingRows:
    """Request, request-gaps and request-value rows of several runs, written in one bulk statement per table.

    A profile of a 1000-run vLLM file showed the per-statement cost of two bulk inserts per run
    (register, INSERT ... SELECT with key checks, unregister) dominating the write; runs are now
    pooled, each table up to its own limit (rows), and a table is written when it reaches it. DuckDB:
    requests up to :data:`REQUEST_LIMIT` (a 1M-request file in one statement: ten inserts of 100k rows
    cost more than one of 1M in one transaction, benchmarks/profile_notes.md; ~100 bytes a row held),
    the others up to :data:`LIMIT`. No key ties the tables together (migration 0008), so the order of
    their statements is free; the rows of each table keep their order.

    PostgreSQL: a COPY runs in a writer thread of the import while the import parses the next runs
    (the server parses and indexes the rows meanwhile; psycopg's connection lock keeps every other
    statement of the transaction after it), so requests are pooled up to :data:`PG_REQUEST_LIMIT`
    only, to start early. Before any other statement on the connection (a SQLAlchemy event) and
    before the artefact's digest, the import waits for the COPY and raises its error, if any."""

    LIMIT = 500_000
    REQUEST_LIMIT = 1 << 20
    PG_REQUEST_LIMIT = 1 << 17
    SMALL_PART = 1 << 15  # DuckDB: pooled parts of fewer rows on average are combined into one chunk

    def __init__(self, conn: sa.Connection, backend: str, pooled: seal.PooledRows) -> None:
        self.conn, self.backend, self.pooled = conn, backend, pooled
        self.tables: dict[str, list[tuple[pa.Table, dict[int, WrittenArtefact]]]] = {
            "request": [],
            "request_gaps": [],
            "request_value": [],
        }
        self.rows = dict.fromkeys(self.tables, 0)
        self.request_limit = self.REQUEST_LIMIT if backend == "duckdb" else self.PG_REQUEST_LIMIT
        self._writer: Any = None  # PostgreSQL: one thread, so the COPYs keep their order
        self._writing: list[Any] = []

    def add(self, table: str, data: pa.Table, arts: dict[int, WrittenArtefact]) -> None:
        """Buffer rows of the artefacts ``arts`` (by id: the rows' ``artefact_id``, in artefact order),
        hashed for their digests as they arrive (:class:`ledger.seal.PooledRows`, in its own thread)."""
        self.tables[table].append((data, arts))
        self.pooled.add(table, data)
        self.rows[table] += data.num_rows
        if self.rows[table] >= (self.request_limit if table == "request" else self.LIMIT):
            self.flush(table)

    def flush(self, only: str | None = None) -> None:
        """Write the pooled rows of every table (of ``only``), after checking their domains."""
        domains = {"request": rec.REQUEST_DOMAINS, "request_value": rec.VALUE_DOMAINS}
        for name, parts in self.tables.items():
            if parts and only in (None, name):
                data = pa.concat_tables([t for t, _ in parts])
                if self.backend == "duckdb" and len(parts) > 1 and data.num_rows < len(parts) * self.SMALL_PART:
                    # one contiguous chunk per column: DuckDB's INSERT ... SELECT scans it faster than
                    # the per-run slices (measured on 200 runs of the benchmark file); parts of many
                    # runs each (artefacts_request_tables) are already large chunks, scanned as they are;
                    # PostgreSQL's COPY encodes each slice's chunks as they are
                    data = data.combine_chunks()
                ends = list(itertools.accumulate(t.num_rows for t, _ in parts))

                def path_of(row: int, parts=parts, ends=ends) -> Path:  # the file a pooled row came from
                    k = bisect.bisect_right(ends, row)
                    data, arts = parts[k]
                    if len(arts) == 1:
                        return next(iter(arts.values())).path
                    return arts[data.column("artefact_id")[row - (ends[k - 1] if k else 0)].as_py()].path

                if name == "request_gaps":
                    refuse_gap_outside_domain(path_of, data)
                else:
                    refuse_outside_domain(path_of, data, domains[name], "record" if name == "request" else "request")
                parts.clear()
                self.rows[name] = 0
                self._insert(name, data)

    def _insert(self, name: str, data: pa.Table) -> None:
        if self.backend == "duckdb":
            bulk_insert(self.conn, self.backend, name, data)
            return
        if self._writer is None:
            from concurrent.futures import ThreadPoolExecutor

            self._writer = ThreadPoolExecutor(1, thread_name_prefix="ledger-copy")
            # an import that fails drops its pool: its writer thread ends with it
            weakref.finalize(self, self._writer.shutdown, wait=False, cancel_futures=True)
            sa.event.listen(self.conn, "before_cursor_execute", self._before_statement)
        self._raise_failed()
        self._writing.append(self._writer.submit(bulk_insert, self.conn, self.backend, name, data))

    def _raise_failed(self) -> None:
        for done in [f for f in self._writing if f.done()]:
            self._writing.remove(done)
            done.result()  # raises the COPY's error

    def _before_statement(self, *_: Any) -> None:
        self.wait()

    def wait(self) -> None:
        """Wait for the COPYs in flight; raise the first one's error (the transaction is then lost)."""
        writing, self._writing = self._writing, []
        for f in writing:
            f.result()

    def close(self) -> None:
        """Stop the writer thread (after :meth:`wait`, or when the import failed)."""
        if self._writer is not None:
            sa.event.remove(self.conn, "before_cursor_execute", self._before_statement)
            self._writer.shutdown(wait=True)
            self._writer = None


_VALUE_SCHEMA = pa.schema(
    [
        ("artefact_id", pa.int32()),
        ("request_idx", pa.int32()),
        ("key", pa.string()),
        ("value", pa.float64()),
        ("flag", pa.string()),
    ]
)


def request_value_table(artefact_id: int, idx: list[int], values: dict[str, rec.RequestValues]) -> pa.Table:
    """The ``request_value`` rows of one run: one per request and key where the record had a value,
    in the table's logical key order (request_idx, key)."""
    rows: list[tuple[int, str, float, str]] = []
    for key in sorted(values):
        rv = values[key]
        rows.extend((i, key, v, rv.flag) for i, v in zip(idx, rv.values, strict=True) if v is not None)
    rows.sort(key=lambda r: (r[0], r[1]))
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * len(rows), pa.int32()),
            "request_idx": pa.array([r[0] for r in rows], pa.int32()),
            "key": pa.array([r[1] for r in rows], pa.string()),
            "value": pa.array([r[2] for r in rows], pa.float64()),
            "flag": pa.array([r[3] for r in rows], pa.string()),
        },
        schema=_VALUE_SCHEMA,
    )


def request_tables(
    artefact_id: int, run_id: int, clock: str | None, cols: rec.RequestColumns | rec.ArrowRequests
) -> tuple[pa.Table, pa.Table | None]:
    """The ``request`` and ``request_gaps`` rows of one run (:func:`artefacts_request_tables` of that run)."""
    req = cols if isinstance(cols, rec.ArrowRequests) else arrow_requests(cols)
    return artefacts_request_tables([(artefact_id, run_id, clock, req)])


def artefacts_request_tables(
    runs: list[tuple[int, int, str | None, rec.ArrowRequests]],
) -> tuple[pa.Table, pa.Table | None]:
    """The ``request`` and ``request_gaps`` rows of consecutive runs ``(artefact id, run id, clock,
    requests)``, of one artefact or of several in artefact order (a group's files, one run each,
    profile note 27), as Arrow tables in the tables' column order, one contiguous chunk per column,
    built with one Arrow call per column: the same rows as one call per artefact, concatenated.

    Columns from a Python importer are first turned into the one Arrow carrier (:func:`arrow_requests`),
    so both kinds of importer reach the database through the same conversion; every importer's gaps
    become ``request_gaps`` rows here (:func:`ledger.gaps.arrays`: one array per request that has gaps)."""
    tables = [req.table for _, _, _, req in runs]
    counts = np.array([t.num_rows for t in tables], dtype=np.int64)
    n = int(counts.sum())
    art_ids = np.array([a for a, _, _, _ in runs], dtype=np.int32)

    def joined(name: str, typ: pa.DataType) -> pa.Array:
        parts = [c for t in tables for c in _as(t.column(name), typ).chunks]
        return pa.chunked_array(parts, typ).combine_chunks() if len(parts) != 1 else parts[0]

    carried = {
        f.name: joined(f.name, f.type) for f in _REQUEST_SCHEMA if f.name not in ("artefact_id", "run_id", "clock")
    }
    clocks = {clock for _, _, clock, _ in runs}
    if clocks == {None}:
        clock_col = pa.nulls(n, pa.string())
    else:
        if len(clocks) == 1:
            named: pa.Array | pa.Scalar = pa.scalar(next(iter(clocks)), pa.string())
        else:  # runs on different clocks: each run's own
            names = sorted(c for c in clocks if c is not None)
            codes = np.repeat([names.index(c) if c is not None else -1 for _, _, c, _ in runs], counts)
            named = pa.DictionaryArray.from_arrays(
                pa.array(codes, pa.int32(), mask=codes < 0), pa.array(names, pa.string())
            ).cast(pa.string())
        clock_col = pc.if_else(pc.is_valid(carried["send_ns"]), named, pa.scalar(None, pa.string()))
    one_artefact = bool((art_ids == art_ids[0]).all())
    fixed = {
        "artefact_id": (
            pa.repeat(pa.scalar(int(art_ids[0]), pa.int32()), n)
            if one_artefact
            else pa.array(np.repeat(art_ids, counts))
        ),
        "run_id": pa.array(np.repeat(np.array([r for _, r, _, _ in runs], dtype=np.int32), counts)),
        "clock": clock_col,
    }
    requests = pa.Table.from_arrays(
        [fixed[f.name] if f.name in fixed else carried[f.name] for f in _REQUEST_SCHEMA], schema=_REQUEST_SCHEMA
    )
    with_gaps = [(a, req.gaps) for a, _, _, req in runs if req.gaps is not None and req.gaps.num_rows]
    if not with_gaps:
        return requests, None
    idx = pa.chunked_array(
        [c for _, g in with_gaps for c in _as(g.column("request_idx"), pa.int32()).chunks], pa.int32()
    )
    lists = pa.chunked_array(
        [c for _, g in with_gaps for c in _as(g.column("gaps"), pa.list_(pa.float64())).chunks], pa.list_(pa.float64())
    )
    arts: int | pa.Array = (
        int(art_ids[0])
        if one_artefact
        else pa.array(
            np.repeat(np.array([a for a, _ in with_gaps], dtype=np.int32), [g.num_rows for _, g in with_gaps])
        )
    )
    gaps = gp.arrays(arts, idx, lists)
    return requests, gaps if gaps.num_rows else None


def _as(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """``col`` as ``typ``; a column already of that type as it is (a cast per column and run was
    16,000 calls of the 1000-run vLLM import)."""
    return col if col.type == typ else col.cast(typ)


_CARRIED = [f for f in _REQUEST_SCHEMA if f.name not in ("artefact_id", "run_id", "clock")]


def arrow_requests(cols: rec.RequestColumns) -> rec.ArrowRequests:
    """:class:`~bench_ledger.records.RequestColumns` (lists) as the Arrow carrier: ``chunk_gaps_s``
    becomes ``chunk_count`` (gaps + 1, null without a gaps array) and a list column of the gaps."""
    gaps = cols.chunk_gaps_s
    data = {f.name: getattr(cols, f.name) for f in _CARRIED if f.name != "chunk_count"}
    data["chunk_count"] = [None if g is None else len(g) + 1 for g in gaps]
    try:
        table = pa.table({f.name: pa.array(data[f.name], f.type) for f in _CARRIED})
    except UnicodeEncodeError:  # a lone surrogate (JSON "\\ud800"): name the record
        i = next(i for i, e in enumerate(cols.error) if e is not None and rec.text_violation("error", e))
        raise rec.RecordError(
            "error", cols.idx[i], cols.line[i], str(rec.text_violation("error", cols.error[i] or ""))
        ) from None
    if not any(g for g in gaps):
        return rec.ArrowRequests(table=table)
    return rec.ArrowRequests(
        table=table, gaps=pa.table({"request_idx": table.column("idx"), "gaps": pa.array(gaps, pa.list_(pa.float64()))})
    )
