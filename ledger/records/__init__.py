"""What an importer hands to the store: parsed, validated, and not yet written.

Importers (``importers/``) turn a raw file into these pydantic models and never touch the database;
the store (``ledger/store.py``) writes one :class:`ParsedArtefact` in one transaction. Per-request
values and hardware samples travel as *columns* (one list per field, one entry per row) so that a
million records are validated by pydantic's core in a handful of calls and handed to the database
as Arrow batches, not as a million Python objects.

Every row keeps its locator: ``idx`` (0-based position of the record in the artefact: array index
or JSON Lines record number) and ``line`` (1-based physical line, where the format has lines).

Modules: :mod:`~ledger.records.fields` (request fields, parse options), :mod:`~ledger.records.domains`
(what each value may be, how a refused one is reported), :mod:`~ledger.records.parsed` (the records).
"""

from bench_ledger.records.domains import (
    GAP_DOMAINS,
    MAX_KEYS_PER_RUN,
    MAX_TEXT_CHARS,
    NON_NEGATIVE_KINDS,
    REQUEST_DOMAINS,
    RUN_DOMAINS,
    SAMPLE_DOMAINS,
    SAMPLE_INDEX_DOMAINS,
    VALUE_DOMAINS,
    Domain,
    RecordError,
    arrow_violation,
    as_parse_error,
    file_name_text,
    name_violation,
    request_rate_text,
    sample_domain,
    text_violation,
)
from bench_ledger.records.fields import (
    DECLARED_ZONE,
    FIELD_COLUMN,
    REQUEST_FIELDS,
    UNCONFIRMED_ZONE,
    ParseOptions,
    TokenSource,
    require_regular_file,
)
from bench_ledger.records.parsed import (
    ArrowRequests,
    Capture,
    LogFact,
    Pairing,
    ParsedArtefact,
    ParsedRun,
    Published,
    RequestColumns,
    RequestValues,
    RunInfo,
    SampleColumns,
    Stated,
    WideSamples,
)

__all__ = [
    "DECLARED_ZONE",
    "FIELD_COLUMN",
    "GAP_DOMAINS",
    "MAX_KEYS_PER_RUN",
    "MAX_TEXT_CHARS",
    "NON_NEGATIVE_KINDS",
    "REQUEST_DOMAINS",
    "REQUEST_FIELDS",
    "RUN_DOMAINS",
    "SAMPLE_DOMAINS",
    "SAMPLE_INDEX_DOMAINS",
    "UNCONFIRMED_ZONE",
    "VALUE_DOMAINS",
    "ArrowRequests",
    "Capture",
    "Domain",
    "LogFact",
    "Pairing",
    "ParseOptions",
    "ParsedArtefact",
    "ParsedRun",
    "Published",
    "RecordError",
    "RequestColumns",
    "RequestValues",
    "RunInfo",
    "SampleColumns",
    "Stated",
    "TokenSource",
    "WideSamples",
    "arrow_violation",
    "as_parse_error",
    "file_name_text",
    "name_violation",
    "request_rate_text",
    "require_regular_file",
    "sample_domain",
    "text_violation",
]
