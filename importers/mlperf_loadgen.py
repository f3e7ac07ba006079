"""MLPerf Inference loadgen logs: ``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``.

The two files of one run sit in one folder (``<system>/<benchmark>/<Scenario>/performance/run_N/``);
both importers label the run from that folder (and from any prefix a copied file kept before
``mlperf_log_``), so the pair lands on one run. Both are aggregates only (loadgen writes no
per-request records here), so every number is ``reported``.

* summary: "Key : Value" text in blocks ("MLPerf Results Summary", "Additional Stats", "Test
  Parameters Used"); labels are not aligned consistently, so a line splits at its first ``:``.
  Keys are kept as printed (``Completed tokens per second``), each with its line; a key that
  repeats (the LLM Server summary prints ``Completed tokens per second`` twice) is kept twice.
  Units come from the label (``(ns)``, ``(ms)``, ``per second``). Validity (``Result is``), the
  constraint lines (``Yes``/``No``) and the early-stopping results (``TTFT Early Stopping Result:``
  and its `` * ...`` lines) are kept as text values.
* detail: one ``:::MLLOG {json}`` per line (``key, value, time_ms, namespace, event_type,
  metadata``). Numbers, strings and booleans are kept under ``detail.<key>`` with their line;
  keys that repeat (``generic_message``) are kept as repeated; objects (file hashes) are not kept.
  Numbers in the detail log are rounded by loadgen to about six significant digits (99123 vs the
  summary's 99123.04): the check compares the two as intervals (R11), never for equality.
  ``loadgen_version`` is the format version; ``test_datetime`` (UTC) the run's start.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import as_dict, head_text, is_number, published
from bench_ledger.importers.base import json_problem, loads
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, Published, RunInfo, Stated
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

TOOL = Tool.MLPERF_LOADGEN
SUCCESS_RULE = "aggregates only: loadgen's per-sample records are not in these logs"
_PREFIX = re.compile(r"^(?P<prefix>.*?)_?mlperf_log_(?:summary|detail)\.txt$")
_RUN_DIR = re.compile(r"^run_\d+$")
MLLOG = ":::MLLOG "


def rate_factor(scenario: str | None, rate: Published | None) -> dict[str, Stated]:
    """The request rate loadgen states: its target QPS in the Server scenario (Poisson arrivals at that
    rate). In Offline it only sizes the one query, in SingleStream/MultiStream there is no rate: none."""
    if scenario != "Server" or rate is None or rate.locator is None:
        return {}
    return {"request_rate": Stated(value=rate.text, at=rate.locator)}


def run_label(path: Path) -> str:
    """The folder of a summary/detail pair, as far up as the submission layout names it."""
    parent = path.parent
    parts = list(parent.parts[-5:]) if _RUN_DIR.match(parent.name) else [parent.name]
    m = _PREFIX.match(path.name)
    if m and m["prefix"]:
        parts.append(m["prefix"])
    return f"{TOOL} {'/'.join(parts)}"


# what a summary and a detail log of one run both state (summary line -> detail key): the pair's facts
_FACTS = {
    "Scenario": "effective_scenario",
    "Min latency (ns)": "result_min_latency_ns",
    "Max latency (ns)": "result_max_latency_ns",
    "qsl_rng_seed": "effective_qsl_rng_seed",
    "schedule_rng_seed": "effective_schedule_rng_seed",
}


def pairing(path: Path, facts: dict[str, str]) -> Pairing:
    """The pair key of a summary or detail log: loadgen's file names with the prefix a copy kept
    before ``mlperf_log_`` (the folder is compared by the store); the facts both logs state."""
    m = _PREFIX.match(path.name)
    return Pairing(key=f"mlperf {m['prefix'] + '_' if m and m['prefix'] else ''}mlperf_log", facts=facts)


def unit_kind(key: str) -> tuple[str | None, str]:
    """Unit and quantity kind from a summary label or a detail key."""
    low = key.lower()
    if low.endswith("(ns)") or low.endswith("_ns") or (low.startswith("result_time_to_output_token")):
        kind = "duration" if "duration" in low else "latency"
        return "ns", kind
    if low.endswith("(ms)") or low.endswith("_ms"):
        return "ms", "duration" if "duration" in low else "latency"
    if "tokens per second" in low or "tokens_per_second" in low or low.startswith("result_token_throughput"):
        return "tokens/s", "aggregate_token_rate"
    if "samples per second" in low or "samples_per_sec" in low or low.endswith("_qps") or low == "target_qps":
        return "samples/s", "request_rate"
    if "query_count" in low or "sample_count" in low or low.endswith("samples_per_query") or low == "num_errors":
        return None, "count"
    return None, "other"


def _value(key: str, text: str, locator: str, note: str | None = None) -> Published:
    unit, kind = unit_kind(key)
    raw = text.strip()
    p = published(key, raw, locator=locator, unit=unit, kind=kind, note=note)
    if p is None or p.value is None:
        return Published(key=key, text=raw, locator=locator, note=note)
    return p


class MlperfSummaryImporter:
    name = "mlperf-summary"
    description = "MLPerf Inference loadgen mlperf_log_summary.txt (results, validity, settings)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if "MLPerf Results Summary" not in text[:400]:
            return "no 'MLPerf Results Summary' header"
        return None

    def parse(self, path: Path, options) -> ParsedArtefact:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise ParseError(path, "line 1", None, "not UTF-8 text") from None
        out: list[Published] = []
        metadata: dict[str, str] = {}
        block = None
        early: str | None = None
        for lineno, line in enumerate(lines, start=1):
            s = line.strip()
            if not s or set(s) == {"="}:
                continue
            if ":" not in s:
                if s in ("MLPerf Results Summary", "Additional Stats", "Test Parameters Used"):
                    block, early = s, None
                elif s.startswith("*") and early is not None:
                    out.append(Published(key=early, text=s, locator=f"line {lineno}", note=block))
                continue
            key, _, value = s.partition(":")
            key, value = key.strip(), value.strip()
            if key.endswith("Early Stopping Result") and not value:
                early = key
                continue
            early = None
            if block == "MLPerf Results Summary" and key in ("SUT name", "Scenario", "Mode", "Result is"):
                metadata[key] = value
            out.append(_value(key, value, f"line {lineno}", block))
        if "Scenario" not in metadata:
            raise ParseError(path, "line 1", "Scenario", "no 'Scenario :' line in the MLPerf summary")
        stated = {
            p.key: p.text
            for p in out
            if p.key in _FACTS and p.note in ("MLPerf Results Summary", "Additional Stats", "Test Parameters Used")
        }
        run = ParsedRun(
            info=RunInfo(
                label=run_label(path),
                tool=TOOL,
                locator="line 1",
                metadata=metadata,
                pairing=pairing(path, {k: stated[k] for k in _FACTS if k in stated}),
                factors=rate_factor(metadata.get("Scenario"), next((p for p in out if p.key == "target_qps"), None)),
            ),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=out,
        )
        return ParsedArtefact(format=self.name, format_version=None, runs=[run])


class MlperfDetailImporter:
    name = "mlperf-detail"
    description = "MLPerf Inference loadgen mlperf_log_detail.txt (:::MLLOG key/value events)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith(MLLOG):
            return "does not start with ':::MLLOG'"
        return None

    def parse(self, path: Path, options) -> ParsedArtefact:
        out: list[Published] = []
        metadata: dict[str, str] = {}
        version = None
        started = None
        errors = warnings = 0
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                text = raw.decode("utf-8", errors="replace").strip()
                if not text:
                    continue
                if not text.startswith(MLLOG):
                    raise ParseError(path, f"line {lineno}", None, "expected a ':::MLLOG {json}' line")
                try:
                    event = loads(text[len(MLLOG) :])
                except json.JSONDecodeError as exc:
                    raise ParseError(
                        path, f"line {lineno} column {exc.colno + len(MLLOG)}", None, f"invalid JSON: {exc.msg}"
                    ) from None
                except (ValueError, RecursionError) as exc:  # a key twice, nesting or digits beyond Python's limits
                    raise ParseError(path, f"line {lineno}", None, json_problem(exc)) from None
                if not isinstance(event, dict) or not isinstance(event.get("key"), str) or "value" not in event:
                    raise ParseError(path, f"line {lineno}", "key", "an MLLOG event needs a string 'key' and a 'value'")
                key, value = event["key"], event["value"]
                meta = as_dict(event.get("metadata"))
                errors += bool(meta.get("is_error"))
                warnings += bool(meta.get("is_warning"))
                loc = f"line {lineno}"
                note = f"time_ms {event['time_ms']}" if is_number(event.get("time_ms")) else None
                if key == "loadgen_version" and isinstance(value, str):
                    version = value
                if key == "test_datetime" and isinstance(value, str):
                    try:
                        started = datetime.fromisoformat(value.replace("Z", "+00:00"))
                    except ValueError:
                        raise ParseError(path, loc, "test_datetime", f"not an ISO time: {value!r}") from None
                if key in (
                    "effective_scenario",
                    "effective_test_mode",
                    "result_validity",
                    "loadgen_version",
                    "power_begin",
                    "power_end",
                    "test_datetime",
                ) and isinstance(value, str):
                    metadata[key] = value
                if isinstance(value, bool):
                    out.append(
                        Published(key=f"detail.{key}", text="true" if value else "false", locator=loc, note=note)
                    )
                elif isinstance(value, str):
                    out.append(Published(key=f"detail.{key}", text=value, locator=loc, note=note))
                elif is_number(value):
                    unit, kind = unit_kind(key)
                    p = published(f"detail.{key}", value, locator=loc, unit=unit, kind=kind, note=note)
                    if p is not None:
                        out.append(p)
        if not out:
            raise ParseError(path, "line 1", None, "no :::MLLOG events")
        metadata["error_events"], metadata["warning_events"] = str(errors), str(warnings)
        stated = {p.key.removeprefix("detail."): p.text for p in out}
        run = ParsedRun(
            info=RunInfo(
                label=run_label(path),
                tool=TOOL,
                tool_version=version,
                started_at=started,
                locator="line 1",
                metadata=metadata,
                pairing=pairing(path, {k: stated[d] for k, d in _FACTS.items() if d in stated}),
                factors=rate_factor(
                    metadata.get("effective_scenario"),
                    next((p for p in out if p.key == "detail.effective_target_qps"), None),
                ),
            ),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=out,
        )
        return ParsedArtefact(
            format=self.name,
            format_version=version,
            runs=[run],
            note="detail-log numbers are rounded by loadgen (about 6 significant digits)",
        )


IMPORTER = MlperfSummaryImporter()
IMPORTERS = (IMPORTER, MlperfDetailImporter())
