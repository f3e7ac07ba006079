"""The inference-perf importers (lifecycle and Prometheus metrics, per-request file, config) on the real
samples and fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.importers.parsing import one_run, parse, pub


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
