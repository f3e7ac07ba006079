"""Issue 13: every input of tests/edges/cases.py is refused with the file, the line and the field,
exit 1, no traceback, and the ledger unchanged, on both backends (one ledger per backend)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from bench_ledger.cli import main
from bench_ledger.cli.setup import import_one
from bench_ledger.ingest import ImportTarget
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.edges import cases
from tests.edges import inputs as I

# the message after "error: <file>"
EXPECTED = {
    "negative ttft": ", $.ttfts[2]: field 'ttfts': input should be greater than or equal to 0, got float -0.2",
    "negative latency": ", $.latencies[0]: field 'latencies': input should be greater than or equal to 0, got float -0.5",
    "negative gap": ", $.itls[0][1]: field 'itls': input should be greater than or equal to 0, got float -0.02",
    "negative output tokens": ", $.output_lens[2]: field 'output_lens': input should be greater than or equal to 0, got int -6",
    "NaN latency": ", $.latencies[2]: field 'latencies': expected a number, got float nan",
    "1e400 ttft": ", line 1 column 366: field 'ttfts': the number 1e400 is beyond the range of a 64-bit float (about ±1.8e308); refused",
    "negative duration": ": $.duration: 'duration': -2.5 is below 0 (a value of kind 'duration': a finite number, >= 0)",
    "negative completed": ": $.completed: 'completed': -2 is below 0 (a value of kind 'request_count': a finite number, >= 0)",
    "negative queue time": ", $.queue_times[1]: field 'queue_times': input should be greater than or equal to 0, got float -0.01",
    "NaN queue time": ", $.queue_times[1]: field 'queue_times': input should be a finite number, got float nan",
    "1e400 gap": ", line 1 column 388: field 'itls': the number 1e400 is beyond the range of a 64-bit float (about ±1.8e308); refused",
    "NaN ttft without start times": ", $.ttfts[2]: field 'ttfts': input should be a finite number, got float nan",
    "llmperf negative ttft": ", record 1 of the run: field 'ttft_s': input should be greater than or equal to 0, got -0.5",
    "llmperf negative tokens": ", record 1 of the run: field 'output_tokens': input should be greater than or equal to 0, got -150",
    "non-numeric summary value": ": $.results_ttft_s_mean: 'results_ttft_s_mean' is a latency but its value 'fast' is not a number",
    "negative power, dmon -o DT": ", line 4: field 'pwr': -101.0 is below 0 (a power draw in W: a finite number, >= 0)",
    "negative power, dmon -o T": ", line 4: field 'pwr': -101.0 is below 0 (a power draw in W: a finite number, >= 0)",
    "percent above 100": ", line 4: field 'sm': 911.0 is above 100 (a share of time in percent: a finite number, >= 0, <= 100)",
    "negative KV cache size": ": line 4: kv_cache_tokens: -464848 is below 0 (a value of kind 'kv_pool_tokens': a finite number, >= 0)",
    "nvidia-smi CSV negative power": ", line 3: field 'power.draw': -33.14 is below 0 (a power draw in W: a finite number, >= 0)",
    "dcgmi dmon negative power": ", line 4: field 'POWER': -20.991 is below 0 (a power draw in W: a finite number, >= 0)",
    "nvidia-smi CSV cut in its last value": ", line 3: the last line has no line end: the file may have been cut while it was written, and its last value with it; refused (end the line if it is complete)",
    "dcgmi dmon cut in its last value": ", line 4: the last line has no line end: the file may have been cut while it was written, and its last value with it; refused (end the line if it is complete)",
    "csv negative ttft": ", line 3: field 'ttft_s': input should be greater than or equal to 0, got -0.1",
    "dmon cut in its last value": ", line 6: the last line has no line end: the file may have been cut while it was written, and its last value with it; refused (end the line if it is complete)",
    "log cut in its last line": ", line 6: the last line has no line end: the file may have been cut while it was written, and its last value with it; refused (end the line if it is complete)",
    "csv cut in its last value": ", line 4: the last line has no line end: the file may have been cut while it was written, and its last value with it; refused (end the line if it is complete)",
    "jsonl cut in its last line": ", line 2 column 470: invalid JSON: Unterminated string starting at; the last line has no line end: the file may have been cut while it was written",
    "duplicate key, pretty JSON": ", line 12: field 'completed': key 'completed' appears twice in one object; refused (which value is meant is not known)",
    "duplicate key, JSON Lines": ", line 2: field 'label': key 'label' appears twice in one object; refused (which value is meant is not known)",
    "duplicate key, ledger JSON Lines": ", line 2: field 'ttft_s': key 'ttft_s' appears twice in one object; refused (which value is meant is not known)",
    "deep nesting": ": nested too deeply to read (beyond Python's recursion limit)",
    "deep nesting in the first line": ": format not recognised; tried:",
    "integer beyond 64 bits in a request": ", $.output_lens[2]: field 'output_lens': input should be less than or equal to 2147483647, got int 1180591620717411303424",
    "integer beyond 64 bits in the header": ", $: field 'concurrency': 1180591620717411303424 is above 2,147,483,647 (a count: an integer, >= 0, <= 2,147,483,647)",
    "5,000-digit integer": ", line 1: an integer with more than 4,300 digits",
    "invalid UTF-8 in CSV": ", line 4: not UTF-8 text",
    "lone surrogate in an error": ", $.errors[1]: field 'errors': input should be a valid string, unable to parse raw data as a unicode string, got str 'HTTP \\ud800'",
    "lone surrogate in the label": ": the run label contains a lone surrogate (U+DC00), which is not text",
    "lone surrogate in a key": ": $.z\\udc00: key contains a lone surrogate (U+DC00), which is not text",
    "NUL in an error": ", line 1, record 1: field 'error': the error contains a NUL character (U+0000), which the ledger does not store",
    "NUL in the label": ": the run label contains a NUL character (U+0000), which the ledger does not store",
    "NUL byte in a log": ": line 2: text contains a NUL character (U+0000), which the ledger does not store",
    "label over the index limit": ": the run label is 5,000 bytes long; at most 1,024 bytes (UTF-8) are stored",
    "error text over the size limit": ", line 1, record 1: field 'error': the error is 1,048,577 characters long; at most 1,048,576 are stored",
    "more keys than a run keeps": ", $: 10,022 keys in one result object; at most 10,000 are read",
    "1e400 duration": ", line 1 column 182: field 'duration': the number 1e400 is beyond the range of a 64-bit float (about ±1.8e308); refused",
    "1e400 duration, JSON Lines": ", line 2 column 182: field 'duration': the number -1e400 is beyond the range of a 64-bit float (about ±1.8e308); refused",
    "inference-perf NaN end time": ", $[0]: field 'end_time': input should be a finite number, got float nan",
    "inference-perf 1e309 start time": ", line 6 column 18: field 'start_time': the number 1e309 is beyond the range of a 64-bit float (about ±1.8e308); refused",
    "inference-perf Infinity token time": ", $[0].info.response_metrics: field 'output_token_times': input should be a finite number, got float inf",
    "Latin-1 byte in inference-perf's config": ", line 7 column 18: field 'model_name': not UTF-8 text (byte 0xe9)",
    "inference-perf config nested 50,000 deep": ": nested too deeply to read (beyond Python's recursion limit)",
}


def import_file(led: Ledger, path: Path, batch: str = "b") -> tuple[bool, str]:
    """The `ledger import` of one file on an open ledger (the command's own function): (ok, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ok = import_one(led, path, None, ImportTarget(batch=batch), quiet=True)
    return ok, err.getvalue()


def test_every_edge_case_is_refused_with_file_line_and_field(ledger: Ledger, tmp_path: Path) -> None:
    name, data = I.vllm_file()
    (tmp_path / "good.json").write_bytes(data)
    assert import_file(ledger, tmp_path / "good.json")[0]
    before = ledger.status().counts
    got = {}
    for cid, name, data in cases.WRONG_DATA + cases.TRACEBACKS:
        path = tmp_path / name
        path.write_bytes(data)
        ok, err = import_file(ledger, path)
        assert not ok, cid
        got[cid] = err.strip().removeprefix(f"error: {path}").split("\n")[0]  # "tried:" lists every format
        assert ledger.status().counts == before, cid
        path.unlink()
    assert got == EXPECTED


def test_the_command_exits_1_with_one_message(ledger_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["init", "--db", ledger_url]).exit_code == 0
    cid, name, data = cases.WRONG_DATA[0]
    (tmp_path / name).write_bytes(data)
    result = runner.invoke(main, ["import", "--db", ledger_url, "--batch", "b", str(tmp_path / name)])
    assert (result.exit_code, result.output) == (1, f"error: {tmp_path / name}{EXPECTED[cid]}\n")
