"""Chunk gaps: stored as one array per request (``request_gaps``), read as rows (``chunk_gap``).

The one home of the mapping between the two shapes (migration 0014, ``models.RequestGaps`` and
``models.ChunkGap``): a request's gaps ``[g0, g1, ...]`` are the rows (request_idx, seq = 0, g0),
(request_idx, 1, g1), ... The database view ``chunk_gap`` (``models.VIEWS``) spells the same in SQL;
here it is in Arrow, for what an import or a loaded export holds in memory:

* :func:`arrays` builds the ``request_gaps`` rows every importer's gaps go through (the one write
  path: ``ingest.request_tables``), straight from a per-request list column (the vLLM and ledger
  format fast paths' Arrow lists, or a Python importer's lists); a request without gaps (no list, or
  an empty one) gets no row, as it got no ``chunk_gap`` row before;
* :func:`rows_of` gives the ``chunk_gap`` rows of such a table in key order: the seal hashes them
  (``seal3.HeldRows``, scheme 3's encoding of gap rows unchanged);
* :func:`arrays_of` goes back from rows (``ledger import-export``: an export keeps the rows' shape).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SCHEMA = pa.schema([("artefact_id", pa.int32()), ("request_idx", pa.int32()), ("gaps", pa.list_(pa.float64()))])
# the rows as the seal hashes them (ledger.digest's canonical types: every integer as int64)
ROW_SCHEMA = pa.schema([("artefact_id", pa.int64()), ("request_idx", pa.int64()), ("seq", pa.int64()),
                        ("gap_s", pa.float64())])  # fmt: skip


def arrays(artefact_id: int, request_idx: pa.Array, lists: pa.Array) -> pa.Table:
    """The ``request_gaps`` rows of requests ``request_idx`` whose gaps are ``lists`` (a list array,
    null where a record had none): one row per request with at least one gap, in the given order."""
    if isinstance(request_idx, pa.ChunkedArray):
        request_idx = request_idx.combine_chunks()
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    if lists.type != pa.list_(pa.float64()):
        lists = lists.cast(pa.list_(pa.float64()))
    lens = pc.list_value_length(lists)
    keep = pc.fill_null(pc.greater(lens, 0), False)
    if not pc.all(keep).as_py():
        request_idx, lists = request_idx.filter(keep), lists.filter(keep)
    n = len(lists)
    return pa.Table.from_arrays([pa.repeat(pa.scalar(artefact_id, pa.int32()), n), request_idx.cast(pa.int32()), lists],
                                schema=SCHEMA)  # fmt: skip


def count(table: pa.Table) -> int:
    """The number of gaps (``chunk_gap`` rows) a ``request_gaps`` table holds."""
    if table.num_rows == 0:
        return 0
    return int(pc.sum(pc.list_value_length(table.column("gaps"))).as_py() or 0)


def rows_of(table: pa.Table) -> pa.Table:
    """The ``chunk_gap`` rows (artefact_id, request_idx, seq, gap_s) of a ``request_gaps`` table, in
    its row order and then ``seq`` (key order when the table is, as an import writes it), in the
    seal's canonical column types (:data:`ROW_SCHEMA`)."""
    lists = table.column("gaps").combine_chunks()
    lens = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists)
    offsets = np.asarray(lists.offsets)
    first = np.repeat(offsets[:-1] - offsets[0], lens)  # where each value's list begins among the values
    seq = np.arange(len(values), dtype=np.int64) - first
    return pa.Table.from_arrays([
        pa.array(np.repeat(table.column("artefact_id").to_numpy().astype(np.int64), lens)),
        pa.array(np.repeat(table.column("request_idx").to_numpy().astype(np.int64), lens)),
        pa.array(seq),
        values.cast(pa.float64()),
    ], schema=ROW_SCHEMA)  # fmt: skip


def arrays_of(rows: pa.Table) -> pa.Table:
    """The ``request_gaps`` rows of ``chunk_gap`` rows in key order (artefact_id, request_idx, seq),
    each request's ``seq`` 0, 1, ... without a hole (what :func:`rows_of` gives); ValueError names
    the first request where that does not hold (such rows have no array form)."""
    if rows.num_rows == 0:
        return SCHEMA.empty_table()
    art = rows.column("artefact_id").to_numpy().astype(np.int64)
    req = rows.column("request_idx").to_numpy().astype(np.int64)
    seq = rows.column("seq").to_numpy().astype(np.int64)
    new = np.ones(len(req), bool)
    new[1:] = (art[1:] != art[:-1]) | (req[1:] != req[:-1])
    starts = np.flatnonzero(new)
    expected = np.arange(len(req)) - np.repeat(starts, np.diff(np.append(starts, len(req))))
    if (bad := np.flatnonzero(seq != expected)).size:
        i = int(bad[0])
        raise ValueError(f"chunk gaps of artefact {art[i]} request {req[i]}: seq {seq[i]} where {expected[i]} was due "
                         "(the gaps of a request are numbered 0, 1, ... in key order)")  # fmt: skip
    offsets = pa.array(np.append(starts, len(req)).astype(np.int32), pa.int32())
    lists = pa.ListArray.from_arrays(offsets, rows.column("gap_s").combine_chunks().cast(pa.float64()))
    return pa.Table.from_arrays([pa.array(art[starts], pa.int32()), pa.array(req[starts], pa.int32()), lists], schema=SCHEMA)
