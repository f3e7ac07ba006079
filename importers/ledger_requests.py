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
instead, many files per call (:meth:`LedgerRequestsImporter.parse_many`, the import's groups;
:mod:`bench_ledger.importers._ledger_requests_arrow`), into the same rows. One file is one run.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._ledger_requests_format import (
    CSV_MAGIC,
    DECODE,
    FIELD_OF,
    IMPORTER_NAME,
    INT_FIELDS,
    SECONDS_FIELDS,
    TIME_FIELDS,
    VERSION,
    artefact_of,
    capture_of,
    read_header,
)
from bench_ledger.importers.base import (
    DuplicateKey,
    ParseOptions,
    file_size,
    first_json_value,
    json_problem,
    read_head,
    refuse_cut_last_line,
    seconds_ns,
)
from bench_ledger.records import FIELD_COLUMN, REQUEST_FIELDS, ParsedArtefact, RequestColumns
from pydantic import ValidationError

__all__ = ["IMPORTER", "LedgerRequestsImporter"]

# The DuckDB-parsed path (importers._ledger_requests_arrow; issue 17): parse_many's groups, and parse()
# of one JSON Lines file of at least FAST_MIN_BYTES.
FAST_PATH = True
FAST_MIN_BYTES = 1 << 20  # parse() of one smaller file: the Python path (parse_many reads small files together)


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
                header = read_header(rec, path)
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
        header = read_header(dict(pairs), path)
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
        if not csv_text and file_size(path) >= FAST_MIN_BYTES and (fast := _fast([path])[0]) is not None:
            return fast
        header, cols, lines = (_read_csv if csv_text else _read_jsonl)(path)
        capture = capture_of(header, list(cols), len(lines))
        requests = _columns(cols, lines, capture.clock, csv_text, path) if lines else None
        return artefact_of(header, capture, requests)

    def parse_many(self, paths: list[Path], options: ParseOptions) -> list[ParsedArtefact | None]:
        """The artefacts of several JSON Lines files read in one DuckDB call (:func:`_fast`) on one
        thread; None for a file the fast path does not take (the caller parses it with :meth:`parse`).
        One thread: the import reads a group of files while it writes the one before (ledger.ingest.
        import_files), and DuckDB's parallel read of a group costs more CPU than one thread's, CPU the
        writer then lacks (profile note 44)."""
        return _fast([Path(p) for p in paths], threads=1)


def _fast(paths: list[Path], threads: int | None = None) -> list[ParsedArtefact | None]:
    """The artefacts the DuckDB-parsed path reads (:func:`_ledger_requests_arrow.fast_parse`, on ``threads``
    threads), None for each file it leaves to the Python path (every file where FAST_PATH is off)."""
    if not FAST_PATH:
        return [None] * len(paths)
    from bench_ledger.importers._ledger_requests_arrow import fast_parse

    return fast_parse(paths, threads)


IMPORTER = LedgerRequestsImporter()
