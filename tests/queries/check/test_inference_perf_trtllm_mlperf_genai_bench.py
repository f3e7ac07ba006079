"""`check` on the formats of issue 15: each tool's own definitions and summary identities, on the
real samples (both backends) and on small fixtures."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench_ledger.cli import main
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger
from click.testing import CliRunner

SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, "-q", *args])
    assert res.exit_code == 0, res.output


def files(samples: Path, folder: str) -> list[str]:
    return sorted(str(p) for p in (samples / folder).rglob("*") if p.is_file())


def tally(rows) -> Counter:
    return Counter((r.section, r.status) for r in rows)


def test_inference_perf_identities_hold_and_prometheus_is_never_recomputed(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, "--batch", "ip", *files(samples, "inference-perf"))
    rows = check(ledger, batch="ip")
    assert tally(rows)[(IDENTITY, "agree")] == 14 and tally(rows)[(IDENTITY, "disagree")] == 0
    stage6 = {r.definition: r for r in rows if r.section == IDENTITY and r.run.endswith("stage 6")}
    rate = stage6["achieved_rate = count / send_duration"]
    assert (rate.reported, rate.status) == ("106.54759673128557", "agree")
    assert "11002" in rate.reason and "103.25901604094543" in rate.reason
    prom = next(r for r in rows if r.key == "prometheus.successes.count" and r.run.endswith("all stages"))
    assert (prom.reported, prom.status) == ("81418", "not re-derivable")
    assert prom.reason == "no per-request records in this run's artefacts (aggregates only)"
    # no identity mixes a Prometheus value with a lifecycle one (R6)
    assert not any("prometheus" in (r.reason or "") for r in rows if r.section == IDENTITY)


def test_inference_perf_per_request_records_reproduce_the_stage(
    ledger: Ledger, ledger_url: str, fixtures: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "reports-1"
    folder.mkdir()
    src = fixtures / "inference_perf/reports-1/per_request_lifecycle_metrics.json"
    (folder / "per_request_lifecycle_metrics.json").write_bytes(src.read_bytes())
    stage = {
        "load_summary": {
            "count": 2,
            "schedule_delay": {"mean": 0.0},
            "send_duration": 0.5,
            "requested_rate": 4.0,
            "achieved_rate": 4.0,
        },
        "successes": {
            "count": 1,
            "latency": {
                "request_latency": {"mean": 0.4, "median": 0.4, "max": 0.4},
                "time_to_first_token": {"mean": 0.1},
            },
            "throughput": {"requests_per_sec": 1.6666666666666667, "output_tokens_per_sec": 5.0},
            "prompt_len": {"mean": 10.0},
            "output_len": {"mean": 3.0},
        },
        "failures": {"count": 1, "request_latency": {"mean": 0.1}, "prompt_len": {"mean": 12.0}},
    }
    (folder / "stage_0_lifecycle_metrics.json").write_text(json.dumps(stage))
    imp(
        ledger_url,
        "--batch",
        "pr",
        str(folder / "per_request_lifecycle_metrics.json"),
        str(folder / "stage_0_lifecycle_metrics.json"),
    )
    rows = {r.key: r for r in check(ledger, batch="pr") if r.section == RECORDS and r.run.endswith("stage 0")}
    for key in (
        "load_summary.count",
        "load_summary.send_duration",
        "load_summary.achieved_rate",
        "successes.count",
        "failures.count",
        "successes.latency.request_latency.mean",
        "successes.latency.request_latency.max",
        "successes.latency.time_to_first_token.mean",
        "successes.prompt_len.mean",
        "successes.output_len.mean",
        "successes.throughput.requests_per_sec",
        "successes.throughput.output_tokens_per_sec",
        "failures.request_latency.mean",
        "failures.prompt_len.mean",
    ):
        assert rows[key].status == "agree", (key, rows[key])
    assert rows["successes.throughput.requests_per_sec"].reason == "over successes / (last end - first start)"
    assert rows["load_summary.schedule_delay.mean"].reason == (
        "needs each request's scheduled time, which the per-request file does not keep"
    )
    assert rows["load_summary.requested_rate"].status == "not re-derivable"


def test_trtllm_floor_index_and_rates(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, "--batch", "t", *files(samples, "trtllm-bench"))
    rows = check(ledger, batch="t")
    assert tally(rows) == Counter({(RECORDS, "not re-derivable"): 79, (IDENTITY, "agree"): 23})
    ident = {r.definition: r for r in rows if r.section == IDENTITY}
    p99 = ident[
        "performance.request_latency_percentiles_ms.p99 = performance.request_latency_percentiles_ms.maximum "
        "(floor index int(20 x 0.99) = 19, the last)"
    ]
    assert (p99.reported, p99.status) == ("93.96171799999999", "agree")
    assert "performance.request_latency_percentiles_ms.p90" not in {r.key for r in rows if r.section == IDENTITY}
    thr = ident["system_output_throughput_tok_s = num_requests x avg_output_length / (total_latency_ms / 1000)"]
    assert (thr.reported, thr.status) == ("556.3859403206322", "agree")
    assert "world_info.issue_rate" not in {r.key for r in rows}  # latency mode: kept n/a, not a claim to check


def test_mlperf_detail_rounding_is_checked_against_the_summary(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, "--batch", "m", *files(samples, "mlperf-loadgen"))
    rows = check(ledger, batch="m")
    # 65 numeric identities + 13 validity identities (Server 7, Offline 6: no performance constraints line)
    assert tally(rows) == Counter({(RECORDS, "not re-derivable"): 310, (IDENTITY, "agree"): 78})
    tok = next(
        r
        for r in rows
        if r.definition == "summary 'Completed tokens per second' = detail "
        "result_completed_tokens_per_second (rounded, R11)"
    )
    assert (tok.reported, tok.recomputed, tok.status, tok.tolerance) == ("99123", 99123.04, "agree", "±0.505")
    offline = next(r for r in rows if (r.definition or "").startswith("result_samples_per_second = result_query_count"))
    assert (offline.reported, offline.status) == ("371.423", "agree")
    assert round(offline.recomputed, 6) == 371.422945
    rep = [r for r in rows if r.definition == "repeated value"]
    assert [(r.key, r.reported, r.status) for r in rep] == [("Completed tokens per second", "99123.04", "agree")]


def test_mlperf_rounded_detail_that_contradicts_the_summary_disagrees(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = samples / "mlperf-loadgen"
    for kind in ("summary", "detail"):
        text = (src / f"NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_{kind}.txt").read_text()
        if kind == "detail":
            text = text.replace(
                '"result_completed_tokens_per_second", "value": 99123,',
                '"result_completed_tokens_per_second", "value": 99124,',
            )
        (tmp_path / f"mlperf_log_{kind}.txt").write_text(text)
    imp(ledger_url, "--batch", "m", str(tmp_path / "mlperf_log_summary.txt"), str(tmp_path / "mlperf_log_detail.txt"))
    bad = [r for r in check(ledger, batch="m") if r.status == "disagree"]
    assert [(r.key, r.reported, r.recomputed) for r in bad] == [
        ("detail.result_completed_tokens_per_second", "99124", 99123.04)
    ]


def test_genai_bench_stats_recomputed_by_numpy_and_rates_by_identity(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, "--batch", "g", *files(samples, "genai-bench"))
    rows = check(ledger, batch="g")
    assert tally(rows) == Counter({(RECORDS, "agree"): 228, (RECORDS, "not re-derivable"): 12, (IDENTITY, "agree"): 12})
    agree = {(r.run[-40:], r.key) for r in rows if r.status == "agree" and r.section == RECORDS}
    for metric in (
        "ttft",
        "tpot",
        "e2e_latency",
        "output_latency",
        "output_inference_speed",
        "num_input_tokens",
        "num_output_tokens",
        "total_tokens",
        "input_throughput",
        "output_throughput",
    ):
        for stat in ("min", "max", "mean", "stddev", "sum", "p25", "p50", "p75", "p90", "p95", "p99"):
            assert ("text-to-text_num_concurrency_16_time_15s", f"stats.{metric}.{stat}") in agree
    why = {r.reason for r in rows if r.status == "not re-derivable"}
    assert why == {
        "the records carry no timestamps: genai-bench's rates divide by its own run_duration (see the "
        "identities), never re-derived from the records"
    }


def test_genai_bench_error_rate_is_checked_against_its_error_counts(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = (
        samples
        / "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"
    )
    data = json.loads(src.read_text())
    for rec in data["individual_request_metrics"][:2]:
        for k in rec:
            rec[k] = None
        rec["error_code"], rec["error_message"] = 500, "Internal Server Error"
    agg = data["aggregated_metrics"]
    agg.update(num_error_requests=2, num_completed_requests=62, error_rate=0, error_codes_frequency={"500": 2})
    f = tmp_path / "N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"
    f.write_text(json.dumps(data))
    imp(ledger_url, "--batch", "g", str(f))
    rows = [r for r in check(ledger, batch="g") if r.key == "aggregated_metrics.error_rate"]
    assert [(r.section, r.status, r.recomputed) for r in rows] == [
        (RECORDS, "disagree", 2 / 64),
        (IDENTITY, "disagree", 2 / 64),
    ]
    freq = next(r for r in check(ledger, batch="g") if r.key == "aggregated_metrics.error_codes_frequency.500")
    assert (freq.status, freq.recomputed) == ("agree", 2.0)


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
