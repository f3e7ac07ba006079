"""The ``seal_part`` rows of a scheme-3 seal: per chunk of a part its digest, its rows' primary keys
and 64-bit row fingerprints, so ``ledger verify`` names the rows that changed (:func:`diff_part`).

The keys of a chunk are its key columns' canonical values as the chunk encoding has them
(:mod:`ledger.encoding.chunks`), zlib'd; fingerprints only locate rows: the chunk digests are the seal.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from bench_ledger import models as m
from bench_ledger.encoding import chunks as dg
from bench_ledger.models import key_columns
from bench_ledger.seal.scheme3 import HeldPart, Part

__all__ = ["PartDiff", "PartRow", "chunk_fields", "diff_part", "seal_part_rows"]


def _keys_blob(table: str, cols: list, lo: int, hi: int) -> bytes:
    """The chunk's primary keys: per key column its canonical values (digest encoding), zlib'd."""
    chunks = []
    for k in key_columns(table):
        c = next(c for c in cols if c.name.split(b"\x00")[0] == k.encode())
        if c.tag == "s":
            chunks.append(bytes(c.lengths[4 * lo : 4 * hi]) + bytes(c.data[c.offsets[lo] : c.offsets[hi]]))
        else:
            chunks.append(bytes(c.values[8 * lo : 8 * hi]))
    return zlib.compress(b"".join(chunks), 1)


def chunk_fields(table: str, cols: list, n: int, digests: list[bytes], first: int = 0) -> list[dict]:
    """The seal_part fields (all but the seal and the part's names) of the chunks of ``n`` rows of
    ``cols``, numbered from ``first``: rows, digest, keys and 64-bit row fingerprints."""
    fps = memoryview(dg.fingerprints(cols, n).buffers()[1]) if n else memoryview(b"")
    out = []
    for i, d in enumerate(digests):
        lo, hi = i * dg.CHUNK, min((i + 1) * dg.CHUNK, n)
        out.append(
            {
                "chunk_no": first + i,
                "row_count": hi - lo,
                "digest": d.hex(),
                "keys": _keys_blob(table, cols, lo, hi),
                "fingerprints": bytes(fps[8 * lo : 8 * hi]),
            }
        )
    return out


def _decode_keys(table: str, blob: bytes, n: int) -> list[tuple]:
    raw = zlib.decompress(blob)
    cols: list[list[Any]] = []
    pos = 0
    t = m.Base.metadata.tables[table]
    for k in key_columns(table):
        tag = dg.tag_of(t.c[k])
        if tag == "s":
            lengths = memoryview(raw)[pos : pos + 4 * n].cast("I")
            pos += 4 * n
            vals = []
            for ln in lengths:
                vals.append(raw[pos : pos + ln].decode())
                pos += ln
            cols.append(vals)
        else:
            cols.append(list(memoryview(raw)[pos : pos + 8 * n].cast("q")))
            pos += 8 * n
    return list(zip(*cols, strict=True))


@dataclass
class PartRow:
    """A stored chunk of a sealed part (``seal_part`` row)."""

    chunk_no: int
    row_count: int
    digest: bytes
    keys: bytes
    fingerprints: bytes


def seal_part_rows(seal_id: int, part: Part | HeldPart) -> list[dict]:
    """The ``seal_part`` rows of ``part``: one per chunk (a part streamed by close keeps its chunks'
    fields, :func:`ledger.seal.streams.artefact_digest_parts`), or one row of no chunk for an empty part."""
    if isinstance(part, Part):
        chunks = chunk_fields(part.table, part.cols, part.count, part.digests)
    elif part.chunks is not None:
        chunks = part.chunks
    else:
        raise ValueError(f"the {part.table} part of artefact {part.artefact_id} was hashed without its seal_part rows")
    names = {"seal_id": seal_id, "table_name": part.table, "artefact_id": part.artefact_id or 0}
    rows = [{**names, **c} for c in chunks]
    if not part.digests:
        rows.append(
            {**names, "chunk_no": -1, "row_count": 0, "digest": dg.EMPTY_ROOT, "keys": b"", "fingerprints": b""}
        )
    return rows


@dataclass
class PartDiff:
    table: str
    artefact_id: int | None
    changed: list[tuple] = field(default_factory=list)
    missing: list[tuple] = field(default_factory=list)
    added: list[tuple] = field(default_factory=list)


def diff_part(part: Part, stored: list[PartRow]) -> PartDiff:
    """Name the rows of ``part`` that differ from a sealed one: by key, comparing fingerprints."""
    old: dict[tuple, int] = {}
    for r in stored:
        if r.row_count:
            fps = memoryview(r.fingerprints).cast("Q")
            for k, f in zip(_decode_keys(part.table, r.keys, r.row_count), fps, strict=True):
                old[k] = int(f)
    now = dg.fingerprints(part.cols, part.count).to_pylist()
    keys = list(dg.key_tuples(part.data, key_columns(part.table)))
    d = PartDiff(part.table, part.artefact_id)
    for k, f in zip(keys, now, strict=True):
        was = old.pop(k, None)
        if was is None:
            d.added.append(k)
        elif was != f:
            d.changed.append(k)
    d.missing = list(old)
    return d
