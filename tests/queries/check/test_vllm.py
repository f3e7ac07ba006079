"""`check` of vLLM's other outputs: sweep summaries against each run file, the console table as rounded,
`--save-detailed` records reproducing vLLM's aggregates (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import RECORDS
from bench_ledger.store import Ledger

from tests.queries.check.importing import files, imp

SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


def test_sweep_summary_is_checked_against_each_run_file(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, "--batch", "s", *files(samples, "vllm-bench-sweep"))
    rows = [r for r in check(ledger, batch="s") if r.definition == "repeated value"]
    assert len(rows) == 2 * 26 and {r.status for r in rows} == {"agree"}  # rtfx 0.0 is n/a (vLLM's placeholder)
    dur = next(r for r in rows if r.key == "duration" and r.run.endswith("run=0"))
    assert (
        dur.reason
        == "duration in summary.json item 0 $.duration = duration in run=0.json $.duration: 1.3653671270003542"
    )


def test_sweep_summary_edited_after_the_run_disagrees(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"
    folder.mkdir()
    for name in ("run=0.json", "run=1.json"):
        (folder / name).write_bytes((samples / SWEEP / name).read_bytes())
    summary = json.loads((samples / SWEEP / "summary.json").read_text())
    summary[1]["output_throughput"] = 200.0
    (folder / "summary.json").write_text(json.dumps(summary))
    imp(ledger_url, "--batch", "s", *sorted(str(p) for p in folder.iterdir()))
    bad = [r for r in check(ledger, batch="s") if r.status == "disagree"]
    assert [(r.key, r.reported, r.recomputed, r.definition) for r in bad] == [
        ("output_throughput", "200.0", 199.36907134182283, "repeated value")
    ]


def test_console_table_is_rounded_not_a_machine_float(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    d = samples / "vllm-bench-serve"
    imp(
        ledger_url,
        "--batch",
        "c",
        "--run",
        "qwen",
        str(d / "benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json"),
        str(d / "benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.stdout.txt"),
    )
    rows = check(ledger, batch="c")
    assert not [r for r in rows if r.status == "disagree"]
    thr = next(r for r in rows if r.definition == "repeated value" and r.key == "request_throughput")
    assert (thr.reported, thr.status) == ("0.17", "agree")
    ttft = next(r for r in rows if r.section == RECORDS and r.key == "mean_ttft_ms" and r.reported == "886.37")
    assert (ttft.status, ttft.tolerance, round(ttft.recomputed, 6)) == ("agree", "±0.005", 886.365973)


def test_vllm_save_detailed_sample_reproduces_vllm_aggregates(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(
        ledger_url,
        "--batch",
        "d",
        str(samples / "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json"),
    )
    rows = [r for r in check(ledger, batch="d") if r.section == RECORDS]
    agree = {r.key for r in rows if r.status == "agree"}
    assert agree == {f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "itl")} | {
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
    }
    assert not [r for r in rows if r.status == "disagree"]
    why = {r.key: r.reason for r in rows if r.status == "not re-derivable"}
    assert why["mean_e2el_ms"] == why["p99_tpot_ms"] == "needed field latency_s not captured"
