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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Provenance = Literal["measured", "derived", "estimated", "reported", "n/a"]
WarmState = Literal["cold", "warm", "unknown"]
RequestStatus = Literal["ok", "failed", "unknown"]
# The clock that request times are on. Monotonic seconds are never shown as wall-clock times.
Clock = Literal["monotonic_s", "epoch_s", "epoch_ns"]
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


@dataclass(frozen=True)
class ParseOptions:
    """Options the command line passes through to parsers."""

    node: str | None = None  # dmon: the node the samples came from
    time_zone: str | None = None  # nvidia-smi CSV: the zone of the host's local timestamps, as declared
    start: datetime | None = None  # dcgmi dmon: when sample 0 was taken, as declared
    interval_s: float | None = None  # dcgmi dmon: seconds between samples (-d), as declared


class Record(BaseModel):
    """Shared configuration: strict field names, no silent extras."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=False)


class RequestColumns(Record):
    """Per-request records of one run, one list per field, all of equal length.

    Times are integer nanoseconds on ``clock``; durations are seconds as the tool wrote them.
    ``None`` means "this record has no value" (e.g. a failed request without TTFT); a field the
    artefact never carried is simply not in the capture's ``fields`` (and its column is all None).
    """

    idx: list[int] = Field(description="0-based index of the record in its artefact")
    line: list[int | None] = Field(description="1-based physical line, where the format has lines")
    status: list[RequestStatus]
    error: list[str | None]
    retries: list[int | None]
    input_tokens: list[int | None]
    output_tokens: list[int | None]
    send_ns: list[int | None]
    first_token_ns: list[int | None]
    end_ns: list[int | None]
    ttft_s: list[float | None]
    latency_s: list[float | None]
    queue_s: list[float | None]
    itl_mean_s: list[float | None]
    cached_tokens: list[int | None]
    chunk_gaps_s: list[list[float] | None] = Field(
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


@dataclass
class ArrowRequests:
    """Per-request rows of one run as Arrow tables: a faster alternative to :class:`RequestColumns`
    for importers that parse at C speed (the vLLM importer's DuckDB-parsed path).

    ``table`` holds the columns of :class:`RequestColumns` with the same meaning, except that
    ``chunk_gaps_s`` is replaced by ``chunk_count`` (int32: number of gaps + 1, null where the file
    had no gaps array) and the gaps themselves are in ``gaps``: ``request_idx`` (int32, the ``idx`` of
    their request), ``seq`` (int32, 0-based) and ``gap_s`` (float64), or None when there are none.
    Columns: ``idx``, ``line``, ``retries``, ``input_tokens``, ``output_tokens``, ``chunk_count``,
    ``cached_tokens`` (int32); ``status``, ``error`` (string); ``send_ns``, ``first_token_ns``,
    ``end_ns`` (int64 ns on the capture's clock); ``ttft_s``, ``latency_s``, ``queue_s``,
    ``itl_mean_s`` (float64). ``idx`` is already numbered across the runs of the artefact.
    """

    table: Any  # pyarrow.Table (kept untyped: this module does not import pyarrow)
    gaps: Any | None = None

    def __len__(self) -> int:
        return self.table.num_rows


class ParsedRun(Record):
    """A run with its capture, its requests (if the file had them) and its tool aggregates."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    info: RunInfo
    capture: Capture
    requests: RequestColumns | ArrowRequests | None = None
    published: list[Published] = Field(default_factory=list)


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


@dataclass
class ParsedArtefact:
    """Everything read from one file. ``runs`` and ``samples`` may be generators (streamed)."""

    format: str
    format_version: str | None
    runs: Iterable[ParsedRun] = field(default_factory=list)
    samples: Iterable[SampleColumns] = field(default_factory=list)
    log_facts: list[LogFact] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    note: str | None = None
    # The same rows as ``samples`` in faster chunks (WideSamples, or SampleColumns where the importer
    # fell back); when set, the store writes these instead of ``samples``.
    wide_samples: Iterable[Any] | None = None

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
                    raise ValueError(f"Arrow request rows of run {run.info.label!r} start at idx {first}, "
                                     f"below {offset}: they must come numbered across the artefact")
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
