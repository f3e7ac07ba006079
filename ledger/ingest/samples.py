"""Hardware samples to ``hardware_sample`` rows: long columns as they are, wide chunks unpivoted in
Arrow; every value checked against its counter's domain, the rows in key order for the digest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger import seal
from bench_ledger.encoding import chunks as dg
from bench_ledger.errors import ParseError
from bench_ledger.ingest.bulk import bulk_insert
from bench_ledger.ingest.refusals import refuse_outside_domain

__all__ = ["write_samples", "write_wide_samples"]


def write_samples(
    conn: sa.Connection,
    backend: str,
    artefact_id: int,
    node: str | None,
    cols: rec.SampleColumns,
    path: Path,
    held: seal.PooledRows | None = None,
) -> int:
    n = len(cols)
    try:
        table = pa.table(
            {
                "artefact_id": pa.array([artefact_id] * n, pa.int32()),
                "line": pa.array(cols.line, pa.int32()),
                "counter": pa.array(cols.counter, pa.string()),
                "node": pa.array(cols.node if node is None else [node] * n, pa.string()),
                "gpu": pa.array(cols.gpu, pa.int32()),
                "tick": pa.array(cols.tick, pa.int32()),
                "ts": pa.array(cols.ts, pa.timestamp("us")),
                "value": pa.array(cols.value, pa.float64()),
                "unit": pa.array(cols.unit, pa.string()),
            }
        )
    except (UnicodeEncodeError, pa.ArrowInvalid, OverflowError) as exc:
        raise ParseError(
            path, f"lines {cols.line[0]}-{cols.line[-1]}", None, f"a value the ledger cannot store: {exc}"
        ) from None
    refuse_outside_domain(path, table, rec.SAMPLE_INDEX_DOMAINS)
    for counter in pc.unique(table.column("counter")).to_pylist():
        one = table.filter(pc.equal(table.column("counter"), counter))
        refuse_outside_domain(
            path,
            pa.table({"line": one.column("line"), counter: one.column("value")}),
            {counter: rec.sample_domain(counter)},
        )
    bulk_insert(conn, backend, "hardware_sample", dg.sorted_by_key(table, m.key_columns("hardware_sample")), held)
    return n


def write_wide_samples(
    conn: sa.Connection,
    backend: str,
    artefact_id: int,
    node: str | None,
    chunk: rec.WideSamples,
    path: Path,
    held: seal.PooledRows | None = None,
) -> int:
    """Unpivot a wide chunk (one column per counter) to long hardware_sample rows, in Arrow: one
    zero-copy slice of the key columns per counter, concatenated, then the usual bulk path."""
    t, n = chunk.table, chunk.table.num_rows
    refuse_outside_domain(path, t, {**rec.SAMPLE_INDEX_DOMAINS, **{c: rec.sample_domain(c) for c in chunk.counters}})
    node = node if node is not None else chunk.node
    keys = {
        "artefact_id": pa.repeat(pa.scalar(artefact_id, pa.int32()), n),
        "line": t.column("line"),
        "node": pa.repeat(pa.scalar(node, pa.string()), n),
        "gpu": t.column("gpu"),
        "tick": t.column("tick"),
        "ts": t.column("ts"),
    }
    counters = sorted(zip(chunk.counters, chunk.units, strict=True), key=lambda cu: cu[0].encode())
    parts = [
        pa.table(
            {
                **keys,
                "counter": pa.repeat(pa.scalar(name, pa.string()), n),
                "value": t.column(name).cast(pa.float64()),
                "unit": pa.repeat(pa.scalar(unit, pa.string()), n),
            }
        )
        for name, unit in counters
    ]
    # line by line, each line's counters in byte order: the rows in key order (artefact, line, counter), so
    # the import's digest hashes them as they go (ledger.seal.streams.STREAMED_TABLES) instead of holding every sample
    # to sort it at the end (a day of 16 cards' dmon, 16.6M rows: 6.4 GB)
    k = len(parts)
    order = (np.arange(n)[:, None] + np.arange(k)[None, :] * n).ravel()
    long = pa.concat_tables(parts).take(pa.array(order)) if k > 1 else pa.concat_tables(parts)
    if not dg.in_key_order(long, ["line"]):  # a chunk whose lines are not ascending: sorted as a whole
        long = dg.sorted_by_key(long, m.key_columns("hardware_sample"))
    bulk_insert(conn, backend, "hardware_sample", long, held)
    return n * len(chunk.counters)
