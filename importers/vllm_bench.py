"""vLLM ``vllm bench serve`` / legacy ``benchmark_serving.py`` result files (formats.md section 1).

Decisions, and why:

* **Layout.** One JSON object per file, or with ``--append-result`` one object per line (JSON
  Lines). Every object is its own run. A file holding one object is addressed ``$.key``; a file of
  several lines ``line N $.key`` (line numbers are physical, 1-based).
* **Success.** The file has no success flag. A request is ``ok`` when ``errors[i] == ""`` and
  ``failed`` otherwise; that is unreliable (a non-200 reply with an empty reason also gives ``""``)
  and :attr:`Capture.success_rule` says so. Without an ``errors`` array every status is
  ``unknown``.
* **Placeholders are not measurements.** vLLM writes ``ttft 0.0`` and ``latency 0.0`` for a request
  that failed (the defaults of its request record), so those become None. ``output_lens`` is kept as
  written (0 is what the tool counted). For status ``unknown`` an exact 0.0 TTFT/latency is also
  treated as the placeholder: no real request has a zero TTFT.
* **Token source: "unknown".** ``input_lens`` are prompt lengths counted by the *client* tokenizer
  when the dataset was sampled; ``output_lens`` are the server's ``usage.completion_tokens`` when
  the stream carried usage, else a client re-count of the generated text; the file does not say
  which, per request or per run. A capture has one source, so claiming either would overstate it.
* **Clock.** ``start_times`` are ``time.perf_counter()`` seconds on an arbitrary monotonic clock:
  ``clock="monotonic_s"``, never wall time. Nanoseconds are computed exactly from the printed
  token: ``int(Decimal(repr(x)) * 10**9)`` (truncated toward zero), and
  ``first_token = start + ttft``, ``end = start + latency`` are summed as decimals before that.
  The ``date`` header (local time, no zone, written when the result was saved) is kept in
  ``metadata['date']`` and never used as ``RunInfo.started_at``.
* **Aggregates** the tool printed become ``Published(flag="reported")`` with the key as written
  (including the legacy ``"request_goodput:"``), the token as printed (``repr(float)`` and
  ``str(int)`` reproduce what Python's ``json`` wrote) and its exact decimal; ``null`` becomes
  ``flag="n/a"``. Nothing is recomputed here (R15 belongs to the ledger, not to parsing).

Columns are built with comprehensions over the arrays and validated by pydantic's core in one
strict ``model_validate`` per run (a million records in about a second); a type error is
translated back to the JSON path it came from.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from importers.base import (
    ParseOptions,
    first_json_value,
    iter_json_lines,
    load_json,
    numbered_across_runs,
    prefetched,
)
from ledger.errors import ParseError
from ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RequestColumns, RunInfo

E9 = Decimal(10**9)
NUMBER = (int, float)

# Aggregates vLLM writes: key as written -> (unit, quantity kind of ledger/kinds.py).
AGGREGATES: dict[str, tuple[str | None, str]] = {
    "duration": ("s", "duration"),
    "completed": ("requests", "request_count"),
    "failed": ("requests", "request_count"),
    "total_input_tokens": ("tokens", "token_count"),
    "total_output_tokens": ("tokens", "token_count"),
    "request_throughput": ("requests/s", "request_rate"),
    "request_goodput": ("requests/s", "request_rate"),
    "request_goodput:": ("requests/s", "request_rate"),
    "output_throughput": ("tokens/s", "aggregate_token_rate"),
    "total_token_throughput": ("tokens/s", "aggregate_token_rate"),
    "max_output_tokens_per_s": ("tokens/s", "aggregate_token_rate"),
    "max_concurrent_requests": ("requests", "concurrency"),
    "rtfx": (None, "ratio"),
}
LATENCY_STAT = re.compile(r"(?:mean|median|std|p\d+(?:\.\d+)?)_(?:ttft|tpot|itl|e2el)_ms")
NOTES = {"request_goodput:": "legacy benchmark_serving.py spelling of request_goodput (with colon)"}

# Header keys that describe the run rather than measure it; settings kept as metadata text.
HEADER = {"label", "request_rate", "max_concurrency", "num_prompts"}
SETTINGS_AS_TEXT = {"burstiness", "ramp_up_start_rps", "ramp_up_end_rps", "seed", "best_of", "use_beam_search"}
ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "queue_times",
          "generated_texts", "errors", "start_times")
# RequestColumns column -> the array it came from (to name the JSON path of a type error).
SOURCE_OF = {"input_tokens": "input_lens", "output_tokens": "output_lens", "ttft_s": "ttfts",
             "chunk_gaps_s": "itls", "latency_s": "latencies", "queue_s": "queue_times",
             "error": "errors", "status": "errors", "send_ns": "start_times",
             "first_token_ns": "ttfts", "end_ns": "latencies"}
SGLANG_MARKERS = {"dataset_name", "random_input_len", "total_output_tokens_retokenized"}
_KEY = re.compile(r'"([^"\\]{1,80})"\s*:')

SUCCESS_RULE = (
    "ok when errors[i] == '' else failed (vLLM writes no success flag). Unreliable: a non-200 "
    "reply with an empty reason also gives ''. TTFT and latency of failed requests are the tool's "
    "0.0 placeholders and are stored as None; output_lens are kept as written (0 for failures)."
)
NO_ERRORS_RULE = "no errors array in the file: every status is unknown (vLLM writes no success flag)"


# ---------------------------------------------------------------- helpers shared with sglang_bench


def where(prefix: str, jpath: str = "") -> str:
    """A locator: ``$.key`` for a single-object file, ``line N $.key`` for JSON Lines."""
    path = "$" + jpath
    return f"{prefix} {path}" if prefix else path


def type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def published(key: str, value: object, prefix: str, path: Path, unit: str | None, kind: str,
              note: str | None = None) -> Published:
    """One printed aggregate: the token as Python's json wrote it, its exact decimal, reported."""
    loc = where(prefix, f".{key}")
    if value is None:
        return Published(key=key, text="null", unit=unit, quantity_kind=kind, flag="n/a",
                         na_reason="null in file", note=note, locator=loc)
    if type(value) is int:
        text = str(value)
    elif type(value) is float:
        if not math.isfinite(value):
            text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return Published(key=key, text=text, unit=unit, quantity_kind=kind, flag="n/a",
                             na_reason="not a finite number in file", note=note, locator=loc)
        text = repr(value)
    else:
        raise ParseError(path, loc, key, f"expected a number, got {type_name(value)} {value!r:.40}")
    exact = Decimal(text)
    return Published(key=key, text=text, value=exact, unit=unit, quantity_kind=kind,
                     precision=-int(exact.as_tuple().exponent), note=note, locator=loc)


def read_arrays(obj: dict[str, Any], names: Iterable[str], path: Path, prefix: str) -> tuple[dict[str, list], int]:
    """The per-request arrays present (null counts as absent), checked to be lists of one length."""
    present: dict[str, list] = {}
    for name in names:
        value = obj.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            raise ParseError(path, where(prefix, f".{name}"), name, f"expected a list, got {type_name(value)}")
        present[name] = value
    if not present:
        return present, 0
    ref, n = next(iter(present)), len(next(iter(present.values())))
    for name, value in present.items():
        if len(value) != n:
            raise ParseError(path, where(prefix, f".{name}"), name,
                             f"$.{name} has {len(value)} entries, $.{ref} has {n}")
    return present, n


def check_numbers(arrays: dict[str, list], names: Iterable[str], path: Path, prefix: str) -> None:
    """Arrays used in decimal arithmetic must hold finite numbers (pydantic checks the rest)."""
    for name in names:
        for i, v in enumerate(arrays.get(name, ())):
            if type(v) not in NUMBER or not math.isfinite(v):
                raise ParseError(path, where(prefix, f".{name}[{i}]"), name,
                                 f"expected a number, got {type_name(v)} {v!r:.40}")


def status_of(errors: list | None, n: int) -> list[str]:
    if errors is None:
        return ["unknown"] * n
    return ["ok" if e == "" else "unknown" if e is None else "failed" for e in errors]


def unless_placeholder(values: list | None, status: list[str], n: int) -> list:
    """Drop 0.0 placeholders: None for failed requests, and an exact 0 where status is unknown."""
    if values is None:
        return [None] * n
    return [v if s == "ok" or (s == "unknown" and v != 0) else None for v, s in zip(values, status)]


def validate_columns(cols: dict[str, list], path: Path, prefix: str) -> RequestColumns:
    """Strict pydantic validation of all columns at once; an error names the source array entry."""
    try:
        return RequestColumns.model_validate(cols, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        column, *rest = err["loc"]
        source = SOURCE_OF.get(str(column), str(column))
        index = "".join(f"[{i}]" for i in rest)
        value = err.get("input")
        raise ParseError(path, where(prefix, f".{source}{index}"), source,
                         f"{err['msg'].lower()}, got {type_name(value)} {value!r:.40}") from None


def iter_objects(path: Path) -> Iterator[tuple[int | None, str, Any]]:
    """Yield (line, locator prefix, value): one object per file or one per JSON Lines line.

    A file with one object is addressed without a line prefix; a pretty-printed file (first line
    not JSON on its own) is loaded whole. Two lines are read before the first is yielded so the
    addressing is known up front.
    """
    lines = iter_json_lines(path)
    try:
        first = next(lines, None)
    except ParseError:
        yield None, "", load_json(path)  # pretty-printed (or broken: load_json says where)
        return
    if first is None:
        raise ParseError(path, None, None, "empty file")
    second = next(lines, None)
    if second is None:
        yield first[0], "", first[1]
        return
    for lineno, value in (first, second):
        yield lineno, f"line {lineno}", value
    for lineno, value in lines:
        yield lineno, f"line {lineno}", value


def top_keys(head: bytes) -> set[str]:
    """Keys of the first JSON value: exact when its first line parses, else found by pattern."""
    _, first_line = first_json_value(head)
    try:
        value = json.loads(first_line)
        if isinstance(value, dict):
            return set(value)
    except ValueError:
        pass
    text = head.decode("utf-8", errors="replace")
    return set(_KEY.findall(text if first_line.strip() == "{" else first_line))


def rate_text(value: object) -> str | None:
    """request_rate as written: a number, or 'inf' (vLLM writes the string, SGLang Infinity)."""
    if value is None:
        return None
    if type(value) is float and math.isinf(value):
        return "inf"
    return value if isinstance(value, str) else repr(value) if type(value) is float else str(value)


def int_or_none(obj: dict[str, Any], key: str, path: Path, prefix: str) -> int | None:
    value = obj.get(key)
    if value is None or type(value) is int:
        return value
    raise ParseError(path, where(prefix, f".{key}"), key, f"expected an integer, got {type_name(value)} {value!r:.40}")


def float_or_none(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    return float(value) if type(value) in NUMBER and math.isfinite(value) else None


# ---------------------------------------------------------------- vLLM


def _label(obj: dict[str, Any]) -> str:
    if isinstance(obj.get("label"), str) and obj["label"]:
        return obj["label"]
    model = str(obj.get("model_id") or obj.get("backend") or "vllm").rstrip("/").rsplit("/", 1)[-1]
    conc = obj.get("max_concurrency")
    parts = [model, f"rate={rate_text(obj.get('request_rate'))}", f"c={'inf' if conc is None else conc}"]
    if obj.get("date"):
        parts.append(str(obj["date"]))
    return " ".join(parts)


def _times_ns(arrays: dict[str, list], ttft: list, latency: list, n: int) -> tuple[list, list, list]:
    """send / first-token / end ns from perf_counter seconds, summed exactly as decimals."""
    none = [None] * n
    starts = [Decimal(repr(x)) for x in arrays["start_times"]]
    send = [int(s * E9) for s in starts]
    first = end = none
    if "ttfts" in arrays:
        first = [None if t is None else int((s + Decimal(repr(t))) * E9) for s, t in zip(starts, ttft)]
    if "latencies" in arrays:
        end = [None if t is None else int((s + Decimal(repr(t))) * E9) for s, t in zip(starts, latency)]
    return send, first, end


def _requests(arrays: dict[str, list], n: int, line: int | None, path: Path, prefix: str) -> RequestColumns:
    status = status_of(arrays.get("errors"), n)
    ttft = unless_placeholder(arrays.get("ttfts"), status, n)
    latency = unless_placeholder(arrays.get("latencies"), status, n)
    none = [None] * n
    send = first = end = none
    if "start_times" in arrays:
        try:  # fast path; a non-number raises in Decimal() or int(), then find it for the message
            send, first, end = _times_ns(arrays, ttft, latency, n)
        except (ArithmeticError, ValueError, TypeError):
            check_numbers(arrays, ("start_times", "ttfts", "latencies"), path, prefix)
            raise
    errors = arrays.get("errors")
    cols = {
        "idx": list(range(n)), "line": [line] * n, "status": status,
        "error": none if errors is None else [e or None for e in errors],
        "retries": none, "input_tokens": arrays.get("input_lens", none),
        "output_tokens": arrays.get("output_lens", none),
        "send_ns": send, "first_token_ns": first, "end_ns": end,
        "ttft_s": ttft, "latency_s": latency, "queue_s": arrays.get("queue_times", none),
        "itl_mean_s": none, "cached_tokens": none, "chunk_gaps_s": arrays.get("itls", none),
    }
    return validate_columns(cols, path, prefix)


def _fields(arrays: dict[str, list]) -> list[str]:
    fields = [f for a, f in (("input_lens", "input_tokens"), ("output_lens", "output_tokens"),
                             ("ttfts", "ttft_s"), ("itls", "chunk_gaps"), ("latencies", "latency_s"),
                             ("queue_times", "queue_s")) if a in arrays]
    if "errors" in arrays:
        fields += ["status", "error"]
    if "start_times" in arrays:
        fields.append("send_time")
        fields += ["first_token_time"] if "ttfts" in arrays else []
        fields += ["end_time"] if "latencies" in arrays else []
    return fields


def parse_run(obj: object, line: int | None, prefix: str, path: Path) -> ParsedRun:
    """One result object -> one run."""
    if not isinstance(obj, dict):
        raise ParseError(path, where(prefix), None, f"expected a JSON object, got {type_name(obj)}")
    arrays, n = read_arrays(obj, ARRAYS, path, prefix)
    pubs: list[Published] = []
    metadata: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in obj.items():
        if key in HEADER or key in ARRAYS:
            continue
        if key in AGGREGATES:
            pubs.append(published(key, value, prefix, path, *AGGREGATES[key], NOTES.get(key)))
        elif LATENCY_STAT.fullmatch(key):
            pubs.append(published(key, value, prefix, path, "ms", "latency"))
        elif isinstance(value, str):
            metadata[key] = value
        elif key in SETTINGS_AS_TEXT and value is not None:
            metadata[key] = rate_text(value) or ""
        elif type(value) in NUMBER:
            pubs.append(published(key, value, prefix, path, None, "other", "key not known to the importer"))
        elif value is not None:
            ignored.append(key)
    if ignored:
        metadata["ignored_keys"] = ",".join(ignored)
    info = RunInfo(
        label=_label(obj), tool="vllm-bench", concurrency=int_or_none(obj, "max_concurrency", path, prefix),
        request_count=int_or_none(obj, "num_prompts", path, prefix), request_rate=rate_text(obj.get("request_rate")),
        duration_s=float_or_none(obj, "duration"), locator=where(prefix), metadata=metadata,
    )
    capture = Capture(
        fields=_fields(arrays), record_count=n, clock="monotonic_s" if "start_times" in arrays else None,
        token_source="unknown", success_rule=SUCCESS_RULE if "errors" in arrays else NO_ERRORS_RULE,
    )
    requests = _requests(arrays, n, line, path, prefix) if n else None
    return ParsedRun(info=info, capture=capture, requests=requests, published=pubs)


class VllmBenchImporter:
    name = "vllm-bench"
    description = "vLLM `vllm bench serve` / benchmark_serving.py --save-result JSON or JSON Lines"

    def sniff(self, head: bytes) -> str | None:
        kind, _ = first_json_value(head)
        if kind != "object":
            return "not a JSON object"
        keys = top_keys(head)
        if keys & SGLANG_MARKERS:
            return "has SGLang keys (dataset_name / random_input_len / total_output_tokens_retokenized)"
        if not {"duration", "completed"} <= keys:
            return "no 'duration' and 'completed' keys"
        if "endpoint_type" not in keys and not ("backend" in keys and keys & {"num_prompts", "request_rate"}):
            return "no 'endpoint_type', nor 'backend' with 'num_prompts'/'request_rate'"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        """Runs are streamed one JSON Lines line at a time; errors in later lines raise while iterating."""
        path = Path(path)
        return ParsedArtefact(format=self.name, format_version=None, runs=prefetched(numbered_across_runs(_runs(path))))


def _runs(path: Path) -> Iterator[ParsedRun]:
    for line, prefix, obj in iter_objects(path):
        yield parse_run(obj, line, prefix, path)


IMPORTER = VllmBenchImporter()
