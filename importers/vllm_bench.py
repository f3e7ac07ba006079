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

from collections.abc import Iterator
from pathlib import Path

from bench_ledger.importers._vllm_result import (
    NO_AUDIO,
    SGLANG_MARKERS,
    ZERO_STATS,
    iter_objects,
    parse_run,
    published,
    success_rule_lists,
    top_keys,
)
from bench_ledger.importers.base import ParseOptions, file_size, first_json_value, prefetched
from bench_ledger.importers.vllm_sweep import relabel
from bench_ledger.records import ParsedArtefact, ParsedRun

__all__ = ["IMPORTER", "NO_AUDIO", "ZERO_STATS", "VllmBenchImporter", "parse_run", "published", "success_rule_lists"]

# The DuckDB-parsed path for regular JSON Lines files (importers._vllm_bench_duckdb; issue 7). Anything it
# does not recognise as regular falls back to the Python path (importers._vllm_result), which owns every error message.
FAST_PATH = True
FAST_MIN_BYTES = 1 << 20  # smaller files: the Python path (DuckDB's start-up would cost more than it saves)


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
        return ParsedArtefact(format=self.name, format_version=None, runs=prefetched(relabel(path, _runs(path))))


def _runs(path: Path, fast: bool | None = None) -> Iterator[ParsedRun]:
    """Runs of the file: DuckDB-parsed (:func:`_vllm_bench_duckdb.fast_runs`) where the file is regular, else in
    Python (a run=N.json of `vllm bench sweep` is relabelled by ``parse``)."""
    if fast or (fast is None and FAST_PATH and file_size(path) >= FAST_MIN_BYTES):
        from bench_ledger.importers._vllm_bench_duckdb import fast_runs

        runs = fast_runs(path)
        if runs is not None:
            yield from runs
            return
    for line, prefix, obj in iter_objects(path):
        yield parse_run(obj, line, prefix, path)


IMPORTER = VllmBenchImporter()
