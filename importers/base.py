"""The importer contract and the format registry.

An importer is a module-level object with a ``name``, a one-line ``description``, a ``sniff`` that
looks at the first bytes of a file (content, never the file name) and either accepts it or says why
not, and a ``parse`` that returns a :class:`ledger.records.ParsedArtefact` or raises
:class:`ledger.errors.ParseError` naming the file, the line or JSON path, and the field.

Parsing never touches the database and computes no metrics.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Context, Decimal, Inexact, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bench_ledger.errors import ParseError, line_key
from bench_ledger.records import (
    DECLARED_ZONE,
    UNCONFIRMED_ZONE,
    ParsedArtefact,
    ParsedRun,
    ParseOptions,
    require_regular_file,
)

SNIFF_BYTES = 64 * 1024
NEWLINE = b"\n"


__all__ = [
    "EXACT_MIN",
    "FAST_NS_MAX",
    "NS_PER_S",
    "DuplicateKey",
    "Importer",
    "ParseOptions",
    "exact_ns_of",
    "file_size",
    "first_json_value",
    "inexact",
    "iter_json_lines",
    "json_problem",
    "literal_paths",
    "load_json",
    "loads",
    "local_time_note",
    "local_zone",
    "prefetched",
    "read_head",
    "read_utf8",
    "refuse_cut_last_line",
    "seconds_ns",
    "setting_text",
    "sql_text",
    "to_utc",
    "unique_keys",
]


class Importer(Protocol):
    name: str
    description: str

    def sniff(self, head: bytes) -> str | None:
        """Return None when this importer takes the file, else why it does not."""

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        """Parse the whole file (streaming where it is large)."""


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes:
    require_regular_file(path)  # a pipe without a writer would block here, a device never ends
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


def setting_text(value: object, path: Path, where: str, field: str) -> str | None:
    """A setting a tool wrote as a JSON number or text (a request rate, vLLM's burstiness), as text as
    written: a float's ``repr`` (the token Python's json wrote), an integer's digits, a string as it is.
    ``inf`` only for the ``Infinity`` Python's json writes for an infinite float (SGLang's default rate):
    Python's json reads that literal as the one object ``json.decoder.PosInf``, while a number too large
    for a double (``1e309``) reads as another infinite float, which is refused rather than recorded as
    the tool's Infinity (the file does not say it); so is NaN (never a setting)."""
    if value is None:
        return None
    if type(value) is float:
        if value is json.decoder.PosInf:  # type: ignore[attr-defined]  # json's module constant, not in typeshed
            return "inf"
        if value != value or value is json.decoder.NegInf:  # type: ignore[attr-defined]  # (as above)
            raise ParseError(path, where, field, f"{'NaN' if value != value else '-Infinity'} is not a setting")
        if value in (float("inf"), float("-inf")):
            raise ParseError(
                path,
                where,
                field,
                "a number beyond the range of a double (it reads as infinity, and "
                "the file does not write Infinity): not a setting",
            )
        return repr(value)
    return str(value)


class DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook`` of every JSON read: a key twice in one object is refused, not resolved
    silently (Python's json keeps the last value; other readers keep the first)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


class NumberOutOfRange(ValueError):
    """A JSON number beyond a 64-bit float: Python's json reads ``1e400`` as infinity, which the file
    does not say (a tool that means it writes ``Infinity``)."""

    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _float_in_range(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberOutOfRange(text)
    return value


# a number that may be beyond a float: an exponent of 3 digits or more, or 309 digits before any point;
# only a text holding one is read with the range check (a Python call per number, not json's C float)
_MAYBE_OUT_OF_RANGE = re.compile(r"[eE]\+?0*[1-9]\d\d|\d{309}")
_MAYBE_OUT_OF_RANGE_BYTES = re.compile(rb"[eE]\+?0*[1-9]\d\d|\d{309}")


def loads(text: str | bytes) -> object:
    """``json.loads`` with duplicate keys refused (raises DuplicateKey, a ValueError) and numbers
    beyond a 64-bit float refused (NumberOutOfRange, a ValueError)."""
    maybe = _MAYBE_OUT_OF_RANGE_BYTES.search(text) if isinstance(text, bytes) else _MAYBE_OUT_OF_RANGE.search(text)
    if maybe:
        return json.loads(text, object_pairs_hook=unique_keys, parse_float=_float_in_range)
    return json.loads(text, object_pairs_hook=unique_keys)


def number_site(text: str | bytes, literal: str, first_line: int = 1) -> tuple[str, str | None]:
    """Error path: where the first ``literal`` standing as a JSON number in ``text`` is ("line L column
    C"), and the key it is the value of (or the key of the array holding it)."""
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    found = re.search(r"(?<![\w.+-])" + re.escape(literal) + r"(?![\w.])", raw)
    pos = found.start() if found else 0
    keys = list(re.finditer(r'"((?:[^"\\]|\\.)*)"\s*:', raw[max(0, pos - 65536) : pos]))
    key = json.loads(f'"{keys[-1].group(1)}"') if keys else None
    line = raw.count("\n", 0, pos) + first_line
    return f"line {line} column {pos - raw.rfind(chr(10), 0, pos)}", key


def _duplicate_line(text: str, key: str) -> int | None:
    """The line of the second ``key`` of the first object holding it twice (error path only: a
    pure-Python re-parse that sees where each object starts)."""
    found: list[int] = []
    original = json.decoder.JSONObject  # type: ignore[attr-defined]  # json's pure-Python hooks are not in typeshed

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        s, start = s_and_end
        pairs, end = original(s_and_end, strict, scan_once, None, lambda p: p, memo)
        if [k for k, _ in pairs].count(key) > 1:
            depth, seen = 0, 0
            for m in _TOKENS.finditer(s, start, end):
                tok = m.group()
                if tok in "{[":
                    depth += 1
                elif tok in "}]":
                    depth -= 1
                elif depth == 0 and m.group("colon") and json.loads(m.group("str")) == key:
                    seen += 1
                    if seen == 2:
                        found.append(s.count("\n", 0, m.start()) + 1)
                        raise DuplicateKey(key)
        return dict(pairs), end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]  # (as above)
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]  # (as above)
    try:
        decoder.decode(text)
    except (ValueError, RecursionError):
        pass
    return found[0] if found else None


_TOKENS = re.compile(r'(?P<str>"(?:[^"\\]++|\\.)*+")(?P<colon>\s*:)?|[{}\[\]]')
_NO_LINE_END = "; the last line has no line end: the file may have been cut while it was written"


def json_problem(exc: Exception) -> str:
    """What a JSON reader's exception means, for a ParseError."""
    if isinstance(exc, DuplicateKey):
        return f"key {exc.key!r} appears twice in one object; refused (which value is meant is not known)"
    if isinstance(exc, NumberOutOfRange):
        return f"the number {exc.literal} is beyond the range of a 64-bit float (about ±1.8e308); refused"
    if isinstance(exc, RecursionError):
        return "nested too deeply to read (beyond Python's recursion limit)"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if "integer string conversion" in str(exc):  # CPython's limit on digits (sys.get_int_max_str_digits)
        return f"an integer with more than {sys.get_int_max_str_digits():,} digits"
    return f"invalid JSON: {getattr(exc, 'msg', exc)}"


def load_json(path: Path) -> object:
    """Load a whole JSON file; an error names the line (and column) and what is wrong."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        return loads(data)
    except json.JSONDecodeError as exc:
        raise ParseError(path, f"line {exc.lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ParseError(path, f"byte {exc.start}", None, "not UTF-8 text") from None
    except DuplicateKey as exc:
        line = _duplicate_line(data.decode("utf-8"), exc.key)
        raise ParseError(path, f"line {line}" if line else None, exc.key, json_problem(exc)) from None
    except NumberOutOfRange as exc:
        raise ParseError(path, *number_site(data, exc.literal), json_problem(exc)) from None
    except (ValueError, RecursionError) as exc:
        where = None
        if "integer string conversion" in str(exc) and (
            m := re.search(rb"\d{%d}" % sys.get_int_max_str_digits(), data)
        ):
            where = f"line {data.count(NEWLINE, 0, m.start()) + 1}"
        raise ParseError(path, where, None, json_problem(exc)) from None


def local_zone(path: Path, tz: str | None) -> ZoneInfo | None:
    """The zone the user declared (``--time-zone``) for a sampler's host-local times, None if none."""
    if not tz:
        return None
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ParseError(path, "option --time-zone", None, f"not an IANA time zone: {tz!r}") from None


def to_utc(local: datetime, zone: ZoneInfo) -> datetime:
    """A host-local time printed without a zone, in the zone the user declared, as naive UTC."""
    return local.replace(tzinfo=zone).astimezone(UTC).replace(tzinfo=None)


def local_time_note(tz: str | None) -> str:
    """What a sampler's timestamps are, for its artefact's note (``UNCONFIRMED_ZONE`` when no zone was declared:
    the read side then never places them in a run's UTC window)."""
    if tz:
        return f"host local wall-clock time converted to UTC; {DECLARED_ZONE}{tz}"
    return f"host local wall-clock time as printed; {UNCONFIRMED_ZONE} (local time of the host, no zone in the file)"


def read_utf8(path: Path) -> str:
    """A whole text file as UTF-8; a byte that is not names its line, column and the key of that line
    (``key:`` of a YAML or log line), if it has one."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start, end = data.rfind(NEWLINE, 0, exc.start) + 1, data.find(NEWLINE, exc.start)
        line = data[start : len(data) if end < 0 else end].decode("utf-8", errors="replace")
        where = f"line {data.count(NEWLINE, 0, exc.start) + 1} column {exc.start - start + 1}"
        raise ParseError(path, where, line_key(line), f"not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def iter_json_lines(path: Path):
    """Yield (line number, parsed object) for each non-blank line of a JSON Lines file."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, loads(raw)
            except json.JSONDecodeError as exc:
                cut = _NO_LINE_END if not raw.endswith(b"\n") else ""
                raise ParseError(
                    path, f"line {lineno} column {exc.colno}", None, f"invalid JSON: {exc.msg}{cut}"
                ) from None
            except DuplicateKey as exc:
                raise ParseError(path, f"line {lineno}", exc.key, json_problem(exc)) from None
            except NumberOutOfRange as exc:
                raise ParseError(path, *number_site(raw, exc.literal, lineno), json_problem(exc)) from None
            except (ValueError, RecursionError) as exc:
                raise ParseError(path, f"line {lineno}", None, json_problem(exc)) from None


def refuse_cut_last_line(path: Path) -> None:
    """Refuse a file whose last line has no line end, for formats whose writers always end their
    lines (CSV, nvidia-smi dmon, server logs): the last value may have been cut in the middle
    (``123.4`` written as ``12``) and would be stored wrong. Costs one seek; the line is counted
    only to name it."""
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        lines = 1 + sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    raise ParseError(
        path,
        f"line {lines}",
        None,
        "the last line has no line end: the file may have been cut while "
        "it was written, and its last value with it; refused (end the line if it is complete)",
    )


def prefetched(runs: Iterator[ParsedRun]) -> Iterator[ParsedRun]:
    """Parse the first run now, so a file that is not what it claims fails in ``parse``."""
    first = next(runs, None)

    def chained() -> Iterator[ParsedRun]:
        if first is not None:
            yield first
        yield from runs

    return chained()


# ---------------------------------------------------------------- the DuckDB-parsed paths (issue 7, 17)
#
# Importers that parse JSON at C speed (vllm_bench, ledger_requests) read it with an in-memory DuckDB
# (read_json with typed columns: numbers become float64) and then need exact ns from seconds. The one
# proof, used by both: a float64's shortest round-trip text (Arrow's float -> string, the digits of
# Python's repr) cast to decimal128(37,24) is exactly Decimal(repr(x)) when x == 0 or
# EXACT_MIN <= |x| < EXACT_MAX: a shortest text has at most 17 significant digits, which fit 24
# places from 1e-7 on, and 13 integer digits below 1e13; outside, the cast raises instead of
# rounding. Sums of such decimals and the truncation to ns are then exact decimal arithmetic, as
# :func:`seconds_ns` of those decimals. (What the float stands for is the importer's business: vLLM's reference
# is repr() of the float it wrote; the ledger's own format is the decimal as written, which equals the
# shortest text of its float only when written with at most 15 significant digits, so that importer
# checks the digits in the file.)
EXACT_MIN, EXACT_MAX = 1e-7, 1e13


def exact_decimal(col):
    """float64 -> decimal128(37,24) of its shortest round-trip text; exact where :func:`inexact` is
    false. Nulls stay null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.cast(col, pa.string()), pa.decimal128(37, 24))


def inexact(col):
    """Where :func:`exact_decimal` would not be exact (boolean array; nulls: false)."""
    import pyarrow.compute as pc

    mag = pc.abs(col)
    out = pc.and_(pc.not_equal(col, 0), pc.or_(pc.less(mag, EXACT_MIN), pc.greater_equal(mag, EXACT_MAX)))
    return pc.fill_null(out, False)


def exact_ns(*decs):
    """Exact integer ns of a sum of :func:`exact_decimal` values, truncated toward zero as
    :func:`seconds_ns` does: the rescale to 9 places truncates, and the unscaled integer of that
    decimal is the ns value. Nulls propagate."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = decs[0]
    for d in decs[1:]:
        total = pc.add(total, d)
    t9 = pc.cast(total, pa.decimal128(38, 9), safe=False)
    chunks = t9.chunks if isinstance(t9, pa.ChunkedArray) else [t9]
    return pa.chunked_array([c.view(pa.decimal128(38, 0)).cast(pa.int64()) for c in chunks], pa.int64())


# A shortcut for most floats, exactly the same ns (issue 17: the casts above dominated the vLLM parse,
# profile notes). Let x be a float64 with 0 < |x| < 2**22 and k = rint(x * 1e9) (float64 arithmetic). If
# k / 1e9 == x (IEEE division, correctly rounded: k < 2**53 is exact), the decimal q = k * 10**-9
# rounds to x, i.e. lies in R(x), the interval of reals that round to x. R(x) is narrower than ulp(x) <=
# 2**-31 < 1e-9, so q is the only decimal of at most 9 places in it. The shortest round-trip text D of
# x (Python's repr, what exact_decimal reads) is the decimal of fewest significant digits in R(x). If D
# had a non-zero digit beyond 10**-9, it would have at least L_D + 11 significant digits (L: the
# exponent of the leading digit) and q at most L_q + 10, so L_D < L_q: the power of ten 10**L_q would
# lie between D and q, inside R(x), with one digit, so D would have one digit too, hence L_D <= -10 and
# D < 1e-9 <= 10**L_q: an interval of width < 1e-9 near 1e-9 that holds both is impossible (its width
# there is ~1e-25). So D has at most 9 places, D == q, D * 10**9 == k exactly, and a sum of such D
# (start + ttft) is the sum of their k, an integer: seconds_ns gives the same. Where the check fails
# (more than 9 places, |x| >= 2**22), :func:`exact_decimal` / :func:`exact_ns` compute those values.
# x == 0 (and -0.0) gives k == 0 == seconds_ns(Decimal("-0.0")). tests/importers/test_exact_ns.py
# compares it with seconds_ns on generated and edge values.
FAST_NS_MAX = 2.0**22


def exact_ns_of(*cols):
    """Exact integer ns of the sum of float64 seconds ``cols`` (Arrow arrays of one length), each read
    as its shortest round-trip text, truncated toward zero: :func:`exact_ns` of the
    :func:`exact_decimal` values, computed in numpy where the shortcut above applies and by them for
    the other values. A null in any column gives null. The caller keeps the values inside the range
    where :func:`exact_decimal` is exact (:func:`inexact`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = tuple(c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols)
    n = len(cols[0])
    total = np.zeros(n, np.int64)
    valid = np.ones(n, bool)
    slow = np.zeros(n, bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for c in cols:
            x = c.to_numpy(zero_copy_only=False)  # float64; nulls become NaN
            if c.null_count:
                valid &= c.is_valid().to_numpy(zero_copy_only=False)
            k = np.rint(x * 1e9)
            fast = (np.abs(x) < FAST_NS_MAX) & (k / 1e9 == x)
            total += np.where(fast, k, 0).astype(np.int64)
            slow |= ~fast
    slow &= valid
    if slow.any():
        where = np.flatnonzero(slow)
        picked = pa.array(where)
        total[where] = exact_ns(*(exact_decimal(pc.take(c, picked)) for c in cols)).to_numpy()
    return pa.array(total, pa.int64(), mask=~valid if not valid.all() else None)


NS_PER_S = Decimal(10**9)
# Decimal arithmetic rounds to its context's precision (28 digits by default), which is not exact for
# e.g. an epoch start plus a sub-microsecond duration (31 digits); in this context a result that would
# round raises Inexact instead, and the sum is then taken as fractions.
_EXACT = Context(prec=60, traps=[Inexact, InvalidOperation])


def seconds_ns(*parts: Decimal) -> int:
    """The sum of decimal seconds as integer nanoseconds, exactly, truncated toward zero: the
    importers' one conversion of printed seconds (``int(Decimal(text) * 10**9)`` without its
    rounding). Raises ValueError for a part of 1e19 s or more (no int64 nanosecond count holds it;
    refused before its digits are made) and ArithmeticError for a part that is not finite."""
    try:
        total = parts[0]
        for d in parts[1:]:
            total = _EXACT.add(total, d)
        return int(_EXACT.multiply(total, NS_PER_S))
    except Inexact:
        pass
    if any(not d.is_finite() for d in parts):
        raise InvalidOperation("not a finite number of seconds")
    if any(d.adjusted() >= 19 for d in parts):
        raise ValueError("a number of seconds beyond the range of int64 nanoseconds")
    if len(parts) == 1 and parts[0].adjusted() < -9:
        return 0  # |x| < 1 ns; its fraction would have as many digits as its exponent says
    exact = sum((Fraction(d) for d in parts), Fraction(0)) * 10**9
    return int(exact)  # int() of a Fraction truncates toward zero


def file_size(path: Path) -> int:
    """The file's size in bytes; 0 when it cannot be read (the fast paths' size threshold)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def sql_text(text: str) -> str:
    """``text`` as a SQL string literal for the in-memory DuckDB of the fast paths."""
    return "'" + text.replace("'", "''") + "'"


@contextmanager
def literal_paths(paths: list[Path]) -> Iterator[list[Path]]:
    """Names for ``paths`` that DuckDB cannot read as glob patterns: read_json expands ``*``, ``?``,
    ``[...]`` and ``{...}`` in the names it is given (issue 13: ``x[1].jsonl`` read ``x1.jsonl``), and
    has no escape for them. A name of only plain characters (:data:`_PLAIN_NAME`) is given as it is
    (made absolute) the first time; for any other, a symbolic link with a plain name, in a fresh private folder,
    points at the file itself; it is read while the link exists and the folder is removed afterwards."""
    import tempfile

    named = [Path(p).absolute() for p in paths]
    seen: set[Path] = set()
    as_is = []  # a plain name, the first time it is given (each name given stays its own, as DuckDB's filename)
    for path in named:
        as_is.append(path not in seen and _PLAIN_NAME.fullmatch(str(path)) is not None)
        seen.add(path)
    if all(as_is):  # nothing to hide: no folder, no links
        yield named  # no links to make (profile note 17: their cost in the benchmark's import)
        return
    with tempfile.TemporaryDirectory(prefix="ledger-read-") as folder:
        plain = []
        for i, path in enumerate(named):
            if as_is[i]:
                plain.append(path)
                continue
            link = Path(folder) / f"artefact-{i}.jsonl"
            link.symlink_to(path.resolve())
            plain.append(link)
        yield plain


# A name DuckDB reads as it is: absolute (no ``~`` expansion, no URL scheme such as ``s3://``) and
# only characters that are neither glob syntax, quoting nor "=" (a folder key=value reads as a hive
# partition column).
_PLAIN_NAME = re.compile(r"/[A-Za-z0-9._/+@,-]*")
