"""The importers of issue 15 on the real samples (../shared/samples, MANIFEST.md "More formats") and on
small fixtures: inference-perf, trtllm-bench, MLPerf loadgen, genai-bench, vLLM sweeps, nvidia-smi
CSV and dcgmi dmon."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers.base import ParseOptions, read_head

# Every sample folder this issue covers, and the one format each of its files must be detected as.
EXPECTED = {
    "inference-perf/kubecon-na-2025_vllm_stage_0_lifecycle_metrics.json": "inference-perf",
    "inference-perf/kubecon-na-2025_vllm_stage_6_lifecycle_metrics.json": "inference-perf",
    "inference-perf/kubecon-na-2025_vllm_summary_lifecycle_metrics.json": "inference-perf",
    "inference-perf/kubecon-na-2025_vllm_stage_0_prometheus_metrics.json": "inference-perf-prometheus",
    "inference-perf/kubecon-na-2025_vllm_summary_prometheus_metrics.json": "inference-perf-prometheus",
    "inference-perf/kubecon-na-2025_config.yaml": "inference-perf-config",
    "trtllm-bench/latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json": "trtllm-bench",
    "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Offline_mlperf_log_summary.txt": "mlperf-summary",
    "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Offline_mlperf_log_detail.txt": "mlperf-detail",
    "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_summary.txt": "mlperf-summary",
    "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_detail.txt": "mlperf-detail",
    "genai-bench/baseten_training_benchmark__experiment_metadata.json": "genai-bench-metadata",
    "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json": "genai-bench",
    "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_2_time_63s.json": "genai-bench",
    "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json": "vllm-bench",
    "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.stdout.txt": "vllm-bench-console",
    "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8/run=0.json": "vllm-bench",
    "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8/run=1.json": "vllm-bench",
    "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8/summary.json": "vllm-sweep-summary",
    "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv": "nvidia-smi-csv",
    "dcgmi-dmon/agi-hpc_dcgm_dmon_rtx2080ti.txt": "dcgmi-dmon",
}
FOLDERS = sorted({k.split("/")[0] for k in EXPECTED})
SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


def parse(path: Path, **options):
    return importers.detect(path).parse(path, ParseOptions(**options))


def one_run(path: Path, **options):
    (run,) = list(parse(path, **options).iter_runs())
    return run


def pub(run, key: str, nth: int = 0):
    return [p for p in run.published if p.key == key][nth]


def test_every_file_of_the_new_folders_is_detected_as_exactly_one_format(samples: Path) -> None:
    files = sorted(str(p.relative_to(samples)) for d in FOLDERS for p in (samples / d).rglob("*") if p.is_file())
    assert files == sorted(EXPECTED)
    for rel, fmt in EXPECTED.items():
        head = read_head(samples / rel)
        assert [i.name for i in importers.all_importers() if i.sniff(head) is None] == [fmt], rel


def test_formats_are_registered() -> None:
    names = {i.name for i in importers.all_importers()}
    assert set(EXPECTED.values()) <= names


# ------------------------------------------------------------------------------------------ inference-perf


def test_inference_perf_stage_keeps_requested_and_achieved_rate_and_flags_the_shortfall(samples: Path) -> None:
    run = one_run(samples / "inference-perf/kubecon-na-2025_vllm_stage_6_lifecycle_metrics.json")
    assert run.info.label == "inference-perf inference-perf/kubecon-na-2025_vllm stage 6"
    assert run.info.tool == "inference-perf" and run.info.request_count == 11002
    assert run.info.request_rate == "183.38" and run.info.duration_s == 103.25901604094543
    assert run.info.metadata["rate_shortfall"] == "achieved 58.1% of the requested rate"
    achieved = pub(run, "load_summary.achieved_rate")
    assert (achieved.text, achieved.unit, achieved.flag) == ("106.54759673128557", "requests/s", "reported")
    assert achieved.note.startswith("achieved rate below 90% of the requested 183.38 req/s")
    delay = pub(run, "load_summary.schedule_delay.mean")
    assert (delay.text, delay.unit, delay.quantity_kind) == (
        "19.920635674947324",
        "s",
        "other",
    )  # signed: min < 0 in stage 0
    assert pub(run, "successes.latency.request_latency.p99").text == "4.549318022641819"
    assert pub(run, "successes.throughput.output_tokens_per_sec").unit == "tokens/s"
    assert pub(run, "failures.request_latency").flag == "n/a"  # null: no failures
    assert run.capture.record_count == 0 and run.capture.fields == []


def test_inference_perf_stage_0_is_not_flagged(samples: Path) -> None:
    run = one_run(samples / "inference-perf/kubecon-na-2025_vllm_stage_0_lifecycle_metrics.json")
    assert "rate_shortfall" not in run.info.metadata
    assert pub(run, "load_summary.achieved_rate").note is None


def test_inference_perf_prometheus_values_are_kept_apart(samples: Path) -> None:
    life = one_run(samples / "inference-perf/kubecon-na-2025_vllm_summary_lifecycle_metrics.json")
    prom = one_run(samples / "inference-perf/kubecon-na-2025_vllm_summary_prometheus_metrics.json")
    assert life.info.label == prom.info.label == "inference-perf inference-perf/kubecon-na-2025_vllm all stages"
    assert pub(life, "successes.count").text == "38717"
    count = pub(prom, "prometheus.successes.count")
    assert count.text == "81418" and "never combined" in count.note
    assert all(p.key.startswith("prometheus.") for p in prom.published)
    assert pub(prom, "prometheus.successes.request_latency.mean").unit == "s"
    assert pub(prom, "prometheus.successes.rate").unit == "requests/s"


def test_inference_perf_per_request_file_splits_stages(fixtures: Path) -> None:
    parsed = parse(fixtures / "inference_perf/reports-1/per_request_lifecycle_metrics.json")
    runs = list(parsed.iter_runs())
    assert [r.info.label for r in runs] == ["inference-perf reports-1 stage 0", "inference-perf reports-1 stage 1"]
    req = runs[0].requests
    assert req.status == ["ok", "failed"] and req.input_tokens == [10, 12]
    assert req.output_tokens == [3, None]
    assert req.send_ns == [100_000_000_000, 100_500_000_000] and req.latency_s[0] == pytest.approx(0.4)
    assert req.ttft_s[0] == pytest.approx(0.1) and req.chunk_gaps_s[0] == pytest.approx([0.1, 0.2])
    assert req.error[1] == "HTTP Error 500: boom"
    assert runs[0].capture.clock == "monotonic_s"
    assert runs[1].requests.idx == [2]  # numbered across the artefact


def test_inference_perf_config_is_kept_as_settings(samples: Path) -> None:
    parsed = parse(samples / "inference-perf/kubecon-na-2025_config.yaml")
    keys = {p.key: p.text for p in parsed.published}
    assert keys["load.sweep.num_stages"] == "7" and keys["load.sweep.stage_duration"] == "60"
    assert keys["report.request_lifecycle.per_request"] == "true"
    assert not any("token" == k.split(".")[-1] for k in keys)  # the placeholder HF token is not kept
    assert list(parsed.iter_runs()) == []


# ------------------------------------------------------------------------------------------ trtllm-bench


def test_trtllm_bench_sections_and_latency_mode_issue_rate(samples: Path) -> None:
    run = one_run(samples / "trtllm-bench/latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json")
    assert run.info.label == "trtllm-bench Qwen/Qwen2.5-0.5B-Instruct tp1 pp1 bs1 n20"
    assert run.info.tool_version == "1.2.0" and run.info.request_count == 20
    assert run.info.metadata["engine.backend"] == "TRT" and run.info.metadata["mode"] == "latency"
    assert run.info.metadata["world_info.scheduling_policy"] == "GUARANTEED_NO_EVICT"
    issue = pub(run, "world_info.issue_rate")
    assert issue.flag == "n/a" and issue.value is None and "latency mode" in issue.na_reason
    total = pub(run, "performance.total_latency_ms")
    assert (total.text, total.unit, total.quantity_kind, total.precision) == ("1437.850855", "ms", "duration", 6)
    assert pub(run, "streaming_metrics.ttft_percentiles.p99").unit == "ms"
    assert pub(run, "streaming_metrics.gen_tps_percentiles.p50").quantity_kind == "per_stream_token_rate"
    assert pub(run, "performance.system_output_throughput_tok_s").quantity_kind == "aggregate_token_rate"
    assert pub(run, "dataset.isl_stats.p50").unit == "tokens"


# ------------------------------------------------------------------------------------------ MLPerf loadgen


def test_mlperf_summary_keeps_validity_early_stopping_and_repeated_keys(samples: Path) -> None:
    run = one_run(samples / "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_summary.txt")
    assert run.info.label == "mlperf-loadgen mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server"
    assert run.info.metadata == {
        "SUT name": "PySUT",
        "Scenario": "Server",
        "Mode": "PerformanceOnly",
        "Result is": "VALID",
    }
    tokens = [p for p in run.published if p.key == "Completed tokens per second"]
    assert [(p.text, p.locator, p.unit) for p in tokens] == [
        ("99123.04", "line 8", "tokens/s"),
        ("99123.04", "line 33", "tokens/s"),
    ]
    assert pub(run, "TTFT Early Stopping Result").text == "* Run successful."
    p99 = pub(run, "99.00 percentile first token latency (ns)")
    assert (p99.value, p99.unit, p99.quantity_kind) == (Decimal(436315697), "ns", "latency")
    assert pub(run, "min_duration (ms)").text == "2400000"


def test_mlperf_detail_keeps_events_with_lines_and_version(samples: Path) -> None:
    parsed = parse(samples / "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Offline_mlperf_log_detail.txt")
    (run,) = list(parsed.iter_runs())
    assert parsed.format_version == "5.0.25 @ 5232291860"
    assert run.info.label == "mlperf-loadgen mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Offline"
    assert run.info.started_at == datetime.fromisoformat("2025-07-20T23:55:38+00:00")
    msgs = [p for p in run.published if p.key == "detail.generic_message"]
    assert [p.locator for p in msgs] == ["line 59", "line 64"]
    tps = pub(run, "detail.result_tokens_per_second")
    assert (tps.text, tps.precision, tps.unit) == ("101527", 0, "tokens/s")
    assert pub(run, "detail.result_validity").text == "VALID"
    assert pub(run, "detail.early_stopping_met").text == "true"
    assert run.info.metadata["effective_scenario"] == "Offline"


def test_mlperf_pair_shares_the_folder_label(tmp_path: Path, samples: Path) -> None:
    folder = tmp_path / "closed/X/results/sys/llama2-70b-99/Server/performance/run_1"
    folder.mkdir(parents=True)
    for kind in ("summary", "detail"):
        src = samples / f"mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_{kind}.txt"
        (folder / f"mlperf_log_{kind}.txt").write_bytes(src.read_bytes())
    labels = {one_run(folder / f"mlperf_log_{k}.txt").info.label for k in ("summary", "detail")}
    assert labels == {"mlperf-loadgen sys/llama2-70b-99/Server/performance/run_1"}


def test_mlperf_detail_bad_line_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "mlperf_log_detail.txt"
    bad.write_text(':::MLLOG {"key": "a", "value": 1}\n:::MLLOG {"key": \n')
    with pytest.raises(ParseError, match=r"line 2 column 17: invalid JSON: Expecting value"):
        parse(bad)


# ------------------------------------------------------------------------------------------ genai-bench


def test_genai_bench_run_file(samples: Path) -> None:
    run = one_run(
        samples
        / "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"
    )
    assert run.info.concurrency == 16 and run.info.request_count == 64
    assert run.info.metadata["scenario"] == "N(2000,200)/(200,20)"
    assert run.info.metadata["name_num_concurrency"] == "16" and "name_mismatch" not in run.info.metadata
    assert run.capture.fields == [
        "error",
        "input_tokens",
        "itl_mean_s",
        "latency_s",
        "output_tokens",
        "status",
        "ttft_s",
    ]
    assert run.capture.clock is None and run.capture.record_count == 64
    req = run.requests
    assert (req.ttft_s[0], req.latency_s[0], req.itl_mean_s[0]) == (
        0.966516887769103,
        2.9223737651482224,
        0.011782270345657346,
    )
    assert (req.input_tokens[0], req.output_tokens[0]) == (2209, 167)
    assert pub(run, "aggregated_metrics.requests_per_second").text == "4.239721261766324"
    assert pub(run, "stats.ttft.mean").unit == "s"
    assert pub(run, "aggregated_metrics.error_rate").text == "0"


def test_genai_bench_metadata_keeps_settings_not_the_command_line(samples: Path) -> None:
    parsed = parse(samples / "genai-bench/baseten_training_benchmark__experiment_metadata.json")
    keys = {p.key: p.text for p in parsed.published}
    assert keys["experiment.num_concurrency"] == "2, 4, 8, 16, 32, 64"
    assert keys["experiment.max_requests_per_run"] == "64" and keys["experiment.server_gpu_type"] == "H100"
    assert "experiment.cmd" not in keys and parsed.format_version == "0.0.2"


def test_genai_bench_failed_records_and_time_unit(tmp_path: Path) -> None:
    data = {
        "aggregated_metrics": {
            "scenario": "D(100,10)",
            "num_concurrency": 2,
            "iteration_type": "num_concurrency",
            "run_duration": 2000.0,
            "error_rate": 0,
            "num_error_requests": 1,
            "num_requests": 2,
            "stats": {},
        },
        "individual_request_metrics": [
            {
                "ttft": 100.0,
                "tpot": 10.0,
                "e2e_latency": 200.0,
                "num_input_tokens": 100,
                "num_output_tokens": 11,
                "error_code": None,
                "error_message": None,
            },
            {
                "ttft": None,
                "tpot": None,
                "e2e_latency": None,
                "num_input_tokens": None,
                "num_output_tokens": None,
                "error_code": 500,
                "error_message": "boom",
            },
        ],
        "_time_unit": "ms",
    }
    f = tmp_path / "D100_10_text-to-text_num_concurrency_4_time_2s.json"
    f.write_text(json.dumps(data))
    run = one_run(f)
    assert run.requests.status == ["ok", "failed"] and run.requests.error == [None, "500: boom"]
    assert run.requests.ttft_s == [0.1, None] and run.requests.latency_s == [0.2, None]
    assert run.info.duration_s == 2.0
    assert run.info.metadata["name_mismatch"] == "file name says num_concurrency 4, the file says 2"


# ------------------------------------------------------------------------------------------ vLLM sweeps


def test_sweep_run_files_are_repetitions_labelled_from_the_folder(samples: Path) -> None:
    run = one_run(samples / SWEEP / "run=1.json")
    assert run.info.label == (
        "vllm-sweep vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8 run=1"
    )
    meta = run.info.metadata
    assert (meta["serve.max_num_seqs"], meta["bench.max_concurrency"], meta["bench.num_prompts"]) == ("4", "2", "8")
    assert meta["launch"] == "vllm_sweep_v0.25.1/SERVE--max_num_seqs=4" and meta["run_number"] == "1"
    assert {"run_number", "max_num_seqs"}.isdisjoint(p.key for p in run.published)


def test_sweep_summary_lands_on_the_same_runs(samples: Path) -> None:
    runs = list(parse(samples / SWEEP / "summary.json").iter_runs())
    files = [one_run(samples / SWEEP / f"run={n}.json") for n in (0, 1)]
    assert [r.info.label for r in runs] == [r.info.label for r in files]
    assert [pub(r, "duration").text for r in runs] == [pub(r, "duration").text for r in files]


def test_sweep_payload_contradicting_its_folder_is_refused(tmp_path: Path, samples: Path) -> None:
    folder = tmp_path / "SERVE--max_num_seqs=8-BENCH--max_concurrency=2"
    folder.mkdir()
    (folder / "run=0.json").write_bytes((samples / SWEEP / "run=0.json").read_bytes())
    with pytest.raises(ParseError, match=r"payload says max_num_seqs=4, the folder name .* says 8"):
        list(parse(folder / "run=0.json").iter_runs())


# ------------------------------------------------------------------------------------------ GPU telemetry


def test_nvidia_smi_csv_units_from_header_and_time_zone_unconfirmed(samples: Path) -> None:
    parsed = parse(samples / "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv")
    (cols,) = list(parsed.samples)
    assert len(cols) == 4 * 2619 and set(cols.gpu) == {0}
    units = dict(zip(cols.counter, cols.unit, strict=True))
    assert units == {"utilization.gpu": "%", "utilization.memory": "%", "memory.used": "MiB", "power.draw": "W"}
    power = [v for c, v in zip(cols.counter, cols.value, strict=True) if c == "power.draw"]
    assert max(power) == 332.92 and power[0] == 33.09
    assert cols.ts[0] == datetime(2026, 1, 3, 15, 36, 53, 507000) and cols.tick[-1] == 2618
    assert "time zone unconfirmed" in parsed.note and "NVIDIA GeForce RTX 4090" in parsed.note
    declared = parse(samples / "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv", time_zone="Asia/Shanghai")
    assert "time zone declared by the user: Asia/Shanghai" in declared.note


def test_nvidia_smi_csv_na_not_supported_instant_power_and_index(fixtures: Path) -> None:
    parsed = parse(fixtures / "gpu_telemetry/two_gpus.csv")
    (cols,) = list(parsed.samples)
    rows = list(zip(cols.tick, cols.gpu, cols.counter, cols.value, cols.unit, strict=True))
    assert (0, 1, "power.draw.instant", None, "W") in rows  # [N/A]
    assert (1, 0, "clocks.sm", None, "MHz") in rows  # [Not Supported]
    assert (1, 1, "power.draw", 71.5, "W") in rows
    assert "1 [N/A], 1 [Not Supported]" in parsed.note


def test_nvidia_smi_csv_cell_unit_contradicting_header(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text("timestamp, power.draw [W]\n2026/01/03 15:36:53.507, 64.07 mW\n")
    with pytest.raises(ParseError, match=r"line 2: field 'power.draw': cell unit 'mW' differs from the header's \[W\]"):
        parse(f)


def test_dcgmi_dmon_unit_row_and_no_times_unless_declared(samples: Path) -> None:
    path = samples / "dcgmi-dmon/agi-hpc_dcgm_dmon_rtx2080ti.txt"
    parsed = parse(path)
    (cols,) = list(parsed.samples)
    units = dict(zip(cols.counter, cols.unit, strict=True))
    assert units == {
        "GPUTL": "unconfirmed",
        "MCUTL": "unconfirmed",
        "POWER": "W",
        "TMPTR": "C",
        "ESVTL": "unconfirmed",
        "EDVTL": "unconfirmed",
        "FBUSD": "unconfirmed",
    }
    assert set(cols.ts) == {None} and max(cols.tick) == 4
    assert [v for c, v in zip(cols.counter, cols.value, strict=True) if c == "POWER"] == [
        20.891,
        20.891,
        20.891,
        20.986,
        20.986,
    ]
    assert "sample times are n/a" in parsed.note
    timed = parse(path, start=datetime(2026, 1, 1, 10, 0, 0), interval_s=1.0)
    (cols,) = list(timed.samples)
    assert cols.ts[-1] == datetime(2026, 1, 1, 10, 0, 4)
    assert "as declared by the user" in timed.note


def test_dcgmi_dmon_wrong_value_count(tmp_path: Path) -> None:
    f = tmp_path / "d.txt"
    f.write_text("#Entity   POWER   TMPTR\nID        W       C\nGPU 0     20.1\n")
    with pytest.raises(ParseError, match="line 3: 1 values, the header names 2"):
        parse(f)
