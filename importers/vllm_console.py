"""The console output of ``vllm bench serve``: the "Serving Benchmark Result" table, as printed.

vLLM prints its aggregates rounded to two decimals (``Request throughput (req/s): 0.17``) while
the ``--save-result`` JSON keeps full floats: the table is a second, rounded claim of the same
numbers (R11). Each row becomes a reported value under the JSON key vLLM fills it from
(``output_throughput``, ``mean_ttft_ms``...), with its printed precision, so ``ledger check``
compares it with the recomputation (or, imported with ``--run`` onto the JSON's run, with the
per-request records) within half a unit of its last printed digit. Rows this module does not
know are kept under their printed label. The argparse ``Namespace(...)`` dump and progress bars
are not kept.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import head_text, published
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, RunInfo
from bench_ledger.tools import Tool

BANNER = "Serving Benchmark Result"
# vLLM prints the banner centred in '=' (``"{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")``)
# on a line of its own, and its argparse dump as a line starting ``Namespace(``. A text that merely
# mentions either (a README, a MANIFEST naming the file) is not console output.
_BANNER_LINE = re.compile(r"^=+ ?Serving Benchmark Result ?=+\r?$", re.MULTILINE)
_NAMESPACE_LINE = re.compile(r"^Namespace\(.*\bbench_type='serve'", re.MULTILINE)
_ROW = re.compile(r"^(?P<label>[A-Za-z][^:]*?):\s+(?P<value>\S+)\s*$")
_STAT = re.compile(r"^(?P<stat>Mean|Median|P\d+(?:\.\d+)?|Std) (?P<metric>TTFT|TPOT|ITL|E2EL) \(ms\)$")
# printed label -> (JSON key, unit, quantity kind)
ROWS: dict[str, tuple[str, str | None, str]] = {
    "Successful requests": ("completed", None, "request_count"),
    "Failed requests": ("failed", None, "request_count"),
    "Benchmark duration (s)": ("duration", "s", "duration"),
    "Total input tokens": ("total_input_tokens", "tokens", "token_count"),
    "Total generated tokens": ("total_output_tokens", "tokens", "token_count"),
    "Request throughput (req/s)": ("request_throughput", "requests/s", "request_rate"),
    "Request goodput (req/s)": ("request_goodput", "requests/s", "request_rate"),
    "Output token throughput (tok/s)": ("output_throughput", "tokens/s", "aggregate_token_rate"),
    "Peak output token throughput (tok/s)": ("max_output_tokens_per_s", "tokens/s", "aggregate_token_rate"),
    "Peak concurrent requests": ("max_concurrent_requests", None, "concurrency"),
    "Total Token throughput (tok/s)": ("total_token_throughput", "tokens/s", "aggregate_token_rate"),
    "Total token throughput (tok/s)": ("total_token_throughput", "tokens/s", "aggregate_token_rate"),
}
SETTINGS = ("Maximum request concurrency", "Traffic request rate", "Burstiness factor")


class VllmConsoleImporter:
    name = "vllm-bench-console"
    description = "console output of `vllm bench serve` (the Serving Benchmark Result table, rounded as printed)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if _BANNER_LINE.search(text) or _NAMESPACE_LINE.search(text):
            return None
        return "no '=== Serving Benchmark Result ===' banner line and no `Namespace(... bench_type='serve' ...)` line"

    def parse(self, path: Path, options) -> ParsedArtefact:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise ParseError(path, None, None, str(exc)) from None
        try:
            start = next(i for i, ln in enumerate(lines) if _BANNER_LINE.match(ln))
        except StopIteration:
            raise ParseError(path, None, None, f"no '{BANNER}' table (the run did not finish?)") from None
        out, metadata = [], {}
        for lineno in range(start + 2, len(lines) + 1):
            line = lines[lineno - 1].strip()
            if line.startswith("=" * 10):
                break
            m = _ROW.match(line)
            if m is None:
                continue
            label, value = m["label"].strip(), m["value"]
            if label in SETTINGS:
                metadata[label] = value
                continue
            if (st := _STAT.match(label)) is not None:
                key, unit, kind = f"{st['stat'].lower()}_{st['metric'].lower()}_ms", "ms", "latency"
            else:
                key, unit, kind = ROWS.get(label, (label, None, "other"))
            p = published(key, value, locator=f"line {lineno}", unit=unit, kind=kind, note="as printed on the console")
            if p is not None:
                out.append(p)
        for line in lines[:start]:  # settings printed before the table
            for setting in SETTINGS:
                if line.startswith(setting + ":"):
                    metadata.setdefault(setting, line.split(":", 1)[1].strip())
        run = ParsedRun(
            info=RunInfo(label=f"vllm-bench console {path.stem}", tool=Tool.VLLM_BENCH, locator=f"line {start + 1}",
                         metadata=metadata),  # fmt: skip
            capture=Capture(fields=[], record_count=0, token_source="unknown",
                            success_rule="aggregates only: the console table has no per-request records"),  # fmt: skip
            published=out,
        )
        return ParsedArtefact(format=self.name, format_version=None, runs=[run],
                              note="vLLM's console table: rounded as printed (R11)")  # fmt: skip


IMPORTER = VllmConsoleImporter()
