"""NVIDIA GenAI-Perf ``profile_export.json``: raw per-request timestamps and responses per experiment.

Shape: ``{"experiments": [{"experiment": {"mode", "value"}, "requests": [{"timestamp",
"request_inputs", "response_timestamps": [...], "response_outputs": [{"response": "data: {...}"}]}],
"window_boundaries": [...]}], "version", "service_kind", "endpoint"}``; times are epoch ns.
One ParsedRun per experiment (one load point each). Why the choices below:

* Timing follows GenAI-Perf's own analysis, so its printed summary can be re-derived: responses
  that carry no generated text (the ``data: [DONE]`` sentinel, a role-only first delta, a usage-only
  last chunk) are dropped first; then TTFT = first remaining response − ``timestamp``, latency =
  last remaining − ``timestamp``, chunk gaps = differences of the remaining response timestamps
  (one chunk may hold several tokens).
* The file has no token counts; GenAI-Perf re-tokenizes text itself. Token counts are taken only
  from a ``usage`` object the *server* put in its payloads (``server_usage``); without one they
  stay n/a, never invented. ``prompt_tokens_details.cached_tokens`` likewise, only when present.
* There is no success flag: a payload with an ``error`` object (or a non-JSON body) makes the
  request failed; a request with no response at all is unknown (GenAI-Perf skips it); else ok.
* An experiment pairs with the ``<stem>_genai_perf.json`` summary GenAI-Perf writes beside
  ``<stem>.json`` (``ledger.pairing``, :func:`pairing`): same folder and stem, the summary's
  configured request count equal to the experiment's number of requests, the same load level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import (
    build_columns,
    has_key,
    head_text,
    integer,
    jpath,
    mapping,
    ns_gap_s,
    present_fields,
    sequence,
    stated,
)
from bench_ledger.importers.base import ParseOptions, load_json, setting_text
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, RunInfo, Stated, file_name_text
from bench_ledger.tools import Tool

__all__ = ["IMPORTER", "pairing"]

SUCCESS_RULE = (
    "failed when a response payload is a JSON object with an 'error' member or is not JSON; "
    "unknown when no response was received; ok otherwise (GenAI-Perf writes no status)"
)


class GenaiPerfExportImporter:
    name = "genai-perf-export"
    description = "NVIDIA GenAI-Perf profile_export.json (per-request timestamps, per experiment)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("{"):
            return "not a JSON object"
        if not has_key(text, "experiments"):
            return "no 'experiments' key"
        if not (has_key(text, "experiment") or has_key(text, "response_timestamps")):
            return "experiments lack GenAI-Perf's experiment/response_timestamps"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = mapping(path, "$", None, load_json(path))
        experiments = sequence(path, "$", "experiments", data.get("experiments"))
        version = data.get("version") or None
        header = {k: str(data[k]) for k in ("service_kind", "endpoint") if data.get(k) not in (None, "")}
        runs = list(_runs(path, experiments, version, header))
        return ParsedArtefact(format=self.name, format_version=None, runs=runs)


def _runs(path: Path, experiments: list, version: str | None, header: dict[str, str]) -> Iterator[ParsedRun]:
    labels: set[str] = set()
    for e, exp in enumerate(experiments):
        where = jpath("experiments", e)
        exp = mapping(path, where, None, exp)
        setting = mapping(path, where, "experiment", exp.get("experiment"), optional=True)
        requests = sequence(path, where, "requests", exp.get("requests"))
        rows = [_row(path, e, i, r) for i, r in enumerate(requests)]
        columns = build_columns(rows)
        inputs = [_payload(r) for r in requests]
        model = next((p["model"] for p in inputs if isinstance(p.get("model"), str)), None)
        caps = {p.get("max_tokens", p.get("max_completion_tokens")) for p in inputs}
        cap = caps.pop() if len(caps) == 1 else None
        mode, value = setting.get("mode"), setting.get("value")
        label = " ".join(str(x) for x in ("genai-perf", model, f"{mode}={value}") if x is not None)
        if label in labels:
            label = f"{label} #{e}"
        labels.add(label)
        metadata = dict(header)
        if exp.get("window_boundaries") is not None:
            metadata["window_boundaries"] = json.dumps(exp["window_boundaries"])
        yield ParsedRun(
            info=RunInfo(
                label=label,
                tool=Tool.GENAI_PERF,
                tool_version=str(version) if version else None,
                output_cap_tokens=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
                concurrency=value if mode == "concurrency" and isinstance(value, int) else None,
                request_rate=setting_text(value, path, where, "experiment.value") if mode == "request_rate" else None,
                request_count=len(rows),
                locator=where,
                metadata=metadata,
                pairing=pairing(path, ".json", len(rows), f"{mode}={value}"),
                factors=_factors(path, exp, e, inputs),
            ),
            capture=Capture(
                fields=present_fields(columns, ["status"]),
                record_count=len(rows),
                clock="epoch_ns",
                token_source="server_usage" if any(r.get("output_tokens") is not None for r in rows) else "unknown",
                success_rule=SUCCESS_RULE,
            ),
            requests=columns,
        )


def _factors(path: Path, exp: dict, e: int, inputs: list[dict]) -> dict[str, Stated]:
    """What experiment ``e`` states: its load (``experiment.mode`` and ``value``), and the model and
    output cap every request body it sent states alike (``request_inputs.payload``, a JSON text)."""
    mode = exp["experiment"].get("mode") if isinstance(exp.get("experiment"), dict) else None
    found = stated(
        path,
        exp,
        {mode: (("experiment", "value"),)} if mode in ("concurrency", "request_rate") else {},
        lambda parts: jpath("experiments", e, *parts),
    )
    for factor, keys in (("model", ("model",)), ("output_len", ("max_tokens", "max_completion_tokens"))):
        values = {next((p[k] for k in keys if k in p), None) for p in inputs}
        if len(values) != 1 or (one := values.pop()) is None:
            continue
        i, key = next((i, k) for i, p in enumerate(inputs) for k in keys if k in p)
        body = jpath("experiments", e, "requests", i, "request_inputs", "payload")
        found.update(stated(path, {key: one}, {factor: ((key,),)}, partial(_in_body, body)))
    return found


def _in_body(body: str, parts: tuple[str | int, ...]) -> str:
    """A key of a request body GenAI-Perf kept as JSON text: ``$.experiments[0]...payload model``."""
    return f"{body} {parts[0]}"


def pairing(path: Path, suffix: str, requests: int | None, load: str | None) -> Pairing:
    """GenAI-Perf writes ``<stem>.json`` (``--profile-export-file``) and ``<stem>_genai_perf.json`` into
    one artifact folder: the folder and the stem (the name without ``suffix``) are the pairing key;
    the load level (``concurrency=4``) is a fact both state."""
    stem = file_name_text(path.name.removesuffix(suffix))
    folder = file_name_text(path.resolve().parent.name)
    return Pairing(key=f"genai-perf {folder}/{stem}", requests=requests, facts={} if load is None else {"load": load})


def _payload(request: Any) -> dict:
    """The request body GenAI-Perf sent (``request_inputs.payload`` is a JSON string)."""
    inputs = request.get("request_inputs") if isinstance(request, dict) else None
    raw = inputs.get("payload") if isinstance(inputs, dict) else None
    if isinstance(raw, str):
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return body if isinstance(body, dict) else {}
    return inputs if isinstance(inputs, dict) else {}


def _row(path: Path, e: int, i: int, req: Any) -> dict[str, Any]:
    where = jpath("experiments", e, "requests", i)
    req = mapping(path, where, None, req)
    sent = integer(path, where, "timestamp", req.get("timestamp"), optional=False)
    stamps = sequence(path, where, "response_timestamps", req.get("response_timestamps"))
    outputs = sequence(path, where, "response_outputs", req.get("response_outputs"))
    if len(stamps) != len(outputs):
        raise ParseError(
            path, where, "response_outputs", f"{len(outputs)} outputs for {len(stamps)} response_timestamps"
        )
    times = [integer(path, f"{where}.response_timestamps[{k}]", None, t, optional=False) for k, t in enumerate(stamps)]
    content: list[int] = []
    error: str | None = None
    usage: dict = {}
    for t, out in zip(times, outputs, strict=True):
        has_text, err, use = _read_output(out)
        if has_text:
            content.append(t)
        error = error or err
        usage = use or usage
    row: dict[str, Any] = {
        "idx": i,
        "line": None,
        "status": "failed" if error else "ok" if times else "unknown",
        "error": error if error else None if times else "no response received",
        "send_ns": sent,
        "input_tokens": _count(usage.get("prompt_tokens")),
        "output_tokens": _count(usage.get("completion_tokens")),
        "cached_tokens": _count((usage.get("prompt_tokens_details") or {}).get("cached_tokens")),
    }
    if content:
        row.update(
            first_token_ns=content[0],
            end_ns=content[-1],
            ttft_s=ns_gap_s(content[0], sent),
            latency_s=ns_gap_s(content[-1], sent),
            chunk_gaps_s=[ns_gap_s(b, a) for a, b in zip(content, content[1:])],
        )
    return row


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_output(out: Any) -> tuple[bool, str | None, dict]:
    """(carries generated text, error text, usage) of one response, SSE or plain JSON."""
    if not isinstance(out, dict):
        return False, None, {}
    if "response" not in out:  # Triton-style outputs: {"text_output": "..."}
        return bool(out.get("text_output")), None, {}
    raw = out["response"]
    if not isinstance(raw, str):
        return False, None, {}
    events = [ln[5:].strip() for ln in raw.splitlines() if ln.startswith("data:")]
    if not events and raw.strip():
        events = [raw.strip()]  # a non-streaming response body
    has_text, error, usage = False, None, {}
    for event in events:
        if event == "[DONE]":
            continue
        try:
            body = json.loads(event)
        except json.JSONDecodeError:
            return False, f"non-JSON response: {event[:200]}", {}
        if not isinstance(body, dict):
            continue
        if body.get("error"):
            err = body["error"]
            error = error or (err.get("message") if isinstance(err, dict) and err.get("message") else str(err))
        if isinstance(body.get("usage"), dict):
            usage = body["usage"]
        has_text = has_text or _has_text(body)
    return has_text, error, usage


def _has_text(body: dict) -> bool:
    for choice in body.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or choice.get("message") or {}
        texts = [choice.get("text")]
        if isinstance(delta, dict):
            texts += [delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning")]
        if any(isinstance(t, str) and t for t in texts):
            return True
    return bool(body.get("text_output"))


IMPORTER = GenaiPerfExportImporter()
