"""The fields a parsed record may carry and the options parsers take: request fields and their
columns, where token counts came from, the words of an unconfirmed or declared time zone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "DECLARED_ZONE",
    "FIELD_COLUMN",
    "REQUEST_FIELDS",
    "UNCONFIRMED_ZONE",
    "ParseOptions",
    "TokenSource",
    "require_regular_file",
]

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
