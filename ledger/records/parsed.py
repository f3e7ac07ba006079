"""The records an importer hands to the store: pydantic models of runs, captures, published values and
samples, per-request values as columns (see :mod:`ledger.records`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from bench_ledger.records.domains import (
    MAX_KEYS_PER_RUN,
    MAX_TEXT_CHARS,
    REQUEST_DOMAINS,
    RUN_DOMAINS,
    FieldError,
    kind_domain,
    message_text,
    name_violation,
    request_rate_text,
    shown_value,
    text_violation,
)
from bench_ledger.records.fields import REQUEST_FIELDS, TokenSource
from bench_ledger.vocab import Clock, Provenance, RequestStatus, RequestValueFlag, RunFactor
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ArrowRequests",
    "Capture",
    "LogFact",
    "Pairing",
    "ParsedArtefact",
    "ParsedRun",
    "Published",
    "RequestColumns",
    "RequestValues",
    "RunInfo",
    "SampleColumns",
    "Stated",
    "WideSamples",
]


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
        where = f"{message_text(self.locator or self.key)}: "
        for what, text in (("key", self.key), ("text", self.text), ("note", self.note), ("unit", self.unit)):
            if text is not None and (why := text_violation(what, text)):
                raise ValueError(where + why)
        if self.flag != "n/a" and self.quantity_kind not in (None, "other") and self.value is None:
            raise ValueError(
                f"{where}{message_text(self.key)!r} is a {self.quantity_kind} but its value {shown_value(self.text)!r} "
                "is not a number"
            )
        if why := kind_domain(self.quantity_kind).violation(self.value):
            raise ValueError(f"{where}{message_text(self.key)!r}: {why}")
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
            if why := text_violation(f"pairing fact {message_text(k[:40])!r}", v):
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
        texts += [(f"metadata key {message_text(k[:40])!r}", k) for k in self.metadata]
        texts += [(f"metadata {message_text(k[:40])!r}", v) for k, v in self.metadata.items()]
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
                raise ValueError(
                    f"per-request value {message_text(key)!r} has {len(rv.values)} entries, the run {n} requests"
                )
            for i, v in zip(self.requests.idx, rv.values, strict=True):
                if v is not None and not math.isfinite(v):
                    raise ValueError(f"record {i}: field {message_text(key)!r}: {v!r} is not a finite number")
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
