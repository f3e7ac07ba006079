"""The trtllm-bench report importer on the real sample."""

from __future__ import annotations

from pathlib import Path

from tests.importers.parsing import one_run, pub


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
