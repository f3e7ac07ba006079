"""vLLM server start-up log -> facts with their source line (formats.md section 8).

Why it is built this way:

* Processes interleave (``(APIServer pid=…)``, ``(EngineCore_0 pid=…)``, ``(EngineCore_DP1 pid=…)``,
  ``(Worker_TP3 pid=…)``), so every fact keeps its process prefix: a KV pool is per engine / DP group.
* Captures are often hard-wrapped at a fixed width. A physical line that starts with neither a process
  prefix, a log level nor a timestamp continues the previous record; the pieces are joined without a
  separator (the wrap cut mid-word) and the record keeps its FIRST physical line number.
* vLLM prints no year (``09-04 01:29:05``): timestamps are kept as printed; elapsed times are computed
  on month-day-time, across midnight and the new year.
* Numbers are kept as printed (``464,848``) and as an exact Decimal with the commas removed (R11).

Fact kinds (:data:`bench_ledger.vocab.LOG_FACT_KINDS` gives each its meaning and quantity kind):

========================== ===== =============================================================
kind                       unit  from
========================== ===== =============================================================
kv_cache_tokens            tokens ``GPU KV cache size: %s tokens`` (per engine / DP group)
max_concurrency_ratio      x     ``Maximum concurrency for %s tokens per request: %.2fx``
max_concurrency_window_tokens tokens the window of that line
model_allocation           GiB   ``Model loading took %s GiB and %.6f seconds`` (per rank; unit as printed)
model_load_seconds         s     the seconds of that line
weights_load_seconds       s     ``Loading weights took %.2f seconds``
kv_cache_memory            GiB   ``Available KV cache memory: %s GiB`` (unit as printed)
num_gpu_blocks             blocks ``num_gpu_blocks is: %d`` (or V0 ``# GPU blocks: %d``)
init_engine_seconds        s     ``init engine (profile, create kv cache, warmup model) took %s seconds``
engine_version             -     ``vLLM API server version X`` (text only)
api_server_start           -     ``Starting vLLM API server … on http://…`` (text: the URL)
ready                      -     uvicorn ``Application startup complete.`` (no timestamp printed)
seconds_to_ready           s     DERIVED, see below
engine_error               -     every ERROR / CRITICAL record (text: its message)
arg_<name>                 (kind) ``non-default args: {…}`` (vLLM's ``log_non_default_args``): one fact per
                                 key of :data:`bench_ledger.vocab.ENGINE_ARGS` the dict holds, value as printed; a key
                                 the dict does not hold was left at vLLM's default (not recorded)
max_model_len              tokens ``Using max model len %s`` (the context window the engine resolved)
max_num_batched_tokens     tokens ``Chunked prefill is enabled with max_num_batched_tokens=%d.``
torch_compile_seconds      s     ``torch.compile takes|took %.2f s in total`` (older: ``graph
                                 compilation takes %.2f s in total``)
compile_and_profile_seconds s    ``torch.compile and initial profiling run took %.2f s in total``
dynamo_transform_seconds   s     ``Dynamo bytecode transform time: %.2f s``
compile_cache_load_seconds s     ``Directly load the compiled graph(s) for … from the cache, took %.3f s``:
                                 the compiled graphs came from the compile cache (warm)
graph_compile_seconds      s     ``Compiling a graph for … takes %.2f s``: a graph was compiled (cold)
cuda_graph_capture_seconds s     ``Graph capturing finished in %.0f secs, took %.2f GiB``
cuda_graph_memory          GiB   the GiB of that line: free device memory before minus after capture
warm_compile               -     DERIVED, see below (text: warm, cold or unknown)
========================== ===== =============================================================

``warm_compile`` (R8: the compile-cache state of this launch, measured from its log) is ``warm``
when the log has compile-cache loads and no graph compilation, ``cold`` when it compiled graphs and
loaded none, ``unknown`` when it did both (some shapes or ranks missed the cache); it sits at the
first line of that evidence. A log with neither line (eager mode, an old vLLM, a cut capture) has no
``warm_compile`` fact: the state stays unknown.

``seconds_to_ready`` = (last timestamp printed at or before the ``ready`` line) - (the first
timestamp of the log: the launcher's first line, taken as process start). uvicorn prints no time, so
the value has 1 s resolution and is a lower bound; it is one launch stage's time to READY (R8: never
compare it across stages as a cold/warm A/B). A log without a ready line (a failed launch) has no
``seconds_to_ready``; its ``engine_error`` facts carry the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers.base import ParseOptions, first_json_value, refuse_cut_last_line
from bench_ledger.records import LogFact, ParsedArtefact
from bench_ledger.vocab import (
    COMPILE_CACHE_LOAD_SECONDS,
    ENGINE_ARGS,
    ENGINE_ERROR,
    GRAPH_COMPILE_SECONDS,
    KV_CACHE_TOKENS,
    LOG_FACT_KINDS,
    MAX_CONCURRENCY_WINDOW_TOKENS,
    MAX_MODEL_LEN,
    MAX_NUM_BATCHED_TOKENS,
    READY,
    SECONDS_TO_READY,
    WARM_COMPILE,
    engine_arg_kind,
)

__all__ = ["FACT_KINDS", "IMPORTER", "elapsed_seconds"]

# kind -> (quantity kind in ledger.kinds.KINDS or None for text facts, meaning): the vocabulary's
FACT_KINDS = LOG_FACT_KINDS

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"\((?P<proc>[^()]*?\bpid=\d+[^()]*)\)\s?")
_TS = r"\d\d-\d\d \d\d:\d\d:\d\d"
_STARTS_RECORD = re.compile(rf"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|{_TS}")
_VLLM_HEAD = re.compile(
    rf"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<ts>{_TS})(?:[.,]\d+)?\s+(?:\[[^\]]*\]\s?)?(?P<msg>.*)",
    re.S,
)
_UVICORN_HEAD = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+(?P<msg>.*)", re.S)
_NUMBER = re.compile(
    r"-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
)  # negative: a failed launch prints "-1.20 GiB"
_SNIFF = re.compile(rf"(?:^|\) )(?:DEBUG|INFO|WARNING|ERROR) {_TS} \[|^\((?:APIServer|EngineCore)", re.M)

_NUMERIC_FACTS: tuple[tuple[re.Pattern[str], tuple[tuple[str, str | None], ...]], ...] = (
    # pattern, ((kind, unit or None to take group 'u'), ...) in group order n1, n2
    (re.compile(r"GPU KV cache size: (?P<n1>\S+) tokens"), ((KV_CACHE_TOKENS, "tokens"),)),
    (
        re.compile(r"Maximum concurrency for (?P<n2>\S+) tokens per request: (?P<n1>\S+?)x"),
        (("max_concurrency_ratio", "x"), (MAX_CONCURRENCY_WINDOW_TOKENS, "tokens")),
    ),
    (
        re.compile(r"Model loading took (?P<n1>\S+) (?P<u>GiB|GB|MiB|MB) and (?P<n2>\S+) seconds"),
        (("model_allocation", None), ("model_load_seconds", "s")),
    ),
    (re.compile(r"Loading model weights took (?P<n1>\S+) (?P<u>GiB|GB|MiB|MB)"), (("model_allocation", None),)),
    (re.compile(r"Loading weights took (?P<n1>\S+) seconds"), (("weights_load_seconds", "s"),)),
    (re.compile(r"Available KV cache memory: (?P<n1>\S+) (?P<u>GiB|GB|MiB|MB)"), (("kv_cache_memory", None),)),
    (re.compile(r"num_gpu_blocks is: (?P<n1>\S+)"), (("num_gpu_blocks", "blocks"),)),
    (re.compile(r"# (?:GPU|cuda) blocks: (?P<n1>[^\s,]+)"), (("num_gpu_blocks", "blocks"),)),
    (
        re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<n1>\S+) seconds"),
        (("init_engine_seconds", "s"),),
    ),
    (re.compile(r"^Using max model len (?P<n1>\S+)$"), ((MAX_MODEL_LEN, "tokens"),)),
    (
        re.compile(r"^Chunked prefill is enabled with max_num_batched_tokens=(?P<n1>\d+)"),
        ((MAX_NUM_BATCHED_TOKENS, "tokens"),),
    ),
    (
        re.compile(r"^torch\.compile and initial profiling run took (?P<n1>\S+) s in total"),
        (("compile_and_profile_seconds", "s"),),
    ),
    (
        re.compile(r"^(?:torch\.compile|graph compilation) (?:takes|took) (?P<n1>\S+) s in total"),
        (("torch_compile_seconds", "s"),),
    ),
    (re.compile(r"^Dynamo bytecode transform time: (?P<n1>\S+) s"), (("dynamo_transform_seconds", "s"),)),
    (
        re.compile(r"^Directly load the compiled graph\(s\) for .* from the cache, took (?P<n1>\S+) s"),
        ((COMPILE_CACHE_LOAD_SECONDS, "s"),),
    ),
    (re.compile(r"^Compiling a graph for .* takes (?P<n1>\S+) s"), ((GRAPH_COMPILE_SECONDS, "s"),)),
    (
        re.compile(r"^Graph capturing finished in (?P<n1>\S+) secs, took (?P<n2>\S+) (?P<u>GiB|GB|MiB|MB)"),
        (("cuda_graph_capture_seconds", "s"), ("cuda_graph_memory", None)),
    ),
)
_ARGS_LINE = re.compile(r"^non-default args: \{(?P<body>.*)\}$", re.S)
_TEXT_FACTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"vLLM API server version (?P<t>\S+)"), "engine_version"),
    (re.compile(r"Starting vLLM API server\b.*? on (?P<t>\S+)"), "api_server_start"),
)


@dataclass
class _Record:
    """One log record, hard-wrapped pieces joined; ``line`` is its first physical line."""

    line: int
    process: str | None
    body: str
    level: str | None = None
    ts: str | None = None
    msg: str = ""


def _records(path: Path) -> list[_Record]:
    records: list[_Record] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, raw in enumerate(fh, start=1):
            text = _ANSI.sub("", raw.rstrip("\r\n"))
            m = _PREFIX.match(text)
            if m:
                records.append(_Record(lineno, m.group("proc"), text[m.end() :]))
            elif _STARTS_RECORD.match(text) or not records:
                records.append(_Record(lineno, None, text))
            else:  # a hard-wrapped piece of the previous record
                records[-1].body += text
    for rec in records:
        m = _VLLM_HEAD.match(rec.body)
        if m:
            rec.level, rec.ts, rec.msg = m.group("level"), m.group("ts"), m.group("msg").strip()
            continue
        m = _UVICORN_HEAD.match(rec.body)
        if m:
            rec.level, rec.msg = m.group("level"), m.group("msg").strip()
        else:
            rec.msg = rec.body.strip()
    return records


def _number(path: Path, rec: _Record, kind: str, text: str) -> Decimal:
    if not _NUMBER.fullmatch(text):
        raise ParseError(path, f"line {rec.line}", kind, f"not a number: {text!r}")
    return Decimal(text.replace(",", ""))


def _moment(ts: str, year: int) -> datetime:
    return datetime.strptime(f"{year}-{ts}", "%Y-%m-%d %H:%M:%S")


def elapsed_seconds(start: str, end: str) -> int:
    """Seconds from ``start`` to ``end`` (``mm-dd hh:mm:ss``, no year), ``end`` not before ``start``.

    ``end`` earlier in the calendar than ``start`` means the log crossed a new year. The year is
    unknown, so a non-leap year is assumed unless a 29 February forces a leap year.
    """
    for year in (2001, 2000, 2003):  # non-leap pair, leap start (02-29), leap following year (end 02-29)
        try:
            a = _moment(start, year)
            b = _moment(end, year) if end[:5] >= start[:5] else _moment(end, year + 1)
            if b < a:  # same day, earlier time: a whole year later is not a start-up log
                raise ValueError(f"{end!r} is before {start!r}")
            return int((b - a).total_seconds())
        except ValueError:
            continue
    raise ValueError(f"not a month-day time pair: {start!r}, {end!r}")


def _facts(path: Path, records: list[_Record]) -> list[LogFact]:
    facts: list[LogFact] = []
    first_ts = next((r.ts for r in records if r.ts), None)
    last_ts: str | None = None

    def add(rec: _Record, kind: str, text: str, value: Decimal | None, unit: str | None) -> None:
        facts.append(
            LogFact(
                line=rec.line,
                process=rec.process,
                kind=kind,
                value=value,
                text=text,
                unit=unit,
                quantity_kind=FACT_KINDS[kind][0],
                logged_at=rec.ts,
            )
        )

    for rec in records:
        last_ts = rec.ts or last_ts
        msg = rec.msg
        if rec.level in ("ERROR", "CRITICAL"):
            add(rec, ENGINE_ERROR, msg, None, None)
            continue
        if msg == "Application startup complete." and rec.level is not None:
            add(rec, READY, msg, None, None)
            if first_ts is not None and last_ts is not None:
                try:
                    secs = elapsed_seconds(first_ts, last_ts)
                except ValueError:
                    raise ParseError(
                        path,
                        f"line {rec.line}",
                        SECONDS_TO_READY,
                        f"last time before ready {last_ts!r} is before the first {first_ts!r}",
                    ) from None
                add(rec, SECONDS_TO_READY, str(secs), Decimal(secs), "s")
            continue
        if args := _ARGS_LINE.match(msg):
            for name, kind in ENGINE_ARGS.items():
                if a := re.search(rf"'{name}': (?P<v>[^,{{}}]+)", args.group("body")):
                    text = a.group("v").strip()
                    value = Decimal(text) if _NUMBER.fullmatch(text) else None  # e.g. None: kept as printed
                    add(rec, engine_arg_kind(name), text, value, "tokens" if kind == "token_setting" else None)
            continue
        for pattern, kinds in _NUMERIC_FACTS:
            m = pattern.search(msg)
            if not m:
                continue
            for group, (kind, unit) in zip(("n1", "n2"), kinds):
                text = m.group(group)
                add(rec, kind, text, _number(path, rec, kind, text), unit or m.group("u"))
            break
        for pattern, kind in _TEXT_FACTS:
            m = pattern.search(msg)
            if m:
                add(rec, kind, m.group("t"), None, None)
    facts += _warm_compile(facts)
    return facts


def _warm_compile(facts: list[LogFact]) -> list[LogFact]:
    """The launch's compile-cache state from its cache-load and graph-compile lines (see the module doc)."""
    loads = [f for f in facts if f.kind == COMPILE_CACHE_LOAD_SECONDS]
    compiles = [f for f in facts if f.kind == GRAPH_COMPILE_SECONDS]
    if not loads and not compiles:
        return []
    state = "unknown" if loads and compiles else "warm" if loads else "cold"
    first = min(loads + compiles, key=lambda f: f.line)
    return [LogFact(line=first.line, process=first.process, kind=WARM_COMPILE, text=state, logged_at=first.logged_at)]


class VllmLogImporter:
    name = "vllm-server-log"
    description = "vLLM server start-up log: KV pool, capacity ratio, model allocation, time to READY, errors"

    def sniff(self, head: bytes) -> str | None:
        shape, _ = first_json_value(head)
        if shape != "other":
            return "starts with '{' or '[': JSON, not a server log"
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
        lines = [ln for ln in text.splitlines() if ln.strip()][:20]
        if lines and lines[0].lstrip().startswith("#") and "gpu" in lines[0].lstrip("# ").split():
            return "a '# gpu ...' header: nvidia-smi dmon text, not a vLLM log"
        if "Serving Benchmark Result" in text or "bench_type='serve'" in text:
            return "the console output of `vllm bench serve`, not a server log"
        if any(_SNIFF.search(_ANSI.sub("", ln)) for ln in lines):
            return None
        return "no vLLM log line ('INFO mm-dd hh:mm:ss [file:line]', '(APIServer pid=', '(EngineCore') in the first 20 lines"

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        path = Path(path)
        refuse_cut_last_line(path)  # logging ends every record: a last line without one may be cut
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            log_facts=_facts(path, _records(path)),
            note="timestamps as printed (no year); seconds_to_ready is derived, 1 s resolution, a lower bound",
        )


IMPORTER = VllmLogImporter()
