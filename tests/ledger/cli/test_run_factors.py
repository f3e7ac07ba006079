"""The factors a run's files state, end to end on both backends (issue 37): `ledger show run --json`
and `ledger runs --json` carry them with where they were read, `ledger runs --column` shows any of
them; a genai-bench run with streaming off shows no TTFT (the tool's placeholder), only n/a."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import run
from tests.importers.test_tool_placeholders import streaming_off

TRTLLM = "trtllm-bench/latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json"
LLMPERF = "llmperf/summary_groq_70b.json"


def test_show_run_and_runs_carry_the_factors(ledger_url: str, samples: Path) -> None:
    run("import", samples / TRTLLM, samples / LLMPERF, "--batch", "f", "--db", ledger_url)
    shown = json.loads(run("show", "run", "1", "--json", "--db", ledger_url).output)
    assert shown["factors"]["model"] == {
        "value": "Qwen/Qwen2.5-0.5B-Instruct",
        "at": "latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json $.engine.model",
    }
    assert shown["factors"]["hardware"]["value"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    listed = json.loads(run("runs", "--json", "--db", ledger_url).output)
    assert listed[0]["factors"] == shown["factors"]
    assert listed[1]["factors"]["concurrency"] == {
        "value": "5",
        "at": "summary_groq_70b.json $.num_concurrent_requests",
    }
    out = run(
        "runs", "--column", "model", "--column", "tp", "--column", "label", "--db", ledger_url
    ).output.splitlines()
    assert [line.split()[0] for line in out] == ["id", "1", "2"]
    assert out[0].endswith("artefacts  model                       tp")
    assert out[1].endswith("1          Qwen/Qwen2.5-0.5B-Instruct  1")
    assert out[2].endswith("1          llama2-70b-4096             n/a")


def test_runs_refuses_a_column_it_does_not_know(ledger_url: str) -> None:
    out = run("runs", "--column", "gpu", "--db", ledger_url, code=2).output
    assert "Invalid value for '--column': 'gpu' is not one of 'id', 'batch'," in out
    assert "'model', 'served_model', 'engine', 'engine_version', 'hardware', 'gpu_count', 'tp'" in out


def test_genai_bench_streaming_off_ttft_reads_na(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    path = streaming_off(samples, tmp_path)
    run("import", path, "--batch", "g", "--db", ledger_url)
    out = run("metrics", "--batch", "g", "--db", ledger_url).output.splitlines()
    assert out[1].endswith("64 d / 0 d  547,373 r  50,706 r    n/a[1]")
    assert out[-1] == "[1] n/a: ttft_p50: ttft_s or send_time + first_token_time not captured"
    note = json.loads(run("show", "artefact", "1", "--json", "--db", ledger_url).output)["note"]
    assert note.endswith(
        "ttft and tpot are n/a: genai-bench's placeholder, not a measurement: with streaming off "
        "(--disable-streaming in experiment_metadata.json) it writes time_at_first_token = start + 0.001 s"
    )
