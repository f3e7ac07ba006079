"""What an importer hands to the store: parsed, validated, and not yet written.

Importers (``importers/``) turn a raw file into these pydantic models and never touch the database;
the store (``ledger/store.py``) writes one :class:`ParsedArtefact` in one transaction. Per-request
values and hardware samples travel as *columns* (one list per field, one entry per row) so that a
million records are validated by pydantic's core in a handful of calls and handed to the database
as Arrow batches, not as a million Python objects.

Every row keeps its locator: ``idx`` (0-based position of the record in the artefact: array index
or JSON Lines record number) and ``line`` (1-based physical line, where the format has lines).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from bench_ledger.vocab import Clock, Provenance, RequestStatus, RequestValueFlag, RunFactor
from pydantic import BaseModel, ConfigDict, Field, model_validator

# Where token counts came from (formats.md): what the server reported in `usage`, what the client
# re-counted with its own tokenizer, or merely the length that was *requested* (not a measurement).
TokenSource = Literal["server_usage", "client_tokenizer", "requested", "unknown"]

# The request fields a capture may contain. A field outside a capture's set is n/a for all of its
# requests (R9), which is different from zero.
REQUEST_FIELDS: tuple[str, ...] = (
    "status",
    "error",
    "retries",
    "input_tokens",
    "output_tokens",
    "send_time",
    "first_token_time",
    "end_time",
    "ttft_s",
    "latency_s",
    "queue_s",
    "itl_mean_s",
    "chunk_gaps",
    "cached_tokens",
)

# The column of RequestColumns that carries each REQUEST_FIELDS entry (times: integer ns on the capture's clock).
FIELD_COLUMN: dict[str, str] = {
    "status": "status",
    "error": "error",
    "retries": "retries",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "send_time": "send_ns",
    "first_token_time": "first_token_ns",
    "end_time": "end_ns",
    "ttft_s": "ttft_s",
    "latency_s": "latency_s",
    "queue_s": "queue_s",
    "itl_mean_s": "itl_mean_s",
    "chunk_gaps": "chunk_gaps_s",
    "cached_tokens": "cached_tokens",
}


# The words an artefact note carries when its sample times are host-local with no known zone: the
# read side then cannot place them in a run's UTC window (queries.metrics).
UNCONFIRMED_ZONE = "time zone unconfirmed"
# ... and, when the user declared the zone (--time-zone), these words followed by its IANA name and ';' or the end.
DECLARED_ZONE = "time zone declared by the user: "


@dataclass(frozen=True)
class ParseOptions:
    """Options the command line passes through to parsers."""

    node: str | None = None  # dmon: the node the samples came from
    time_zone: str | None = None  # nvidia-smi CSV: the zone of the host's local timestamps, as declared
    start: datetime | None = None  # dcgmi dmon: when sample 0 was taken, as declared
    interval_s: float | None = None  # dcgmi dmon: seconds between samples (-d), as declared


def require_regular_file(path: Any) -> None:
    """Refuse a device (``/dev/zero``), a pipe or a socket before reading it as an artefact: it may
    never end (or, a pipe without a writer, block), and its bytes could not be read again to match
    their hash (issue 13)."""
    from pathlib import Path

    from bench_ledger.errors import InputError

    if not Path(path).is_file():
        raise InputError(f"{path}: not a regular file (a device, pipe or socket); save it to a file and import that")


# ---------------------------------------------------------------- domains (issue 13)
#
# What each value may be. This is the one place: the pydantic column types below, the store's check
# of the Arrow tables it bulk-writes (``arrow_violation``, for importers that hand over Arrow), the
# published-value and log-fact validators and the fuzz tests all read these. A value outside its
# domain is refused with the file, the line and the field; it is never stored. NaN and infinities
# are never measurements (Python's json reads ``NaN`` and ``1e400`` as floats: they stop here).

INT32_MAX = 2**31 - 1  # request, gap and sample integer columns are INTEGER in the database
INT64_MAX = 2**63 - 1
MAX_TEXT_CHARS = 1 << 20  # one text value (an error message, a metadata value, a log text): 1 Mi characters
MAX_NAME_BYTES = 1024  # an indexed name (run label, batch, deployment): far below PostgreSQL's 2704-byte btree row
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
            return f"{_shown(value)} is below {self.lo} ({self.describe()})"
        if self.hi is not None and value > self.hi:
            return f"{_shown(value)} is above {self.hi:,} ({self.describe()})"
        return None

    def pydantic(self) -> Any:
        """The pydantic type of one value of this domain (strict int or finite float, bounded)."""
        if self.integer:
            return Annotated[int, Field(ge=self.lo, le=self.hi)]
        return Annotated[float, Field(ge=self.lo, le=self.hi, allow_inf_nan=False)]


def _safe(text: str) -> str:
    """Text for a message: a lone surrogate shown as its escape (a message must itself be text)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, float) else _safe(str(value))
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


SECONDS = Domain("a duration in seconds", lo=0)
TOKENS = Domain("a token count", lo=0, hi=INT32_MAX, integer=True)
COUNT = Domain("a count", lo=0, hi=INT32_MAX, integer=True)
NANOSECONDS = Domain("a time in integer nanoseconds", lo=-INT64_MAX - 1, hi=INT64_MAX, integer=True)
INDEX = Domain("a 0-based record index", lo=0, hi=INT32_MAX, integer=True)
LINE = Domain("a 1-based line number", lo=1, hi=INT32_MAX, integer=True)

# RequestColumns / ArrowRequests column -> domain (``chunk_gaps_s``: each gap; ``chunk_count``: Arrow only)
REQUEST_DOMAINS: dict[str, Domain] = {
    "idx": INDEX,
    "line": LINE,
    "retries": COUNT,
    "input_tokens": TOKENS,
    "output_tokens": TOKENS,
    "cached_tokens": TOKENS,
    "send_ns": NANOSECONDS,
    "first_token_ns": NANOSECONDS,
    "end_ns": NANOSECONDS,
    "ttft_s": Domain("a time to first token in seconds", lo=0),
    "latency_s": Domain("a latency in seconds", lo=0),
    "queue_s": Domain("a queueing time in seconds", lo=0),
    "itl_mean_s": Domain("a mean inter-token time in seconds", lo=0),
    "chunk_gaps_s": Domain("a gap between streamed chunks in seconds", lo=0),
    "chunk_count": COUNT,
}
# a per-request value a tool wrote (request_value): any finite number; its meaning is the tool's key
VALUE_DOMAINS: dict[str, Domain] = {
    "request_idx": Domain("a request index", lo=0, hi=2**31 - 1),
    "value": Domain("a per-request value the tool wrote"),
}
GAP_DOMAINS: dict[str, Domain] = {"request_idx": INDEX, "seq": INDEX, "gap_s": REQUEST_DOMAINS["chunk_gaps_s"]}

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
    "line": LINE,
    "gpu": Domain("a GPU index", lo=0, hi=INT32_MAX, integer=True),
    "tick": INDEX,
}
ANY_NUMBER = Domain("a number")
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
    return next((d for prefix, d in _SAMPLE_PREFIXES if counter.startswith(prefix)), ANY_NUMBER)


# RunInfo numbers (the run table's INTEGER and DOUBLE columns; the manifest's and `ledger correct`'s too)
RUN_DOMAINS: dict[str, Domain] = {
    "input_target_tokens": TOKENS,
    "output_cap_tokens": TOKENS,
    "concurrency": COUNT,
    "request_count": COUNT,
    "seed": Domain("a seed", lo=-INT32_MAX - 1, hi=INT32_MAX, integer=True),
    "duration_s": SECONDS,
}

# A request rate setting (requests/s) is kept as written, as text (R11: "2.0" stays "2.0"): a decimal
# number > 0 (vLLM and GuideLLM divide by it) and at most one request per nanosecond, the resolution of
# every time the ledger keeps (a faster rate cannot be told from "all at once"); or "inf": every request
# at once, vLLM's and SGLang's default (vLLM writes the text "inf", SGLang's json writes Infinity).
MAX_REQUEST_RATE = 10**9
REQUEST_RATE = (
    f"a request rate in requests/s: a decimal number > 0 and <= {MAX_REQUEST_RATE:,} (one request "
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
    if not _RATE_TEXT.fullmatch(t) or not 0 < Decimal(t) <= MAX_REQUEST_RATE:
        raise ValueError(f"{_shown(text)!r} is not {REQUEST_RATE}")
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
    return ANY_NUMBER


def file_name_text(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by Python as lone surrogates) shown as
    ``\\xNN`` escapes, so a name never stops an import nor differs between the backends."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def name_violation(what: str, name: str) -> str | None:
    """Why a name that the database indexes cannot be stored, or None."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return f"{what} is {size:,} bytes long; at most {MAX_NAME_BYTES:,} bytes (UTF-8) are stored"
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
        shown = "" if "input" not in err or isinstance(err["input"], (dict, list)) else f", got {_shown(err['input'])}"
        return ParseError(
            path, where, ".".join(loc) or None, f"{_lowered(err['msg'].removeprefix('Value error, '))}{shown}"
        )
    if isinstance(exc, RecursionError):
        return ParseError(path, None, None, "nested too deeply to read (beyond Python's recursion limit)")
    if isinstance(exc, UnicodeEncodeError):  # pydantic meets a lone surrogate (a JSON "\\udc00") in a key or text
        text = exc.object if isinstance(exc.object, str) else ""
        return ParseError(
            path, None, None, f"a lone surrogate (U+{ord(text[exc.start]):04X}) in {_shown(text)!r}, which is not text"
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


class Record(BaseModel):
    """Shared configuration: strict field names, no silent extras."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=False)


# the column types below, one per REQUEST_DOMAINS entry
_IDX = REQUEST_DOMAINS["idx"].pydantic()
_LINE = REQUEST_DOMAINS["line"].pydantic()
_RETRIES = REQUEST_DOMAINS["retries"].pydantic()
_INPUT_TOKENS = REQUEST_DOMAINS["input_tokens"].pydantic()
_OUTPUT_TOKENS = REQUEST_DOMAINS["output_tokens"].pydantic()
_SEND_NS = REQUEST_DOMAINS["send_ns"].pydantic()
_FIRST_TOKEN_NS = REQUEST_DOMAINS["first_token_ns"].pydantic()
_END_NS = REQUEST_DOMAINS["end_ns"].pydantic()
_TTFT_S = REQUEST_DOMAINS["ttft_s"].pydantic()
_LATENCY_S = REQUEST_DOMAINS["latency_s"].pydantic()
_QUEUE_S = REQUEST_DOMAINS["queue_s"].pydantic()
_ITL_MEAN_S = REQUEST_DOMAINS["itl_mean_s"].pydantic()
_CACHED_TOKENS = REQUEST_DOMAINS["cached_tokens"].pydantic()
_CHUNK_GAPS_S = REQUEST_DOMAINS["chunk_gaps_s"].pydantic()


class RequestColumns(Record):
    """Per-request records of one run, one list per field, all of equal length.

    Times are integer nanoseconds on ``clock``; durations are seconds as the tool wrote them.
    ``None`` means "this record has no value" (e.g. a failed request without TTFT); a field the
    artefact never carried is simply not in the capture's ``fields`` (and its column is all None).
    """

    idx: list[_IDX] = Field(description="0-based index of the record in its artefact")  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    line: list[_LINE | None] = Field(description="1-based physical line, where the format has lines")  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    status: list[RequestStatus]
    error: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None]
    retries: list[_RETRIES | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    input_tokens: list[_INPUT_TOKENS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    output_tokens: list[_OUTPUT_TOKENS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    send_ns: list[_SEND_NS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    first_token_ns: list[_FIRST_TOKEN_NS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    end_ns: list[_END_NS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    ttft_s: list[_TTFT_S | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    latency_s: list[_LATENCY_S | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    queue_s: list[_QUEUE_S | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    itl_mean_s: list[_ITL_MEAN_S | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    cached_tokens: list[_CACHED_TOKENS | None]  # type: ignore[valid-type]  # a domain's Annotated type, built at import
    chunk_gaps_s: list[list[_CHUNK_GAPS_S] | None] = Field(  # type: ignore[valid-type]  # a domain's Annotated type, built at import
        description="gaps between streamed chunks (one chunk may carry several tokens), seconds"
    )

    @model_validator(mode="after")
    def _equal_lengths(self) -> RequestColumns:
        n = len(self.idx)
        for name in type(self).model_fields:
            if len(getattr(self, name)) != n:
                raise ValueError(f"column {name!r} has {len(getattr(self, name))} rows, idx has {n}")
        return self

    def __len__(self) -> int:
        return len(self.idx)

    @classmethod
    def empty_columns(cls) -> dict[str, list]:
        """A dict of empty lists, one per column, for importers that build rows one by one."""
        return {name: [] for name in cls.model_fields}


class Capture(Record):
    """What one artefact really contained for one run (R9) and how its values were decided."""

    fields: list[str] = Field(description="request fields present in the file (REQUEST_FIELDS)")
    record_count: int = Field(description="request records present in the file for this run")
    sampled: bool = Field(False, description="the file keeps only a sample of its records")
    sample_note: str | None = None
    clock: Clock | None = Field(None, description="clock of send/first-token/end times")
    token_source: TokenSource = "unknown"
    success_rule: str = Field(description="how ok / failed / unknown was decided, in words")

    @model_validator(mode="after")
    def _known_fields(self) -> Capture:
        unknown = sorted(set(self.fields) - set(REQUEST_FIELDS))
        if unknown:
            raise ValueError(f"unknown request fields {unknown}")
        self.fields = sorted(set(self.fields))
        return self


class Published(Record):
    """A number as printed by a tool summary or a report: exact text, exact decimal, flag."""

    key: str
    text: str = Field(description="the value exactly as printed")
    value: Decimal | None = Field(None, description="exact decimal of the printed text")
    unit: str | None = None
    quantity_kind: str | None = None
    precision: int | None = Field(None, description="printed decimal places (negative: tens...)")
    flag: Provenance = "reported"
    na_reason: str | None = None
    note: str | None = None
    locator: str | None = Field(None, description="JSON path or line of the value in its artefact")

    @model_validator(mode="after")
    def _in_domain(self) -> Published:
        where = f"{_safe(self.locator or self.key)}: "
        for what, text in (("key", self.key), ("text", self.text), ("note", self.note), ("unit", self.unit)):
            if text is not None and (why := text_violation(what, text)):
                raise ValueError(where + why)
        if self.flag != "n/a" and self.quantity_kind not in (None, "other") and self.value is None:
            raise ValueError(
                f"{where}{_safe(self.key)!r} is a {self.quantity_kind} but its value {_shown(self.text)!r} "
                "is not a number"
            )
        if why := kind_domain(self.quantity_kind).violation(self.value):
            raise ValueError(f"{where}{_safe(self.key)!r}: {why}")
        return self


class Stated(Record):
    """A factor of the system under test as a file states it (``RunInfo.factors``): its value as written
    and where: a JSON path or line in the file (``$.model_id``, ``line 12``), or, weakest, the file's
    name or folder (``folder 'tp4_dp2_c64'``), for outputs organised by configuration."""

    value: str
    at: str

    @model_validator(mode="after")
    def _in_domain(self) -> Stated:
        for what, text in (("a factor's value", self.value), ("where a factor is stated", self.at)):
            if why := text_violation(what, text):
                raise ValueError(why)
        if not self.value.strip():
            raise ValueError("a stated factor is empty")
        return self


class Pairing(Record):
    """How the files a tool writes separately for one run find each other (``ledger.pairing``).

    ``key`` is what the tool's files of one run share, e.g. llmperf's file prefix
    (``<prefix>_summary.json`` and ``<prefix>_individual_responses.json``); ``requests`` is how many
    requests this file says the run had (a summary's count, a records file's length), which the
    other file must match.

    A file may instead name the other file of its run: ``names`` is that file's name as this file
    prints it (vLLM's console ``Namespace(... result_filename='x.json')``), ``file`` this file's own
    name (the result JSON). They pair when the file's name is the named one or ends with it after a
    separator (a copy renamed ``benchmaq_x.json``). ``facts`` are further contents the two files both
    state (completed requests, the model) and must agree on wherever both state them."""

    key: str | None = None
    requests: int | None = None
    file: str | None = None
    names: str | None = None
    facts: dict[str, str] = Field(default_factory=dict)
    # the key is the tool's own name for the files one invocation writes of one run, side by side
    # (inference-perf's report prefix and stage): it pairs in its folder without a count or fact both
    # state (files that both state a count must still agree)
    named_by_tool: bool = False

    @model_validator(mode="after")
    def _in_domain(self) -> Pairing:
        if self.key is None and self.file is None and self.names is None:
            raise ValueError("a pairing needs a key, the file's own name or the name of the file it names")
        for what, text in (
            ("the pairing key", self.key),
            ("the pairing file name", self.file),
            ("the named file", self.names),
        ):
            if text is not None and (why := name_violation(what, text)):
                raise ValueError(why)
        for k, v in self.facts.items():
            if why := text_violation(f"pairing fact {_safe(k[:40])!r}", v):
                raise ValueError(why)
        return self


class RunInfo(Record):
    """One load point, as far as the artefact describes it."""

    label: str
    tool: str
    tool_version: str | None = None
    input_target_tokens: int | None = None
    output_cap_tokens: int | None = None
    concurrency: int | None = None
    request_count: int | None = None
    request_rate: str | None = Field(None, description="as written: a number or 'inf'")
    seed: int | None = None
    dataset: str | None = None
    started_at: datetime | None = Field(None, description="wall-clock start, where the file says")
    ended_at: datetime | None = None
    duration_s: float | None = Field(None, description="the tool's own run duration")
    locator: str | None = Field(None, description="where the run's header sits in the artefact")
    metadata: dict[str, str] = Field(default_factory=dict, description="free labels from the file")
    pairing: Pairing | None = Field(None, description="what pairs this run with the tool's other files of it")
    factors: dict[RunFactor, Stated] = Field(
        default_factory=dict, description="what the file states of the system under test (ledger.factors)"
    )

    @model_validator(mode="after")
    def _in_domain(self) -> RunInfo:
        if why := name_violation("the run label", self.label):
            raise ValueError(why)
        if len(self.metadata) > MAX_KEYS_PER_RUN:
            raise ValueError(
                f"the run has {len(self.metadata):,} metadata entries; at most {MAX_KEYS_PER_RUN:,} are kept"
            )
        texts = [
            ("tool", self.tool),
            ("tool_version", self.tool_version),
            ("request_rate", self.request_rate),
            ("dataset", self.dataset),
            ("locator", self.locator),
        ]
        texts += [(f"metadata key {_safe(k[:40])!r}", k) for k in self.metadata]
        texts += [(f"metadata {_safe(k[:40])!r}", v) for k, v in self.metadata.items()]
        for what, text in texts:
            if text is not None and (why := text_violation(what, text)):
                raise ValueError(why)
        for name in RUN_DOMAINS:
            if why := RUN_DOMAINS[name].violation(getattr(self, name)):
                raise FieldError(self.locator, name, why)
        if self.request_rate is not None:
            try:
                self.request_rate = request_rate_text(self.request_rate)
            except ValueError as exc:
                raise FieldError(self.locator, "request_rate", str(exc)) from None
        return self


@dataclass
class ArrowRequests:
    """Per-request rows of one run as Arrow tables: a faster alternative to :class:`RequestColumns`
    for importers that parse at C speed (the vLLM importer's DuckDB-parsed path).

    ``table`` holds the columns of :class:`RequestColumns` with the same meaning, except that
    ``chunk_gaps_s`` is replaced by ``chunk_count`` (int32: number of gaps + 1, null where the file
    had no gaps array) and the gaps themselves are in ``gaps``: ``request_idx`` (int32, the ``idx`` of
    their request) and ``gaps`` (list of float64 in stream order; null or empty where the request has
    none, which stores nothing: ``ledger.gaps.arrays``), or None when there are none.
    Columns: ``idx``, ``line``, ``retries``, ``input_tokens``, ``output_tokens``, ``chunk_count``,
    ``cached_tokens`` (int32); ``status``, ``error`` (string); ``send_ns``, ``first_token_ns``,
    ``end_ns`` (int64 ns on the capture's clock); ``ttft_s``, ``latency_s``, ``queue_s``,
    ``itl_mean_s`` (float64). ``idx`` is already numbered across the runs of the artefact.
    """

    table: Any  # pyarrow.Table (kept untyped: this module does not import pyarrow)
    gaps: Any | None = None

    def __len__(self) -> int:
        return self.table.num_rows


class RequestValues(Record):
    """One per-request value the tool wrote that has no request column (``request_value``), one
    entry per request of the run in the order of ``RequestColumns.idx``; None: that record has none."""

    flag: RequestValueFlag = Field(description="measured by the tool, or computed by it per request (reported)")
    values: list[float | None]


class ParsedRun(Record):
    """A run with its capture, its requests (if the file had them) and its tool aggregates."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    info: RunInfo
    capture: Capture
    requests: RequestColumns | ArrowRequests | None = None
    published: list[Published] = Field(default_factory=list, max_length=MAX_KEYS_PER_RUN)
    # per-request values without a request column, by the tool's key (llmperf's per-request throughput...)
    request_values: dict[str, RequestValues] = Field(default_factory=dict, max_length=MAX_KEYS_PER_RUN)

    @model_validator(mode="after")
    def _values_per_request(self) -> ParsedRun:
        if not self.request_values:
            return self
        if not isinstance(self.requests, RequestColumns):
            raise ValueError("per-request values need the run's request columns")
        n = len(self.requests)
        for key, rv in self.request_values.items():
            if why := text_violation("a per-request value's key", key):
                raise ValueError(why)
            if len(rv.values) != n:
                raise ValueError(f"per-request value {_safe(key)!r} has {len(rv.values)} entries, the run {n} requests")
            for i, v in zip(self.requests.idx, rv.values, strict=True):
                if v is not None and not math.isfinite(v):
                    raise ValueError(f"record {i}: field {_safe(key)!r}: {v!r} is not a finite number")
        return self


class SampleColumns(Record):
    """Hardware samples in long form: one row per GPU, tick and counter."""

    line: list[int]
    node: list[str | None]
    gpu: list[int]
    tick: list[int] = Field(description="0-based sample tick within the artefact")
    ts: list[datetime | None] = Field(description="time printed by the tool (-o DT), else None")
    counter: list[str] = Field(description="column name as printed")
    value: list[float | None] = Field(description="None where the tool printed '-'")
    unit: list[str] = Field(description="unit as printed, or 'unconfirmed' (R12)")

    def __len__(self) -> int:
        return len(self.line)


class LogFact(Record):
    """One fact read from a server log line."""

    line: int
    process: str | None = Field(None, description="process or rank prefix, e.g. 'EngineCore_0 pid=2881'")
    kind: str
    value: Decimal | None = None
    text: str = Field(description="the value as printed, e.g. '464,848'")
    unit: str | None = None
    logged_at: str | None = Field(None, description="timestamp as printed (vLLM prints no year)")
    quantity_kind: str | None = Field(None, description="kind of the value (ledger.kinds), for its domain")

    @model_validator(mode="after")
    def _in_domain(self) -> LogFact:
        for what, text in (("text", self.text), ("process", self.process), ("kind", self.kind)):
            if text is not None and (why := text_violation(what, text)):
                raise ValueError(f"line {self.line}: {why}")
        if why := kind_domain(self.quantity_kind).violation(self.value):
            raise ValueError(f"line {self.line}: {self.kind}: {why}")
        return self


@dataclass
class ParsedArtefact:
    """Everything read from one file. ``runs`` and ``samples`` may be generators (streamed)."""

    format: str
    format_version: str | None
    runs: Iterable[ParsedRun] = field(default_factory=list)
    # hardware samples, long (SampleColumns) or wide (WideSamples: the store unpivots them)
    samples: Iterable[SampleColumns | WideSamples] = field(default_factory=list)
    log_facts: list[LogFact] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    note: str | None = None
    notice: str | None = (
        None  # what the import tells the user about the file (a `note:` line), e.g. columns kept unread
    )

    def iter_runs(self) -> Iterator[ParsedRun]:
        """The runs, with ``idx`` made the record's position in the *artefact*.

        Request rows are keyed by (artefact, idx), and the database does not enforce that key
        (migration 0008): a file of several runs (vLLM or SGLang JSON Lines, GenAI-Perf experiments,
        guidellm benchmarks) whose importer numbered each run from 0 is numbered on here, in file
        order. Runs already numbered past the previous ones are left as they are.
        """
        offset = 0
        for run in self.runs:
            req = run.requests
            if isinstance(req, RequestColumns) and req.idx:
                if req.idx[0] < offset:
                    req.idx = list(range(offset, offset + len(req.idx)))
                offset = max(offset, max(req.idx) + 1)
            elif isinstance(req, ArrowRequests) and len(req):
                first, last = req.table.column("idx")[0].as_py(), req.table.column("idx")[-1].as_py()
                if first < offset:
                    raise ValueError(
                        f"Arrow request rows of run {run.info.label!r} start at idx {first}, "
                        f"below {offset}: they must come numbered across the artefact"
                    )
                offset = max(offset, last + 1)
            yield run


@dataclass
class WideSamples:
    """Hardware samples in *wide* form, one Arrow row per GPU and tick, one float64 column per counter.

    An optional, faster alternative to :class:`SampleColumns` for importers that parse at C speed
    (nvidia-smi dmon): the store unpivots it to the same long ``hardware_sample`` rows. ``table``
    holds ``line`` (int32), ``gpu`` (int32), ``tick`` (int32), ``ts`` (timestamp[us], null without
    -o DT) and one column per name in ``counters`` (null where the tool printed '-'); ``units``
    gives each counter's unit as printed, or 'unconfirmed' (R12).
    """

    table: Any  # pyarrow.Table (kept untyped: this module does not import pyarrow)
    counters: list[str]
    units: list[str]
    node: str | None = None

    def __len__(self) -> int:
        """Long rows this chunk stands for (rows x counters)."""
        return self.table.num_rows * len(self.counters)
