"""What each value may be (issue 13): one domain per field, checked by the pydantic column types, by the
store over the Arrow tables it bulk-writes (:func:`arrow_violation`), by the validators and the fuzz
tests; and how a refused value is reported (:func:`as_parse_error`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any

from pydantic import Field

__all__ = [
    "GAP_DOMAINS",
    "MAX_KEYS_PER_RUN",
    "MAX_TEXT_CHARS",
    "NON_NEGATIVE_KINDS",
    "REQUEST_DOMAINS",
    "RUN_DOMAINS",
    "SAMPLE_DOMAINS",
    "SAMPLE_INDEX_DOMAINS",
    "VALUE_DOMAINS",
    "Domain",
    "FieldError",
    "RecordError",
    "Violation",
    "arrow_violation",
    "as_parse_error",
    "file_name_text",
    "kind_domain",
    "message_text",
    "name_violation",
    "request_rate_text",
    "sample_domain",
    "shown_value",
    "text_violation",
]

# ---------------------------------------------------------------- domains (issue 13)
#
# What each value may be. This is the one place: the pydantic column types below, the store's check
# of the Arrow tables it bulk-writes (``arrow_violation``, for importers that hand over Arrow), the
# published-value and log-fact validators and the fuzz tests all read these. A value outside its
# domain is refused with the file, the line and the field; it is never stored. NaN and infinities
# are never measurements (Python's json reads ``NaN`` and ``1e400`` as floats: they stop here).

_INT32_MAX = 2**31 - 1  # request, gap and sample integer columns are INTEGER in the database
_INT64_MAX = 2**63 - 1
MAX_TEXT_CHARS = 1 << 20  # one text value (an error message, a metadata value, a log text): 1 Mi characters
_MAX_NAME_BYTES = 1024  # an indexed name (run label, batch, deployment): far below PostgreSQL's 2704-byte btree row
MAX_KEYS_PER_RUN = 10_000  # printed aggregates plus metadata entries of one run


@dataclass(frozen=True)
class Domain:
    """The values a field may take: finite numbers in [lo, hi] (None: no bound on that side)."""

    what: str
    lo: float | int | None = None
    hi: float | int | None = None
    integer: bool = False

    def describe(self) -> str:
        parts = ["an integer" if self.integer else "a finite number"]
        if self.lo is not None:
            parts.append(f">= {self.lo}")
        if self.hi is not None:
            parts.append(f"<= {self.hi:,}" if self.integer else f"<= {self.hi}")
        return f"{self.what}: {', '.join(parts)}"

    def violation(self, value: Any) -> str | None:
        """Why ``value`` is outside the domain, or None (None values are 'no value' and pass)."""
        if value is None:
            return None
        if isinstance(value, Decimal):
            if not value.is_finite():
                return f"{value} is not a finite number ({self.describe()})"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{value!r} is not a finite number ({self.describe()})"
        if self.lo is not None and value < self.lo:
            return f"{shown_value(value)} is below {self.lo} ({self.describe()})"
        if self.hi is not None and value > self.hi:
            return f"{shown_value(value)} is above {self.hi:,} ({self.describe()})"
        return None

    def pydantic(self) -> Any:
        """The pydantic type of one value of this domain (strict int or finite float, bounded)."""
        if self.integer:
            return Annotated[int, Field(ge=self.lo, le=self.hi)]
        return Annotated[float, Field(ge=self.lo, le=self.hi, allow_inf_nan=False)]


def message_text(text: str) -> str:
    """Text for a message: a lone surrogate shown as its escape (a message must itself be text)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown_value(value: Any) -> str:
    """A value for a message: short, and text."""
    text = repr(value) if isinstance(value, float) else message_text(str(value))
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


_SECONDS = Domain("a duration in seconds", lo=0)
_TOKENS = Domain("a token count", lo=0, hi=_INT32_MAX, integer=True)
_COUNT = Domain("a count", lo=0, hi=_INT32_MAX, integer=True)
_NANOSECONDS = Domain("a time in integer nanoseconds", lo=-_INT64_MAX - 1, hi=_INT64_MAX, integer=True)
_INDEX = Domain("a 0-based record index", lo=0, hi=_INT32_MAX, integer=True)
_LINE = Domain("a 1-based line number", lo=1, hi=_INT32_MAX, integer=True)

# RequestColumns / ArrowRequests column -> domain (``chunk_gaps_s``: each gap; ``chunk_count``: Arrow only)
REQUEST_DOMAINS: dict[str, Domain] = {
    "idx": _INDEX,
    "line": _LINE,
    "retries": _COUNT,
    "input_tokens": _TOKENS,
    "output_tokens": _TOKENS,
    "cached_tokens": _TOKENS,
    "send_ns": _NANOSECONDS,
    "first_token_ns": _NANOSECONDS,
    "end_ns": _NANOSECONDS,
    "ttft_s": Domain("a time to first token in seconds", lo=0),
    "latency_s": Domain("a latency in seconds", lo=0),
    "queue_s": Domain("a queueing time in seconds", lo=0),
    "itl_mean_s": Domain("a mean inter-token time in seconds", lo=0),
    "chunk_gaps_s": Domain("a gap between streamed chunks in seconds", lo=0),
    "chunk_count": _COUNT,
}
# a per-request value a tool wrote (request_value): any finite number; its meaning is the tool's key
VALUE_DOMAINS: dict[str, Domain] = {
    "request_idx": Domain("a request index", lo=0, hi=2**31 - 1),
    "value": Domain("a per-request value the tool wrote"),
}
GAP_DOMAINS: dict[str, Domain] = {"request_idx": _INDEX, "seq": _INDEX, "gap_s": REQUEST_DOMAINS["chunk_gaps_s"]}

# Hardware counters (nvidia-smi dmon names) -> domain. Every counter is finite; all but temperatures
# are non-negative (power, busy-time percentages, clocks, memory, PCIe rates, event counts).
# A counter not named here is only required to be finite.
_PERCENT = Domain("a share of time in percent", lo=0, hi=100)
SAMPLE_DOMAINS: dict[str, Domain] = {
    "pwr": Domain("a power draw in W", lo=0),
    "gtemp": Domain("a temperature", lo=-273.15),
    "mtemp": Domain("a temperature", lo=-273.15),
    "sm": _PERCENT,
    "mem": _PERCENT,
    "enc": _PERCENT,
    "dec": _PERCENT,
    "jpg": _PERCENT,
    "ofa": _PERCENT,
    "mclk": Domain("a clock frequency", lo=0),
    "pclk": Domain("a clock frequency", lo=0),
    "pviol": _PERCENT,
    "tviol": _PERCENT,
    "fb": Domain("a memory size", lo=0),
    "bar1": Domain("a memory size", lo=0),
    "ccpm": Domain("a memory size", lo=0),
    "sbecc": Domain("an error count", lo=0),
    "dbecc": Domain("an error count", lo=0),
    "pci": Domain("an error count", lo=0),
    "rxpci": Domain("a PCIe data rate", lo=0),
    "txpci": Domain("a PCIe data rate", lo=0),
}
SAMPLE_INDEX_DOMAINS: dict[str, Domain] = {
    "line": _LINE,
    "gpu": Domain("a GPU index", lo=0, hi=_INT32_MAX, integer=True),
    "tick": _INDEX,
}
_ANY_NUMBER = Domain("a number")
# nvidia-smi --query-gpu fields and dcgmi dmon short names, by prefix (gpu_telemetry importer)
_SAMPLE_PREFIXES: tuple[tuple[str, Domain], ...] = (
    ("power.", SAMPLE_DOMAINS["pwr"]),
    ("utilization.", _PERCENT),
    ("temperature.", SAMPLE_DOMAINS["gtemp"]),
    ("clocks.", SAMPLE_DOMAINS["pclk"]),
    ("memory.", SAMPLE_DOMAINS["fb"]),
    ("POWER", SAMPLE_DOMAINS["pwr"]),
    ("GPUTL", _PERCENT),
    ("MCUTL", _PERCENT),
    ("TMPTR", SAMPLE_DOMAINS["gtemp"]),
    ("FBUSD", SAMPLE_DOMAINS["fb"]),
)


def sample_domain(counter: str) -> Domain:
    """The domain of a hardware counter: dmon's names exactly, other samplers' by prefix, else finite."""
    if counter in SAMPLE_DOMAINS:
        return SAMPLE_DOMAINS[counter]
    return next((d for prefix, d in _SAMPLE_PREFIXES if counter.startswith(prefix)), _ANY_NUMBER)


# RunInfo numbers (the run table's INTEGER and DOUBLE columns; the manifest's and `ledger correct`'s too)
RUN_DOMAINS: dict[str, Domain] = {
    "input_target_tokens": _TOKENS,
    "output_cap_tokens": _TOKENS,
    "concurrency": _COUNT,
    "request_count": _COUNT,
    "seed": Domain("a seed", lo=-_INT32_MAX - 1, hi=_INT32_MAX, integer=True),
    "duration_s": _SECONDS,
}

# A request rate setting (requests/s) is kept as written, as text (R11: "2.0" stays "2.0"): a decimal
# number > 0 (vLLM and GuideLLM divide by it) and at most one request per nanosecond, the resolution of
# every time the ledger keeps (a faster rate cannot be told from "all at once"); or "inf": every request
# at once, vLLM's and SGLang's default (vLLM writes the text "inf", SGLang's json writes Infinity).
_MAX_REQUEST_RATE = 10**9
_REQUEST_RATE = (
    f"a request rate in requests/s: a decimal number > 0 and <= {_MAX_REQUEST_RATE:,} (one request "
    "per nanosecond), or inf (every request at once)"
)
_RATE_TEXT = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INFINITE_RATE = frozenset({"inf", "+inf", "infinity", "+infinity"})


def request_rate_text(text: str) -> str:
    """The stored form of a request rate setting written as ``text``: the text itself (without the
    spaces around it), or ``inf`` for an infinite rate however it is spelled; ValueError otherwise."""
    t = text.strip()
    if t.casefold() in _INFINITE_RATE:
        return "inf"
    if not _RATE_TEXT.fullmatch(t) or not 0 < Decimal(t) <= _MAX_REQUEST_RATE:
        raise ValueError(f"{shown_value(text)!r} is not {_REQUEST_RATE}")
    return t


# Quantity kinds (ledger.kinds) whose values are never negative, for printed values and log facts.
# Not here: ratios, percent changes, 'other' and 'kv_cache_memory' (vLLM prints a negative available
# KV cache memory when a launch does not fit: "Available KV cache memory: -1.20 GiB").
NON_NEGATIVE_KINDS = frozenset(
    {
        "token_count",
        "token_setting",
        "request_count",
        "record_count",
        "concurrency",
        "duration",
        "latency",
        "startup_time",
        "aggregate_token_rate",
        "per_stream_token_rate",
        "request_rate",
        "power_normalized_rate",
        "capacity_ratio",
        "weights_file_size",
        "model_allocation",
        "device_memory",
        "kv_pool_tokens",
        "power_card_mean_sum",
        "power_peak_of_sum",
        "power_sum_of_peaks",
        "power",
        "activity_time_percent",
        "memory_busy_percent",
        "utilization_percent",
        "clock_frequency",
        "bandwidth",
        "count",
    }
)


def kind_domain(kind: str | None) -> Domain:
    """The domain of a printed value or log fact of a quantity kind."""
    if kind in NON_NEGATIVE_KINDS:
        return Domain(f"a value of kind {kind!r}", lo=0)
    return _ANY_NUMBER


def file_name_text(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by Python as lone surrogates) shown as
    ``\\xNN`` escapes, so a name never stops an import nor differs between the backends."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def name_violation(what: str, name: str) -> str | None:
    """Why a name that the database indexes cannot be stored, or None."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > _MAX_NAME_BYTES:
        return f"{what} is {size:,} bytes long; at most {_MAX_NAME_BYTES:,} bytes (UTF-8) are stored"
    return text_violation(what, name)


def text_violation(what: str, text: str) -> str | None:
    """Why a text value cannot be stored (too long, NUL or a lone surrogate: refused on both backends)."""
    if text.isascii() and len(text) <= MAX_TEXT_CHARS and "\x00" not in text:
        return None  # the usual case, at C speed (9,000 printed values of one vLLM file: 4 texts each)
    if len(text) > MAX_TEXT_CHARS:
        return f"{what} is {len(text):,} characters long; at most {MAX_TEXT_CHARS:,} are stored"
    if "\x00" in text:
        return f"{what} contains a NUL character (U+0000), which the ledger does not store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{what} contains a lone surrogate (U+{ord(text[exc.start]):04X}), which is not text"
    return None


class FieldError(ValueError):
    """A value a record refused, with its place in the file and its field: :func:`as_parse_error` makes it
    a ParseError naming both (pydantic keeps the exception a validator raised as ``ctx['error']``)."""

    def __init__(self, where: str | None, field: str, problem: str) -> None:
        self.where, self.field, self.problem = where, field, problem
        super().__init__(f"{field}: {problem}")


class RecordError(ValueError):
    """A value of one record that the store cannot take (the store adds the file to the message)."""

    def __init__(self, field: str, idx: int | None, line: int | None, problem: str) -> None:
        self.field, self.idx, self.line, self.problem = field, idx, line, problem
        super().__init__(problem)


def _lowered(msg: str) -> str:
    return msg[:1].lower() + msg[1:]


def as_parse_error(path: Any, exc: Exception) -> Exception:
    """The ParseError for an exception that escaped a parser, or ``exc`` itself when it is not one
    of the known kinds: a record the contract refused (pydantic names the field and the position), a
    structure nested beyond Python's recursion limit."""
    from bench_ledger.errors import ParseError
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        if isinstance(placed := (err.get("ctx") or {}).get("error"), FieldError):
            return ParseError(path, placed.where, placed.field, placed.problem)
        loc = [str(x) for x in err["loc"] if not isinstance(x, int)]
        pos = [x for x in err["loc"] if isinstance(x, int)]
        where = f"record {pos[0]} of the run" if pos and loc and loc[0] in REQUEST_DOMAINS else None
        shown = (
            "" if "input" not in err or isinstance(err["input"], (dict, list)) else f", got {shown_value(err['input'])}"
        )
        return ParseError(
            path, where, ".".join(loc) or None, f"{_lowered(err['msg'].removeprefix('Value error, '))}{shown}"
        )
    if isinstance(exc, RecursionError):
        return ParseError(path, None, None, "nested too deeply to read (beyond Python's recursion limit)")
    if isinstance(exc, UnicodeEncodeError):  # pydantic meets a lone surrogate (a JSON "\\udc00") in a key or text
        text = exc.object if isinstance(exc.object, str) else ""
        return ParseError(
            path,
            None,
            None,
            f"a lone surrogate (U+{ord(text[exc.start]):04X}) in {shown_value(text)!r}, which is not text",
        )
    return exc


@dataclass(frozen=True)
class Violation:
    """The first value of a bulk table outside its domain: column, row and why."""

    column: str
    row: int
    problem: str


def arrow_violation(table: Any, domains: dict[str, Domain]) -> Violation | None:
    """The first value of an Arrow table outside its column's domain, found with Arrow kernels (one
    min/max pass per column; the row is looked up only when a bound is crossed)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in table.column_names:
        domain = domains.get(name)
        col = table.column(name)
        if pa.types.is_string(col.type) and col.null_count < len(col):
            bad = pc.or_(pc.greater(pc.utf8_length(col), MAX_TEXT_CHARS), pc.match_substring(col, "\x00"))
            if pc.any(bad).as_py():
                row = pc.index(pc.fill_null(bad, False), True).as_py()
                return Violation(name, row, text_violation(f"the {name}", col[row].as_py()) or "not storable text")
            continue
        if (
            domain is None
            or col.null_count == len(col)
            or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type))
        ):
            continue
        bad = None
        if pa.types.is_floating(col.type):
            finite = pc.is_finite(col)
            if pc.any(pc.invert(finite)).as_py():
                bad = pc.invert(pc.fill_null(finite, True))
        if bad is None:
            mm = pc.min_max(col).as_py()
            low = domain.lo is not None and mm["min"] < domain.lo
            high = domain.hi is not None and mm["max"] > domain.hi
            if not (low or high):
                continue
            bad = pc.or_(
                pc.less(col, domain.lo) if low else pa.repeat(False, len(col)),
                pc.greater(col, domain.hi) if high else pa.repeat(False, len(col)),
            )
        row = pc.index(pc.fill_null(bad, False), True).as_py()
        return Violation(name, row, domain.violation(col[row].as_py()) or "outside its domain")
    return None
