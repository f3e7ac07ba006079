"""Pairing a run's files by content, `ledger attach`, and the import edge cases of issue 14 (both backends)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bench_ledger.store import Ledger

from tests.clirun import run


def runs(url: str, batch: str) -> list[dict]:
    return json.loads(run("runs", "--db", url, "--batch", batch, "--json").output)


def check(url: str, batch: str) -> list[dict]:
    return json.loads(run("check", "--db", url, "--batch", batch, "--json").output)


def counts(url: str) -> dict[str, int]:
    return json.loads(run("status", "--db", url, "--json").output)["counts"]


GROQ = "llmperf groq_70b"  # the individual file's own label
GROQ_SUMMARY = "llmperf llama2-70b-4096_550_150_summary"
TOGETHER_SUMMARY = "llmperf together_ai-togethercomputer-llama-2-70b-chat_550_150_summary"


def _llmperf_checked(url: str) -> None:
    """Both llmperf pairs on one run each; every summary statistic of the records is recomputed."""
    rows = check(url, "lp")
    assert {r["run_id"] for r in rows} == {r["id"] for r in runs(url, "lp")}
    assert not [r for r in rows if "no per-request records" in (r["reason"] or "")]
    by = {(r["run"], r["key"]): r for r in rows}
    assert len({r["run"] for r in rows}) == 2
    groq = next(r["run"] for r in rows if r["key"] == "results_ttft_s_mean" and r["reported"] == "0.22786034579078357")
    for key, recomputed in (
        ("results_ttft_s_mean", 0.22786034579078357),
        ("results_ttft_s_quantiles_p50", 0.2218883791938424),
        ("results_end_to_end_latency_s_quantiles_p99", 0.9922714155726133),
    ):
        assert by[(groq, key)]["status"] == "agree" and by[(groq, key)]["recomputed"] == pytest.approx(
            recomputed, rel=1e-12
        )
    assert sum(r["status"] == "agree" for r in rows if r["section"] == "records") >= 2 * 50
    assert not [r for r in rows if r["status"] == "disagree"]


def test_llmperf_folder_pairs_summary_and_records(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    out = run("import", "--db", ledger_url, "--batch", "lp", str(samples / "llmperf")).output
    assert "4 imported, 0 already imported, 0 skipped (format not recognised), 0 failed" in out
    assert (
        "note: summary_groq_70b.json: attached to run 1 'llmperf groq_70b' "
        "by same pairing key 'llmperf groq_70b' and 150 requests"
    ) in out
    got = [
        (r["label"], r["requests"], r["artefacts"], r["input_target_tokens"], r["concurrency"])
        for r in runs(ledger_url, "lp")
    ]
    assert got == [(GROQ, 150, 2, 550, 5), ("llmperf together_70b", 150, 2, 550, 5)]
    _llmperf_checked(ledger_url)


def test_llmperf_pairs_with_the_summary_imported_first(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    d = samples / "llmperf"
    run(
        "import",
        "--db",
        ledger_url,
        "--batch",
        "lp",
        str(d / "summary_groq_70b.json"),
        str(d / "summary_together_70b.json"),
    )
    out = run(
        "import",
        "--db",
        ledger_url,
        "--batch",
        "lp",
        str(d / "individual_together_70b.json"),
        str(d / "individual_groq_70b.json"),
    ).output
    assert (
        f"note: individual_groq_70b.json: attached to run 1 '{GROQ_SUMMARY}' by same pairing key "
        "'llmperf groq_70b' and 150 requests"
    ) in out
    assert [(r["id"], r["label"], r["requests"], r["artefacts"]) for r in runs(ledger_url, "lp")] == [
        (1, GROQ_SUMMARY, 150, 2),
        (2, TOGETHER_SUMMARY, 150, 2),
    ]
    _llmperf_checked(ledger_url)


def test_llmperf_native_names_pair_and_a_count_mismatch_does_not(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("init", "--db", ledger_url)
    d = samples / "llmperf"
    shutil.copy(d / "summary_groq_70b.json", tmp_path / "llama2-70b-4096_550_150_summary.json")
    shutil.copy(d / "individual_groq_70b.json", tmp_path / "llama2-70b-4096_550_150_individual_responses.json")
    records = json.loads((d / "individual_together_70b.json").read_text())
    (tmp_path / "other_individual_responses.json").write_text(json.dumps(records[:149]))
    shutil.copy(d / "summary_together_70b.json", tmp_path / "other_summary.json")
    out = run("import", "--db", ledger_url, "--batch", "lp", str(tmp_path)).output
    assert "by same pairing key 'llmperf llama2-70b-4096_550_150' and 150 requests" in out
    assert ("note: other_summary.json: not paired with run 2 'llmperf other'") in out
    assert (
        "(same pairing key 'llmperf other'): request counts 149 there and 150 in this file differ or are unknown" in out
    )
    assert [(r["requests"], r["artefacts"]) for r in runs(ledger_url, "lp")] == [(150, 2), (149, 1), (0, 1)]


def test_an_ambiguous_pair_is_refused_naming_the_candidates(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    d = samples / "llmperf"
    for file, name in (
        ("summary_groq_70b.json", "llama2-70b-4096_550_150_summary"),
        ("groq_70b_summary.json", "again_summary"),
    ):
        text = (d / "summary_groq_70b.json").read_text().replace('"llama2-70b-4096_550_150_summary"', json.dumps(name))
        (tmp_path / file).write_text(text)  # two summaries of one key in one folder
    run(
        "import",
        "--db",
        ledger_url,
        "--batch",
        "lp",
        str(tmp_path / "summary_groq_70b.json"),
        str(tmp_path / "groq_70b_summary.json"),
    )
    before = counts(ledger_url)
    records = tmp_path / "individual_groq_70b.json"
    shutil.copy(d / "individual_groq_70b.json", records)
    out = run("import", "--db", ledger_url, "--batch", "lp", str(records), code=1).output
    assert (
        f"error: {records}: run '{GROQ}' (per-request records) could belong to 2 runs of "
        f"batch 'lp' by same pairing key 'llmperf groq_70b' and 150 requests: run 1 '{GROQ_SUMMARY}', run 2 "
        "'llmperf again_summary'; none was chosen: name one with --run LABEL"
    ) in out
    assert counts(ledger_url) == before
    run("import", "--db", ledger_url, "--batch", "lp", "--run", "llmperf again_summary", str(records))
    assert [(r["label"], r["requests"]) for r in runs(ledger_url, "lp")] == [
        (GROQ_SUMMARY, 0),
        ("llmperf again_summary", 150),
    ]


MANIFEST = """version: 1
deployments:
  - {name: qwen-coder, engine: vllm, model: Qwen2.5-Coder-7B-Instruct}
batches:
  - {name: fx, description: "qps sweep", deployment: qwen-coder}
runs:
"""


def _declare(url: str, tmp_path: Path, runs_yaml: str) -> None:
    (tmp_path / "system.yaml").write_text(MANIFEST + runs_yaml)
    run("declare", "--db", url, str(tmp_path / "system.yaml"))


def test_the_readme_tour_attaches_files_to_the_declared_runs(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    _declare(
        ledger_url,
        tmp_path,
        "".join(
            f'  - {{batch: fx, label: qps{r}, request_rate: "{r}.0", request_count: 150, tool: vllm-bench}}\n'
            for r in (1, 2, 4)
        ),
    )
    files = sorted(str(p) for p in (samples / "vllm").glob("*.json"))
    out = run("import", "--db", ledger_url, *files, "--batch", "fx").output
    assert (
        "note: openai-2.0qps-Qwen2.5-Coder-7B-Instruct-20260707-094353.json: attached to run 2 'qps2' by declared "
        "workload (prompt_count 150, request_count 150, request_rate 2.0)"
    ) in out
    got = [(r["label"], r["artefacts"], r["tool"]) for r in runs(ledger_url, "fx")]
    assert got == [("qps1", 1, "vllm-bench"), ("qps2", 1, "vllm-bench"), ("qps4", 1, "vllm-bench")]
    rows = check(ledger_url, "fx")
    assert {r["run"] for r in rows} == {"qps1", "qps2", "qps4"}
    ident = [r for r in rows if r["key"] == "output_throughput" and r["run"] == "qps1" and r["section"] == "identity"]
    assert ident and ident[0]["status"] == "agree"


def test_two_declared_runs_of_one_workload_are_refused_with_the_candidates(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("init", "--db", ledger_url)
    _declare(
        ledger_url,
        tmp_path,
        '  - {batch: fx, label: a, request_rate: "1.0", seed: 1}\n'
        '  - {batch: fx, label: b, request_rate: "1.0", seed: 2}\n',
    )
    f = samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
    out = run("import", "--db", ledger_url, str(f), "--batch", "fx", code=1).output
    assert (
        f"error: {f}: run 'Qwen2.5-Coder-7B-Instruct rate=1.0 c=inf' (the tool's aggregates (vllm-bench)) could "
        "belong to 2 runs of batch 'fx' by declared workload (request_rate 1.0): run 1 'a', run 2 'b'; none was "
        "chosen: name one with --run LABEL"
    ) in out
    assert counts(ledger_url)["artefact"] == 0


def test_reimport_with_run_points_at_attach(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    f = samples / "llmperf" / "summary_groq_70b.json"
    run("import", "--db", ledger_url, "--batch", "lp", str(f))
    out = run("import", "--db", ledger_url, "--batch", "lp", "--run", "other", str(f), code=1).output
    assert (
        f"error: {f}: already imported as artefact 1 (summary_groq_70b.json, llmperf-summary, sha256 09de95de0eb3…); "
        f"nothing changed: it is in run 1 '{GROQ_SUMMARY}' of batch 'lp'; --run 'other' was not applied (an import "
        "never moves what was captured). To attach it to another run, as a correction: "
        '`ledger attach 1 --run RUN_ID --reason "..."`'
    ) in out
    # the run it is in: a plain no-op
    assert "nothing changed" in run("import", "--db", ledger_url, "--batch", "lp", "--run", GROQ_SUMMARY, str(f)).output


def test_attach_moves_a_summary_onto_the_records_run_as_a_correction(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("init", "--db", ledger_url)
    shutil.copy(samples / "llmperf" / "summary_groq_70b.json", tmp_path / "s.json")  # names that pair nothing
    shutil.copy(samples / "llmperf" / "individual_groq_70b.json", tmp_path / "i.json")
    run("import", "--db", ledger_url, "--batch", "lp", str(tmp_path / "s.json"), str(tmp_path / "i.json"))
    assert [r["requests"] for r in runs(ledger_url, "lp")] == [0, 150]
    # records never move: the message names the command that pairs them the other way
    out = run("attach", "--db", ledger_url, "2", "--run", "1", "--reason", "pair", code=3).output
    assert (
        "refused (R9): attach artefact 2 (i.json) to run 1\n  why: it holds 150 per-request records captured for run 2 "
        "'llmperf i'; captured rows never move\n  instead: attach the aggregate artefact(s) of run 1 to run 2 "
        "instead: `ledger attach 1 --run 2 --reason ...`"
    ) in out
    out = run("attach", "--db", ledger_url, "1", "--run", "2", "--reason", "s.json summarises i.json").output
    assert out.startswith(
        "artefact 1: 67 reported value(s) moved from run 1 to run 2, now revision run 3: learned "
        "input_target_tokens=550, output_cap_tokens=150, concurrency=5"
    )
    got = [(r["id"], r["label"], r["requests"], r["concurrency"]) for r in runs(ledger_url, "lp")]
    assert got == [(1, GROQ_SUMMARY, 0, 5), (3, "llmperf i", 150, 5)]
    rows = check(ledger_url, "lp")
    assert {r["run_id"] for r in rows} == {3} and len(rows) == 70  # the 67 values on run 3 only (current revisions)
    assert not [r for r in rows if "no per-request records" in (r["reason"] or "")]
    hist = json.loads(run("history", "--db", ledger_url, "run", "3", "--json").output)
    assert [h["id"] for h in hist] == [2, 3]
    assert (
        hist[1]["correction_reason"]
        == f"attached artefact 1 (s.json) from run 1 '{GROQ_SUMMARY}': s.json summarises i.json"
    )
    out = run("attach", "--db", ledger_url, "1", "--run", "2", "--reason", "again", code=1).output
    assert "run 2 is superseded by a correction: the current revision is run 3" in out
    run("close", "--db", ledger_url, "lp", "--seal-file", str(tmp_path / "seals.jsonl"))
    out = run("attach", "--db", ledger_url, "1", "--run", "1", "--reason", "back", code=3).output
    assert out.startswith("refused (R10): attach artefact 1 to run 1 of batch 'lp'\n  why: the batch was closed at ")
    run("verify", "--db", ledger_url, "--seal-file", str(tmp_path / "seals.jsonl"))


def test_import_of_the_whole_samples_folder(ledger_url: str, samples: Path) -> None:
    run("init", "--db", ledger_url)
    out = run("import", "--db", ledger_url, "--batch", "all", "-q", str(samples)).output
    assert f"{samples / 'MANIFEST.md'}: skipped: format not recognised (" in out
    files = [p for p in samples.rglob("*") if p.is_file()]
    imported = out.count(": imported as artefact ")
    skipped = out.count(": skipped: ")
    assert imported + skipped == len(files)
    assert f"{imported} imported, 0 already imported, {skipped} skipped (format not recognised), 0 failed" in out
    again = run("import", "--db", ledger_url, "--batch", "all", "-q", str(samples)).output
    assert f"0 imported, {imported} already imported, {skipped} skipped (format not recognised), 0 failed" in again


@pytest.mark.parametrize("fmt", [None, "sglang-bench"])
def test_the_same_label_twice_in_json_lines_is_two_runs(
    ledger_url: str, samples: Path, tmp_path: Path, fmt: str | None
) -> None:
    """Two results of one label in one file are two runs (issue 37), the second labelled apart, with a note."""
    run("init", "--db", ledger_url)
    one = json.dumps(
        json.loads((samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json").read_text())
    )
    f = tmp_path / "twice.jsonl"
    f.write_text(one + "\n" + one + "\n")
    args = ["--format", fmt, "--force-format"] if fmt else []
    out = run("import", "--db", ledger_url, "--batch", "d", *args, str(f)).output
    label = "openai rate=1.0 c=inf base_r1_burstgpt" if fmt else "Qwen2.5-Coder-7B-Instruct rate=1.0 c=inf"
    assert (
        f"note: twice.jsonl: run label '{label}' is taken by a run of this import; this file's result is another "
        f"run: labelled '{label} #2'"
    ) in out
    assert [(r["label"], r["artefacts"]) for r in runs(ledger_url, "d")] == [(label, 1), (f"{label} #2", 1)]


def test_aiperf_records_of_the_old_schema_pair_with_the_aggregate(ledger_url: str, samples: Path) -> None:
    """The AIPerf maintainers' example artifacts (old schema: credit_phase, ttft) are detected, and the
    records file and profile_export_aiperf.json land on one run, so check recomputes the aggregate."""
    run("init", "--db", ledger_url)
    d = samples / "aiperf"
    out = run(
        "import",
        "--db",
        ledger_url,
        "--batch",
        "ai",
        str(d / "aiperf-repo-examples-run1__profile_export_aiperf.json"),
        str(d / "aiperf-repo-examples-run1__profile_export.jsonl"),
    ).output
    assert (
        "note: aiperf-repo-examples-run1__profile_export.jsonl: attached to run 1 'aiperf openai/gpt-oss-20b c100' "
        "by same pairing key 'aiperf aiperf-repo-examples-run1' and 100 requests"
    ) in out
    assert [(r["requests"], r["artefacts"]) for r in runs(ledger_url, "ai")] == [(100, 2)]
    rows = check(ledger_url, "ai")
    by = {r["key"]: r for r in rows if r["section"] == "records"}
    for key, value in (
        ("records.ttft.avg", 2343.219436988764),
        ("records.ttft.p99", 3833.38940004),
        ("records.request_latency.std", 220.2182731972512),
        ("records.output_sequence_length.p5", 228.6),
        ("records.input_sequence_length.count", 89),
    ):
        assert by[key]["status"] == "agree" and by[key]["recomputed"] == pytest.approx(value, rel=1e-12), key
    assert sum(r["status"] == "agree" for r in by.values()) >= 52
    assert not [r for r in rows if r["status"] == "disagree"]
    assert not [r for r in rows if "no per-request records" in (r["reason"] or "")]


@pytest.mark.parametrize("order", ["csv first", "json first"])
def test_aiperf_csv_export_is_detected_and_pairs_with_the_json_export_and_the_records(
    ledger_url: str, samples: Path, order: str
) -> None:
    """profile_export_aiperf.csv (two tables, two decimals) was not recognised. It is the same run's
    statistics as the JSON export: both aggregate files attach to the records' run (one format each),
    its distribution rows are recomputed from the records, its scalars checked by AIPerf's identities."""
    run("init", "--db", ledger_url)
    d = samples / "aiperf"
    csv_, json_ = (d / f"aiperf-repo-examples-run1__profile_export_aiperf.{ext}" for ext in ("csv", "json"))
    files = [
        d / "aiperf-repo-examples-run1__profile_export.jsonl",
        *((csv_, json_) if order == "csv first" else (json_, csv_)),
    ]
    out = run("import", "--db", ledger_url, "--batch", "ai", *map(str, files)).output
    for f in (csv_, json_):
        assert f"note: {f.name}: attached to run 1 " in out, out
    assert "[aiperf-csv]" in out and "131 reported values" in out
    assert [(r["requests"], r["artefacts"]) for r in runs(ledger_url, "ai")] == [(100, 3)]
    rows = check(ledger_url, "ai")
    recomputed = {r["key"]: r for r in rows if r["section"] == "records"}
    for key, printed, exact in (
        ("time_to_first_token.avg", "2343.22", 2343.219436988764),
        ("time_to_first_token.p99", "3833.39", 3833.38940004),
        ("output_sequence_length.p5", "228.60", 228.6),
        ("request_latency.p99", "9297.61", 9297.609933759999),
    ):
        r = recomputed[key]
        assert (r["reported"], r["status"]) == (printed, "agree") and r["recomputed"] == pytest.approx(exact, rel=1e-12)
    identities = {r["key"]: r for r in rows if r["section"] == "identity" and not r["key"].startswith("records.")}
    assert {k: (v["reported"], v["status"]) for k, v in identities.items()} == {
        "request_throughput.avg": ("9.55", "agree"),
        "output_token_throughput.avg": ("2320.72", "agree"),
        "benchmark_duration.avg": ("9.32", "agree"),
    }
    assert not [r for r in rows if r["status"] == "disagree"]


def newer_aiperf_csv(text: str) -> str:
    """The sample's CSV as AIPerf's newer exporter writes it (aiperf/common/constants.py STAT_KEYS: a ``sum``
    after ``max``, ``p10`` after ``p5``; an empty cell for a statistic that is None; a GPU telemetry table
    whose card columns come before ``Metric`` and its host after ``std``), plus a column no version has."""
    out = []
    for line in text.splitlines():
        c = line.split(",")
        if line.startswith("Metric,avg"):
            c = [*c[:4], "sum", *c[4:6], "p10", *c[6:], "trimmed_mean"]
        elif len(c) == 13:
            c = [*c[:4], "" if c[0].startswith("Output Token Count") else "1.00", *c[4:6], "2.00", *c[6:], "3.00"]
        out.append(",".join(c))
    return "\n".join(
        [
            *out,
            "",
            "",
            "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Metric,avg,min,max,sum,p1,p5,p10,p25,p50,"
            "p75,p90,p95,p99,std,Hostname",
            "http://node1:9401/metrics,0,NVIDIA H100,GPU-1a,GPU Power Usage (W),"
            "300.00,250.00,350.00,,251.00,255.00,260.00,280.00,300.00,320.00,340.00,345.00,349.00,20.00,node1",
            "",
        ]
    )


def test_aiperf_csv_of_a_newer_aiperf_is_read_and_says_what_it_did_not_know(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    """AIPerf 0.8's CSV was refused whole: "unknown statistic column 'sum'" (issue 39). Its known statistics
    are read and checked as before; ``sum``, the empty cells and the GPU table are kept; a column no
    version of the importer knows is kept as reported values, and the import says so."""
    run("init", "--db", ledger_url)
    d = samples / "aiperf"
    name = "aiperf-repo-examples-run1__profile_export_aiperf.csv"
    (tmp_path / name).write_text(newer_aiperf_csv((d / name).read_text()))
    records = shutil.copyfile(
        d / "aiperf-repo-examples-run1__profile_export.jsonl",
        tmp_path / "aiperf-repo-examples-run1__profile_export.jsonl",
    )
    out = run("import", "--db", ledger_url, "--batch", "ai", records, tmp_path / name).output
    assert (
        f"note: {name}: statistic column(s) 'trimmed_mean' (line 1) not known to this importer (a newer AIPerf?): "
        "kept as reported values <metric>.<column> with the unit of their row, not checked"
    ) in out
    assert f"note: {name}: attached to run 1 " in out and "[aiperf-csv]" in out
    with Ledger(ledger_url) as led, led.connection() as conn:
        rows = {
            r.key: r for r in conn.exec_driver_sql("SELECT key, text, unit, flag, na_reason, note FROM published_value")
        }
    assert (rows["request_latency.sum"].text, rows["request_latency.sum"].unit) == ("1.00", "ms")
    assert (rows["output_token_count.sum"].flag, rows["output_token_count.sum"].na_reason) == (
        "n/a",
        "the tool printed an empty cell (no value)",
    )
    assert rows["time_to_first_token.trimmed_mean"].note == (
        "statistic column 'trimmed_mean': not known to this importer, kept as printed"
    )
    card = "gpu_telemetry[http://node1:9401/metrics GPU_Index 0 GPU_Name NVIDIA H100 GPU_UUID GPU-1a Hostname node1]"
    assert (rows[f"{card}.gpu_power_usage.p99"].text, rows[f"{card}.gpu_power_usage.p99"].unit) == ("349.00", "W")
    checked = {r["key"]: r["status"] for r in check(ledger_url, "ai") if r["section"] == "records"}
    assert checked["time_to_first_token.p99"] == checked["request_latency.avg"] == "agree"


SERVE = "benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d"  # the vLLM result JSON, renamed with a prefix
NAMED = "tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json"  # the result_filename its console prints
SERVE_RUN = "Qwen3.6-27B rate=inf c=1"
CONSOLE_RUN = SERVE_RUN  # the console's label is the result JSON's: model, rate and concurrency of its Namespace


@pytest.mark.parametrize("order", ["json first", "console first"])
def test_vllm_console_pairs_with_the_result_json_it_names(ledger_url: str, samples: Path, order: str) -> None:
    """The console's Namespace names result_filename 'tm-….json'; the saved JSON is 'benchmaq_tm-….json'.
    Matched as a suffix and by content (num_prompts, completed, model), the two land on one run, so
    check compares the console's rounded table with the records and with the JSON's full floats."""
    run("init", "--db", ledger_url)
    d = samples / "vllm-bench-serve"
    files = [d / f"{SERVE}.json", d / f"{SERVE}.stdout.txt"]
    out = run(
        "import", "--db", ledger_url, "--batch", "v", *map(str, files if order == "json first" else files[::-1])
    ).output
    both = "both state 50 requests, completed '50', model 'Qwen/Qwen3.6-27B'"
    if order == "json first":
        assert (
            f"note: {SERVE}.stdout.txt: attached to run 1 '{SERVE_RUN}' by file name: '{SERVE}.json' there is the "
            f"'{NAMED}' this file names; {both}"
        ) in out
    else:
        assert (
            f"note: {SERVE}.json: attached to run 1 '{CONSOLE_RUN}' by file name: this file '{SERVE}.json' is the "
            f"'{NAMED}' named there; {both}"
        ) in out
    assert [(r["requests"], r["artefacts"], r["concurrency"], r["request_count"]) for r in runs(ledger_url, "v")] == [
        (50, 2, 1, 50)
    ]
    rows = check(ledger_url, "v")
    assert not [r for r in rows if r["status"] == "disagree"]
    # the console's printed values, recomputed from the records over the JSON's exact duration
    printed = {r["key"]: r for r in rows if r["section"] == "records" and r["reported"] in ("0.17", "21.82", "886.37")}
    assert {k: (r["status"], r["tolerance"], r["recomputed"]) for k, r in printed.items()} == {
        "request_throughput": ("agree", "±0.005", 0.17044888893036758),
        "output_throughput": ("agree", "±0.005", 21.81745778308705),
        "mean_ttft_ms": ("agree", "±0.005", 886.3659732043743),
    }
    # and each printed value against the JSON's value of the same key (R11: within half a printed unit)
    repeated = {r["key"]: r for r in rows if r["definition"] == "repeated value"}
    assert len(repeated) == 22 and {r["status"] for r in repeated.values()} == {"agree"}
    dur = repeated["duration"]
    assert (dur["reported"], dur["recomputed"]) in (("293.34", 293.343067905982), ("293.343067905982", 293.34))


def _serve_copy(samples: Path, to: Path, **changes: object) -> None:
    obj = json.loads((samples / "vllm-bench-serve" / f"{SERVE}.json").read_text())
    obj.update(changes)
    to.write_text(json.dumps(obj))


def test_vllm_console_naming_two_result_files_is_refused_with_the_candidates(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("init", "--db", ledger_url)
    _serve_copy(samples, tmp_path / f"a_{NAMED}")
    _serve_copy(samples, tmp_path / f"b_{NAMED}", date="20260428-091917")
    _serve_copy(samples, tmp_path / f"xa{NAMED}", date="20260428-101917")  # no separator before the name: not it
    run("import", "--db", ledger_url, "--batch", "v", str(tmp_path))
    before = counts(ledger_url)
    console = samples / "vllm-bench-serve" / f"{SERVE}.stdout.txt"
    out = run("import", "--db", ledger_url, "--batch", "v", str(console), code=1).output
    assert (
        f"error: {console}: run '{CONSOLE_RUN}' (the tool's aggregates (vllm-bench-console)) could belong to 2 runs "
        f"of batch 'v' by the file name '{NAMED}' this file names, 50 requests, completed '50', model "
        f"'Qwen/Qwen3.6-27B': run 1 '{SERVE_RUN}', run 2 'Qwen3.6-27B rate=inf c=1 #2'; none was "
        "chosen: name one with --run LABEL"
    ) in out
    assert counts(ledger_url) == before


def test_vllm_console_and_a_result_file_of_other_counts_are_not_paired(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("init", "--db", ledger_url)
    obj = json.loads((samples / "vllm-bench-serve" / f"{SERVE}.json").read_text())
    _serve_copy(samples, tmp_path / f"benchmaq_{NAMED}", completed=49, failed=1, errors=["boom", *obj["errors"][1:]])
    _serve_copy(samples, tmp_path / f"other_{NAMED}", model_id="Qwen/Qwen3-8B", date="20260428-091917")
    run("import", "--db", ledger_url, "--batch", "v", str(tmp_path))
    out = run(
        "import", "--db", ledger_url, "--batch", "v", str(samples / "vllm-bench-serve" / f"{SERVE}.stdout.txt")
    ).output
    assert (
        f"note: {SERVE}.stdout.txt: not paired with run 1 '{SERVE_RUN}' (file name: 'benchmaq_{NAMED}' there is the "
        f"'{NAMED}' this file names): completed '49' there and '50' in this file differ"
    ) in out
    assert (
        f"note: {SERVE}.stdout.txt: not paired with run 2 'Qwen3-8B rate=inf c=1' (file name: "
        f"'other_{NAMED}' there is the '{NAMED}' this file names): model 'Qwen/Qwen3-8B' there and "
        "'Qwen/Qwen3.6-27B' in this file differ"
    ) in out
    # the console's label is taken: the factor only it states tells the two apart (its Namespace line's dataset_name)
    assert [(r["label"], r["artefacts"]) for r in runs(ledger_url, "v")][-1] == (f"{CONSOLE_RUN} dataset=random", 1)
