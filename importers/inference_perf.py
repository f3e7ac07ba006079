"""kubernetes-sigs/inference-perf reports: lifecycle summaries, Prometheus summaries, per-request files.

A report folder (``reports-<timestamp>/`` locally) is one launch of the tool: ``stage_<N>_*`` files
describe one load stage each (one run per stage), ``summary_*`` files all stages together (one run,
labelled ``all stages``). The folder name and any prefix before ``stage_``/``summary_`` in the file
name make the run label, so the lifecycle and Prometheus files of one stage land on the same run.

Two kinds of aggregates are kept strictly apart (R6): client-side *lifecycle* metrics (what
inference-perf measured per request: ``load_summary``, ``successes``, ``failures``) and
*Prometheus* summaries scraped from the model server (server counters over the scrape window:
their counts differ from the client's by design, 81418 vs 38717 in the kubecon sample). The
Prometheus values get the key prefix ``prometheus.`` and a note; the check never combines them
with lifecycle values.

How inference-perf computes its lifecycle aggregates (``reportgen/base.py``, ``summarize_requests``):
distributions are numpy ``mean``/``min``/``max`` and ``np.percentile`` (linear); latencies are in
seconds; ``send_duration`` = last start - first start of the stage, ``achieved_rate`` = count /
send_duration; throughputs divide by ``max(end) - min(start)``, a span the file does not carry.
A stage whose achieved rate is below :data:`SHORTFALL` of its requested rate is flagged: its
``achieved_rate`` carries a note, and so does the run's metadata.

The per-request file (``per_request_lifecycle_metrics.json``) is a JSON array of
``{start_time, end_time, request, response, info, error, [stage_id]}``; times are the client's
monotonic seconds. Token counts are read from ``info.request_metrics.text.input_tokens`` /
``info.response_metrics.output_tokens`` (older: ``info.input_tokens`` / ``info.output_tokens``),
the token times from ``output_token_times`` (per token, not per chunk: tokens of one chunk share
its time), so TTFT is ``output_token_times[0] - start_time`` and the gaps between token times are
kept as chunk gaps only where no two tokens share a time.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import (
    as_dict,
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
)
from bench_ledger.importers.base import ParseOptions, load_json, setting_text
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

TOOL = Tool.INFERENCE_PERF
# A stage that achieved less than this share of its requested rate is flagged (it saturated).
SHORTFALL = Decimal("0.9")
SHORTFALL_NOTE = (
    "achieved rate below {pct}% of the requested {req} req/s: the stage saturated; compare it with other "
    "stages as a different offered load, not as the requested rate"
)
PROMETHEUS_NOTE = (
    "scraped from the model server's Prometheus counters over the scrape window (may include traffic "
    "outside the stage): not the client's lifecycle count, never combined with it (R6)"
)
SUCCESS_RULE = "aggregates only: inference-perf counts a request as a failure when its error is set"
PER_REQUEST_RULE = "ok iff the record's error is null (inference-perf's own split into successes and failures)"

# Units of the lifecycle sections (all latencies in seconds).
_LATENCY = (
    "request_latency",
    "normalized_time_per_output_token",
    "time_per_output_token",
    "time_to_first_token",
    "inter_token_latency",
)
_THROUGHPUT = {
    "input_tokens_per_sec": ("tokens/s", "aggregate_token_rate"),
    "output_tokens_per_sec": ("tokens/s", "aggregate_token_rate"),
    "total_tokens_per_sec": ("tokens/s", "aggregate_token_rate"),
    "requests_per_sec": ("requests/s", "request_rate"),
}
_STAGE_NAME = re.compile(
    r"^(?P<prefix>.*?)(?:_)?(?:stage_(?P<stage>\d+)|summary)_(?P<kind>lifecycle|prometheus)_metrics\.json$"
)
_PER_REQUEST_NAME = re.compile(r"^(?P<prefix>.*?)(?:_)?per_request_lifecycle_metrics\.json$")


def launch_label(path: Path, prefix: str) -> str:
    """The report folder (and the prefix a copied file kept) that names the launch."""
    prefix = prefix.strip("_")
    return f"{path.parent.name}/{prefix}" if prefix else path.parent.name


def run_label(path: Path) -> tuple[str, str, int | None]:
    """(run label, launch, stage) of a lifecycle or Prometheus file, from its folder and name."""
    m = _STAGE_NAME.match(path.name)
    if m is None:
        launch = f"{path.parent.name}/{path.stem}"
        return f"{TOOL} {launch}", launch, None
    stage = int(m["stage"]) if m["stage"] is not None else None
    launch = launch_label(path, m["prefix"])
    return f"{TOOL} {launch} {'all stages' if stage is None else f'stage {stage}'}", launch, stage


def _unit_kind(parts: list[str]) -> tuple[str | None, str]:
    leaf_parent = parts[-2] if len(parts) >= 2 else ""
    head = parts[0]
    if parts[-1] == "count" and len(parts) == 2:
        return None, "request_count"
    if head == "load_summary":
        if parts[1] == "schedule_delay":  # actual minus scheduled send time: signed (negative when sent
            return "s", "other"  # early), so not a latency, which is never negative (ledger.records domains)
        if parts[1] == "send_duration":
            return "s", "duration"
        if parts[1] in ("requested_rate", "achieved_rate"):
            return "requests/s", "request_rate"
        if parts[1] == "concurrency":
            return None, "concurrency"
    if "latency" in parts or leaf_parent == "request_latency" or parts[1] == "request_latency":
        return "s", "latency"
    if len(parts) >= 3 and parts[1] == "throughput" and parts[2] in _THROUGHPUT:
        return _THROUGHPUT[parts[2]]
    if parts[1] in ("prompt_len", "output_len", "prompt_tokens", "output_tokens"):
        return "tokens", "token_count"
    return None, "other"


def _walk(path: Path, obj: Any, parts: list[str], out: list[Published], note: str | None) -> None:
    """Every number below ``obj`` as a reported value keyed by its dotted path."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            _walk(path, value, [*parts, str(key)], out, note)
        return
    if isinstance(obj, list) or isinstance(obj, str) or isinstance(obj, bool):
        return
    if obj is not None and not is_number(obj):
        raise ParseError(path, jpath(*parts), parts[-1], f"expected a number, got {obj!r}")
    unit, kind = _unit_kind(parts)
    p = published(".".join(parts), obj, locator=jpath(*parts), unit=unit, kind=kind, note=note)
    if p is not None:
        out.append(p)


class InferencePerfImporter:
    name = "inference-perf"
    description = "kubernetes-sigs/inference-perf stage_N_/summary_lifecycle_metrics.json (client lifecycle aggregates)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not all(has_key(text, k) for k in ("load_summary", "successes", "failures")):
            return "no load_summary / successes / failures keys"
        if re.search(r'"load_summary"\s*:\s*\{\s*\}', text) or has_key(text, "kv_cache_usage_percentage"):
            return "an inference-perf Prometheus summary (empty load_summary), not lifecycle metrics"
        if not has_key(text, "schedule_delay") and not has_key(text, "latency"):
            return "no schedule_delay or latency sections"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        for key in ("load_summary", "successes", "failures"):
            mapping(path, jpath(key), key, data.get(key))
        label, launch, stage = run_label(path)
        load = data["load_summary"]
        out: list[Published] = []
        _walk(
            path,
            {k: v for k, v in data.items() if k in ("load_summary", "successes", "failures", "retries")},
            [],
            out,
            None,
        )
        metadata = {"launch": launch}
        if "benchmark_time_seconds" in data:
            p = published(
                "benchmark_time_seconds",
                data["benchmark_time_seconds"],
                locator=jpath("benchmark_time_seconds"),
                unit="s",
                kind="duration",
            )
            if p is not None:
                out.append(p)
        requested, achieved = load.get("requested_rate"), load.get("achieved_rate")
        if stage is not None:
            metadata["stage"] = str(stage)
        if is_number(requested) and is_number(achieved):
            metadata["requested_rate"] = (
                setting_text(requested, path, jpath("load_summary", "requested_rate"), "requested_rate") or ""
            )
            metadata["achieved_rate"] = repr(achieved) if isinstance(achieved, float) else str(achieved)
            req, ach = Decimal(repr(requested)), Decimal(repr(achieved))
            if req > 0 and ach < SHORTFALL * req:
                note = SHORTFALL_NOTE.format(pct=int(SHORTFALL * 100), req=requested)
                metadata["rate_shortfall"] = f"achieved {ach / req:.1%} of the requested rate"
                for i, p in enumerate(out):
                    if p.key == "load_summary.achieved_rate":
                        out[i] = p.model_copy(update={"note": note})
        count = integer(path, jpath("load_summary", "count"), "count", load.get("count"))
        send = number(path, jpath("load_summary", "send_duration"), "send_duration", load.get("send_duration"))
        run = ParsedRun(
            info=RunInfo(
                label=label,
                tool=TOOL,
                request_count=count,
                request_rate=metadata.get("requested_rate"),
                concurrency=integer(path, jpath("load_summary", "concurrency"), "concurrency", load.get("concurrency")),
                duration_s=float(send) if send is not None else None,
                locator="$",
                metadata=metadata,
                pairing=_pairing(label, count),
                factors=stated(
                    path,
                    data,
                    {
                        "request_rate": (("load_summary", "requested_rate"),),
                        "concurrency": (("load_summary", "concurrency"),),
                    },
                ),
            ),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=out,
        )
        return ParsedArtefact(format=self.name, format_version="stage" if stage is not None else "summary", runs=[run])


class InferencePerfPrometheusImporter:
    name = "inference-perf-prometheus"
    description = "kubernetes-sigs/inference-perf *_prometheus_metrics.json (server-side Prometheus summaries)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not all(has_key(text, k) for k in ("load_summary", "successes", "failures")):
            return "no load_summary / successes / failures keys"
        if not re.search(r'"load_summary"\s*:\s*\{\s*\}', text):
            return "load_summary is not empty: lifecycle metrics, not a Prometheus summary"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        successes = mapping(path, jpath("successes"), "successes", data.get("successes"))
        label, launch, stage = run_label(path)
        out: list[Published] = []
        _walk(path, successes, ["successes"], out, PROMETHEUS_NOTE)
        for i, p in enumerate(out):  # units of the server-side summaries
            unit, kind = _prometheus_unit(p.key)
            out[i] = p.model_copy(update={"key": f"prometheus.{p.key}", "unit": unit, "quantity_kind": kind})
        metadata = {"launch": launch, "scope": "server Prometheus counters"}
        if stage is not None:
            metadata["stage"] = str(stage)
        run = ParsedRun(
            info=RunInfo(label=label, tool=TOOL, locator="$", metadata=metadata, pairing=_pairing(label, None)),
            capture=Capture(
                fields=[],
                record_count=0,
                token_source="unknown",
                success_rule="aggregates only: server-side counters, no client records",
            ),
            published=out,
        )
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            runs=[run],
            note="Prometheus-scraped summaries: kept apart from client lifecycle metrics (R6)",
        )


def _pairing(label: str, requests: int | None) -> Pairing:
    """One stage's lifecycle, Prometheus and per-request files: inference-perf names them by its report
    prefix and the stage, side by side in one folder; a count both state must agree."""
    return Pairing(key=label, requests=requests, named_by_tool=True)


def _prometheus_unit(key: str) -> tuple[str | None, str]:
    parts = key.split(".")
    metric = parts[1] if len(parts) > 1 else ""
    stat = parts[-1]
    if metric == "count":
        return None, "request_count"
    if metric == "rate":
        return "requests/s", "request_rate"
    if metric in ("prompt_len", "output_len"):
        return ("tokens/s", "aggregate_token_rate") if stat == "rate" else ("tokens", "token_count")
    if metric in (
        "request_latency",
        "time_to_first_token",
        "time_per_output_token",
        "inter_token_latency",
        "request_queue_time",
        "request_inference_time",
        "request_prefill_time",
        "request_decode_time",
    ):
        return "s", "latency"
    if metric.endswith("_percent") or metric.endswith("_percentage"):
        return "%", "other"
    if metric == "queue_len":
        return None, "other"
    return None, "other"


class InferencePerfPerRequestImporter:
    name = "inference-perf-requests"
    description = "kubernetes-sigs/inference-perf per_request_lifecycle_metrics.json (per-request records)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("["):
            return "not a JSON array"
        if not all(has_key(text, k) for k in ("start_time", "end_time", "info")):
            return "array records lack inference-perf's start_time / end_time / info"
        if not (
            has_key(text, "request_metrics") or has_key(text, "output_token_times") or has_key(text, "input_tokens")
        ):
            return "records carry no inference-perf token metrics"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = sequence(path, "$", None, load_json(path))
        m = _PER_REQUEST_NAME.match(path.name)
        launch = launch_label(path, m["prefix"] if m else "")
        by_stage: dict[int | None, list[dict]] = {}
        for i, rec in enumerate(data):
            row, stage = _request_row(path, i, rec)
            by_stage.setdefault(stage, []).append(row)
        runs = []
        for stage in sorted(by_stage, key=lambda s: -1 if s is None else s):
            rows = by_stage[stage]
            where = "all stages" if stage is None else f"stage {stage}"
            columns = build_columns(rows)
            fields = present_fields(columns, always=("status", "error", "send_time", "end_time", "latency_s"))
            runs.append(
                ParsedRun(
                    info=RunInfo(
                        label=f"{TOOL} {launch} {where}",
                        tool=TOOL,
                        request_count=len(rows),
                        locator="$",
                        metadata={"launch": launch, **({"stage": str(stage)} if stage is not None else {})},
                        pairing=_pairing(f"{TOOL} {launch} {where}", len(rows)),
                    ),
                    capture=Capture(
                        fields=fields,
                        record_count=len(rows),
                        clock="monotonic_s",
                        token_source="unknown",
                        success_rule=PER_REQUEST_RULE,
                    ),
                    requests=columns,
                )
            )
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            runs=runs,
            note="token counts: inference-perf's (server usage where the server reported it, else its tokenizer); "
            "times on the client's monotonic clock",
        )


def _time(path: Path, where: str, field: str, value: object) -> float | int:
    """A time in seconds on the client's clock: a finite number (NaN or Infinity is no time)."""
    t = number(path, where, field, value, optional=False)
    if not math.isfinite(t):
        raise ParseError(path, where, field, f"input should be a finite number, got {type(t).__name__} {t!r}")
    return t


def _request_row(path: Path, i: int, rec: Any) -> tuple[dict, int | None]:
    where = jpath(i)
    rec = mapping(path, where, None, rec)
    start = _time(path, where, "start_time", rec.get("start_time"))
    end = _time(path, where, "end_time", rec.get("end_time"))
    info = mapping(path, where, "info", rec.get("info"), optional=True)
    req_m = got if isinstance(got := info.get("request_metrics"), dict) else None
    resp_m = got if isinstance(got := info.get("response_metrics"), dict) else None
    if req_m is not None:
        text = as_dict(req_m.get("text"))
        in_tok = integer(path, f"{where}.info.request_metrics.text", "input_tokens", text.get("input_tokens"))
    else:
        in_tok = integer(path, f"{where}.info", "input_tokens", info.get("input_tokens"))
    src = resp_m if resp_m is not None else info
    loc = f"{where}.info.response_metrics" if resp_m is not None else f"{where}.info"
    out_tok = integer(path, loc, "output_tokens", src.get("output_tokens"))
    times = src.get("output_token_times")
    times = [
        _time(path, loc, "output_token_times", t)
        for t in sequence(path, loc, "output_token_times", times, optional=True)
    ]
    error = rec.get("error")
    ok = error is None
    stage = rec.get("stage_id")
    stage = integer(path, where, "stage_id", stage) if stage is not None else None
    err_text = None
    if not ok:
        err_text = (
            f"{error.get('error_type', '')}: {error.get('error_msg', '')}".strip(": ")
            if isinstance(error, dict)
            else str(error)
        )
    row: dict[str, Any] = {
        "idx": i,
        "line": None,
        "status": "ok" if ok else "failed",
        "error": err_text,
        "input_tokens": in_tok,
        "output_tokens": out_tok if ok else None,
        "send_ns": to_ns(start),
        "end_ns": to_ns(end),
        "latency_s": float(end) - float(start),
    }
    if ok and times:
        row["first_token_ns"] = to_ns(times[0])
        row["ttft_s"] = float(times[0]) - float(start)
        if len(times) > 1 and len(set(times)) == len(times):  # one token per chunk: gaps are chunk gaps
            row["chunk_gaps_s"] = [float(b) - float(a) for a, b in zip(times, times[1:])]
    return row, stage


IMPORTER = InferencePerfImporter()
IMPORTERS = (IMPORTER, InferencePerfPrometheusImporter(), InferencePerfPerRequestImporter())
