"""The genai-bench run file and experiment metadata importers on the real samples and a fixture."""

from __future__ import annotations

import json
from pathlib import Path

from tests.importers.parsing import one_run, parse, pub


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
