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
  token: ``Decimal(repr(x))`` seconds x 10**9, truncated toward zero, and ``first_token = start +
  ttft``, ``end = start + latency`` summed as decimals before that, all exactly
  (``importers.base.seconds_ns``; Decimal's default 28-digit context would round).
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

import bisect
import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.factors import model_name
from bench_ledger.importers._toolfiles import ENGINE_BACKENDS, placeholder, stated
from bench_ledger.importers._toolfiles import published as tool_published
from bench_ledger.importers.base import (
    EXACT_MIN,
    ParseOptions,
    exact_ns_of,
    file_size,
    first_json_value,
    iter_json_lines,
    literal_paths,
    load_json,
    prefetched,
    seconds_ns,
    setting_text,
    sql_text,
)
from bench_ledger.records import (
    MAX_KEYS_PER_RUN,
    ArrowRequests,
    Capture,
    Pairing,
    ParsedArtefact,
    ParsedRun,
    Published,
    RequestColumns,
    RunInfo,
    file_name_text,
)
from bench_ledger.tools import SERVING_LATENCY_STAT, Tool
from pydantic import ValidationError

# The DuckDB-parsed path for regular JSON Lines files (_fast_runs below; issue 7). Anything it
# does not recognise as regular falls back to the Python path below, which owns every error message.
FAST_PATH = True
FAST_MIN_BYTES = 1 << 20  # smaller files: the Python path (DuckDB's start-up would cost more than it saves)
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
NOTES = {"request_goodput:": "legacy benchmark_serving.py spelling of request_goodput (with colon)"}

# Header keys that describe the run rather than measure it; settings kept as metadata text.
HEADER = {"label", "request_rate", "max_concurrency", "num_prompts"}
SETTINGS_AS_TEXT = {"burstiness", "ramp_up_start_rps", "ramp_up_end_rps", "seed", "best_of", "use_beam_search"}
ARRAYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "queue_times",
    "generated_texts",
    "errors",
    "start_times",
)
# RequestColumns column -> the array it came from (to name the JSON path of a type error).
SOURCE_OF = {
    "input_tokens": "input_lens",
    "output_tokens": "output_lens",
    "ttft_s": "ttfts",
    "chunk_gaps_s": "itls",
    "latency_s": "latencies",
    "queue_s": "queue_times",
    "error": "errors",
    "status": "errors",
    "send_ns": "start_times",
    "first_token_ns": "ttfts",
    "end_ns": "latencies",
}
# What a result object states of the system under test (save_result's keys; the parallel layout only
# where ``--metadata tp=4`` or a sweep's serve parameter wrote it at the top level).
FACTORS: dict[str, tuple[tuple[str, ...], ...]] = {
    "model": (("model_id",),),
    "served_model": (("served_model_name",),),
    "engine": (("backend",),),
    "tp": (("tp",), ("tensor_parallel_size",)),
    "dp": (("dp",), ("data_parallel_size",)),
    "pp": (("pp",), ("pipeline_parallel_size",)),
    "ep": (("ep",), ("expert_parallel_size",)),
    "dataset": (("dataset_name",),),
    "concurrency": (("max_concurrency",),),
    "request_rate": (("request_rate",),),
    "prompt_count": (("num_prompts",),),
}
SGLANG_MARKERS = {"dataset_name", "random_input_len", "total_output_tokens_retokenized"}
_KEY = re.compile(r'"([^"\\]{1,80})"\s*:')

SUCCESS_RULE = (
    "ok when errors[i] == '' else failed (vLLM writes no success flag). Unreliable: a non-200 "
    "reply with an empty reason also gives ''. TTFT and latency of failed requests are the tool's "
    "0.0 placeholders and are stored as None; output_lens are kept as written (0 for failures)."
)
NO_ERRORS_RULE = "no errors array in the file: every status is unknown (vLLM writes no success flag)"
ZERO_STATS = (
    "the tool's placeholder, not a measurement: vLLM and SGLang write a statistic over no values as 0 "
    "(np.mean(values or 0)): no request completed, none had 2+ output tokens (TPOT) or no chunks were "
    "streamed (ITL)"
)
NO_AUDIO = "vLLM's placeholder, not a measurement: rtfx is input audio seconds / duration, 0.0 without audio (not ASR)"


# ---------------------------------------------------------------- helpers shared with sglang_bench


def where(prefix: str, jpath: str = "") -> str:
    """A locator: ``$.key`` for a single-object file, ``line N $.key`` for JSON Lines."""
    path = "$" + jpath
    return f"{prefix} {path}" if prefix else path


def type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def published(
    key: str, value: object, prefix: str, path: Path, unit: str | None, kind: str, note: str | None = None
) -> Published:
    """One printed aggregate (:func:`bench_ledger.importers._toolfiles.published`); vLLM and SGLang
    write only numbers and null here, so anything else is a parse error naming the key."""
    loc = where(prefix, f".{key}")
    if value is not None and type(value) not in (int, float):
        raise ParseError(path, loc, key, f"expected a number, got {type_name(value)} {value!r:.40}")
    p = tool_published(key, value, locator=loc, unit=unit, kind=kind, note=note)
    assert p is not None  # a number or null always gives a row
    return p


def placeholders(pubs: list[Published]) -> list[Published]:
    """The printed aggregates with vLLM's and SGLang's placeholders as n/a: a latency series whose every
    statistic is 0 (:data:`ZERO_STATS`), and vLLM's ``rtfx`` 0.0 (:data:`NO_AUDIO`)."""
    series: dict[str, list[int]] = {}
    for i, p in enumerate(pubs):
        if (m := SERVING_LATENCY_STAT.fullmatch(p.key)) is not None and p.value is not None:
            series.setdefault(m["series"], []).append(i)
    zero = {i for found in series.values() if all(pubs[i].value == 0 for i in found) for i in found}
    return [
        placeholder(p, ZERO_STATS) if i in zero else placeholder(p, NO_AUDIO) if p.key == "rtfx" and p.value == 0 else p
        for i, p in enumerate(pubs)
    ]


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
            raise ParseError(
                path, where(prefix, f".{name}"), name, f"$.{name} has {len(value)} entries, $.{ref} has {n}"
            )
    return present, n


def check_numbers(arrays: dict[str, list], names: Iterable[str], path: Path, prefix: str) -> None:
    """Arrays used in decimal arithmetic must hold finite numbers (pydantic checks the rest)."""
    for name in names:
        for i, v in enumerate(arrays.get(name, ())):
            if type(v) not in NUMBER or not math.isfinite(v):
                raise ParseError(
                    path, where(prefix, f".{name}[{i}]"), name, f"expected a number, got {type_name(v)} {v!r:.40}"
                )


def success_rule(errors: Any, values: dict[str, Any], n: int) -> tuple[Any, Any, dict[str, Any]]:
    """vLLM's success rule and 0.0 placeholders (:data:`SUCCESS_RULE`), over Arrow arrays: the one
    definition for both parse paths (:func:`success_rule_lists` gives the Python path's lists).

    ``errors``: a string array or None (no errors array: every status unknown); an entry "" is ok,
    null unknown, anything else failed, and the error text is kept for failed requests only.
    ``values``: float arrays (TTFT, latency) whose 0.0 placeholders become null: every value of a
    failed request, and an exact 0 where the status is unknown (no real request has a zero TTFT).
    Returns (status, error, values without placeholders)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if errors is None:
        status, error = pa.repeat(pa.scalar("unknown"), n), pa.nulls(n, pa.string())
    else:
        empty = pc.equal(errors, "")
        status = pc.if_else(pc.is_null(errors), "unknown", pc.if_else(empty, "ok", "failed"))
        error = pc.if_else(empty, pa.scalar(None, pa.string()), errors)
    ok, unknown = pc.equal(status, "ok"), pc.equal(status, "unknown")
    kept = {
        name: pc.if_else(pc.or_(ok, pc.and_(unknown, pc.not_equal(v, 0))), v, pa.scalar(None, pa.float64()))
        for name, v in values.items()
    }
    return status, error, kept


def success_rule_lists(
    arrays: dict[str, list], n: int, names: tuple[str, ...]
) -> tuple[list, list, dict[str, list]] | None:
    """:func:`success_rule` on the Python path's lists (``names``: the arrays with placeholders; one
    that is missing gives None values). None when an entry is not what vLLM writes (a string TTFT, a
    lone surrogate): the caller's column validation then names it."""
    import pyarrow as pa

    errors = arrays.get("errors")
    try:
        values = {name: pa.array(arrays[name], pa.float64()) for name in names if name in arrays}
        err = None if errors is None else pa.array(errors, pa.string())
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    status, error, kept = success_rule(err, values, n)
    return (
        status.to_pylist(),
        error.to_pylist(),
        {name: kept[name].to_pylist() if name in kept else [None] * n for name in names},
    )


def validate_columns(cols: dict[str, list], path: Path, prefix: str, ruled: bool = True) -> RequestColumns:
    """Strict pydantic validation of all columns at once; an error names the source array entry.
    ``ruled``: False when the success rule could not read the arrays (columns are then as written,
    and validation must name the entry; if it finds none, the file is refused all the same)."""
    try:
        columns = RequestColumns.model_validate(cols, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        column, *rest = err["loc"]
        source = SOURCE_OF.get(str(column), str(column))
        index = "".join(f"[{i}]" for i in rest)
        value = err.get("input")
        raise ParseError(
            path,
            where(prefix, f".{source}{index}"),
            source,
            f"{err['msg'].lower()}, got {type_name(value)} {value!r:.40}",
        ) from None
    if not ruled:
        raise ParseError(
            path, where(prefix), "errors", "the errors, ttfts or latencies arrays hold entries vLLM does not write"
        )
    return columns


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
    except (ValueError, RecursionError):
        pass
    text = head.decode("utf-8", errors="replace")
    return set(_KEY.findall(text if first_line.strip() == "{" else first_line))


def int_or_none(obj: dict[str, Any], key: str, path: Path, prefix: str) -> int | None:
    value = obj.get(key)
    if value is None or type(value) is int:
        return value
    raise ParseError(path, where(prefix, f".{key}"), key, f"expected an integer, got {type_name(value)} {value!r:.40}")


def float_or_none(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    return float(value) if type(value) in NUMBER and isinstance(value, NUMBER) and math.isfinite(value) else None


# ---------------------------------------------------------------- vLLM


def _label(obj: dict[str, Any], rate: str | None) -> str:
    if isinstance(obj.get("label"), str) and obj["label"]:
        return obj["label"]
    model = model_name(str(obj.get("model_id") or obj.get("backend") or "vllm"))
    conc = obj.get("max_concurrency")
    return " ".join([model, f"rate={rate}", f"c={'inf' if conc is None else conc}"])


def _times_ns(arrays: dict[str, list], ttft: list, latency: list, n: int) -> tuple[list, list, list]:
    """send / first-token / end ns from perf_counter seconds, summed exactly as decimals."""
    none: list[int | None] = [None] * n
    starts = [Decimal(repr(x)) for x in arrays["start_times"]]
    send = [seconds_ns(s) for s in starts]
    first = end = none
    if "ttfts" in arrays:
        first = [None if t is None else seconds_ns(s, Decimal(repr(t))) for s, t in zip(starts, ttft)]
    if "latencies" in arrays:
        end = [None if t is None else seconds_ns(s, Decimal(repr(t))) for s, t in zip(starts, latency)]
    return send, first, end


def _requests(arrays: dict[str, list], n: int, line: int | None, path: Path, prefix: str) -> RequestColumns:
    none = [None] * n
    ruled = success_rule_lists(arrays, n, ("ttfts", "latencies"))
    status, error, kept = ruled or (["unknown"] * n, arrays.get("errors", none), arrays)
    ttft, latency = kept.get("ttfts", none), kept.get("latencies", none)
    send = first = end = none
    if "start_times" in arrays:
        try:  # fast path; a non-number raises in Decimal() or int(), then find it for the message
            send, first, end = _times_ns(arrays, ttft, latency, n)
        except (ArithmeticError, ValueError, TypeError):
            check_numbers(arrays, ("start_times", "ttfts", "latencies"), path, prefix)
            raise
    cols: dict[str, list[Any]] = {
        "idx": list(range(n)),
        "line": [line] * n,
        "status": status,
        "error": error,
        "retries": none,
        "input_tokens": arrays.get("input_lens", none),
        "output_tokens": arrays.get("output_lens", none),
        "send_ns": send,
        "first_token_ns": first,
        "end_ns": end,
        "ttft_s": ttft,
        "latency_s": latency,
        "queue_s": arrays.get("queue_times", none),
        "itl_mean_s": none,
        "cached_tokens": none,
        "chunk_gaps_s": arrays.get("itls", none),
    }
    return validate_columns(cols, path, prefix, ruled is not None)


def _fields(arrays) -> list[str]:
    fields = [
        f
        for a, f in (
            ("input_lens", "input_tokens"),
            ("output_lens", "output_tokens"),
            ("ttfts", "ttft_s"),
            ("itls", "chunk_gaps"),
            ("latencies", "latency_s"),
            ("queue_times", "queue_s"),
        )
        if a in arrays
    ]
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
    info, capture, pubs = _header(obj, set(arrays), n, prefix, path)
    requests = _requests(arrays, n, line, path, prefix) if n else None
    return ParsedRun(info=info, capture=capture, requests=requests, published=pubs)


def _header(
    obj: dict[str, Any], present: set[str], n: int, prefix: str, path: Path
) -> tuple[RunInfo, Capture, list[Published]]:
    """Run info, capture and printed aggregates of one result object (``present``: its arrays)."""
    if len(obj) > MAX_KEYS_PER_RUN:  # before building a record per key (memory; issue 13)
        raise ParseError(
            path, where(prefix), None, f"{len(obj):,} keys in one result object; at most {MAX_KEYS_PER_RUN:,} are read"
        )
    pubs: list[Published] = []
    metadata: dict[str, str] = {}
    ignored: list[str] = []
    rate = setting_text(obj.get("request_rate"), path, where(prefix, ".request_rate"), "request_rate")
    for key, value in obj.items():
        if key in HEADER or key in ARRAYS:
            continue
        if key in AGGREGATES:
            pubs.append(published(key, value, prefix, path, *AGGREGATES[key], NOTES.get(key)))
        elif SERVING_LATENCY_STAT.fullmatch(key):
            pubs.append(published(key, value, prefix, path, "ms", "latency"))
        elif isinstance(value, str):
            metadata[key] = value
        elif key in SETTINGS_AS_TEXT and value is not None:
            metadata[key] = setting_text(value, path, where(prefix, f".{key}"), key) or ""
        elif type(value) in NUMBER:
            pubs.append(published(key, value, prefix, path, None, "other", "key not known to the importer"))
        elif value is not None:
            ignored.append(key)
    if ignored:
        metadata["ignored_keys"] = ",".join(ignored)
    info = RunInfo(
        label=_label(obj, rate),
        tool=Tool.VLLM_BENCH,
        concurrency=int_or_none(obj, "max_concurrency", path, prefix),
        request_count=int_or_none(obj, "num_prompts", path, prefix),
        request_rate=rate,
        duration_s=float_or_none(obj, "duration"),
        locator=where(prefix),
        metadata=metadata,
        pairing=result_pairing(path, obj),
        factors=factors_of(obj, prefix, path),
    )
    capture = Capture(
        fields=_fields(present),
        record_count=n,
        clock="monotonic_s" if "start_times" in present else None,
        token_source="unknown",
        success_rule=SUCCESS_RULE if "errors" in present else NO_ERRORS_RULE,
    )
    return info, capture, placeholders(pubs)


def factors_of(obj: dict[str, Any], prefix: str, path: Path) -> dict:
    """What a vLLM or SGLang result object states of the system under test (:data:`FACTORS`); the
    ``backend`` is the engine only where it names one (``_toolfiles.ENGINE_BACKENDS``)."""
    found = stated(path, obj, FACTORS, lambda parts: where(prefix, jpath_of(parts)))
    if "engine" in found and found["engine"].value not in ENGINE_BACKENDS:
        del found["engine"]
    return found


def jpath_of(parts: tuple) -> str:
    """``.a.b[0]`` (the part of a JSON path after ``$``)."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def result_pairing(path: Path, obj: dict[str, Any]) -> Pairing:
    """The result file's own name, which ``vllm bench serve``'s console names (``result_filename``;
    ``importers.vllm_console``), with what both state: num_prompts (else completed + failed), completed
    and the model."""
    completed, failed, prompts = (
        obj.get(k) if type(obj.get(k)) is int else None for k in ("completed", "failed", "num_prompts")
    )
    if prompts is None and completed is not None and failed is not None:
        prompts = completed + failed
    facts = {"completed": str(completed)} if completed is not None else {}
    if isinstance(obj.get("model_id"), str) and obj["model_id"]:
        facts["model"] = obj["model_id"]
    return Pairing(file=file_name_text(path.name), requests=prompts, facts=facts)


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
        from bench_ledger.importers.vllm_sweep import relabel  # a run=N.json of `vllm bench sweep`

        path = Path(path)
        return ParsedArtefact(format=self.name, format_version=None, runs=prefetched(relabel(path, _runs(path))))


def _runs(path: Path, fast: bool | None = None) -> Iterator[ParsedRun]:
    """Runs of the file: DuckDB-parsed (:func:`_fast_runs`) where the file is regular, else in Python."""
    if fast or (fast is None and FAST_PATH and file_size(path) >= FAST_MIN_BYTES):
        runs = _fast_runs(path)
        if runs is not None:
            yield from runs
            return
    for line, prefix, obj in iter_objects(path):
        yield parse_run(obj, line, prefix, path)


# ---------------------------------------------------------------- the DuckDB-parsed path (issue 7)
#
# An in-memory DuckDB (not the ledger) is the JSON parser: read_json with typed columns reads the
# per-request arrays of every line at C speed into typed lists, straight into an Arrow table (one row
# per line, kept in memory: ~100 MB for the 1M-request benchmark file); Arrow kernels then flatten them,
# a batch of runs at a time, into request rows and a list of gaps per request
# (ledger.records.ArrowRequests) that the store bulk-inserts (the gaps as they are, one array per
# request: ledger.gaps).
# Python reads each line once as bytes (_cut_arrays): it checks the arrays' bytes with
# bytes.translate / one regex and decodes only the rest of the line (the small header) with json, so
# labels, metadata and printed aggregates come from the same _header code as the Python path.
#
# Exactness: a start/ttft/latency double is turned into its shortest round-trip text and then a
# decimal (importers.base.exact_decimal / exact_ns: the one proof both DuckDB-parsed importers use; here through
# importers.base.exact_ns_of, which takes a proven numpy shortcut where a value has at most 9 places);
# sums and the truncation to ns are exact decimal arithmetic, as base.seconds_ns in the Python path. This importer takes |x| < 1e9 that are 0 or >= 1e-7 (inside base's exact range);
# files with other values fall back. Anything irregular (blank line, a line that is not an object, an array holding
# anything but plain numbers / strings as expected, an array key that is not an array, unequal
# lengths, integers beyond int32, a key found twice) makes the whole file take the Python path
# before any run is yielded, so its error messages stay exactly as they are.
# Tests: tests/importers/test_vllm_bench.py compares both paths row for row.

FAST_RUNS_PER_QUERY = 64  # runs per Arrow batch (~64k requests of the benchmark file)
_INT = ("input_lens", "output_lens")
_TYPES = {
    "input_lens": "BIGINT[]",
    "output_lens": "BIGINT[]",
    "ttfts": "DOUBLE[]",
    "latencies": "DOUBLE[]",
    "start_times": "DOUBLE[]",
    "queue_times": "DOUBLE[]",
    "errors": "VARCHAR[]",
    "itls": "DOUBLE[][]",
    "generated_texts": "VARCHAR[]",
}
# Bytes an array may hold besides its numbers' digits (checked with bytes.translate, at C speed).
_INT_BYTES = b"0123456789-, \t"
_FLOAT_BYTES = b"0123456789-+.eE, \t"
# possessive (*+, ++): no backtracking state per character (a 20 MiB string cost 18 s and 2.5 GB before)
_STRINGS = re.compile(rb'\[\s*(?:"(?:[^"\\]++|\\.)*+"\s*(?:,\s*"(?:[^"\\]++|\\.)*+"\s*)*+)?\]')


_KEYS = {name: b'"' + name.encode() + b'"' for name in ARRAYS}


def _find_outside(line: bytes, key: bytes, spans: list[tuple[int, int]]) -> int:
    """``line.find(key)`` without reading the numeric arrays already checked (``spans``: their
    brackets included): such an array holds no quote and no bracket of a key, so no match can start in
    it or cross it, and the first match is the same (a search for each array key read the whole
    line, ~0.1 s of the 1M-request file)."""
    pos = 0
    for j, end in spans:
        i = line.find(key, pos, j)
        if i >= 0:
            return i
        pos = end
    return line.find(key, pos)


def _cut_arrays(line: bytes) -> tuple[bytes, tuple[str, ...]] | None:
    """The line without its per-request arrays (the small header for Python's json) and the arrays
    it has, or None where an array is not plainly what the fast path expects: a numeric array with
    anything but number characters (strings, null, true, NaN...), a string array with anything but
    strings, a nested level too many. (A key found twice is caught by the caller: its second value
    stays in the header.)"""
    cuts, present = [], []
    spans: list[tuple[int, int]] = []  # numeric arrays checked so far, in line order
    for name in ARRAYS:
        key = _KEYS[name]
        i = _find_outside(line, key, spans)
        if i < 0:
            continue
        j = i + len(key)
        while line[j : j + 1] in (b" ", b"\t"):
            j += 1
        if line[j : j + 1] != b":":
            return None
        j += 1
        while line[j : j + 1] in (b" ", b"\t"):
            j += 1
        if line.startswith(b"null", j):
            continue  # null counts as absent; the key stays in the header (the Python path skips it)
        if line[j : j + 1] != b"[":
            return None
        if name in ("errors", "generated_texts"):
            match = _STRINGS.match(line, j)
            if match is None:
                return None
            end = match.end()
        elif name == "itls":
            if line.startswith(b"[]", j):
                end = j + 2
            else:
                end = line.find(b"]]", j) + 2
                seg = line[j + 1 : end - 1]
                if end < 2 or b"[[" in seg or seg.translate(None, _FLOAT_BYTES + b"[]") or not seg.startswith(b"["):
                    return None
        else:
            end = line.find(b"]", j) + 1
            if end <= 0 or line[j + 1 : end - 1].translate(None, _INT_BYTES if name in _INT else _FLOAT_BYTES):
                return None
        cuts.append((j, end))
        present.append(name)
        if name not in ("errors", "generated_texts"):
            bisect.insort(spans, (j, end))
    if not cuts:
        return line, ()
    cuts.sort()
    parts, pos = [], 0
    for j, end in cuts:
        parts.append(line[pos:j])
        parts.append(b"null")
        pos = end
    parts.append(line[pos:])
    return b"".join(parts), tuple(present)


def _prescan(path: Path) -> tuple[list[tuple[dict, tuple[str, ...]]], int] | None:
    """Per line: the header (the object without its arrays, decoded by Python's json) and the arrays
    present; None where a line is blank, not an object, or irregular (see :func:`_cut_arrays`)."""
    heads, longest = [], 0
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                cut = _cut_arrays(raw)
                if cut is None:
                    return None
                head = json.loads(cut[0])
                # an array key found twice (or first inside a nested object) leaves a value here
                if not isinstance(head, dict) or any(head.get(name) is not None for name in ARRAYS):
                    return None
                heads.append((head, cut[1]))
                longest = max(longest, len(raw))
    except (OSError, ValueError):
        return None
    return (heads, longest) if heads else None


def _fast_runs(path: Path) -> Iterator[ParsedRun] | None:
    """Runs parsed by DuckDB, or None where the file is not regular enough (see above)."""
    scan = _prescan(path)
    if scan is None:
        return None
    heads, longest = scan
    import duckdb

    con = duckdb.connect()
    try:
        with _literal_path(path) as plain:
            loaded = _fast_load(con, plain, heads, longest)
    except (duckdb.Error, OSError):
        loaded = None
    finally:
        con.close()  # the lines are an Arrow table now
    if loaded is None:
        return None
    tab, meta = loaded
    return _fast_iter(tab, path, meta, len(heads))


@contextmanager
def _literal_path(path: Path) -> Iterator[Path]:
    """A name for ``path`` that DuckDB cannot read as a glob pattern (:func:`base.literal_paths`)."""
    with literal_paths([path]) as plain:
        yield plain[0]


def _fast_load(con, path: Path, heads: list, longest: int) -> tuple[Any, list[tuple]] | None:
    """Read the arrays as typed lists, one row per line in the file's order, straight into an Arrow
    table (a DuckDB table in between, scanned back to Arrow, cost ~0.5 s more of the 1M-request file);
    (the table, (row, header, arrays, n) per line), or None where lengths differ, an integer is
    beyond int32 or a time outside the exact range.

    Order: a scan of one table function keeps its rows' order with preserve_insertion_order (DuckDB's
    "order preservation" rules: FROM with a single table), as the in-memory table's rowids did; the
    arrays present in each row are checked against the line's own all the same."""
    import numpy as np
    import pyarrow.compute as pc

    cols = ", ".join(f"{name}: {sql_text(typ)}" for name, typ in _TYPES.items())
    con.execute("SET preserve_insertion_order = true")
    con.execute("SET enable_progress_bar = false")
    tab = con.execute(
        f"SELECT * FROM read_json({sql_text(str(path))}, format='newline_delimited', columns={{{cols}}}, "
        f"maximum_object_size={max(2 * longest, 1 << 20)})"
    ).to_arrow_table()
    if tab.num_rows != len(heads):
        return None
    names = list(_TYPES)
    lens = [pc.list_value_length(tab.column(name)).to_pylist() for name in names]
    meta = []
    for rid, (ns, (head, present)) in enumerate(zip(zip(*lens, strict=True), heads, strict=True)):
        got = {name for name, n in zip(names, ns, strict=True) if n is not None}
        if got != set(present) or len({n for n in ns if n is not None}) > 1:
            return None
        meta.append((rid, head, present, next((n for n in ns if n is not None), 0)))
    for name in _INT:  # integers beyond int32 (the request columns), as the Python path refuses them
        flat = pc.list_flatten(tab.column(name).combine_chunks())
        if len(flat):
            lo_hi = pc.min_max(flat).as_py()
            if lo_hi["max"] >= 2147483648 or lo_hi["min"] <= -2147483648:
                return None
    for name in ("ttfts", "latencies", "start_times"):  # times outside the range where exact ns are proven
        x = pc.list_flatten(tab.column(name).combine_chunks()).to_numpy(zero_copy_only=False)
        mag = np.abs(x)
        if ((mag >= 1e9) | ((x != 0) & (mag < EXACT_MIN))).any():
            return None
    return tab, meta


def _arrow_rows(tab, present: tuple[str, ...], idx0: int, lines: list[int]):
    """Request rows and each request's list of gaps of consecutive runs (rows of ``tab``) that have the
    same arrays, computed with Arrow kernels from the typed lists: flatten, placeholders, status, exact ns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = tab.column(present[0]).combine_chunks()
    parent = pc.list_parent_indices(first)
    n = len(parent)
    flat = {name: pc.list_flatten(tab.column(name).combine_chunks()) for name in present if name != "generated_texts"}

    def nulls(typ):
        return pa.nulls(n, typ)

    status, error, kept = success_rule(flat.get("errors"), {k: flat[k] for k in ("ttfts", "latencies") if k in flat}, n)
    ttft = kept.get("ttfts", nulls(pa.float64()))
    lat = kept.get("latencies", nulls(pa.float64()))
    if "start_times" in flat:
        st = flat["start_times"]
        send = exact_ns_of(st)
        first_tok = exact_ns_of(st, ttft) if "ttfts" in flat else nulls(pa.int64())
        end = exact_ns_of(st, lat) if "latencies" in flat else nulls(pa.int64())
    else:
        send = first_tok = end = nulls(pa.int64())
    idx = pc.add(pa.array(range(n), pa.int64()), idx0).cast(pa.int32())
    if "itls" in flat:
        inner = flat["itls"]  # one list of gaps per request: stored as it is (ledger.gaps.arrays)
        chunk_count = pc.add(pc.list_value_length(inner), 1).cast(pa.int32())
        gaps = pa.table({"request_idx": idx, "gaps": inner})
    else:
        chunk_count, gaps = nulls(pa.int32()), None
    cols = {
        "idx": idx,
        "line": pc.take(pa.array(lines, pa.int32()), parent),
        "status": status,
        "error": error,
        "retries": nulls(pa.int32()),
        "input_tokens": flat["input_lens"].cast(pa.int32()) if "input_lens" in flat else nulls(pa.int32()),
        "output_tokens": flat["output_lens"].cast(pa.int32()) if "output_lens" in flat else nulls(pa.int32()),
        "send_ns": send,
        "first_token_ns": first_tok,
        "end_ns": end,
        "ttft_s": ttft,
        "latency_s": lat,
        "queue_s": flat["queue_times"] if "queue_times" in flat else nulls(pa.float64()),
        "itl_mean_s": nulls(pa.float64()),
        "chunk_count": chunk_count,
        "cached_tokens": nulls(pa.int32()),
    }
    return pa.table(cols), gaps


def _fast_iter(tab, path: Path, meta: list[tuple], lines: int) -> Iterator[ParsedRun]:
    single = lines == 1
    idx0 = 0
    for lo in range(0, len(meta), FAST_RUNS_PER_QUERY):
        part = meta[lo : lo + FAST_RUNS_PER_QUERY]
        batch = tab.slice(lo, len(part))
        # groups of consecutive runs with the same arrays (all of them in a regular file)
        start = 0
        while start < len(part):
            stop = start + 1
            while stop < len(part) and part[stop][2] == part[start][2]:
                stop += 1
            group = part[start:stop]
            present = group[0][2]
            req = gaps = None
            if any(r[3] for r in group):
                req, gaps = _arrow_rows(batch.slice(start, stop - start), present, idx0, [rid + 1 for rid, *_ in group])
            at = 0
            for rid, obj, present, n in group:
                prefix = "" if single else f"line {rid + 1}"
                info, capture, pubs = _header(obj, set(present), n, prefix, path)
                requests = None
                if n:
                    assert req is not None  # read above for every group with a request
                    table = req.slice(at, n)
                    g = gaps.slice(at, n) if gaps is not None else None  # a row per request, as the table
                    at += n
                    requests = ArrowRequests(table=table, gaps=g)
                idx0 += n
                yield ParsedRun(info=info, capture=capture, requests=requests, published=pubs)
            start = stop


IMPORTER = VllmBenchImporter()
