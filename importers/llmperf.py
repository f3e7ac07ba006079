"""ray-project llmperf ``*_individual_responses.json``: one JSON array of per-request records.

Each record: ``error_code`` (null or int), ``error_msg``, ``ttft_s``, ``end_to_end_latency_s``,
``inter_token_latency_s`` (a per-request *mean*, so it becomes ``itl_mean_s``, never chunk gaps),
``request_output_throughput_token_per_s``, ``number_total_tokens``, ``number_output_tokens``,
``number_input_tokens``. There are no timestamps and no ITL list. Token counts are re-counted by
llmperf with a client-side tokenizer, so they are ``client_tokenizer``, not server usage.

``request_output_throughput_token_per_s`` (llmperf's own per-request value, flag ``reported``: its
10 summary statistics are taken over it) and ``number_total_tokens`` (``measured``) have no request
column: they are kept as ``request_value`` rows (ParsedRun.request_values), for ok records only,
like the timings.

The paired ``*_summary.json`` is a separate artefact (importer ``llmperf-summary`` in
:mod:`importers.llmperf_summary`); both carry the file prefix they share as their pairing key
(:func:`pairing_key`), with the request count, so the import attaches the second to the first's run
(``ledger.pairing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import build_columns, has_key, head_text, integer, jpath, mapping, number
from bench_ledger.importers.base import ParseOptions, load_json
from bench_ledger.records import Capture, Pairing, ParsedArtefact, ParsedRun, RequestValues, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER", "pairing"]

# per-request values without a request column: key -> flag (ledger.vocab.RequestValueFlag)
VALUE_KEYS = {"request_output_throughput_token_per_s": "reported", "number_total_tokens": "measured"}
SUCCESS_RULE = (
    "ok iff error_code is null (llmperf's own rule: its summary statistics use exactly these "
    "records); failed otherwise, with error_msg as the error. Timing and output-token values of "
    "failed records are not kept: llmperf writes its initial zeros or partial values there."
)


class LlmperfIndividualImporter:
    name = "llmperf-individual"
    description = "ray-project llmperf *_individual_responses.json (per-request records)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("["):
            return "not a JSON array"
        if not all(has_key(text, k) for k in ("ttft_s", "end_to_end_latency_s", "error_code")):
            return "array records lack llmperf's ttft_s / end_to_end_latency_s / error_code"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        data = load_json(path)
        if not isinstance(data, list):
            raise ParseError(path, "$", None, "expected a JSON array of llmperf request records")
        rows = [_row(path, i, rec) for i, rec in enumerate(data)]
        kept = {key: RequestValues(flag=flag, values=[r.pop(key) for r in rows]) for key, flag in VALUE_KEYS.items()}
        columns = build_columns(rows)
        fields = ["status", "error", "input_tokens", "output_tokens", "ttft_s", "latency_s", "itl_mean_s"]
        # A field no record carried at all is n/a for the whole capture, never zero (R9).
        fields = [f for f in fields if f in ("status", "error") or any(r.get(f) is not None for r in rows)]
        failed = sum(1 for r in rows if r["status"] == "failed")
        run = ParsedRun(
            info=RunInfo(
                label=f"llmperf {pairing_key(path, INDIVIDUAL) or path.stem}",
                tool=Tool.LLMPERF,
                request_count=len(rows),
                locator="$",
                metadata={"failed_records": str(failed)},
                pairing=pairing(path, INDIVIDUAL, len(rows)),
            ),
            capture=Capture(
                fields=fields,
                record_count=len(rows),
                clock=None,
                token_source="client_tokenizer",
                success_rule=SUCCESS_RULE,
            ),
            requests=columns,
            request_values={k: v for k, v in kept.items() if any(x is not None for x in v.values)},
        )
        return ParsedArtefact(format=self.name, format_version=None, runs=[run])


INDIVIDUAL = ("_individual_responses", "individual_")  # the records file's (suffix, prefix): pairing_key


def pairing_key(path: Path, affixes: tuple[str, str]) -> str | None:
    """The prefix llmperf's two files of one run share, from the file name: llmperf writes
    ``<prefix>_summary.json`` and ``<prefix>_individual_responses.json``; the llmperf leaderboard keeps
    them as ``summary/<prefix>.json`` and ``individual/<prefix>.json`` (or ``summary_<prefix>.json``).
    ``affixes`` is this file's (suffix, prefix); None when the name has neither."""
    stem = path.name.removesuffix(".json")
    suffix, prefix = affixes
    if stem.endswith(suffix) and len(stem) > len(suffix):
        return stem[: -len(suffix)]
    if stem.startswith(prefix) and len(stem) > len(prefix):
        return stem[len(prefix) :]
    if path.parent.name == prefix.rstrip("_"):  # raw_data/individual/<prefix>.json
        return stem
    return None


def pairing(path: Path, affixes: tuple[str, str], requests: int | None) -> Pairing | None:
    key = pairing_key(path, affixes)
    return None if key is None else Pairing(key=f"llmperf {key}", requests=requests)


def _row(path: Path, i: int, rec: Any) -> dict[str, Any]:
    where = jpath(i)
    rec = mapping(path, where, None, rec)
    code = rec.get("error_code")
    if code is not None:
        code = integer(path, where, "error_code", code)
    ok = code is None
    msg = rec.get("error_msg")
    row: dict[str, Any] = {
        "idx": i,
        "line": None,
        "status": "ok" if ok else "failed",
        "error": None if ok else f"{code}: {msg}" if msg else str(code),
        "input_tokens": integer(path, where, "number_input_tokens", rec.get("number_input_tokens")),
    }
    # Validate every numeric field, even those we drop for failed records.
    values = {
        "ttft_s": number(path, where, "ttft_s", rec.get("ttft_s")),
        "latency_s": number(path, where, "end_to_end_latency_s", rec.get("end_to_end_latency_s")),
        "itl_mean_s": number(path, where, "inter_token_latency_s", rec.get("inter_token_latency_s")),
        "output_tokens": integer(path, where, "number_output_tokens", rec.get("number_output_tokens")),
    }
    throughput = number(
        path, where, "request_output_throughput_token_per_s", rec.get("request_output_throughput_token_per_s")
    )
    total = integer(path, where, "number_total_tokens", rec.get("number_total_tokens"))
    row["request_output_throughput_token_per_s"] = float(throughput) if ok and throughput is not None else None
    row["number_total_tokens"] = float(total) if ok and total is not None else None
    if ok:
        row.update({k: (float(v) if k != "output_tokens" and v is not None else v) for k, v in values.items()})
    return row


IMPORTER = LlmperfIndividualImporter()
