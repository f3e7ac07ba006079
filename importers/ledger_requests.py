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

The file is read line by line into raw columns, then each column is converted with one
comprehension and all of them validated by one strict pydantic call, so a million-line file is
never held as text or as a million objects; a conversion or type error is traced back to its line.
One file is one run.
"""

from __future__ import annotations

import csv
import json
import shlex
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, get_args

from bench_ledger.errors import ParseError
from bench_ledger.importers.base import (
    DuplicateKey,
    ParseOptions,
    first_json_value,
    json_problem,
    read_head,
    refuse_cut_last_line,
    unique_keys,
)
from bench_ledger.records import (
    FIELD_COLUMN,
    REQUEST_FIELDS,
    Capture,
    Clock,
    ParsedArtefact,
    ParsedRun,
    RequestColumns,
    RunInfo,
    TokenSource,
)
from pydantic import ValidationError

VERSION = 1
E9 = Decimal(10**9)
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
    "run": _text, "tool": _text, "clock": _choice(get_args(Clock)),
    "token_source": _choice(get_args(TokenSource)), "success_rule": _text,
    "tool_version": _text, "dataset": _text, "input_target_tokens": _int, "output_cap_tokens": _int,
    "concurrency": _int, "request_count": _int, "seed": _int, "request_rate": _rate,
    "duration_s": _float, "started_at": _when, "ended_at": _when, "sampled": _bool, "sample_note": _text,
}


def _header(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """Check and convert the header keys; unknown keys are refused so that typos do not vanish."""
    out: dict[str, Any] = {"metadata": {}}
    for key, value in raw.items():
        if key == "metadata":
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
                    raise ParseError(path, f"line {lineno}", "ledger_requests",
                                     f"the first line must be the header {{\"ledger_requests\": {VERSION}, ...}}, "
                                     f"got version {version!r}")
                header = _header(rec, path)
                continue
            if not rec.keys() <= cols.keys():  # a field seen for the first time: backfill None
                for key in rec.keys() - cols.keys():
                    if key not in FIELD_COLUMN:
                        raise ParseError(path, f"line {lineno}", key, f"unknown field; known: {', '.join(REQUEST_FIELDS)}")
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
                raise ParseError(path, f"line {reader.line_num + 1}", None,
                                 f"row has {len(row)} cells, the header has {len(names)}")
            for col, cell in zip(order, row):
                col.append(cell if cell != "" else None)
            lines.append(reader.line_num + 1)
    return header, cols, lines


def _shown(value: Any) -> str:
    """A value for a message: decimals as written in the file, everything else as repr."""
    return f"{value}" if isinstance(value, Decimal) else f"{value!r:.40}"


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
        return int(Decimal(v) * E9)
    except (ArithmeticError, ValueError):
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
            values = _convert(values, _float_cell if csv_text else (lambda v: float(v) if type(v) is Decimal else v),
                              field, lines, path)
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
        raise ParseError(path, f"line {lines[int(i)]}", FIELD_OF.get(str(col), str(col)),
                         f"{err['msg'].lower()}, got {_shown(value)}") from None


class LedgerRequestsImporter:
    name = "ledger-requests"
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
        header, cols, lines = (_read_csv if csv_text else _read_jsonl)(path)
        clock = header.pop("clock", None)
        capture = Capture(
            fields=list(cols), record_count=len(lines), clock=clock,
            token_source=header.pop("token_source", "unknown"),
            success_rule=header.pop("success_rule", DEFAULT_RULE),
            sampled=header.pop("sampled", False), sample_note=header.pop("sample_note", None),
        )
        requests = _columns(cols, lines, clock, csv_text, path) if lines else None
        info = RunInfo(label=header.pop("run"), locator="line 1", **header)
        run = ParsedRun(info=info, capture=capture, requests=requests)
        return ParsedArtefact(format=self.name, format_version=str(VERSION), runs=[run])


IMPORTER = LedgerRequestsImporter()
