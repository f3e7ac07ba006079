"""One vLLM (or SGLang) result object read in Python: its keys, arrays, success rule and printed
aggregates, and the run it gives (:func:`parse_run`).

The meaning of each key and the decisions behind it are in :mod:`bench_ledger.importers.vllm_bench`;
this module is shared by that importer's two parse paths (the DuckDB-parsed one,
:mod:`bench_ledger.importers._vllm_bench_duckdb`, reads the header of each line with
:func:`result_header`), by ``sglang_bench``, ``vllm_console`` and ``vllm_sweep``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.factors import model_name
from bench_ledger.importers._toolfiles import ENGINE_BACKENDS, placeholder, stated
from bench_ledger.importers._toolfiles import published as tool_published
from bench_ledger.importers.base import (
    first_json_value,
    iter_json_lines,
    load_json,
    seconds_ns,
    setting_text,
)
from bench_ledger.records import (
    MAX_KEYS_PER_RUN,
    Capture,
    Pairing,
    ParsedRun,
    Published,
    RequestColumns,
    RunInfo,
    file_name_text,
)
from bench_ledger.tools import SERVING_LATENCY_STAT, Tool
from pydantic import ValidationError

__all__ = [
    "ARRAYS",
    "NO_AUDIO",
    "NUMBER",
    "SGLANG_MARKERS",
    "ZERO_STATS",
    "factors_of",
    "float_or_none",
    "int_or_none",
    "iter_objects",
    "jpath_of",
    "parse_run",
    "placeholders",
    "published",
    "read_arrays",
    "result_header",
    "success_rule",
    "success_rule_lists",
    "top_keys",
    "type_name",
    "validate_columns",
    "where",
]

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
    info, capture, pubs = result_header(obj, set(arrays), n, prefix, path)
    requests = _requests(arrays, n, line, path, prefix) if n else None
    return ParsedRun(info=info, capture=capture, requests=requests, published=pubs)


def result_header(
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
