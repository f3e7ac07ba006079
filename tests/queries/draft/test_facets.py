"""The draft binds against the model, engine and dataset a table's cells and headings name (issue 38).

A candidate run whose model, engine or dataset contradicts a context cell or heading is rejected (the
reason listed among the rejected candidates); a model, engine or dataset that agrees does not by itself
name a run (every run of a one-model sweep agrees), and runs tied on what names them are listed, never
guessed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench_ledger.queries.draft import Facets, RunScope, names_run, system_names

from tests.clirun import run
from tests.conftest import SHARED, shared_folder

SG = SHARED / "real-reports" / "tonyli15-sglang-pd-disagg" / "benchmarks" / "results" / "agg_local.jsonl"


def test_model_engine_and_dataset_named_in_text() -> None:
    got = system_names(["Qwen2.5-3B-Instruct on SGLang", "ShareGPT", "| Llama-3.1-70B (vLLM) |"])
    assert got["model"] == {"Qwen2.5-3B-Instruct", "Llama-3.1-70B"}
    assert got["engine"] == {"sglang", "vllm"}
    assert got["dataset"] == {"sharegpt"}
    # names that are no model: a GPU, a version, a plain word
    assert "model" not in system_names(["RTX 6000", "CUDA 12.4", "the quick results"])


def _run(**stated: str) -> RunScope:
    return RunScope("b", "agg", 512, 128, 200, None, tuple(stated.items()))


def test_a_contradicting_model_engine_or_dataset_rejects_the_run() -> None:
    run_ = _run(model="Qwen/Qwen2.5-3B-Instruct", engine="sglang", dataset="random")
    for factor, said, why in (
        ("model", "Llama-3.1-70B", "model Llama-3.1-70B != Qwen/Qwen2.5-3B-Instruct"),
        ("engine", "vllm", "engine vllm != sglang"),
        ("dataset", "sharegpt", "dataset sharegpt != random"),
    ):
        assert names_run(Facets(concurrency=200, system={factor: {said}}), run_) == (False, 0, [why])
    # agreeing: the concurrency names it, the model neither adds nor names
    assert names_run(Facets(concurrency=200, system={"model": {"Qwen2.5-3B"}}), run_) == (True, 2, ["concurrency 200"])
    assert names_run(Facets(system={"model": {"Qwen2.5-3B"}}), run_)[0] is False
    # a served name counts as the model's
    served = _run(model="/models/x/MiniMax-M2.5", served_model="minimax-m2.5")
    assert names_run(Facets(concurrency=200, system={"model": {"MiniMax-M2.5"}}), served)[0] is True


@pytest.fixture
def sg_ledger(ledger_url: str) -> str:
    run("import", "--db", ledger_url, "--batch", "sg", "-q", shared_folder(SG.parent) / SG.name)
    return ledger_url


def test_draft_rejects_the_run_of_another_model(sg_ledger: str, tmp_path: Path) -> None:
    report = tmp_path / "r.md"
    table = "| concurrency | mean TTFT (ms) |\n|--:|--:|\n| 200 | 618.01 |\n"
    report.write_text(
        f"# Results\n\n## Qwen2.5-3B-Instruct on SGLang\n\n{table}\n## Llama-3.1-70B on vLLM\n\n{table}",
        encoding="utf-8",
    )
    out = tmp_path / "d.yaml"
    run("claims", "draft", report, "--db", sg_ledger, "--batch", "sg", "-o", out)
    claims = {(c["evidence"]["place"]["line"], c["text"]): c for c in yaml.safe_load(out.read_text())["claims"]}
    assert claims[(7, "618.01")]["metric"]["name"] == "ttft_mean"
    other = claims[(13, "618.01")]
    assert "quoted" in other
    shown = " ".join(other["evidence"].get("candidates_not_proposed", []))
    assert "model Llama-3.1-70B != Qwen/Qwen2.5-3B-Instruct" in shown
