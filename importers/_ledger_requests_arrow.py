"""The DuckDB-parsed path of the ``ledger-requests`` importer (issue 17): regular JSON Lines files, many
per call. :func:`fast_parse` is its one entry (``importers.ledger_requests`` calls it); a None for a file
sends it to the Python path there, which owns every error message.

An in-memory DuckDB (not the ledger) reads the request lines of many JSON Lines files in one call
(read_json, typed columns) into Arrow; the header line is decoded in Python (read_header). DuckDB
coerces what it reads (the string "7" to 7, 12.0 to 12, a number to text), does not tell a null
from a missing key, and reads numbers as float64, so a file takes this path only when its text
proves the result is what the Python path would build, checked at C speed in one pass of RE2
(DuckDB's regexp_matches over read_text):
* every value's first character fits its field (a string or null for status/error; a number or
  null for numbers, and no fraction or exponent for integers and epoch_ns times; a list of plain
  numbers or null for chunk_gaps), and no key is outside REQUEST_FIELDS;
* no backslash (escapes: keys and strings are then literal, a surrogate cannot hide), no carriage
  return, no blank line, one object per line (rows per file = lines);
* a time on epoch_s / monotonic_s written with at most 15 significant digits: then the decimal as
  written is the float's shortest text, and importers.base.exact_ns_of (the exact conversion the
  vLLM fast path uses) gives base.seconds_ns(Decimal(text)) exactly.
A captured field is one whose key occurs ('"key":' in the text: with no escapes a quoted key
followed by a colon is never inside a string). The typed rows are read first; the fields with a
value in some request of a file are then its captured fields when one RE2 pass over its text finds
it regular and no other key in it (_proof, run once per set of such fields); a file where it finds
something (irregular, or a key that is only ever null) is checked again field by field (_proofs).
Values outside their domains, unknown status words,
too long error texts or times outside the exact range send the file to the Python path too, which
owns every error message. Tests: tests/importers/test_ledger_requests.py compares both paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._ledger_requests_format import (
    DECODE,
    INT_FIELDS,
    SECONDS_FIELDS,
    TIME_FIELDS,
    VERSION,
    artefact_of,
    capture_of,
    read_header,
)
from bench_ledger.importers.base import exact_ns_of, file_size, inexact, literal_paths, sql_text
from bench_ledger.records import FIELD_COLUMN, MAX_TEXT_CHARS, REQUEST_FIELDS, ArrowRequests, ParsedArtefact

__all__ = ["fast_parse"]

_INT32 = ("idx", "line", "retries", "input_tokens", "output_tokens", "cached_tokens", "chunk_count")  # ArrowRequests
_WS = "[ \\t\\n]*"
_TYPES = {
    "status": "VARCHAR",
    "error": "VARCHAR",
    "retries": "BIGINT",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "cached_tokens": "BIGINT",
    "send_time": "DOUBLE",
    "first_token_time": "DOUBLE",
    "end_time": "DOUBLE",
    "ttft_s": "DOUBLE",
    "latency_s": "DOUBLE",
    "queue_s": "DOUBLE",
    "itl_mean_s": "DOUBLE",
    "chunk_gaps": "DOUBLE[]",
}
assert set(_TYPES) == set(REQUEST_FIELDS)


def _keys(names) -> str:
    return '"(?:' + "|".join(names) + ')"' + _WS + ":" + _WS


def _other_key(names: tuple[str, ...] | list[str] = REQUEST_FIELDS) -> str:
    """RE2 of a quoted key (no escapes) followed by a colon that is not one of ``names`` (by default
    REQUEST_FIELDS: an unknown key): the complement of the names, built on their trie (RE2 has no
    lookahead)."""
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}

    def other(node: dict) -> str:
        kids = sorted(k for k in node if k)
        alts = [] if "" in node else [""]  # the key ends here and is not a name
        alts.append('[^"\\\\' + "".join(kids) + '][^"]*')  # another character, then anything
        alts += [ch + "(?:" + other(node[ch]) + ")" for ch in kids]
        return "|".join(alts)

    return '"(?:' + other(trie) + ')"' + _WS + ":"


def _irregular(clock: str | None, known: tuple[str, ...] | list[str] = REQUEST_FIELDS) -> str:
    """RE2 that matches the request text of a file the fast path must not take (see the module docstring), or (with
    ``known``) that has a key outside ``known``. A value's first character is read after any white
    space (each class excludes it: RE2 backtracks)."""
    num = "(?:[^-0-9n \\t\\n]|-[^0-9])"  # not a number or null (NaN, Infinity, strings, lists, objects, true)
    integer = "(?:[^-0-9n \\t\\n]|-[^0-9]|-?[0-9]+[.eE])"  # not an integer or null
    times = _keys(TIME_FIELDS) + (integer if clock == "epoch_ns" else f"(?:{num}|-?0*\\.?0*[1-9](?:\\.?[0-9]){{15}})")
    gaps = '"chunk_gaps"' + _WS + ":" + _WS + "(?:[^\\[n \\t\\n]|\\[[^\\]]*[^-0-9.eE+, \\t\\n\\]])"
    return "|".join(
        [
            _keys(("status", "error")) + '[^"n \\t\\n]',
            _keys(INT_FIELDS) + integer,
            _keys(SECONDS_FIELDS) + num,
            times,
            gaps,
            _other_key(known),
            "\\\\",
            "\\r",
            "\\n[ \\t]*\\n",
            '"[ \\t\\n]+:',
        ]
    )


_BLANK_FIRST, _BLANK_LAST = "^[ \\t]*\\n", "\\n[ \\t]+$"  # a blank line 2, a blank last line without line end


def _proof(clock: str | None, known: list[str]) -> str:
    """RE2 over a whole file (header line included) that matches unless the request text is regular
    (:func:`_irregular`, :data:`_BLANK_FIRST`, :data:`_BLANK_LAST`) and every key in it is one of
    ``known``: one pass, where the checks of each file used to be three patterns and a search for each
    field over a copy of the text without its first line (2.6 s of 3.1 s for the benchmark's 1,000
    files, profile note 17). A file without a line end after its header matches too."""
    return f"^[^\\n]*(?:\\z|\\n(?:[ \\t]*\\n|(?s:.*?)(?:{_irregular(clock, known)}|\\n[ \\t]+\\z)))"


def _proofs(
    con, plain: list[Path], heads: list[dict[str, Any]], ns: bool, valued: dict[int, list[str]]
) -> dict[int, list[str]]:
    """The captured fields of each file the fast path may take (see the module docstring), by index into ``plain``.

    ``valued`` gives, per file DuckDB read, the fields that have a value in some request. The text
    proof (:func:`_proof`) is run once per distinct set of them, over all files with that set: a file
    it passes is regular and captures exactly those fields (every key is one of them, and each occurs).
    A file it does not pass (irregular, or a key that is only ever null: still captured, R9) is checked
    again as before: the patterns, then each field's key searched in its text."""
    clock = "epoch_ns" if ns else None
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, got in valued.items():
        groups.setdefault(tuple(got), []).append(i)
    fields: dict[int, list[str]] = {}
    again: list[int] = []
    for known, idx in groups.items():
        listed = "[" + ", ".join(sql_text(str(plain[i])) for i in idx) + "]"
        at = {str(plain[i]): i for i in idx}
        for name, matched in con.execute(
            f"SELECT filename, regexp_matches(content, {sql_text(_proof(clock, list(known)))}) FROM read_text({listed})"
        ).fetchall():
            if matched:
                again.append(at[name])
            else:
                fields[at[name]] = list(known)
    if again:
        listed = "[" + ", ".join(sql_text(str(plain[i])) for i in again) + "]"
        at = {str(plain[i]): i for i in again}
        present = ", ".join(f"contains(body, {sql_text(chr(34) + f + chr(34) + ':')})" for f in REQUEST_FIELDS)
        for name, irregular, *has in con.execute(
            f"SELECT filename, regexp_matches(body, {sql_text(_irregular(clock))}) "
            f"OR regexp_matches(body, {sql_text(_BLANK_FIRST)}) OR regexp_matches(right(body, 256), {sql_text(_BLANK_LAST)}), "
            f"{present} FROM (SELECT filename, substr(content, strpos(content, chr(10)) + 1) AS body "
            f"FROM read_text({listed}))"
        ).fetchall():
            if not irregular:
                fields[at[name]] = [f for f, h in zip(REQUEST_FIELDS, has, strict=True) if h]
    return {i: got for i, got in fields.items() if not (heads[i].get("clock") is None and set(got) & set(TIME_FIELDS))}


def _fast_header(path: Path) -> dict[str, Any] | None:
    """The checked header of line 1, or None where it is not a regular JSON Lines header."""
    try:
        with open(path, "rb") as fh:
            raw = fh.readline()
        rec = DECODE(raw.decode("utf-8"))
        if not isinstance(rec, dict):
            return None
        version = rec.pop("ledger_requests", None)
        return read_header(rec, path) if type(version) is int and version == VERSION else None
    except (OSError, ValueError, ParseError, RecursionError):
        return None


def fast_parse(paths: list[Path], threads: int | None = None) -> list[ParsedArtefact | None]:
    """The artefacts of ``paths`` (JSON Lines files of this format) parsed by DuckDB (on ``threads``
    threads; None: DuckDB's default), None for each file that must take the Python path (see the module docstring);
    files with the same kind of clock are read in one call."""
    out: list[ParsedArtefact | None] = [None] * len(paths)
    heads = [_fast_header(p) for p in paths]
    kinds: dict[bool, list[int]] = {}
    for i, h in enumerate(heads):
        if h is not None:
            kinds.setdefault(h.get("clock") == "epoch_ns", []).append(i)
    for ns, idx in kinds.items():
        for i, art in zip(idx, _fast_read([paths[i] for i in idx], [heads[i] for i in idx], ns, threads), strict=True):  # type: ignore[misc]
            out[i] = art
    return out


def _fast_read(
    paths: list[Path], heads: list[dict[str, Any]], ns: bool, threads: int | None = None
) -> list[ParsedArtefact | None]:
    """Read ``paths`` (their clocks all epoch_ns, or none) in one DuckDB call: the typed rows of all
    of them, then the text proof per file (:func:`_proofs`), converted with Arrow kernels over the
    whole call and sliced per file."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from bench_ledger import records as rec

    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = true")
        con.execute("SET enable_progress_bar = false")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        with literal_paths(paths) as plain:
            types = dict(_TYPES, **({f: "BIGINT" for f in TIME_FIELDS} if ns else {}))
            typed = ", ".join(f"{name}: {sql_text(t)}" for name, t in types.items())
            longest = max(file_size(p) for p in paths)
            listed = "[" + ", ".join(sql_text(str(p)) for p in plain) + "]"
            try:
                table = con.execute(
                    f"SELECT file_index, * FROM read_json({listed}, format='newline_delimited', columns={{{typed}}}, "
                    f"maximum_object_size={max(2 * longest, 1 << 20)})"
                ).to_arrow_table()
            except duckdb.Error:  # DuckDB refused a file (not UTF-8, a key twice, two objects on a line): halves
                if len(paths) == 1:
                    return [None]
                half = len(paths) // 2
                return [
                    *_fast_read(paths[:half], heads[:half], ns, threads),
                    *_fast_read(paths[half:], heads[half:], ns, threads),
                ]
            # one span of rows per file, in the order given (its header line first); DuckDB skips blank
            # lines and refuses two objects on a line, so with blank lines refused a row is a line.
            # file_index (the file's place in the list) rather than filename=true: a string per row
            # cost ~10-25% of the read (profile notes 20, 27)
            ends = pc.run_end_encode(table.column("file_index").combine_chunks())
            spans: dict[int, tuple[int, int]] = {}
            start = 0
            for i, end in zip(ends.values.to_pylist(), ends.run_ends.to_pylist(), strict=True):
                spans[i] = (start, end - start)
                start = end
            file_of = _file_of(spans, table.num_rows)
            # the fields with a value in some request of each file (a header row has none of them)
            owner = np.asarray(file_of)
            valued = {
                f: np.bincount(owner[np.asarray(table.column(f).is_valid())], minlength=len(paths))
                for f in REQUEST_FIELDS
            }
            fields = _proofs(con, plain, heads, ns, {i: [f for f in REQUEST_FIELDS if valued[f][i]] for i in spans})
    except duckdb.Error:  # read_text refused a file (not UTF-8): halves
        if len(paths) == 1:
            return [None]
        half = len(paths) // 2
        return [
            *_fast_read(paths[:half], heads[:half], ns, threads),
            *_fast_read(paths[half:], heads[half:], ns, threads),
        ]
    finally:
        con.close()
    if not fields:
        return [None] * len(paths)
    t = table.drop_columns(["file_index"]).combine_chunks()
    n = t.num_rows
    status = pc.fill_null(t.column("status"), "unknown")
    error = t.column("error")
    cols: dict[str, Any] = {"status": status, "error": error}
    for f in (*INT_FIELDS, *SECONDS_FIELDS):
        cols[f] = t.column(f)
    bad = pc.invert(pc.is_in(status, pa.array(["ok", "failed", "unknown"])))
    bad = pc.or_(bad, pc.fill_null(pc.greater(pc.utf8_length(error), MAX_TEXT_CHARS), False))
    for f in TIME_FIELDS:
        v = t.column(f)
        if not ns:
            off = inexact(v)
            bad = pc.or_(bad, off)
            v = exact_ns_of(pc.if_else(off, pa.scalar(None, pa.float64()), v))
        cols[FIELD_COLUMN[f]] = v
    gaps_list = t.column("chunk_gaps")
    lens = pc.list_value_length(gaps_list)
    cols["chunk_count"] = pc.add(lens, 1)
    # idx and line per file: the row's place after its file's header (which gets idx -1)
    first = pa.array([spans[i][0] + 1 if i in spans else 0 for i in range(len(paths))], pa.int64())
    idx = pc.subtract(pa.array(np.arange(n, dtype=np.int64)), pc.take(first, file_of))
    cols["idx"], cols["line"] = idx, pc.add(idx, 2)
    whole = pa.table({c: v.cast(pa.int32(), safe=False) if c in _INT32 else v for c, v in cols.items()})
    rejected = set(pc.unique(pc.filter(file_of, bad)).to_pylist()) | (set(range(len(paths))) - set(fields))
    flat, g_parent = pc.list_flatten(gaps_list), pc.list_parent_indices(gaps_list)
    g_file = pc.take(file_of, g_parent)
    gap_values = pa.table({"gap_s": flat.cast(pa.float64())})  # only for the domain check: stored as lists
    # values outside their domains: the files holding them take the Python path (it names them)
    body = pc.greater_equal(idx, 0)
    for data, owner, domains in (
        (pa.table(cols).filter(body), file_of.filter(body), rec.REQUEST_DOMAINS),
        (gap_values, g_file, rec.GAP_DOMAINS),
    ):
        while True:
            if rejected:  # the rows of files already refused are not looked at
                keep = pc.invert(pc.is_in(owner, pa.array(sorted(rejected), pa.int32())))
                data, owner = data.filter(keep), owner.filter(keep)
            if (v := rec.arrow_violation(data, domains)) is None:
                break
            rejected.add(owner[v.row].as_py())
    gaps = pa.table(
        {"request_idx": whole.column("idx"), "gaps": gaps_list}
    )  # a list per row, stored as it is (ledger.gaps)

    out: list[ParsedArtefact | None] = [None] * len(paths)
    for i, got in fields.items():
        if i in rejected:
            continue
        lo, count = spans[i]
        rows = whole.slice(lo + 1, count - 1)
        header = dict(heads[i])
        capture = capture_of(header, got, rows.num_rows)
        requests = None
        if rows.num_rows:
            requests = ArrowRequests(table=rows, gaps=gaps.slice(lo + 1, count - 1))
        out[i] = artefact_of(header, capture, requests)
    return out


def _file_of(spans: dict[int, tuple[int, int]], n: int):
    """For each row, the index of the file it came from (int32)."""
    import numpy as np
    import pyarrow as pa

    owner = np.zeros(n, dtype=np.int32)
    for i, (lo, count) in spans.items():
        owner[lo : lo + count] = i
    return pa.array(owner)
