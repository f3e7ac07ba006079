"""The console output of ``vllm bench serve``: the "Serving Benchmark Result" table, as printed.

vLLM prints its aggregates rounded to two decimals (``Request throughput (req/s): 0.17``) while
the ``--save-result`` JSON keeps full floats: the table is a second, rounded claim of the same
numbers (R11). Each row becomes a reported value under the JSON key vLLM fills it from
(``output_throughput``, ``mean_ttft_ms``...), with its printed precision, so ``ledger check``
compares it with the recomputation (or, imported with ``--run`` onto the JSON's run, with the
per-request records) within half a unit of its last printed digit. Rows this module does not
know are kept under their printed label. Progress bars are not kept.

The argparse ``Namespace(...)`` dump gives the run's settings (num_prompts, max_concurrency,
request_rate, seed, dataset_name) and, with ``save_result=True``, the ``result_filename`` of the
JSON the same run wrote: the run pairs with that file (``ledger.pairing``; a copy may carry a
prefix, ``benchmaq_<name>``) when both state the same num_prompts, completed count and model.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.factors import model_name
from bench_ledger.importers._toolfiles import ENGINE_BACKENDS, distinct_served, head_text, published
from bench_ledger.importers._vllm_result import placeholders
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, RunInfo, Stated
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

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
# one argument of the Namespace dump: ``, name=value`` (a quoted text, a number, inf or None)
_ARG = r"(?:\(|, ){}=(?:'(?P<text>[^']*)'|(?P<bare>[^,()]*))"


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
        args, at = _namespace(lines[:start])
        completed = next((p.value for p in out if p.key == "completed"), None)
        failed = next((p.value for p in out if p.key == "failed"), None)
        prompts = _int(args.get("num_prompts"))
        if prompts is None and completed is not None and failed is not None:
            prompts = int(completed + failed)
        named = args.get("result_filename") if args.get("save_result") == "True" else None
        facts = {"completed": str(int(completed))} if completed is not None else {}
        if args.get("model"):
            facts["model"] = args["model"]
        run = ParsedRun(
            info=RunInfo(
                label=_label(path, args),
                tool=Tool.VLLM_BENCH,
                locator=f"line {start + 1}",
                metadata=metadata,
                request_count=prompts,
                concurrency=_int(args.get("max_concurrency")),
                request_rate=args.get("request_rate") or None,
                seed=_int(args.get("seed")),
                dataset=args.get("dataset_name") or None,
                factors=_factors(args, at),
                pairing=Pairing(names=named, requests=prompts, facts=facts) if named else None,
            ),
            capture=Capture(
                fields=[],
                record_count=0,
                token_source="unknown",
                success_rule="aggregates only: the console table has no per-request records",
            ),
            published=placeholders(out),
        )
        return ParsedArtefact(
            format=self.name, format_version=None, runs=[run], note="vLLM's console table: rounded as printed (R11)"
        )


def _label(path: Path, args: dict[str, str]) -> str:
    """The run's label as the result JSON's (``vllm_bench``): model, rate and concurrency from the
    ``Namespace`` line; the file's name where it printed none."""
    if not args.get("model"):
        return f"vllm-bench console {path.stem}"
    return (
        f"{model_name(args['model'])} rate={args.get('request_rate') or 'inf'} c={args.get('max_concurrency') or 'inf'}"
    )


# factor -> the Namespace arguments stating it, first found wins: the general --input-len/--output-len
# override the random dataset's own (vLLM's datasets.py); those apply only where dataset_name is random
_FACTOR_ARGS = {
    "model": ("model",),
    "served_model": ("served_model_name",),
    "engine": ("backend",),
    "dataset": ("dataset_path", "dataset_name"),
    "input_len": ("input_len", "random_input_len"),
    "output_len": ("output_len", "random_output_len"),
    "concurrency": ("max_concurrency",),
    "request_rate": ("request_rate",),
    "prompt_count": ("num_prompts",),
}
_ARGS = (
    "num_prompts",
    "max_concurrency",
    "request_rate",
    "seed",
    "dataset_name",
    "model",
    "save_result",
    "result_filename",
    "served_model_name",
    "backend",
    "dataset_path",
    "input_len",
    "output_len",
    "random_input_len",
    "random_output_len",
)


def _factors(args: dict[str, str], at: str) -> dict[str, Stated]:
    """What the Namespace line (``at``) states of the system under test and the load."""
    out: dict[str, Stated] = {}
    for factor, names in _FACTOR_ARGS.items():
        for name in names:
            if name.startswith("random_") and args.get("dataset_name") != "random":
                continue
            if (value := args.get(name, "").strip()) and (factor != "engine" or value in ENGINE_BACKENDS):
                out[factor] = Stated(value=value, at=f"{at} {name}")
                break
    return distinct_served(out)


def _namespace(lines: list[str]) -> tuple[dict[str, str], str]:
    """The arguments of the ``Namespace(...)`` line the run printed, as texts (``None`` left out), and
    that line (``line N``)."""
    n, line = next(((i, ln) for i, ln in enumerate(lines, start=1) if _NAMESPACE_LINE.match(ln)), (0, None))
    out: dict[str, str] = {}
    if line is None:
        return out, ""
    for name in _ARGS:
        if (m := re.search(_ARG.format(name), line)) is not None:
            value = m["text"] if m["text"] is not None else m["bare"].strip()
            if value != "None":
                out[name] = value
    return out, f"line {n}"


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


IMPORTER = VllmConsoleImporter()
