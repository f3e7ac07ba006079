"""What each importer reads of the system under test and its load (``RunInfo.factors``, issue 37): on a
real file of each format (../shared/samples, ../shared/real-reports; the repository's fixtures where
``../shared`` has none of the format), every factor with the exact place the file states it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers import _vllm_bench_duckdb as vbd  # private: the DuckDB path's own entry and checks
from bench_ledger.importers import ledger_requests, vllm_bench
from bench_ledger.importers.base import ParseOptions

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "real-reports"
SGLANG_PD = "tonyli15-sglang-pd-disagg/benchmarks/results"
AIPERF_NEW = "anud18-aiperf-ngrok-endpoint-errors/results/nvfp4/w0_agent/agent_flat/c2/profile_export_aiperf.json"
VLLM_ZH = (
    "wentao274-vllm-h100-concurrency-zh/reports/benchmark/nvidia_h100/MiniMax-M2.5/test_01/01/"
    "8-320-i10240-o256/bench-test_01-8-320-i10240-o256.log"
)
SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


GENAI_BENCH = "genai-bench/baseten_training_benchmark__"
RUN_FILE = "N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"


def factors(path: Path, nth: int = 0) -> dict[str, tuple[str, str]]:
    runs = list(importers.detect(path).parse(path, ParseOptions()).iter_runs())
    return {k: (v.value, v.at) for k, v in runs[nth].info.factors.items()}


def real(name: str) -> Path:
    path = REAL / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def test_vllm_bench_result(samples: Path) -> None:
    # a local model path is the model as written; backend 'openai' names the API, not the engine
    assert factors(samples / "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json") == {
        "model": ("/model/ModelScope/Qwen/Qwen2.5-Coder-7B-Instruct", "$.model_id"),
        "request_rate": ("1.0", "$.request_rate"),
        "prompt_count": ("150", "$.num_prompts"),
    }
    assert factors(samples / "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json") == {
        "model": ("Qwen/Qwen3.6-27B", "$.model_id"),
        "engine": ("vllm", "$.backend"),
        "concurrency": ("1", "$.max_concurrency"),
        "request_rate": ("inf", "$.request_rate"),
        "prompt_count": ("50", "$.num_prompts"),
    }


def test_vllm_bench_fast_path_states_the_same_factors(samples: Path, tmp_path: Path) -> None:
    """Both parse paths read the factors from the same header (_vllm_result.result_header)."""
    line = json.loads(
        (samples / "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json").read_text()
    )
    line["tp"] = 2  # as `vllm bench serve --metadata tp=2` writes it
    path = tmp_path / "append.jsonl"
    path.write_text("\n".join(json.dumps(line) for _ in range(8)) + "\n")
    assert vbd.fast_runs(path) is not None, "the fast path refused a regular file"
    fast = [r.info.factors for r in vllm_bench._runs(path, fast=True)]
    slow = [r.info.factors for r in vllm_bench._runs(path, fast=False)]
    assert fast == slow
    assert {k: (v.value, v.at) for k, v in fast[7].items()} == {
        "model": ("Qwen/Qwen3.6-27B", "line 8 $.model_id"),
        "engine": ("vllm", "line 8 $.backend"),
        "tp": ("2", "line 8 $.tp"),
        "concurrency": ("1", "line 8 $.max_concurrency"),
        "request_rate": ("inf", "line 8 $.request_rate"),
        "prompt_count": ("50", "line 8 $.num_prompts"),
    }


def test_vllm_console(samples: Path) -> None:
    assert factors(samples / "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.stdout.txt") == {
        "model": ("Qwen/Qwen3.6-27B", "line 3 model"),
        "engine": ("vllm", "line 3 backend"),
        "dataset": ("random", "line 3 dataset_name"),
        "input_len": ("4096", "line 3 random_input_len"),
        "output_len": ("128", "line 3 random_output_len"),
        "concurrency": ("1", "line 3 max_concurrency"),
        "request_rate": ("inf", "line 3 request_rate"),
        "prompt_count": ("50", "line 3 num_prompts"),
    }
    # the served name is kept where it differs from the model
    assert factors(real(VLLM_ZH))["served_model"] == ("minimax-m2.5", "line 3 served_model_name")
    assert factors(real(VLLM_ZH))["model"] == ("/userdata/llms/MiniMax/MiniMax-M2.5", "line 3 model")


def test_vllm_sweep(samples: Path) -> None:
    expected = {
        "model": ("facebook/opt-125m", "$.model_id"),
        "concurrency": ("2", "$.max_concurrency"),
        "request_rate": ("inf", "$.request_rate"),
        "prompt_count": ("8", "$.num_prompts"),
    }
    assert factors(samples / SWEEP / "run=0.json") == expected
    assert factors(samples / SWEEP / "summary.json", 1) == {k: (v, f"item 1 {at}") for k, (v, at) in expected.items()}


def test_sglang_bench(samples: Path) -> None:
    # random dataset: its lengths; no server_info in this file
    assert factors(samples / "sglang/llama_3_3_70b_online_output.jsonl", 1) == {
        "engine": ("sglang", "line 2 $.backend"),
        "dataset": ("random", "line 2 $.dataset_name"),
        "request_rate": ("2.0", "line 2 $.request_rate"),
        "input_len": ("1024", "line 2 $.random_input_len"),
        "output_len": ("1024", "line 2 $.random_output_len"),
    }
    # sharegpt: the random lengths are unused argparse defaults
    assert "input_len" not in factors(samples / "sglang/llama_3_3_70b_online_output.jsonl", 5)


def test_sglang_bench_server_info() -> None:
    assert factors(real(f"{SGLANG_PD}/agg_local.jsonl")) == {
        "engine": ("sglang", "line 1 $.backend"),
        "dataset": ("random", "line 1 $.dataset_name"),
        "concurrency": ("200", "line 1 $.max_concurrency"),
        "request_rate": ("inf", "line 1 $.request_rate"),
        "input_len": ("512", "line 1 $.random_input_len"),
        "output_len": ("128", "line 1 $.random_output_len"),
        "model": ("Qwen/Qwen2.5-3B-Instruct", "line 1 $.server_info.model_path"),
        "engine_version": ("0.5.5.post3", "line 1 $.server_info.version"),
        "tp": ("1", "line 1 $.server_info.tp_size"),
        "dp": ("1", "line 1 $.server_info.dp_size"),
        "pp": ("1", "line 1 $.server_info.pp_size"),
        "ep": ("1", "line 1 $.server_info.ep_size"),
    }
    # prefill and decode: what both state alike; their versions differ (0.5.5.post3, 0.5.6): none
    pd = factors(real(f"{SGLANG_PD}/pd_inter_node_gh200_a100.jsonl"))
    assert pd["model"] == ("Qwen/Qwen2.5-3B-Instruct", "line 1 $.server_info.prefill[0].model_path")
    assert pd["tp"] == ("1", "line 1 $.server_info.prefill[0].tp_size")
    assert "engine_version" not in pd


def test_trtllm_bench(samples: Path) -> None:
    assert factors(samples / "trtllm-bench/latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json") == {
        "model": ("Qwen/Qwen2.5-0.5B-Instruct", "$.engine.model"),
        "engine": ("TRT", "$.engine.backend"),
        "engine_version": ("1.2.0", "$.engine.version"),
        "hardware": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "$.machine.name"),
        "gpu_count": ("1", "$.world_info.world_size"),
        "tp": ("1", "$.world_info.tp_size"),
        "pp": ("1", "$.world_info.pp_size"),
        "ep": ("1", "$.world_info.ep_size"),
        "dataset": ("/workspace/trtllm-latency/artifacts/datasets_seq1065/in128_out40.json", "$.dataset.dataset_path"),
        "input_len": ("128.0", "$.request_info.avg_input_length"),
        "output_len": ("40.0", "$.request_info.avg_output_length"),
        "prompt_count": ("20", "$.request_info.num_requests"),
    }


def test_llmperf(samples: Path) -> None:
    assert factors(samples / "llmperf/summary_groq_70b.json") == {
        "model": ("llama2-70b-4096", "$.model"),
        "input_len": ("550", "$.mean_input_tokens"),
        "output_len": ("150", "$.mean_output_tokens"),
        "concurrency": ("5", "$.num_concurrent_requests"),
    }
    assert factors(samples / "llmperf/individual_groq_70b.json") == {}  # per-request records state none


def test_aiperf(samples: Path) -> None:
    assert factors(samples / "aiperf/aiperf-repo-examples-run1__profile_export_aiperf.json") == {
        "model": ("openai/gpt-oss-20b", "$.input_config.endpoint.model_names[0]"),
        "output_len": ("250", "$.input_config.input.prompt.output_tokens.mean"),
        "concurrency": ("100", "$.input_config.loadgen.concurrency"),
        "prompt_count": ("100", "$.input_config.loadgen.request_count"),
    }
    assert factors(real(AIPERF_NEW)) == {
        "model": ("Qwen3-VL-30B-A3B-Instruct-optimumxt", "$.input_config.models.items[0].name"),
        "dataset": ("datasets/aiperf/nvfp4_agent_flat.jsonl", "$.input_config.datasets[0].path"),
        "concurrency": ("2", "$.input_config.phases[0].concurrency"),
        "prompt_count": ("20", "$.input_config.phases[0].requests"),
    }
    # the records and the CSV state nothing of the system under test
    assert factors(samples / "aiperf/aiperf-repo-examples-run1__profile_export.jsonl") == {}
    assert factors(samples / "aiperf/aiperf-repo-examples-run1__profile_export_aiperf.csv") == {}


def test_genai_perf(fixtures: Path) -> None:
    # ../shared holds no GenAI-Perf output: the repository's fixtures
    assert factors(fixtures / "genai_perf/profile_export_genai_perf.json") == {
        "model": ("TinyLlama-1.1B-Chat-v1.0", "$.input_config.model[0]"),
        "input_len": ("128", "$.input_config.synthetic_input_tokens_mean"),
        "output_len": ("128", "$.input_config.output_tokens_mean"),
        "concurrency": ("4", "$.input_config.concurrency"),
        "prompt_count": ("100", "$.input_config.request_count"),
    }
    body = "$.experiments[1].requests[0].request_inputs.payload"
    assert factors(fixtures / "genai_perf/profile_export.json", 1) == {
        "request_rate": ("5.0", "$.experiments[1].experiment.value"),
        "model": ("llama-3-8b", f"{body} model"),
        "output_len": ("3", f"{body} max_tokens"),
    }


def test_genai_bench_reads_its_experiment_metadata(samples: Path, tmp_path: Path) -> None:
    alone = samples / f"{GENAI_BENCH}{RUN_FILE}"
    assert factors(alone) == {"concurrency": ("16", "$.aggregated_metrics.num_concurrency")}
    shutil.copy(samples / f"{GENAI_BENCH}experiment_metadata.json", tmp_path / "experiment_metadata.json")
    shutil.copy(alone, tmp_path / RUN_FILE)
    beside = "experiment_metadata.json beside it"
    assert factors(tmp_path / RUN_FILE) == {
        "model": ("Qwen3-30B-A3B-Instruct-2507", f"{beside} $.model"),
        "served_model": ("Qwen3-30B-A3B-Instruct-2507-FP8", f"{beside} $.api_model_name"),
        "hardware": ("H100", f"{beside} $.server_gpu_type"),
        "gpu_count": ("1", f"{beside} $.server_gpu_count"),
        "concurrency": ("16", "$.aggregated_metrics.num_concurrency"),
    }


def test_inference_perf(samples: Path) -> None:
    assert factors(samples / "inference-perf/kubecon-na-2025_vllm_stage_6_lifecycle_metrics.json") == {
        "request_rate": ("183.38", "$.load_summary.requested_rate")
    }


def test_mlperf_loadgen(samples: Path) -> None:
    prefix = samples / "mlperf-loadgen/NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_"
    assert factors(Path(f"{prefix}Server_mlperf_log_summary.txt")) == {"request_rate": ("364", "line 58")}
    assert factors(Path(f"{prefix}Server_mlperf_log_detail.txt")) == {"request_rate": ("364", "line 46")}
    # Offline: target_qps only sizes the one query, it is no arrival rate
    assert factors(Path(f"{prefix}Offline_mlperf_log_summary.txt")) == {}


def test_guidellm(samples: Path) -> None:
    assert factors(
        samples / "guidellm/guidellm-bench_sanity_20260302_1856_Qwen3-4B-Thinking-2507_tp4_fp8_benchmarks.json"
    ) == {
        "model": ("Qwen/Qwen3-4B-Thinking-2507", "$.benchmarks[0].config.backend.model"),
        "concurrency": ("4", "$.benchmarks[0].config.strategy.streams"),
        "prompt_count": ("4", "$.args.max_requests"),
        "dataset": ("/root/aime_2024_v2.jsonl", "$.args.data[0]"),
    }


def test_ledger_requests_header(fixtures: Path, tmp_path: Path) -> None:
    assert factors(fixtures / "ledger_requests/native.jsonl") == {
        "input_len": ("2048", "line 1 input_target_tokens"),
        "output_len": ("512", "line 1 output_cap_tokens"),
        "concurrency": ("64", "line 1 concurrency"),
        "request_rate": ("inf", "line 1 request_rate"),
    }
    lines = (fixtures / "ledger_requests/native.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["factors"] = {"model": "Qwen3-32B", "tp": 4, "hardware": "H20"}
    path = tmp_path / "stated.jsonl"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    got = factors(path)
    assert {k: got[k] for k in ("model", "tp", "hardware")} == {
        "model": ("Qwen3-32B", "line 1 factors.model"),
        "tp": ("4", "line 1 factors.tp"),
        "hardware": ("H20", "line 1 factors.hardware"),
    }
    regular = tmp_path / "regular.jsonl"  # one the DuckDB path takes: both paths read the same header
    regular.write_text(json.dumps(head) + '\n{"status": "ok", "ttft_s": 0.5}\n')
    fast = ledger_requests.IMPORTER.parse_many([regular], ParseOptions())[0]
    assert fast is not None, "the fast path refused a regular file"
    assert fast.runs[0].info.factors == importers.detect(regular).parse(regular, ParseOptions()).runs[0].info.factors
    assert fast.runs[0].info.factors["tp"].at == "line 1 factors.tp"
    csv_text = (
        (fixtures / "ledger_requests/native.csv")
        .read_text()
        .replace(" meta.gpu=H20", " meta.gpu=H20 factor.model=Qwen3-32B")
    )
    (tmp_path / "stated.csv").write_text(csv_text)
    assert factors(tmp_path / "stated.csv")["model"] == ("Qwen3-32B", "line 1 factor.model")


def test_ledger_requests_refuses_an_unknown_factor(fixtures: Path, tmp_path: Path) -> None:
    lines = (fixtures / "ledger_requests/native.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["factors"] = {"gpu": "H20"}
    path = tmp_path / "typo.jsonl"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.raises(ParseError) as exc:
        importers.detect(path).parse(path, ParseOptions())
    assert str(exc.value).endswith(
        "line 1: field 'factors.gpu': unknown factor 'gpu'; known: model, served_model, engine, "
        "engine_version, hardware, gpu_count, tp, dp, pp, ep, dataset, input_len, output_len, "
        "concurrency, request_rate, prompt_count"
    )
