"""`compare` / `ratio`: every differing factor, and each refused conclusion with its rule (R6, R8)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from bench_ledger import models as m
from bench_ledger.cli import main
from bench_ledger.errors import Refused
from bench_ledger.queries.compare import compare, ratio
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.clirun import run


@pytest.fixture
def declared(ledger: Ledger, ledger_url: str, fixtures: Path, tmp_path: Path) -> Ledger:
    for f in ("system.yaml", "report.txt"):
        shutil.copy(fixtures / "manifest" / f, tmp_path / f)
    res = CliRunner().invoke(main, ["declare", "--db", ledger_url, str(tmp_path / "system.yaml")])
    assert res.exit_code == 0, res.output
    with ledger.session() as s:
        s.add(
            m.Deployment(
                name="6000d-sglang",
                gpu_model="RTX 6000D",
                gpus_per_node=8,
                nodes=1,
                engine="sglang",
                engine_version="0.5",
                weights_version="1017",
                tp=8,
                dp=1,
                ep=8,
                pp=1,
                fingerprint="2" * 64,
                recorded_at=datetime(2026, 1, 1),
            )
        )
    return ledger


def test_only_weights_differ_is_attributable(declared: Ledger) -> None:
    c = compare(declared, "deployment:h20-1017", "deployment:h20-old")
    names = [f.name for f in c.differences]
    assert "weights_version" in names and "hardware" not in names and "layout" not in names
    # h20-old has no runs: its workload, seed and batch are unknown, so more than one factor differs
    assert c.attributable_to is None and c.equal_resources and not c.paired and not c.stack_ratio


def test_stack_ratio_and_unequal_resources(declared: Ledger) -> None:
    c = compare(declared, "deployment:h20-1017", "deployment:6000d-sglang")
    names = {f.name for f in c.differences}
    assert {"hardware", "gpu_count", "engine", "engine_version", "layout"} <= names
    assert c.stack_ratio and not c.equal_resources and c.attributable_to is None
    assert next(f for f in c.differences if f.name == "gpu_count").a == "16"


def test_refusals(declared: Ledger) -> None:
    a, b = "deployment:h20-1017", "deployment:6000d-sglang"
    with pytest.raises(Refused) as exc:
        compare(declared, a, b, "hardware")
    assert exc.value.rule == "R6" and exc.value.asked == f"attribute {a} vs {b} to hardware"
    assert exc.value.why.startswith("hardware is not the only difference: model, gpu_count, engine, engine_version")
    with pytest.raises(Refused) as exc:
        compare(declared, a, b, equal_resources=True)
    assert (exc.value.rule, exc.value.why) == ("R6", "GPU counts differ (16 vs 8 GPUs)")
    with pytest.raises(Refused) as exc:
        compare(declared, a, b, paired=True)
    assert (exc.value.rule, exc.value.why) == ("R6", "seeds differ (17 vs ?)")
    with pytest.raises(Refused) as exc:
        compare(declared, a, b, "warm")
    assert exc.value.rule == "R8" and exc.value.instead.startswith("name one dimension: warm_prefix_cache")


def test_ratio_is_labelled(declared: Ledger) -> None:
    r = ratio(declared, "kv_capacity_ratio", "deployment:h20-1017", "deployment:6000d-sglang")
    assert r.ratio is None and r.label.startswith("stack ratio")
    with pytest.raises(Refused):
        ratio(declared, "kv_capacity_ratio", "deployment:h20-1017", "deployment:6000d-sglang", "engine")


def test_cli_compare_exit_codes(declared: Ledger, ledger_url: str) -> None:
    ok = CliRunner().invoke(main, ["compare", "--db", ledger_url, "deployment:h20-1017", "deployment:6000d-sglang"])
    assert ok.exit_code == 0, ok.output
    assert "hardware" in ok.output and "stack ratio: yes" in ok.output
    bad = CliRunner().invoke(
        main, ["compare", "--db", ledger_url, "deployment:h20-1017", "deployment:6000d-sglang", "--equal-resources"]
    )
    assert bad.exit_code == 3
    assert (
        "refused (R6): call deployment:h20-1017 vs deployment:6000d-sglang an equal-resource comparison" in bad.output
    )


def test_saturated_inference_perf_stage_is_named_in_the_comparison(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    d = samples / "inference-perf"
    res = CliRunner().invoke(
        main,
        [
            "import",
            "--db",
            ledger_url,
            "--batch",
            "ip",
            "-q",
            str(d / "kubecon-na-2025_vllm_stage_0_lifecycle_metrics.json"),
            str(d / "kubecon-na-2025_vllm_stage_6_lifecycle_metrics.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    c = compare(ledger, "run:1", "run:2")
    work = next(f for f in c.differences if f.name == "workload")
    assert (work.a, work.b) == (
        "rate 1.0 / in ? / out ? / C ? / N 60 / dataset ?",
        "rate 183.38 / in ? / out ? / C ? / N 11002 / dataset ?",
    )
    (note,) = [n for n in c.notes if "requested" in n]
    assert note == (
        "run 2 (inference-perf inference-perf/kubecon-na-2025_vllm stage 6): achieved 58.1% of the "
        "requested rate: the load it was offered is not the requested one; compare it as the achieved "
        "load, not the requested rate"
    )


def test_compare_names_the_model_of_two_deployments(ledger_url: str, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\ndeployments:\n"
        "  - {name: a, gpu_model: H100, gpus_per_node: 8, nodes: 1, engine: vllm, model: Qwen/Qwen3-32B}\n"
        "  - {name: b, gpu_model: H100, gpus_per_node: 8, nodes: 1, engine: vllm, model: Qwen/Qwen3-8B}\n"
    )
    run("init", "--db", ledger_url)
    run("declare", "--db", ledger_url, manifest)
    out = run("compare", "--db", ledger_url, "deployment:a", "deployment:b", "--json").output
    differences = {d["name"]: (d["a"], d["b"]) for d in json.loads(out)["differences"]}
    assert differences["model"] == ("Qwen3-32B", "Qwen3-8B")
