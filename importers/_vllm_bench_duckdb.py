"""The DuckDB-parsed path of the ``vllm-bench`` importer (issue 7): regular JSON Lines files at C speed.

:func:`fast_runs` is its one entry (``importers.vllm_bench`` calls it for files of at least
``FAST_MIN_BYTES``); None sends the file to the Python path (:mod:`bench_ledger.importers._vllm_result`),
which owns every error message.

An in-memory DuckDB (not the ledger) is the JSON parser: read_json with typed columns reads the
per-request arrays of every line at C speed into typed lists, straight into an Arrow table (one row
per line, kept in memory: ~100 MB for the 1M-request benchmark file); Arrow kernels then flatten them,
a batch of runs at a time, into request rows and a list of gaps per request
(ledger.records.ArrowRequests) that the store bulk-inserts (the gaps as they are, one array per
request: ledger.gaps).
Python reads each line once as bytes (_cut_arrays): it checks the arrays' bytes with
bytes.translate / one regex and decodes only the rest of the line (the small header) with json, so
labels, metadata and printed aggregates come from the same code as the Python path (result_header).

Exactness: a start/ttft/latency double is turned into its shortest round-trip text and then a
decimal (importers.base.exact_decimal / exact_ns: the one proof both DuckDB-parsed importers use; here through
importers.base.exact_ns_of, which takes a proven numpy shortcut where a value has at most 9 places);
sums and the truncation to ns are exact decimal arithmetic, as base.seconds_ns in the Python path. This importer takes |x| < 1e9 that are 0 or >= 1e-7 (inside base's exact range);
files with other values fall back. Anything irregular (blank line, a line that is not an object, an array holding
anything but plain numbers / strings as expected, an array key that is not an array, unequal
lengths, integers beyond int32, a key found twice) makes the whole file take the Python path
before any run is yielded, so its error messages stay exactly as they are.
Tests: tests/importers/test_vllm_bench.py compares both paths row for row.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_ledger.importers._vllm_result import ARRAYS, result_header, success_rule
from bench_ledger.importers.base import EXACT_MIN, exact_ns_of, literal_paths, sql_text
from bench_ledger.records import ArrowRequests, ParsedRun

__all__ = ["fast_runs"]

FAST_RUNS_PER_QUERY = 64  # runs per Arrow batch (~64k requests of the benchmark file)
_INT = ("input_lens", "output_lens")
_TYPES = {
    "input_lens": "BIGINT[]",
    "output_lens": "BIGINT[]",
    "ttfts": "DOUBLE[]",
    "latencies": "DOUBLE[]",
    "start_times": "DOUBLE[]",
    "queue_times": "DOUBLE[]",
    "errors": "VARCHAR[]",
    "itls": "DOUBLE[][]",
    "generated_texts": "VARCHAR[]",
}
# Bytes an array may hold besides its numbers' digits (checked with bytes.translate, at C speed).
_INT_BYTES = b"0123456789-, \t"
_FLOAT_BYTES = b"0123456789-+.eE, \t"
# possessive (*+, ++): no backtracking state per character (profile_notes.md: a long string array)
_STRINGS = re.compile(rb'\[\s*(?:"(?:[^"\\]++|\\.)*+"\s*(?:,\s*"(?:[^"\\]++|\\.)*+"\s*)*+)?\]')


_KEYS = {name: b'"' + name.encode() + b'"' for name in ARRAYS}


def _find_outside(line: bytes, key: bytes, spans: list[tuple[int, int]]) -> int:
    """``line.find(key)`` without reading the numeric arrays already checked (``spans``: their
    brackets included): such an array holds no quote and no bracket of a key, so no match can start in
    it or cross it, and the first match is the same (a search for each array key read the whole
    line)."""
    pos = 0
    for j, end in spans:
        i = line.find(key, pos, j)
        if i >= 0:
            return i
        pos = end
    return line.find(key, pos)


def _cut_arrays(line: bytes) -> tuple[bytes, tuple[str, ...]] | None:
    """The line without its per-request arrays (the small header for Python's json) and the arrays
    it has, or None where an array is not plainly what the fast path expects: a numeric array with
    anything but number characters (strings, null, true, NaN...), a string array with anything but
    strings, a nested level too many. (A key found twice is caught by the caller: its second value
    stays in the header.)"""
    cuts, present = [], []
    spans: list[tuple[int, int]] = []  # numeric arrays checked so far, in line order
    for name in ARRAYS:
        key = _KEYS[name]
        i = _find_outside(line, key, spans)
        if i < 0:
            continue
        j = i + len(key)
        while line[j : j + 1] in (b" ", b"\t"):
            j += 1
        if line[j : j + 1] != b":":
            return None
        j += 1
        while line[j : j + 1] in (b" ", b"\t"):
            j += 1
        if line.startswith(b"null", j):
            continue  # null counts as absent; the key stays in the header (the Python path skips it)
        if line[j : j + 1] != b"[":
            return None
        if name in ("errors", "generated_texts"):
            match = _STRINGS.match(line, j)
            if match is None:
                return None
            end = match.end()
        elif name == "itls":
            if line.startswith(b"[]", j):
                end = j + 2
            else:
                end = line.find(b"]]", j) + 2
                seg = line[j + 1 : end - 1]
                if end < 2 or b"[[" in seg or seg.translate(None, _FLOAT_BYTES + b"[]") or not seg.startswith(b"["):
                    return None
        else:
            end = line.find(b"]", j) + 1
            if end <= 0 or line[j + 1 : end - 1].translate(None, _INT_BYTES if name in _INT else _FLOAT_BYTES):
                return None
        cuts.append((j, end))
        present.append(name)
        if name not in ("errors", "generated_texts"):
            bisect.insort(spans, (j, end))
    if not cuts:
        return line, ()
    cuts.sort()
    parts, pos = [], 0
    for j, end in cuts:
        parts.append(line[pos:j])
        parts.append(b"null")
        pos = end
    parts.append(line[pos:])
    return b"".join(parts), tuple(present)


def _prescan(path: Path) -> tuple[list[tuple[dict, tuple[str, ...]]], int] | None:
    """Per line: the header (the object without its arrays, decoded by Python's json) and the arrays
    present; None where a line is blank, not an object, or irregular (see :func:`_cut_arrays`)."""
    heads, longest = [], 0
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                cut = _cut_arrays(raw)
                if cut is None:
                    return None
                head = json.loads(cut[0])
                # an array key found twice (or first inside a nested object) leaves a value here
                if not isinstance(head, dict) or any(head.get(name) is not None for name in ARRAYS):
                    return None
                heads.append((head, cut[1]))
                longest = max(longest, len(raw))
    except (OSError, ValueError):
        return None
    return (heads, longest) if heads else None


def fast_runs(path: Path) -> Iterator[ParsedRun] | None:
    """Runs parsed by DuckDB, or None where the file is not regular enough (see the module docstring)."""
    scan = _prescan(path)
    if scan is None:
        return None
    heads, longest = scan
    import duckdb

    con = duckdb.connect()
    try:
        with _literal_path(path) as plain:
            loaded = _fast_load(con, plain, heads, longest)
    except (duckdb.Error, OSError):
        loaded = None
    finally:
        con.close()  # the lines are an Arrow table now
    if loaded is None:
        return None
    tab, meta = loaded
    return _fast_iter(tab, path, meta, len(heads))


@contextmanager
def _literal_path(path: Path) -> Iterator[Path]:
    """A name for ``path`` that DuckDB cannot read as a glob pattern (:func:`base.literal_paths`)."""
    with literal_paths([path]) as plain:
        yield plain[0]


def _fast_load(con, path: Path, heads: list, longest: int) -> tuple[Any, list[tuple]] | None:
    """Read the arrays as typed lists, one row per line in the file's order, straight into an Arrow
    table (not a DuckDB table in between, scanned back to Arrow: benchmarks/profile_notes.md);
    (the table, (row, header, arrays, n) per line), or None where lengths differ, an integer is
    beyond int32 or a time outside the exact range.

    Order: a scan of one table function keeps its rows' order with preserve_insertion_order (DuckDB's
    "order preservation" rules: FROM with a single table), as the in-memory table's rowids did; the
    arrays present in each row are checked against the line's own all the same."""
    import numpy as np
    import pyarrow.compute as pc

    cols = ", ".join(f"{name}: {sql_text(typ)}" for name, typ in _TYPES.items())
    con.execute("SET preserve_insertion_order = true")
    con.execute("SET enable_progress_bar = false")
    tab = con.execute(
        f"SELECT * FROM read_json({sql_text(str(path))}, format='newline_delimited', columns={{{cols}}}, "
        f"maximum_object_size={max(2 * longest, 1 << 20)})"
    ).to_arrow_table()
    if tab.num_rows != len(heads):
        return None
    names = list(_TYPES)
    lens = [pc.list_value_length(tab.column(name)).to_pylist() for name in names]
    meta = []
    for rid, (ns, (head, present)) in enumerate(zip(zip(*lens, strict=True), heads, strict=True)):
        got = {name for name, n in zip(names, ns, strict=True) if n is not None}
        if got != set(present) or len({n for n in ns if n is not None}) > 1:
            return None
        meta.append((rid, head, present, next((n for n in ns if n is not None), 0)))
    for name in _INT:  # integers beyond int32 (the request columns), as the Python path refuses them
        flat = pc.list_flatten(tab.column(name).combine_chunks())
        if len(flat):
            lo_hi = pc.min_max(flat).as_py()
            if lo_hi["max"] >= 2147483648 or lo_hi["min"] <= -2147483648:
                return None
    for name in ("ttfts", "latencies", "start_times"):  # times outside the range where exact ns are proven
        x = pc.list_flatten(tab.column(name).combine_chunks()).to_numpy(zero_copy_only=False)
        mag = np.abs(x)
        if ((mag >= 1e9) | ((x != 0) & (mag < EXACT_MIN))).any():
            return None
    return tab, meta


def _arrow_rows(tab, present: tuple[str, ...], idx0: int, lines: list[int]):
    """Request rows and each request's list of gaps of consecutive runs (rows of ``tab``) that have the
    same arrays, computed with Arrow kernels from the typed lists: flatten, placeholders, status, exact ns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = tab.column(present[0]).combine_chunks()
    parent = pc.list_parent_indices(first)
    n = len(parent)
    flat = {name: pc.list_flatten(tab.column(name).combine_chunks()) for name in present if name != "generated_texts"}

    def nulls(typ):
        return pa.nulls(n, typ)

    status, error, kept = success_rule(flat.get("errors"), {k: flat[k] for k in ("ttfts", "latencies") if k in flat}, n)
    ttft = kept.get("ttfts", nulls(pa.float64()))
    lat = kept.get("latencies", nulls(pa.float64()))
    if "start_times" in flat:
        st = flat["start_times"]
        send = exact_ns_of(st)
        first_tok = exact_ns_of(st, ttft) if "ttfts" in flat else nulls(pa.int64())
        end = exact_ns_of(st, lat) if "latencies" in flat else nulls(pa.int64())
    else:
        send = first_tok = end = nulls(pa.int64())
    idx = pc.add(pa.array(range(n), pa.int64()), idx0).cast(pa.int32())
    if "itls" in flat:
        inner = flat["itls"]  # one list of gaps per request: stored as it is (ledger.gaps.arrays)
        chunk_count = pc.add(pc.list_value_length(inner), 1).cast(pa.int32())
        gaps = pa.table({"request_idx": idx, "gaps": inner})
    else:
        chunk_count, gaps = nulls(pa.int32()), None
    cols = {
        "idx": idx,
        "line": pc.take(pa.array(lines, pa.int32()), parent),
        "status": status,
        "error": error,
        "retries": nulls(pa.int32()),
        "input_tokens": flat["input_lens"].cast(pa.int32()) if "input_lens" in flat else nulls(pa.int32()),
        "output_tokens": flat["output_lens"].cast(pa.int32()) if "output_lens" in flat else nulls(pa.int32()),
        "send_ns": send,
        "first_token_ns": first_tok,
        "end_ns": end,
        "ttft_s": ttft,
        "latency_s": lat,
        "queue_s": flat["queue_times"] if "queue_times" in flat else nulls(pa.float64()),
        "itl_mean_s": nulls(pa.float64()),
        "chunk_count": chunk_count,
        "cached_tokens": nulls(pa.int32()),
    }
    return pa.table(cols), gaps


def _fast_iter(tab, path: Path, meta: list[tuple], lines: int) -> Iterator[ParsedRun]:
    single = lines == 1
    idx0 = 0
    for lo in range(0, len(meta), FAST_RUNS_PER_QUERY):
        part = meta[lo : lo + FAST_RUNS_PER_QUERY]
        batch = tab.slice(lo, len(part))
        # groups of consecutive runs with the same arrays (all of them in a regular file)
        start = 0
        while start < len(part):
            stop = start + 1
            while stop < len(part) and part[stop][2] == part[start][2]:
                stop += 1
            group = part[start:stop]
            present = group[0][2]
            req = gaps = None
            if any(r[3] for r in group):
                req, gaps = _arrow_rows(batch.slice(start, stop - start), present, idx0, [rid + 1 for rid, *_ in group])
            at = 0
            for rid, obj, present, n in group:
                prefix = "" if single else f"line {rid + 1}"
                info, capture, pubs = result_header(obj, set(present), n, prefix, path)
                requests = None
                if n:
                    assert req is not None  # read above for every group with a request
                    table = req.slice(at, n)
                    g = gaps.slice(at, n) if gaps is not None else None  # a row per request, as the table
                    at += n
                    requests = ArrowRequests(table=table, gaps=g)
                idx0 += n
                yield ParsedRun(info=info, capture=capture, requests=requests, published=pubs)
            start = stop
