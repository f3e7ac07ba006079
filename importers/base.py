"""The importer contract and the format registry.

An importer is a module-level object with a ``name``, a one-line ``description``, a ``sniff`` that
looks at the first bytes of a file (content, never the file name) and either accepts it or says why
not, and a ``parse`` that returns a :class:`ledger.records.ParsedArtefact` or raises
:class:`ledger.errors.ParseError` naming the file, the line or JSON path, and the field.

Parsing never touches the database and computes no metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from bench_ledger.errors import ParseError
from bench_ledger.records import ParsedArtefact, ParsedRun, ParseOptions

SNIFF_BYTES = 64 * 1024


__all__ = ["Importer", "ParseOptions", "first_json_value", "iter_json_lines", "load_json", "prefetched", "read_head"]


class Importer(Protocol):
    name: str
    description: str

    def sniff(self, head: bytes) -> str | None:
        """Return None when this importer takes the file, else why it does not."""

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        """Parse the whole file (streaming where it is large)."""


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def first_json_value(head: bytes) -> tuple[str, str]:
    """Classify the start of a JSON or JSON Lines text: ('object'|'array'|'other', first line)."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    first_line = text.split("\n", 1)[0]
    if text.startswith("{"):
        return "object", first_line
    if text.startswith("["):
        return "array", first_line
    return "other", first_line


def load_json(path: Path) -> object:
    """Load a whole JSON file; a syntax error names the line and column."""
    try:
        with open(path, "rb") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ParseError(path, f"line {exc.lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ParseError(path, f"byte {exc.start}", None, "not UTF-8 text") from None


def iter_json_lines(path: Path):
    """Yield (line number, parsed object) for each non-blank line of a JSON Lines file."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ParseError(path, f"line {lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}") from None
            except UnicodeDecodeError:
                raise ParseError(path, f"line {lineno}", None, "not UTF-8 text") from None


def prefetched(runs: Iterator[ParsedRun]) -> Iterator[ParsedRun]:
    """Parse the first run now, so a file that is not what it claims fails in ``parse``."""
    first = next(runs, None)

    def chained() -> Iterator[ParsedRun]:
        if first is not None:
            yield first
        yield from runs

    return chained()
