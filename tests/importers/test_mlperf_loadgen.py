"""The MLPerf loadgen summary and detail log importers on the real samples."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError

from tests.importers.parsing import one_run, parse, pub


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
