"""What a file of the ledger's own per-request format declares (docs/request-format.md): its version,
the fields by kind, the header line and the run and capture it gives.

Shared by the two parse paths of :mod:`bench_ledger.importers.ledger_requests` (the Python one there,
the DuckDB one in :mod:`bench_ledger.importers._ledger_requests_arrow`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, get_args

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import factor_text
from bench_ledger.importers.base import unique_keys
from bench_ledger.records import (
    FIELD_COLUMN,
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

__all__ = [
    "CSV_MAGIC",
    "DECODE",
    "FIELD_OF",
    "IMPORTER_NAME",
    "INT_FIELDS",
    "SECONDS_FIELDS",
    "TIME_FIELDS",
    "VERSION",
    "artefact_of",
    "capture_of",
    "read_header",
]

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


def read_header(raw: dict[str, Any], path: Path) -> dict[str, Any]:
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


def artefact_of(
    header: dict[str, Any], capture: Capture, requests: RequestColumns | ArrowRequests | None
) -> ParsedArtefact:
    info = RunInfo(label=header.pop("run"), locator="line 1", **header)
    run = ParsedRun(info=info, capture=capture, requests=requests)
    return ParsedArtefact(format=IMPORTER_NAME, format_version=str(VERSION), runs=[run])


def capture_of(header: dict[str, Any], fields: list[str], n: int) -> Capture:
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
