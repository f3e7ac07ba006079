"""guidellm ``benchmarks.json``: one ParsedRun per benchmark, v2 and the older v0.3 shape.

v2: ``{metadata: {version: 2, guidellm_version, ...}, config, benchmarks: [...]}``; each benchmark has
``scheduler_metrics`` (epoch seconds), ``metrics`` (each split successful/incomplete/errored/total
with mean, median, min, max, count, total_sum, percentiles) and ``requests`` {successful,
incomplete, errored} whose records carry ``info.timings`` (request_start, first_token_iteration,
last_token_iteration, request_end; Unix seconds), ``prompt_tokens``, ``output_tokens``,
``cached_tokens``, ``time_to_first_token_ms``, ``request_latency`` (s). v0.3 has no ``metadata``;
records carry ``scheduler_info``, ``start_time``, ``end_time``, ``first_token_time``,
``last_token_time``. Why the choices below:

* Status: successful -> ok, errored -> failed, incomplete -> unknown. Incomplete requests were cut
  off when the benchmark ended (guidellm cancels them); they are not server failures, and whether
  they would have succeeded is not known.
* Rows are numbered per benchmark in file order: successful, then incomplete, then errored.
* ``cached_tokens`` (and every other field) counts as captured only if at least one record holds a
  number for it. Present-but-null everywhere means the server reported nothing: n/a, never zero,
  and not listed (formats.md section 9, R9). Listed fields keep None where a record had no value.
* Sampling: with ``sample_size`` set, or when a group holds fewer records than guidellm counted,
  the capture is ``sampled`` and says that the aggregates cannot be re-derived from the sample.
* Token counts: guidellm takes them from the server's usage when the response had one and counts
  them itself otherwise; the file does not say which, so the source is ``unknown``.
* Times are epoch seconds converted exactly (Decimal) to integer ns; the clock is ``epoch_s``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.importers._toolfiles import (
    build_columns,
    has_key,
    head_text,
    integer,
    is_number,
    jpath,
    mapping,
    number,
    present_fields,
    published,
    sequence,
    stated,
    to_ns,
    to_seconds,
)
from bench_ledger.importers.base import ParseOptions, load_json, setting_text
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RequestValues, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

GROUPS = (("successful", "ok"), ("incomplete", "unknown"), ("errored", "failed"))
SUCCESS_RULE = (
    "by guidellm's grouping: requests.successful -> ok, requests.errored -> failed (error text kept), "
    "requests.incomplete -> unknown (cut off when the benchmark ended)"
)
MS = Decimal("0.001")
# Metric name -> (unit, quantity kind). Units come from guidellm's names and its documented schema.
_METRICS: dict[str, tuple[str | None, str]] = {
    "requests_per_second": ("requests/s", "request_rate"),
    "request_concurrency": (None, "concurrency"),
    "request_latency": ("s", "latency"),
    "prompt_token_count": ("tokens", "token_count"),
    "output_token_count": ("tokens", "token_count"),
    "total_token_count": ("tokens", "token_count"),
    "time_to_first_token_ms": ("ms", "latency"),
    "time_per_output_token_ms": ("ms", "latency"),
    "inter_token_latency_ms": ("ms", "latency"),
    "output_tokens_per_second": ("tokens/s", "aggregate_token_rate"),
    "prompt_tokens_per_second": ("tokens/s", "aggregate_token_rate"),
    "tokens_per_second": ("tokens/s", "aggregate_token_rate"),
}


class GuidellmImporter:
    name = "guidellm"
    description = "guidellm benchmarks.json (v2 and v0.3), one run per benchmark"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not has_key(text, "benchmarks"):
            return "no 'benchmarks' key"
        markers = ("guidellm_version", "scheduler_metrics", "request_totals", "scheduler_info", "run_stats")
        if not (any(has_key(text, k) for k in markers) or '"generative_benchmark"' in text):
            return "benchmarks lack guidellm's keys (guidellm_version, scheduler_metrics, ...)"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        meta = mapping(path, "$", "metadata", data.get("metadata"), optional=True)
        benchmarks = sequence(path, "$", "benchmarks", data.get("benchmarks"))
        top_config = _merged(_dict(data.get("args")), _dict(data.get("config")))
        version = str(meta["version"]) if meta.get("version") is not None else "0.3"
        tool_version = str(meta["guidellm_version"]) if meta.get("guidellm_version") else None
        runs = list(_runs(path, benchmarks, top_config, tool_version, data))
        return ParsedArtefact(format=self.name, format_version=version, runs=runs)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _merged(*configs: dict) -> dict:
    """Later configs win, but a null never hides a value set elsewhere (e.g. sample_size)."""
    out: dict = {}
    for config in configs:
        out.update({k: v for k, v in config.items() if v is not None})
    return out


def _runs(path: Path, benchmarks: list, top_config: dict, tool_version: str | None, root: dict) -> Iterator[ParsedRun]:
    for b, bench in enumerate(benchmarks):
        where = jpath("benchmarks", b)
        bench = mapping(path, where, None, bench)
        groups = mapping(path, where, "requests", bench.get("requests"))
        rows: list[dict[str, Any]] = []
        kept: dict[str, list[float | None]] = {key: [] for key in VALUE_KEYS}
        for group, status in GROUPS:
            records = sequence(path, jpath("benchmarks", b, "requests"), group, groups.get(group), optional=True)
            for k, rec in enumerate(records):
                rows.append(_row(path, (b, group, k), len(rows), status, rec))
                for key, value in _values(path, jpath("benchmarks", b, "requests", group, k), rec).items():
                    kept[key].append(value)
        columns = build_columns(rows)
        request_values = {
            key: RequestValues(flag=VALUE_KEYS[key], values=vals)
            for key, vals in kept.items()
            if any(v is not None for v in vals)
        }
        config = _merged(top_config, _dict(bench.get("args")), _dict(bench.get("config")))
        sampled, note = _sampling(bench, groups, config)
        info = _info(path, bench, b, config, tool_version, sum(_counts(bench).values()) or len(rows))
        yield ParsedRun(
            info=info.model_copy(update={"factors": _factors(path, root, b)}),
            capture=Capture(
                fields=present_fields(columns, ["status"]),
                record_count=len(rows),
                sampled=sampled,
                sample_note=note,
                clock="epoch_s",
                token_source="unknown",
                success_rule=SUCCESS_RULE,
            ),
            requests=columns,
            published=_published(bench, b),
            request_values=request_values,
        )


def _factors(path: Path, root: dict, b: int) -> dict:
    """What benchmark ``b`` states of the system under test and its load, looked up where :func:`_merged`
    would take it from (the benchmark's config, its args, the file's config, its args); a synthetic
    data spec (:func:`_token_settings`) states the lengths, any other data is the dataset."""
    bench = ("benchmarks", b)
    configs = [(*bench, "config"), (*bench, "args"), ("config",), ("args",)]
    strategies = [
        (*bench, "config", "strategy"),
        (*bench, "args", "strategy"),
        (*bench, "strategy"),
        (*bench, "scheduler", "strategy"),
    ]
    found = stated(
        path,
        root,
        {
            "model": (
                (*bench, "config", "backend", "model"),
                (*bench, "worker", "backend_model"),
                *((*c, "model") for c in configs),
            ),
            "concurrency": tuple((*s, "streams") for s in strategies),
            "request_rate": tuple((*s, "rate") for s in strategies),
            "prompt_count": ((*bench, "args", "max_number"), *((*c, "max_requests") for c in configs)),
        },
    )
    data = stated(path, root, {"dataset": ((*bench, "request_loader", "data"), *((*c, "data") for c in configs))})
    if (spec := data.get("dataset")) is not None:
        tokens = _token_settings([spec.value])
        for factor, key in (("input_len", "prompt_tokens"), ("output_len", "output_tokens")):
            if key in tokens:
                found[factor] = spec.model_copy(update={"value": str(tokens[key])})
        if not tokens:
            found.update(data)
    return found


def _row(path: Path, at: tuple[int, str, int], idx: int, status: str, rec: Any) -> dict[str, Any]:
    b, group, k = at
    where = jpath("benchmarks", b, "requests", group, k)
    rec = mapping(path, where, None, rec)
    info = _dict(rec.get("info"))
    timings = _dict(info.get("timings"))

    def t(v2: str, v03: str) -> int | None:
        key, raw = (f"info.timings.{v2}", timings[v2]) if timings.get(v2) is not None else (v03, rec.get(v03))
        return to_ns(number(path, where, key, raw))

    error = rec.get("error") or info.get("error")
    if status == "unknown":
        error = "incomplete: cut off when the benchmark ended" + (f" ({error})" if error else "")
    ttft_ms = number(path, where, "time_to_first_token_ms", rec.get("time_to_first_token_ms"))
    itl_ms = number(path, where, "inter_token_latency_ms", rec.get("inter_token_latency_ms"))
    latency = number(path, where, "request_latency", rec.get("request_latency"))
    return {
        "idx": idx,
        "line": None,
        "status": status,
        "error": None if status == "ok" else str(error) if error else None,
        "input_tokens": integer(path, where, "prompt_tokens", rec.get("prompt_tokens")),
        "output_tokens": integer(path, where, "output_tokens", rec.get("output_tokens")),
        "cached_tokens": integer(path, where, "cached_tokens", rec.get("cached_tokens")),
        "send_ns": t("request_start", "start_time"),
        "first_token_ns": t("first_token_iteration", "first_token_time"),
        "end_ns": t("request_end", "end_time"),
        "ttft_s": to_seconds(ttft_ms, MS),
        "itl_mean_s": to_seconds(itl_ms, MS),
        "latency_s": None if latency is None else float(latency),
    }


# Per-request values guidellm writes that have no request column, by their path in the record ->
# flag: what guidellm measured (counts, times) or computed per request (its per-token latencies).
# Its metrics are distributions over these (benchmark/schemas/generative/metrics.py).
VALUE_KEYS: dict[str, str] = {
    "request_start_time": "measured",
    "request_end_time": "measured",
    "info.timings.request_iterations": "measured",
    "info.timings.token_iterations": "measured",
    "info.timings.first_token_iteration": "measured",
    "info.timings.last_token_iteration": "measured",
    "total_tokens": "measured",
    "time_per_output_token_ms": "reported",
    "inter_token_latency_ms": "reported",
    **{
        f"{side}_metrics.text_{what}": "measured"
        for side in ("input", "output")
        for what in ("tokens", "words", "characters")
    },
}


def _values(path: Path, where: str, rec: Any) -> dict[str, float | None]:
    """The record's :data:`VALUE_KEYS` as floats (None where it has none); a value that is there but
    not a number is refused naming the record and key."""
    rec = mapping(path, where, None, rec)
    out: dict[str, float | None] = {}
    for key in VALUE_KEYS:
        obj: Any = rec
        for part in key.split("."):
            obj = obj.get(part) if isinstance(obj, dict) else None
        if key in ("request_start_time", "request_end_time") and obj is None:  # v0.3: start_time / end_time
            obj = rec.get(key.removeprefix("request_"))
        value = number(path, where, key, obj)
        out[key] = None if value is None else float(value)
    return out


def _counts(bench: dict) -> dict[str, int | float]:
    """Requests guidellm counted per group, wherever this version wrote them."""
    made = _dict(_dict(bench.get("scheduler_metrics")).get("requests_made"))
    for table in (made, _dict(bench.get("request_totals"))):
        found = {g: v for g, _ in GROUPS if is_number(v := table.get(g))}
        if found:
            return found
    latency = _dict(_dict(bench.get("metrics")).get("request_latency"))
    return {g: v for g, _ in GROUPS if is_number(v := _dict(latency.get(g)).get("count"))}


def _sampling(bench: dict, groups: dict, config: dict) -> tuple[bool, str | None]:
    size = config.get("sample_size")
    short = [
        f"{g} {len(groups.get(g) or [])} of {int(n)}" for g, n in _counts(bench).items() if len(groups.get(g) or []) < n
    ]
    if size is None and not short:
        return False, None
    why = [f"sample_size={size}"] if size is not None else []
    why += [f"records kept: {', '.join(short)}"] if short else []
    return True, (
        f"guidellm kept only a sample of the request records ({'; '.join(why)}): its aggregates "
        "cannot be re-derived from these records; they stay as reported"
    )


def _published(bench: dict, b: int) -> list[Published]:
    out: list[Published] = []
    if is_number(bench.get("duration")):  # the benchmark's measurement window, guidellm's own clock
        dur = published(
            "duration", bench["duration"], locator=jpath("benchmarks", b, "duration"), unit="s", kind="duration"
        )
        if dur is not None:
            out.append(dur)
    for name, splits in _dict(bench.get("metrics")).items():
        unit, kind = _METRICS.get(name, ("ms", "latency") if name.endswith("_ms") else (None, "other"))
        out.extend(_leaves(b, ["metrics", name], splits, unit, kind))
    made = _dict(_dict(bench.get("scheduler_metrics")).get("requests_made"))
    out.extend(_leaves(b, ["scheduler_metrics", "requests_made"], made, None, "request_count"))
    out.extend(_leaves(b, ["request_totals"], _dict(bench.get("request_totals")), None, "request_count"))
    return out


def _leaves(b: int, parts: list[str], obj: Any, unit: str | None, kind: str) -> list[Published]:
    """Every number below ``obj`` (lists such as the CDF are distributions, not single values)."""
    if isinstance(obj, dict):
        return [
            p
            for k, v in obj.items()
            if k != "cumulative_distribution_function"
            for p in _leaves(b, [*parts, str(k)], v, unit, kind)
        ]
    if not is_number(obj) and obj is not None:
        return []
    stat = parts[-1]
    if stat == "count":
        unit, kind = None, "request_count"
    elif stat == "variance":
        unit, kind = None, "other"
    p = published(".".join(parts), obj, locator=jpath("benchmarks", b, *parts), unit=unit, kind=kind)
    return [p] if p is not None else []


def _strategy(bench: dict, config: dict) -> dict:
    for source in (config, bench, _dict(bench.get("scheduler"))):
        if isinstance(source.get("strategy"), dict):
            return source["strategy"]
    return {}


def _epoch(value: Any) -> datetime | None:
    return datetime.fromtimestamp(float(value), tz=UTC) if is_number(value) else None


def _info(path: Path, bench: dict, b: int, config: dict, tool_version: str | None, n: int | float) -> RunInfo:
    strategy = _strategy(bench, config)
    kind = strategy.get("type_") or strategy.get("type")
    streams = strategy.get("streams")
    rate = setting_text(strategy.get("rate"), path, jpath("benchmarks", b) + " strategy", "rate")
    desc = " ".join(
        str(x)
        for x in (
            kind,
            f"streams={streams}" if streams is not None else None,
            f"rate={rate}" if rate is not None else None,
        )
        if x is not None
    )
    sched = _dict(bench.get("scheduler_metrics"))
    start = sched.get("start_time", bench.get("start_time"))
    end = sched.get("end_time", bench.get("end_time"))
    concurrency = streams if type(streams) is int else 1 if kind == "synchronous" else None
    metadata = {k: str(v) for k, v in (("id", bench.get("id_")), ("run_id", bench.get("run_id"))) if v is not None}
    for key in ("measure_start_time", "measure_end_time"):  # guidellm's measurement window (its metrics' range)
        if is_number(sched.get(key)):
            metadata[key] = repr(float(sched[key]))
    data = config.get("data")
    specs = [str(d) for d in data] if isinstance(data, list) else [str(data)] if data is not None else []
    if specs:
        metadata["data"] = ", ".join(specs)
    tokens = _token_settings(specs)
    return RunInfo(
        label=f"guidellm #{b} {desc}".rstrip(),
        tool=Tool.GUIDELLM,
        tool_version=tool_version,
        concurrency=concurrency,
        request_count=n,
        request_rate=rate if rate is not None else "inf" if kind == "throughput" else None,
        input_target_tokens=tokens.get("prompt_tokens"),
        output_cap_tokens=tokens.get("output_tokens"),
        dataset=None if tokens or len(specs) != 1 else specs[0],
        duration_s=float(bench["duration"]) if is_number(bench.get("duration")) else None,
        started_at=_epoch(start),
        ended_at=_epoch(end),
        locator=jpath("benchmarks", b),
        metadata=metadata,
    )


def _token_settings(specs: list[str]) -> dict[str, int]:
    """``prompt_tokens`` / ``output_tokens`` of a synthetic data spec (guidellm's
    ``SyntheticDatasetConfig``, written ``prompt_tokens=256,output_tokens=128`` or as JSON): workload
    settings (targets), never actual lengths (R3). A file path or dataset name gives none."""
    out: dict[str, int] = {}
    if len(specs) != 1:
        return out
    spec = specs[0].strip()
    items: dict = {}
    if spec.startswith("{"):
        try:
            loaded = json.loads(spec)
        except ValueError:
            return out
        items = loaded if isinstance(loaded, dict) else {}
    elif "=" in spec and "/" not in spec:
        items = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    for key in ("prompt_tokens", "output_tokens"):
        value = items.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
        elif isinstance(value, str) and value.strip().isdigit():
            out[key] = int(value.strip())
    return out


IMPORTER = GuidellmImporter()
