"""The ledger's own per-request format, for tools that have no importer (docs/request-format.md).

Why a format of our own: a tool we do not know can still be imported without guessing, because
the producer declares what we would otherwise have to infer: the clock of its times, where its
token counts came from, and how it decided success. The file is JSON Lines or CSV:

* JSON Lines: line 1 is a header object ``{"ledger_requests": 1, "run": ..., "tool": ...,
  "clock": ...}``; every further non-blank line is one request, keys named after
  :data:`ledger.records.REQUEST_FIELDS`.
* CSV: line 1 is ``# ledger_requests v1 run=... tool=... clock=...`` (shell quoting for values
  with spaces), line 2 the column names, then one row per request.

The fields of the capture are the keys that occur (JSON Lines: in any record; CSV: in the header
row). A captured field with null / an empty cell has no value for that record; a field that never
occurs is not captured (R9). A record without ``status`` is ``unknown``.

Times (``send_time``, ``first_token_time``, ``end_time``) are on the declared clock and converted
exactly to integer ns: JSON numbers are read as decimals (never floats) and multiplied by 10**9,
truncating toward zero below 1 ns. Durations stay seconds as written.

The Python path reads the file line by line into raw columns, then converts each column with one
comprehension and validates all of them by one strict pydantic call, so a million-line file is
never held as text or as a million objects; a conversion or type error is traced back to its line.
It owns every error message. JSON Lines files whose text proves them regular are read by DuckDB
instead, many files per call (:meth:`LedgerRequestsImporter.parse_many`, the import's groups; see
"the DuckDB-parsed path" below), into the same rows. One file is one run.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, get_args

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import factor_text
from bench_ledger.importers.base import (
    DuplicateKey,
    ParseOptions,
    exact_ns_of,
    file_size,
    first_json_value,
    inexact,
    json_problem,
    literal_paths,
    read_head,
    refuse_cut_last_line,
    seconds_ns,
    sql_text,
    unique_keys,
)
from bench_ledger.records import (
    FIELD_COLUMN,
    MAX_TEXT_CHARS,
    REQUEST_FIELDS,
    ArrowRequests,
    Capture,
    ParsedArtefact,
    ParsedRun,
    RequestColumns,
    RunInfo,
    Stated,
    TokenSource,
)
from bench_ledger.vocab import RUN_FACTORS, Clock
from pydantic import ValidationError

VERSION = 1
IMPORTER_NAME = "ledger-requests"
CSV_MAGIC = "# ledger_requests"
INT_FIELDS = ("retries", "input_tokens", "output_tokens", "cached_tokens")
SECONDS_FIELDS = ("ttft_s", "latency_s", "queue_s", "itl_mean_s")
TIME_FIELDS = ("send_time", "first_token_time", "end_time")  # absolute times, stored as integer ns
FIELD_OF = {column: field for field, column in FIELD_COLUMN.items()}  # to name a bad column by its field
# One decoder for all lines (json.loads with a hook builds a new one per call). Numbers with a
# fraction or exponent become exact decimals: times need more digits than a float holds.
DECODE = json.JSONDecoder(parse_float=Decimal, object_pairs_hook=unique_keys).decode
DEFAULT_RULE = "status as written by the producing tool; a record without status is unknown"


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {type(v).__name__}")
    return v


def _int(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    raise ValueError(f"expected an integer, got {v!r:.40}")


def _float(v: Any) -> float:
    if type(v) in (int, Decimal, float) or isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {v!r:.40}")


def _rate(v: Any) -> str:
    if isinstance(v, str):
        return v
    if type(v) in (int, Decimal):
        return str(v)
    raise ValueError(f"expected a number or 'inf', got {v!r:.40}")


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if v in ("true", "false"):
        return v == "true"
    raise ValueError(f"expected true or false, got {v!r:.40}")


def _when(v: Any) -> datetime:
    try:
        when = datetime.fromisoformat(_text(v))
    except ValueError:
        raise ValueError(f"expected an ISO 8601 date-time, got {v!r:.40}") from None
    if when.tzinfo is None:
        raise ValueError(f"{v!r} has no UTC offset; write e.g. 2026-07-07T09:39:20+08:00")
    return when


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {v!r:.40}")
        return v

    return check


HEADER: dict[str, Callable[[Any], Any]] = {
    "run": _text,
    "tool": _text,
    "clock": _choice(get_args(Clock)),
    "token_source": _choice(get_args(TokenSource)),
    "success_rule": _text,
    "tool_version": _text,
    "dataset": _text,
    "input_target_tokens": _int,
    "output_cap_tokens": _int,
    "concurrency": _int,
    "request_count": _int,
    "seed": _int,
    "request_rate": _rate,
    "duration_s": _float,
    "started_at": _when,
    "ended_at": _when,
    "sampled": _bool,
    "sample_note": _text,
}


# header keys that state a factor of the run (ledger.factors) besides the ``factors`` object
_FACTOR_KEYS = {
    "dataset": "dataset",
    "input_target_tokens": "input_len",
    "output_cap_tokens": "output_len",
    "concurrency": "concurrency",
    "request_rate": "request_rate",
}


def _factor(path: Path, key: str, name: str, value: Any) -> tuple[str, Stated]:
    """One ``factors`` entry (``factor.NAME`` in CSV): a factor of the vocabulary, a text or a number."""
    if name not in RUN_FACTORS:
        raise ParseError(path, "line 1", key, f"unknown factor {name!r}; known: {', '.join(RUN_FACTORS)}")
    if (text := factor_text(value)) is None:
        raise ParseError(path, "line 1", key, f"expected a text or a number, got {value!r:.40}")
    try:
        return name, Stated(value=text, at=f"line 1 {key}")
    except ValueError as exc:
        raise ParseError(path, "line 1", key, str(exc).splitlines()[-1]) from None


def _header(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """Check and convert the header keys; unknown keys are refused so that typos do not vanish."""
    out: dict[str, Any] = {"metadata": {}, "factors": {}}
    for key, value in raw.items():
        if key == "factors":
            if not isinstance(value, dict):
                raise ParseError(path, "line 1", key, "expected an object of factors")
            out["factors"].update(_factor(path, f"factors.{name}", name, v) for name, v in value.items())
        elif key.startswith("factor."):
            out["factors"].update([_factor(path, key, key[7:], value)])
        elif key == "metadata":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ParseError(path, "line 1", key, "expected an object of strings")
            out["metadata"].update(value)
        elif key.startswith("meta."):
            out["metadata"][key[5:]] = _text(value)
        elif key not in HEADER:
            raise ParseError(path, "line 1", key, f"unknown header key; known: {', '.join(HEADER)}, metadata")
        else:
            try:
                out[key] = HEADER[key](value)
            except ValueError as exc:
                raise ParseError(path, "line 1", key, str(exc)) from None
    for key in ("run", "tool"):
        if key not in out:
            raise ParseError(path, "line 1", key, "the header must name the run and the tool")
    for key, name in _FACTOR_KEYS.items():
        if key in raw and out.get(key) is not None and name not in out["factors"]:
            out["factors"][name] = Stated(value=factor_text(out[key]) or str(out[key]), at=f"line 1 {key}")
    return out


def _read_jsonl(path: Path) -> tuple[dict[str, Any], dict[str, list], list[int]]:
    """Header and raw columns (one list per field that occurs, None where a record lacks it)."""
    cols: dict[str, list] = {}
    lines: list[int] = []
    with open(path, "rb") as fh:
        header: dict[str, Any] | None = None
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                rec = DECODE(raw.decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise ParseError(path, f"line {lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}") from None
            except UnicodeDecodeError:
                raise ParseError(path, f"line {lineno}", None, "not UTF-8 text") from None
            except DuplicateKey as exc:
                raise ParseError(path, f"line {lineno}", exc.key, json_problem(exc)) from None
            except (ValueError, RecursionError) as exc:
                raise ParseError(path, f"line {lineno}", None, json_problem(exc)) from None
            if not isinstance(rec, dict):
                raise ParseError(path, f"line {lineno}", None, f"expected a JSON object, got {type(rec).__name__}")
            if header is None:
                version = rec.pop("ledger_requests", None)
                if type(version) is not int or version != VERSION:
                    raise ParseError(
                        path,
                        f"line {lineno}",
                        "ledger_requests",
                        f'the first line must be the header {{"ledger_requests": {VERSION}, ...}}, '
                        f"got version {version!r}",
                    )
                header = _header(rec, path)
                continue
            if not rec.keys() <= cols.keys():  # a field seen for the first time: backfill None
                for key in rec.keys() - cols.keys():
                    if key not in FIELD_COLUMN:
                        raise ParseError(
                            path, f"line {lineno}", key, f"unknown field; known: {', '.join(REQUEST_FIELDS)}"
                        )
                    cols[key] = [None] * len(lines)
            for key, col in cols.items():
                col.append(rec.get(key))
            lines.append(lineno)
    if header is None:
        raise ParseError(path, None, None, "empty file: no ledger_requests header")
    return header, cols, lines


def _read_csv(path: Path) -> tuple[dict[str, Any], dict[str, list], list[int]]:
    """Header comment, column names, then rows; empty cells are None."""
    refuse_cut_last_line(path)  # csv writers end every row: a last row without a line end may be cut
    try:
        return _read_csv_rows(path)
    except UnicodeDecodeError:
        with open(path, "rb") as fh:
            line = next((n for n, raw in enumerate(fh, 1) if not _utf8(raw)), None)
        raise ParseError(path, f"line {line}" if line else None, None, "not UTF-8 text") from None
    except csv.Error as exc:
        raise ParseError(path, None, None, f"not CSV: {exc}") from None


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _read_csv_rows(path: Path) -> tuple[dict[str, Any], dict[str, list], list[int]]:
    with open(path, encoding="utf-8", newline="") as fh:
        first = fh.readline()
        try:
            words = shlex.split(first.lstrip("\ufeff# "))
        except ValueError as exc:
            raise ParseError(path, "line 1", None, f"header comment: {exc}") from None
        if words[:2] != ["ledger_requests", f"v{VERSION}"]:
            raise ParseError(path, "line 1", None, f"expected '{CSV_MAGIC} v{VERSION} run=... tool=...'")
        pairs = [w.split("=", 1) for w in words[2:]]
        if any(len(p) != 2 for p in pairs):
            raise ParseError(path, "line 1", None, "header comment words must be key=value")
        header = _header(dict(pairs), path)
        reader = csv.reader(fh)
        names = next(reader, None)
        if not names:
            raise ParseError(path, "line 2", None, "no column names row")
        for name in names:
            if name not in FIELD_COLUMN:
                raise ParseError(path, "line 2", name, f"unknown column; known: {', '.join(REQUEST_FIELDS)}")
        if len(set(names)) != len(names):
            raise ParseError(path, "line 2", None, "a column name occurs twice")
        cols: dict[str, list] = {name: [] for name in names}
        order = list(cols.values())
        lines: list[int] = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(names):
                raise ParseError(
                    path, f"line {reader.line_num + 1}", None, f"row has {len(row)} cells, the header has {len(names)}"
                )
            for col, cell in zip(order, row):
                col.append(cell if cell != "" else None)
            lines.append(reader.line_num + 1)
    return header, cols, lines


def _shown(value: Any) -> str:
    """A value for a message: decimals as written in the file, everything else as repr (both cut at
    40 characters). An integer too long to print (Python refuses to convert one of more than 4300
    digits to text) is described by its number of digits."""
    if isinstance(value, Decimal):
        text = f"{value}"
        return text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"
    if isinstance(value, int) and abs(value) >= 10**40:
        n = abs(value)
        digits = int(math.log10(n)) + 1  # a float estimate, corrected exactly below
        digits += (n >= 10**digits) - (n < 10 ** (digits - 1))
        return f"an integer of {digits} digits"
    return f"{value!r:.40}"


def _convert(values: list, convert: Callable[[Any], Any], field: str, lines: list[int], path: Path) -> list:
    """Convert a column in one comprehension; on failure find the offending row for the message."""
    try:
        return [None if v is None else convert(v) for v in values]
    except (ValueError, TypeError, ArithmeticError):
        for i, v in enumerate(values):
            try:
                None if v is None else convert(v)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise ParseError(path, f"line {lines[i]}", field, f"{exc}, got {_shown(v)}") from None
        raise


def _int_cell(v: str) -> int:
    if v.lstrip("-").isdigit():
        return int(v)
    raise ValueError("expected an integer")


def _seconds_ns(v: Any) -> int:
    if type(v) not in (int, Decimal, str):
        raise TypeError("expected a number of seconds")
    try:
        d = Decimal(v)
    except ArithmeticError:
        raise ValueError("expected a number of seconds") from None
    try:
        return seconds_ns(d)
    except ArithmeticError:
        raise ValueError("expected a number of seconds") from None


def _ns(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    raise TypeError("epoch_ns times must be integers")


def _float_cell(v: str) -> float:
    try:
        return float(v)
    except ValueError:
        raise ValueError("expected a number of seconds") from None


def _gaps_json(v: Any) -> list:
    if not isinstance(v, list):
        raise TypeError(f"expected a list of numbers, got {type(v).__name__}")
    return [float(g) if type(g) is Decimal else g for g in v]


def _gaps_csv(v: str) -> list[float]:
    try:
        return [] if v == "[]" else [float(g) for g in v.split(";")]
    except ValueError:
        raise ValueError("expected numbers of seconds separated by ';' (or [] for none)") from None


def _columns(cols: dict[str, list], lines: list[int], clock: str | None, csv_text: bool, path: Path) -> RequestColumns:
    n = len(lines)
    out: dict[str, list] = {"idx": list(range(n)), "line": lines}
    for field, values in cols.items():
        if field in TIME_FIELDS:
            if clock is None:
                raise ParseError(path, "line 1", "clock", f"the file has {field} but the header declares no clock")
            values = _convert(values, _ns if clock == "epoch_ns" else _seconds_ns, field, lines, path)
        elif field in SECONDS_FIELDS:
            values = _convert(
                values,
                _float_cell if csv_text else (lambda v: float(v) if type(v) is Decimal else v),
                field,
                lines,
                path,
            )
        elif field in INT_FIELDS and csv_text:
            values = _convert(values, _int_cell, field, lines, path)
        elif field == "chunk_gaps":
            values = _convert(values, _gaps_csv if csv_text else _gaps_json, field, lines, path)
        elif field == "status":
            values = ["unknown" if v is None else v for v in values]
        out[FIELD_COLUMN[field]] = values
    out.setdefault("status", ["unknown"] * n)
    none = [None] * n
    for column in RequestColumns.model_fields:
        out.setdefault(column, none)
    try:
        return RequestColumns.model_validate(out, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        col, i, *_ = err["loc"]
        value = err.get("input")
        raise ParseError(
            path,
            f"line {lines[int(i)]}",
            FIELD_OF.get(str(col), str(col)),
            f"{err['msg'].lower()}, got {_shown(value)}",
        ) from None


class LedgerRequestsImporter:
    name = IMPORTER_NAME
    description = "the ledger's own per-request format (docs/request-format.md), JSON Lines or CSV"

    def sniff(self, head: bytes) -> str | None:
        kind, first_line = first_json_value(head)
        if kind == "object":
            try:
                value = json.loads(first_line)
            except ValueError:
                return "first line is not a complete JSON object"
            return None if isinstance(value, dict) and "ledger_requests" in value else "no 'ledger_requests' header key"
        if first_line.startswith(CSV_MAGIC):
            return None
        return f"first line is neither a ledger_requests JSON header nor '{CSV_MAGIC} v{VERSION} ...'"

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        path = Path(path)
        kind, _ = first_json_value(read_head(path, 4096))
        csv_text = kind != "object"
        if (
            not csv_text
            and FAST_PATH
            and file_size(path) >= FAST_MIN_BYTES
            and (fast := _fast_parse([path])[0]) is not None
        ):
            return fast
        header, cols, lines = (_read_csv if csv_text else _read_jsonl)(path)
        capture = _capture(header, list(cols), len(lines))
        requests = _columns(cols, lines, capture.clock, csv_text, path) if lines else None
        return _artefact(header, capture, requests)

    def parse_many(self, paths: list[Path], options: ParseOptions) -> list[ParsedArtefact | None]:
        """The artefacts of several JSON Lines files read in one DuckDB call (:func:`_fast_parse`) on one
        thread; None for a file the fast path does not take (the caller parses it with :meth:`parse`).
        One thread: the import reads a group of files while it writes the one before (ledger.ingest.
        import_files), and DuckDB's parallel read of a group cost ~0.7 s more CPU per 1,000 files than
        one thread's, CPU the writer then lacked (profile note 44)."""
        return _fast_parse([Path(p) for p in paths], threads=1) if FAST_PATH else [None] * len(paths)


def _artefact(
    header: dict[str, Any], capture: Capture, requests: RequestColumns | ArrowRequests | None
) -> ParsedArtefact:
    info = RunInfo(label=header.pop("run"), locator="line 1", **header)
    run = ParsedRun(info=info, capture=capture, requests=requests)
    return ParsedArtefact(format=IMPORTER_NAME, format_version=str(VERSION), runs=[run])


def _capture(header: dict[str, Any], fields: list[str], n: int) -> Capture:
    """The capture of a file's run; takes the capture's keys out of ``header``."""
    return Capture(
        fields=fields,
        record_count=n,
        clock=header.pop("clock", None),
        token_source=header.pop("token_source", "unknown"),
        success_rule=header.pop("success_rule", DEFAULT_RULE),
        sampled=header.pop("sampled", False),
        sample_note=header.pop("sample_note", None),
    )


# ---------------------------------------------------------------- the DuckDB-parsed path (issue 17)
#
# An in-memory DuckDB (not the ledger) reads the request lines of many JSON Lines files in one call
# (read_json, typed columns) into Arrow; the header line is decoded by the Python code above. DuckDB
# coerces what it reads (the string "7" to 7, 12.0 to 12, a number to text), does not tell a null
# from a missing key, and reads numbers as float64, so a file takes this path only when its text
# proves the result is what the Python path would build, checked at C speed in one pass of RE2
# (DuckDB's regexp_matches over read_text):
# * every value's first character fits its field (a string or null for status/error; a number or
#   null for numbers, and no fraction or exponent for integers and epoch_ns times; a list of plain
#   numbers or null for chunk_gaps), and no key is outside REQUEST_FIELDS;
# * no backslash (escapes: keys and strings are then literal, a surrogate cannot hide), no carriage
#   return, no blank line, one object per line (rows per file = lines);
# * a time on epoch_s / monotonic_s written with at most 15 significant digits: then the decimal as
#   written is the float's shortest text, and importers.base.exact_ns_of (the exact conversion the
#   vLLM fast path uses) gives base.seconds_ns(Decimal(text)) exactly.
# A captured field is one whose key occurs ('"key":' in the text: with no escapes a quoted key
# followed by a colon is never inside a string). The typed rows are read first; the fields with a
# value in some request of a file are then its captured fields when one RE2 pass over its text finds
# it regular and no other key in it (_proof, run once per set of such fields); a file where it finds
# something (irregular, or a key that is only ever null) is checked again field by field (_proofs).
# Values outside their domains, unknown status words,
# too long error texts or times outside the exact range send the file to the Python path too, which
# owns every error message. Tests: tests/importers/test_ledger_requests.py compares both paths.

FAST_PATH = True
_INT32 = ("idx", "line", "retries", "input_tokens", "output_tokens", "cached_tokens", "chunk_count")  # ArrowRequests
FAST_MIN_BYTES = 1 << 20  # parse() of one smaller file: the Python path (parse_many reads small files together)
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
    """RE2 that matches the request text of a file the fast path must not take (see above), or (with
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
    """The captured fields of each file the fast path may take (see above), by index into ``plain``.

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
        return _header(rec, path) if type(version) is int and version == VERSION else None
    except (OSError, ValueError, ParseError, RecursionError):
        return None


def _fast_parse(paths: list[Path], threads: int | None = None) -> list[ParsedArtefact | None]:
    """The artefacts of ``paths`` (JSON Lines files of this format) parsed by DuckDB (on ``threads``
    threads; None: DuckDB's default), None for each file that must take the Python path (see above);
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
        capture = _capture(header, got, rows.num_rows)
        requests = None
        if rows.num_rows:
            requests = ArrowRequests(table=rows, gaps=gaps.slice(lo + 1, count - 1))
        out[i] = _artefact(header, capture, requests)
    return out


def _file_of(spans: dict[int, tuple[int, int]], n: int):
    """For each row, the index of the file it came from (int32)."""
    import numpy as np
    import pyarrow as pa

    owner = np.zeros(n, dtype=np.int32)
    for i, (lo, count) in spans.items():
        owner[lo : lo + count] = i
    return pa.array(owner)


IMPORTER = LedgerRequestsImporter()
