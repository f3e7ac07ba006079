"""One result, one run (issue 37): real result files imported into one batch with nothing declared give
exactly the runs the files hold; a tool's complementary files still pair, in one folder only (both backends)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.clirun import run
from tests.conftest import SHARED, shared_folder


def runs(url: str, batch: str) -> list[dict]:
    return json.loads(run("runs", "--db", url, "--batch", batch, "--json").output)


def imported(url: str, batch: str, *paths: Path) -> str:
    run("init", "--db", url)
    return run("import", "--db", url, "--batch", batch, *paths).output


@pytest.fixture
def real_reports() -> Path:
    return shared_folder(SHARED / "real-reports")


def test_sglang_lines_of_two_sources_are_one_run_each(ledger_url: str, samples: Path, real_reports: Path) -> None:
    pd = real_reports / "tonyli15-sglang-pd-disagg" / "benchmarks" / "results"
    imported(ledger_url, "sg", samples / "sglang", pd)
    got = runs(ledger_url, "sg")
    lines = sum(len(p.read_text().splitlines()) for p in [*pd.glob("*.jsonl"), *(samples / "sglang").glob("*.jsonl")])
    assert (len(got), lines) == (13, 13)
    assert all(r["artefacts"] == 1 for r in got)
    assert len({r["label"] for r in got}) == 13


def test_a_copy_of_sglang_results_for_another_model_is_seven_more_runs(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    other = tmp_path / "405b" / "llama_405b_online_output.jsonl"
    other.parent.mkdir()
    text = (samples / "sglang" / "llama_3_3_70b_online_output.jsonl").read_text()
    other.write_text(text.replace('"duration": ', '"duration": 1'))  # other bytes, the same settings
    out = imported(ledger_url, "sg", samples / "sglang", other)
    got = runs(ledger_url, "sg")
    assert len(got) == 14 and all(r["artefacts"] == 1 for r in got)
    assert (
        "note: llama_405b_online_output.jsonl: run label 'sglang random in<=1024 out<=1024 range_ratio=0.0 "
        "rate=1.0 c=inf' is taken by run 1" in out
    )
    assert "sglang random in<=1024 out<=1024 range_ratio=0.0 rate=1.0 c=inf (405b)" in {r["label"] for r in got}


def test_the_ten_console_logs_of_a_concurrency_sweep_are_ten_runs_labelled_by_concurrency(
    ledger_url: str, real_reports: Path
) -> None:
    imported(ledger_url, "zh", real_reports / "wentao274-vllm-h100-concurrency-zh" / "reports")
    got = runs(ledger_url, "zh")
    assert sorted(r["label"] for r in got) == sorted(
        f"MiniMax-M2.5 rate=inf c={c}" for c in (1, 2, 4, 8, 10, 16, 32, 64, 80, 128)
    )
    assert sorted(r["concurrency"] for r in got) == [1, 2, 4, 8, 10, 16, 32, 64, 80, 128]


def _mlperf_pair(samples: Path, folder: Path) -> None:
    folder.mkdir(parents=True)
    src = samples / "mlperf-loadgen"
    for kind in ("summary", "detail"):
        shutil.copy(
            src / f"NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_{kind}.txt",
            folder / f"mlperf_log_{kind}.txt",
        )


def test_mlperf_pairs_in_two_folders_are_two_runs_of_two_artefacts(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    for name in ("a", "b"):
        _mlperf_pair(samples, tmp_path / name / "performance")
    (tmp_path / "b" / "performance" / "mlperf_log_detail.txt").open("a").write("\n")  # other bytes, one run's content
    (tmp_path / "b" / "performance" / "mlperf_log_summary.txt").open("a").write("\n")
    out = imported(ledger_url, "ml", tmp_path / "a", tmp_path / "b")
    got = runs(ledger_url, "ml")
    assert [(r["label"], r["artefacts"]) for r in got] == [
        ("mlperf-loadgen performance", 2),
        ("mlperf-loadgen performance (b/performance)", 2),
    ]
    assert "its file is in another folder" in out


def test_llmperf_pairs_pair_within_their_folder_only(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    for name in ("expA", "expB"):
        (tmp_path / name).mkdir()
        for f in ("individual_groq_70b.json", "summary_groq_70b.json"):
            data = json.loads((samples / "llmperf" / f).read_text())
            if name == "expB" and f.startswith("summary"):
                data["results_ttft_s_mean"] = 0.5  # another result, the same count
            if name == "expB" and f.startswith("individual"):
                data = data[::-1]
            (tmp_path / name / f).write_text(json.dumps(data))
    out = imported(ledger_url, "lp", tmp_path / "expA", tmp_path / "expB")
    got = runs(ledger_url, "lp")
    assert [(r["label"], r["artefacts"], r["requests"]) for r in got] == [
        ("llmperf groq_70b", 2, 150),
        ("llmperf groq_70b (expB)", 2, 150),
    ]
    assert "note: summary_groq_70b.json: attached to run 2 'llmperf groq_70b (expB)' by same pairing key" in out


def test_a_trtllm_report_of_another_input_length_is_another_run(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    src = next((samples / "trtllm-bench").glob("*.json"))
    data = json.loads(src.read_text())
    data["request_info"]["avg_input_length"] = 2048  # the sweep's next point: the same labels, another input
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / src.name).write_text(json.dumps(data))
    out = imported(ledger_url, "tr", src, tmp_path / "sweep" / src.name)
    got = runs(ledger_url, "tr")
    assert len(got) == 2 and all(r["artefacts"] == 1 for r in got)
    assert got[1]["label"] != got[0]["label"] and got[1]["label"].startswith(got[0]["label"])
    assert "this file's result is another run" in out


def test_verify_names_a_run_that_holds_two_results_of_one_format(ledger_url: str, samples: Path) -> None:
    """A run holding two results of one format (what earlier versions made of equal labels; here by --run)."""
    run("init", "--db", ledger_url)
    files = sorted((samples / "vllm").glob("*.json"))[:2]
    for f in files:
        run("import", "--db", ledger_url, "--batch", "v", "--run", "both", f)
    out = run("verify", "--db", ledger_url, code=1).output
    assert "merged: run 1 'both' of batch 'v' holds 2 results of format vllm-bench: artefact 1 " in out
    assert "two results are two runs" in out


def test_attach_takes_settings_only_from_the_attached_artefact(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    """The console log's run holds the result JSON too: its settings are not the log's alone, so none is learned."""
    serve = samples / "vllm-bench-serve"
    imported(ledger_url, "v", *sorted(serve.iterdir()))  # the JSON and its console log: one run of two artefacts
    run("declare", "--db", ledger_url, _manifest(tmp_path, "v", "target"))
    held = json.loads(run("show", "run", "1", "--db", ledger_url, "--json").output)["captures"]
    log = next(c["artefact_id"] for c in held if c["file_name"].endswith(".stdout.txt"))
    assert len(held) == 2
    out = run("attach", "--db", ledger_url, log, "--run", "2", "--reason", "the log is the target's").output
    assert "learned" not in out
    assert (
        "  settings: run 1 holds other artefacts too: its settings are not this file's alone, so none was taken" in out
    )
    target = next(r for r in runs(ledger_url, "v") if r["label"] == "target")
    assert (target["concurrency"], target["request_count"]) == (None, None)


def _manifest(tmp_path: Path, batch: str, label: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\nruns:\n  - {{batch: {batch}, label: {label}, tool: vllm-bench}}\n")
    return path


def test_a_superseded_run_id_is_refused_naming_the_current_one(ledger_url: str, samples: Path) -> None:
    imported(ledger_url, "v", sorted((samples / "vllm").glob("*.json"))[0])
    run("correct", "--db", ledger_url, "run", "1", "--set", "concurrency=8", "--reason", "the sweep ran at C8")
    expected = (
        "run 1 is superseded by a correction: the current revision is run 2 (`ledger history run 1` shows the chain)"
    )
    for command in (("check", "--run", "1", "--fail-on", "disagree"), ("metrics", "--run", "1"), ("show", "run", "1")):
        out = run(*command, "--db", ledger_url, code=1).output
        assert expected in out, command
    assert run("check", "--db", ledger_url, "--run", "2").output.startswith("== recomputed from records")


def test_a_declared_run_is_matched_on_the_input_length_the_file_states(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    """trtllm-bench states its workload as avg_input_length: the declared run of that input target is the one."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nbatches:\n  - {name: t}\nruns:\n"
        "  - {batch: t, label: in2048, input_target_tokens: 2048, tool: trtllm-bench}\n"
        "  - {batch: t, label: in128, input_target_tokens: 128, tool: trtllm-bench}\n"
    )
    run("init", "--db", ledger_url)
    run("declare", "--db", ledger_url, manifest)
    src = next((samples / "trtllm-bench").glob("*.json"))
    out = run("import", "--db", ledger_url, "--batch", "t", src).output
    assert f"note: {src.name}: attached to run 2 'in128' by declared workload (input_len 128.0" in out
    assert [(r["label"], r["artefacts"]) for r in runs(ledger_url, "t")] == [("in2048", 0), ("in128", 1)]
