"""ledger.factors: what a result file's folders and name say, the weakest evidence of its configuration."""

from __future__ import annotations

from pathlib import PurePath

import pytest
from bench_ledger.factors import from_path, model_name, same_model


def named(path: str) -> dict[str, tuple[str, str]]:
    return {k: (v.value, v.at) for k, v in from_path(PurePath(path)).items()}


def test_configuration_folders_and_file_names_name_their_factors() -> None:
    assert named("h100x8/Qwen3-32B/tp4_dp2_in1024_out128_c64.json") == {
        "hardware": ("H100", "folder 'h100x8'"),
        "gpu_count": ("8", "folder 'h100x8'"),
        "tp": ("4", "file name 'tp4_dp2_in1024_out128_c64.json'"),
        "dp": ("2", "file name 'tp4_dp2_in1024_out128_c64.json'"),
        "input_len": ("1024", "file name 'tp4_dp2_in1024_out128_c64.json'"),
        "output_len": ("128", "file name 'tp4_dp2_in1024_out128_c64.json'"),
        "concurrency": ("64", "file name 'tp4_dp2_in1024_out128_c64.json'"),
    }
    assert named("runs/8xGH200/qps2.5-i10240-o256.json") == {
        "hardware": ("GH200", "folder '8xGH200'"),
        "gpu_count": ("8", "folder '8xGH200'"),
        "request_rate": ("2.5", "file name 'qps2.5-i10240-o256.json'"),
        "input_len": ("10240", "file name 'qps2.5-i10240-o256.json'"),
        "output_len": ("256", "file name 'qps2.5-i10240-o256.json'"),
    }


def test_a_factor_two_names_state_differently_is_left_out() -> None:
    assert named("pd_inter_node_gh200_a100/result.jsonl") == {}  # two GPUs named: which one is not known
    assert named("c8/run_c16.json") == {}
    assert named("Qwen2.5-Coder-7B-Instruct/out.json") == {}  # a model name is no token of the conventions


@pytest.mark.parametrize(
    ("declared", "stated", "same"),
    [
        ("Qwen/Qwen3-32B", "/models/Qwen/Qwen3-32B", True),
        ("Llama-3.3-70B", "meta-llama/Llama-3.3-70B-Instruct", True),
        (
            "DeepSeek-V4.1-Flash",
            "/root/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-V4.1-Flash/snapshots/0123abcd",
            True,
        ),
        ("Qwen/Qwen3-32B", "Qwen/Qwen3-8B", False),
        ("llama2-70b", "llama-2-7b", False),
    ],
)
def test_a_files_model_is_the_declared_one_by_its_name(declared: str, stated: str, same: bool) -> None:
    assert same_model(declared, stated) is same


def test_a_hugging_face_snapshot_path_names_the_model_before_the_snapshot() -> None:
    assert model_name("/hf/hub/models--Qwen--Qwen3-32B/snapshots/9f0c1e2d3a4b") == "Qwen3-32B"
    assert model_name("Qwen/Qwen3-32B") == "Qwen3-32B"
