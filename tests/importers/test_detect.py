"""Detection by content (``importers.detect``, each importer's ``sniff``): every real sample of the formats of
issue 15 (../shared/samples, MANIFEST.md "More formats") is exactly one format, and text that only names a
tool's banner is none."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import UnknownFormat
from bench_ledger.importers.base import read_head

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
FOLDERS = sorted({k.split("/")[0] for k in EXPECTED})


def test_every_file_of_the_new_folders_is_detected_as_exactly_one_format(samples: Path) -> None:
    files = sorted(str(p.relative_to(samples)) for d in FOLDERS for p in (samples / d).rglob("*") if p.is_file())
    assert files == sorted(EXPECTED)
    for rel, fmt in EXPECTED.items():
        head = read_head(samples / rel)
        assert [i.name for i in importers.all_importers() if i.sniff(head) is None] == [fmt], rel


def test_formats_are_registered() -> None:
    names = {i.name for i in importers.all_importers()}
    assert set(EXPECTED.values()) <= names


@pytest.mark.parametrize("name", ["MANIFEST.md"])
def test_text_naming_a_console_banner_is_not_console_output(samples: Path, name: str, tmp_path: Path) -> None:
    with pytest.raises(UnknownFormat):
        importers.detect(samples / name)
    readme = Path(__file__).resolve().parents[2] / "README.md"
    (tmp_path / "notes.md").write_text(
        readme.read_text() + "\nthe Serving Benchmark Result table; bench_type='serve'\n"
    )
    with pytest.raises(UnknownFormat):
        importers.detect(tmp_path / "notes.md")
    console = next((samples / "vllm-bench-serve").glob("*.stdout.txt"))
    assert importers.detect(console).name == "vllm-bench-console"
