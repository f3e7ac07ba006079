"""Workload settings (request rate, concurrency, counts, lengths, seed) from a tool's file, a manifest or
`ledger correct --set`: an invalid one is refused naming the file, the place and the field, and nothing is
written; `Infinity` stays the tool's "all at once", a number beyond a double is not read as it (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.records import request_rate_text
from bench_ledger.store import Ledger

from tests.clirun import run

VLLM = "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
SGLANG = "sglang/llama_3_3_70b_online_output.jsonl"
RATE = (
    "is not a request rate in requests/s: a decimal number > 0 and <= 1,000,000,000 (one request per "
    "nanosecond), or inf (every request at once)"
)
# refused by the JSON reader, where the number is written (importers.base.loads)
OVERFLOW = "field 'request_rate': the number 1e309 is beyond the range of a 64-bit float (about ±1.8e308); refused"


def _settings(url: str) -> list[tuple]:
    with Ledger(url) as led, led.connection() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.select(m.Run.label, m.Run.request_rate, m.Run.concurrency, m.Run.request_count).order_by(m.Run.id)
            )
        ]


def _place(text: str, token: str) -> tuple[int, int]:
    """Line and column (1-based) where ``token`` first stands in ``text``."""
    at = text.find(token)
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def _mutated(samples: Path, rel: str, tmp_path: Path, old: str, new: str) -> Path:
    text = (samples / rel).read_text(encoding="utf-8")
    assert old in text
    out = tmp_path / Path(rel).name
    out.write_text(text.replace(old, new, 1), encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("-1", f"field 'request_rate': '-1' {RATE}"),
        ("-0.001", f"field 'request_rate': '-0.001' {RATE}"),
        ("0", f"field 'request_rate': '0' {RATE}"),
        ("NaN", "field 'request_rate': NaN is not a setting"),
        ('"abc"', f"field 'request_rate': 'abc' {RATE}"),
        ("1e308", f"field 'request_rate': '1e+308' {RATE}"),
        ("1e309", OVERFLOW),
        ("true", f"field 'request_rate': 'True' {RATE}"),
    ],
)
def test_a_tool_file_with_an_invalid_request_rate_is_refused(
    ledger_url: str, samples: Path, tmp_path: Path, written: str, problem: str
) -> None:
    f = _mutated(samples, VLLM, tmp_path, '"request_rate": 1.0', f'"request_rate": {written}')
    out = run("import", "--db", ledger_url, f, "--batch", "b", code=1).output
    line, column = _place(f.read_text(encoding="utf-8"), "1e309")
    place = {"NaN": f"{f}, $.request_rate", "1e309": f"{f}, line {line} column {column}"}.get(written, f"{f}, $")
    assert out == f"error: {place}: {problem}\n"
    assert _settings(ledger_url) == []  # nothing written


def test_json_lines_name_the_line_of_the_run(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    text = (samples / SGLANG).read_text(encoding="utf-8").splitlines(keepends=True)
    text[2] = text[2].replace('"request_rate": 4.0', '"request_rate": 1e309', 1)
    f = tmp_path / "sglang.jsonl"
    f.write_text("".join(text), encoding="utf-8")
    line, column = _place("".join(text), "1e309")
    assert (
        run("import", "--db", ledger_url, f, "--batch", "b", code=1).output
        == f"error: {f}, line {line} column {column}: {OVERFLOW}\n"
    )
    text[2] = text[2].replace('"request_rate": 1e309', '"request_rate": -4.0', 1)
    f.write_text("".join(text), encoding="utf-8")
    assert (
        run("import", "--db", ledger_url, f, "--batch", "b", code=1).output
        == f"error: {f}, line 3 $: field 'request_rate': '-4.0' {RATE}\n"
    )
    assert _settings(ledger_url) == []


def test_infinity_stays_the_tools_all_at_once(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    """SGLang's json writes Infinity for its default rate, vLLM the text "inf": both are kept as "inf"."""
    sglang = _mutated(samples, SGLANG, tmp_path, '"request_rate": 1.0', '"request_rate": Infinity')
    vllm = _mutated(samples, VLLM, tmp_path, '"request_rate": 1.0', '"request_rate": "inf"')
    run("import", "--db", ledger_url, sglang, vllm, "--batch", "b")
    rates = [r[1] for r in _settings(ledger_url)]
    assert rates == ["inf", "2.0", "4.0", "8.0", "16.0", "4.0", "8.0", "inf"]


def test_other_settings_of_a_tool_file_are_held_to_their_domain(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    f = _mutated(
        samples,
        "llmperf/summary_groq_70b.json",
        tmp_path,
        '"num_concurrent_requests": 5',
        '"num_concurrent_requests": -1',
    )
    out = run("import", "--db", ledger_url, f, "--batch", "b", code=1).output
    assert out == f"error: {f}, $: field 'concurrency': -1 is below 0 (a count: an integer, >= 0, <= 2,147,483,647)\n"
    g = tmp_path / "g.json"
    guidellm = "guidellm/guidellm-bench_sanity_20260302_1856_Qwen3-4B-Thinking-2507_tp4_fp8_benchmarks.json"
    g.write_text(
        (samples / guidellm).read_text(encoding="utf-8").replace('"streams": 4', '"streams": true'), encoding="utf-8"
    )
    run("import", "--db", ledger_url, g, "--batch", "b")
    assert [r[2] for r in _settings(ledger_url)] == [None]  # `true` is not a concurrency (it was stored as 1)


def _manifest(tmp_path: Path, run_line: str) -> Path:
    f = tmp_path / "m.yaml"
    f.write_text(
        f"version: 1\nbatches: [{{name: mb}}]\nruns:\n  - batch: mb\n    label: a\n{run_line}\n", encoding="utf-8"
    )
    return f


@pytest.mark.parametrize(
    ("written", "stored"), [("2.0", "2.0"), ("4", "4"), ('"2.50"', "2.50"), (".inf", "inf"), ('"inf"', "inf")]
)
def test_a_manifest_takes_a_request_rate_as_a_number_or_text(
    ledger_url: str, tmp_path: Path, written: str, stored: str
) -> None:
    run("declare", "--db", ledger_url, _manifest(tmp_path, f"    request_rate: {written}"))
    assert _settings(ledger_url) == [("a", stored, None, None)]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("    request_rate: -1", f"runs.0.request_rate: '-1' {RATE}"),
        ("    request_rate: .nan", f"runs.0.request_rate: '.nan' {RATE}"),
        ("    request_rate: 1.0e+309", f"runs.0.request_rate: '1.0e+309' {RATE}"),
        ("    request_rate: abc", f"runs.0.request_rate: 'abc' {RATE}"),
        ("    request_rate: 1e308", f"runs.0.request_rate: '1e308' {RATE}"),
        ("    concurrency: -1", "runs.0.concurrency: Input should be greater than or equal to 0"),
        ("    request_count: 2147483648", "runs.0.request_count: Input should be less than or equal to 2147483647"),
        (
            "    input_target_tokens: 1.0e+309",
            "runs.0.input_target_tokens: Input should be a valid integer, unable to parse string as an integer",
        ),
    ],
)
def test_a_manifest_refuses_an_invalid_setting_naming_its_line(
    ledger_url: str, tmp_path: Path, line: str, problem: str
) -> None:
    f = _manifest(tmp_path, line)
    assert run("declare", "--db", ledger_url, f, code=1).output == f"error: {f}, line 6: {problem}\n"
    assert _settings(ledger_url) == []


def test_a_correction_is_held_to_the_same_domains(ledger_url: str, tmp_path: Path) -> None:
    run("declare", "--db", ledger_url, _manifest(tmp_path, "    request_rate: 1.0"))
    for assignment, problem in (
        ("request_rate=-1", f"run.request_rate: '-1' {RATE}"),
        ("request_rate=abc", f"run.request_rate: 'abc' {RATE}"),
        ("concurrency=-1", "run.concurrency: -1 is below 0 (a count: an integer, >= 0, <= 2,147,483,647)"),
    ):
        out = run("correct", "--db", ledger_url, "run", 1, "--set", assignment, "--reason", "r", code=1).output
        assert out == f"error: {problem}\n"
    run("correct", "--db", ledger_url, "run", 1, "--set", "request_rate=Infinity", "--reason", "r")
    assert _settings(ledger_url) == [("a", "1.0", None, None), ("a", "inf", None, None)]


def test_request_rate_text() -> None:
    assert [request_rate_text(t) for t in ("2.0", " 2.50 ", "1e3", ".5", "Infinity", "INF", "1000000000")] == [
        "2.0",
        "2.50",
        "1e3",
        ".5",
        "inf",
        "inf",
        "1000000000",
    ]
    for bad in ("-1", "0", "0.0", "nan", "1e308", "1000000000.5", "0x10", "2,5", "", "1e9e9"):
        with pytest.raises(ValueError, match=re.escape(RATE)):
            request_rate_text(bad)
