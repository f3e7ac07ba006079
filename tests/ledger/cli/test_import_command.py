"""`ledger import` end to end: detection, atomicity, idempotence, messages (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_ledger.cli import main
from click.testing import CliRunner


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def counts(url: str) -> dict[str, int]:
    return json.loads(run("status", "--db", url, "--json").output)["counts"]


# The folders of ../shared/samples whose formats the first importers cover (MANIFEST.md's first part).
FIRST_FORMATS = ("vllm", "sglang", "llmperf", "dmon", "vllm-server-log")
# The folders of MANIFEST.md's "More formats" that issue 15's importers cover (aiperf and guidellm: issue 14).
MORE_FORMATS = (
    "inference-perf",
    "trtllm-bench",
    "mlperf-loadgen",
    "genai-bench",
    "vllm-bench-serve",
    "vllm-bench-sweep",
    "nvidia-smi",
    "dcgmi-dmon",
)


def test_every_real_sample_imports_through_detection(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    files = sorted(p for d in FIRST_FORMATS for p in (samples / d).rglob("*") if p.is_file())
    out = run("import", "--db", ledger_url, "--batch", "real", *map(str, files)).output
    assert out.count("imported as artefact") == len(files) == 10
    c = counts(ledger_url)
    assert c["artefact"] == 10
    assert c["request"] == 300  # two llmperf files of 150 records; the others are aggregates only
    assert c["hardware_sample"] == 3 * 11  # dmon: 3 GPUs x 11 counters (gpu is the key, not a counter)
    batches = json.loads(run("batches", "--db", ledger_url, "--json").output)
    # runs: vLLM 3, SGLang 7, llmperf 2 (each summary paired with its individual file by content)
    assert [(b["name"], b["runs"], b["requests"], b["artefacts"]) for b in batches] == [("real", 12, 300, 10)]


def test_every_more_formats_sample_imports_through_detection(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    files = sorted(p for d in MORE_FORMATS for p in (samples / d).rglob("*") if p.is_file())
    out = run("import", "--db", ledger_url, "--batch", "more", *map(str, files)).output
    assert out.count("imported as artefact") == len(files) == 21
    assert "[vllm-bench-console]" in out and "[vllm-sweep-summary]" in out and "[inference-perf-config]" in out
    c = counts(ledger_url)
    assert c["artefact"] == 21
    assert c["request"] == 50 + 64 + 65  # the vLLM --save-detailed file and the two genai-bench runs
    assert c["hardware_sample"] == 4 * 2619 + 7 * 5  # nvidia-smi CSV 4 counters; dcgmi dmon 7 fields x 5 samples
    batches = json.loads(run("batches", "--db", ledger_url, "--json").output)
    # runs: inference-perf 3 (stage 0, stage 6, all stages), trtllm 1, MLPerf 2 (pairs), genai-bench 2,
    # vLLM detailed 1 (its console paired with it by the result_filename it names), sweep 2 (summary.json lands
    # on the two repetitions)
    assert [(b["name"], b["runs"], b["requests"], b["artefacts"]) for b in batches] == [("more", 11, 179, 21)]
    formats = run("formats").output
    for name in (
        "inference-perf",
        "inference-perf-prometheus",
        "inference-perf-requests",
        "inference-perf-config",
        "trtllm-bench",
        "mlperf-summary",
        "mlperf-detail",
        "genai-bench",
        "genai-bench-metadata",
        "vllm-sweep-summary",
        "vllm-bench-console",
        "nvidia-smi-csv",
        "dcgmi-dmon",
    ):
        assert f"\n{name} " in "\n" + formats, name


def test_same_bytes_twice_is_a_no_op(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    f = str(samples / "llmperf" / "individual_groq_70b.json")
    run("import", "--db", ledger_url, "--batch", "b", f)
    before = counts(ledger_url)
    again = run("import", "--db", ledger_url, "--batch", "b", f).output
    assert "already imported as artefact 1 (individual_groq_70b.json, llmperf-individual, sha256 948a9414793e" in again
    assert counts(ledger_url) == before


def test_pair_attaches_to_one_run_and_show_run_lists_fields(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    d = samples / "llmperf"
    run(
        "import",
        "--db",
        ledger_url,
        "--batch",
        "b",
        "--run",
        "groq",
        str(d / "individual_groq_70b.json"),
        str(d / "summary_groq_70b.json"),
    )
    runs = json.loads(run("runs", "--db", ledger_url, "--json").output)
    assert [(r["label"], r["requests"], r["artefacts"]) for r in runs] == [("groq", 150, 2)]
    shown = run("show", "run", str(runs[0]["id"]), "--db", ledger_url).output
    assert "requests: 150 (150 ok, 0 failed, 0 unknown)" in shown
    assert "fields captured: error, input_tokens, itl_mean_s, latency_s, output_tokens, status, ttft_s" in shown
    assert (
        "not captured (n/a): retries, send_time, first_token_time, end_time, queue_s, chunk_gaps, cached_tokens"
        in shown
    )
    assert "results_ttft_s_mean" in shown and "0.22786034579078357 s" in shown


def test_bad_file_leaves_nothing_and_names_the_place(ledger_url: str, tmp_path: Path, samples: Path) -> None:
    run("init", "--db", ledger_url)
    records = json.loads((samples / "llmperf" / "individual_groq_70b.json").read_text())
    records[3]["ttft_s"] = "abc"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(records))
    good = samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
    res = run("import", "--db", ledger_url, "--batch", "b", str(bad), str(good), ok=False)
    assert res.exit_code == 1
    assert f"error: {bad}, $[3]: field 'ttft_s'" in res.output
    c = counts(ledger_url)
    assert c["artefact"] == 1 and c["request"] == 0  # the good file imported, the bad one left nothing


def test_truncated_file_in_the_middle_of_a_stream_rolls_back(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    good = '{"ledger_requests": 1, "run": "r", "tool": "t", "clock": "epoch_s"}\n' + "".join(
        f'{{"status": "ok", "input_tokens": 10, "output_tokens": 5, "send_time": {1700000000 + i}, "end_time": {1700000001 + i}}}\n'
        for i in range(50)
    )
    f = tmp_path / "cut.jsonl"
    f.write_text(good + '{"status": "ok", "input_tok')
    res = run("import", "--db", ledger_url, "--batch", "b", str(f), ok=False)
    assert res.exit_code == 1 and f"{f}, line 52" in res.output
    assert counts(ledger_url)["request"] == 0 and counts(ledger_url)["run"] == 0


def test_unknown_format_lists_every_importer_tried(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    res = run("import", "--db", ledger_url, "--batch", "b", str(f), ok=False)
    assert res.exit_code == 1
    assert f"{f}: format not recognised; tried:" in res.output
    for name in (
        "vllm-bench",
        "sglang-bench",
        "llmperf-individual",
        "nvidia-smi-dmon",
        "vllm-server-log",
        "ledger-requests",
    ):
        assert f"  {name}: " in res.output


def test_formats_lists_one_line_each() -> None:
    lines = run("formats").output.strip().splitlines()
    assert len(lines) >= 12
    assert any(line.startswith("nvidia-smi-dmon ") for line in lines)


def test_row_progress_only_on_a_terminal_and_never_quiet(monkeypatch, capsys) -> None:
    import sys

    from bench_ledger.cli import RowProgress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with RowProgress(Path("big.json"), enabled=True) as shown:
        shown(1_000_000)
    assert "big.json: 1,000,000 rows written" in capsys.readouterr().err
    with RowProgress(Path("big.json"), enabled=False) as shown:  # --quiet
        shown(5)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with RowProgress(Path("big.json"), enabled=True) as shown:  # piped
        shown(5)
    assert capsys.readouterr().err == ""


def test_several_runs_with_records_in_one_file_import(ledger_url: str, tmp_path: Path) -> None:
    """Request rows are keyed by artefact and record index: runs of one file keep counting."""
    line = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": 1.0,
        "max_concurrency": 2,
        "random_input_len": 10,
        "random_output_len": 5,
        "duration": 2.0,
        "completed": 2,
        "total_input_tokens": 20,
        "total_output_tokens": 10,
        "output_throughput": 5.0,
        "input_lens": [10, 10],
        "output_lens": [5, 5],
        "ttfts": [0.1, 0.2],
        "itls": [[0.1] * 4, [0.1] * 4],
        "generated_texts": ["a", "b"],
        "errors": ["", ""],
    }
    f = tmp_path / "sg.jsonl"
    f.write_text(json.dumps(line) + "\n" + json.dumps({**line, "request_rate": 2.0}) + "\n")
    run("init", "--db", ledger_url)
    out = run("import", "--db", ledger_url, "--batch", "b", str(f)).output
    assert "2 run(s), 4 requests" in out
    assert counts(ledger_url)["request"] == 4 and counts(ledger_url)["chunk_gap"] == 16


@pytest.mark.parametrize("fixture", ["guidellm/benchmarks_v2.json", "genai_perf/profile_export.json"])
def test_runs_of_one_file_never_share_a_record_index(ledger_url: str, fixtures: Path, fixture: str) -> None:
    """The database does not enforce (artefact, idx) (migration 0008): the records contract does."""
    from bench_ledger.store import Ledger

    run("init", "--db", ledger_url)
    run("import", "--db", ledger_url, "--batch", "b", str(fixtures / fixture))
    with Ledger(ledger_url) as led, led.connection() as conn:
        total, distinct = conn.exec_driver_sql(
            "SELECT COUNT(*), COUNT(DISTINCT CAST(artefact_id AS VARCHAR) || ':' || CAST(idx AS VARCHAR)) FROM request"
        ).one()
        runs = conn.exec_driver_sql("SELECT COUNT(DISTINCT run_id) FROM request").scalar()
    assert runs == 2 and total == distinct > 0


def test_iter_runs_numbers_records_across_the_artefact() -> None:
    from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, RequestColumns, RunInfo

    def parsed_run(label: str, idx: list[int]) -> ParsedRun:
        cols = RequestColumns.empty_columns()
        for i in idx:
            for name, column in cols.items():
                column.append(i if name == "idx" else "ok" if name == "status" else None)
        return ParsedRun(
            info=RunInfo(label=label, tool="t"),
            requests=RequestColumns(**cols),
            capture=Capture(fields=["status"], record_count=len(idx), success_rule="test"),
        )

    runs = [parsed_run("a", [0, 1, 2]), parsed_run("b", [0, 1]), parsed_run("c", [7, 9])]
    got = [r.requests.idx for r in ParsedArtefact(format="t", format_version=None, runs=runs).iter_runs()]
    assert got == [[0, 1, 2], [3, 4], [7, 9]]  # b renumbered in file order; c already past b: left as is
