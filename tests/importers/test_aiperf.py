"""AIPerf per-request JSONL and aggregate JSON importers, on hand-written fixtures of each quirk."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers import aiperf, aiperf_aggregate, genai_perf_summary
from bench_ledger.importers.base import ParseOptions, read_head

OPTS = ParseOptions()


def accepting(path: Path) -> list[str]:
    found = {
        i.name: i
        for i in [*importers.all_importers(), aiperf.IMPORTER, aiperf_aggregate.IMPORTER, genai_perf_summary.IMPORTER]
    }
    return [name for name, imp in found.items() if imp.sniff(read_head(path)) is None]


def records(fixtures: Path, name: str):
    return aiperf.IMPORTER.parse(fixtures / "aiperf" / name, OPTS)


def test_records_skip_warmup_and_keep_locators(fixtures: Path) -> None:
    art = records(fixtures, "profile_export.jsonl")
    (run,) = art.runs
    req = run.requests
    # line 1 is warmup, line 3 is blank: profiling records keep their record index and line
    assert req.idx == [1, 2, 3, 4] and req.line == [2, 4, 5, 6]
    assert run.capture.record_count == 4 and run.info.request_count == 4
    assert run.info.metadata == {"skipped_records": "warmup: 1"}
    assert art.note == "skipped non-profiling records (warmup: 1)"
    assert art.format == "aiperf-records" and art.format_version is None


def test_records_values_and_units(fixtures: Path) -> None:
    req = records(fixtures, "profile_export.jsonl").runs[0].requests
    assert req.status == ["ok", "ok", "failed", "failed"]
    assert req.send_ns[0] == 1759813207532900363 and req.end_ns[0] == 1759813207838764604
    assert req.first_token_ns == [None] * 4  # not in the file; start + TTFT would be derived
    assert req.ttft_s[0] == 0.255886568 and req.latency_s[0] == 0.297525228
    assert req.itl_mean_s[0] == 0.0052048325
    assert req.chunk_gaps_s[0][:2] == [0.004898437, 0.005316006] and len(req.chunk_gaps_s[0]) == 8
    # record 2 states other units per value: s, ns, us
    assert (req.ttft_s[1], req.latency_s[1], req.chunk_gaps_s[1]) == (0.1, 0.5, [0.2, 0.2])
    assert req.input_tokens[:2] == [550, 512] and req.output_tokens[:2] == [9, 3]


def test_records_failed_carry_only_error_isl(fixtures: Path) -> None:
    run = records(fixtures, "profile_export.jsonl").runs[0]
    req = run.requests
    assert req.error[2] == "499 RequestCancellationError: Request was cancelled after 0.000 seconds"
    assert req.error[3] == "500 InternalServerError: Server encountered an internal error"
    assert req.input_tokens[2:] == [550, None]  # error_isl; metrics null on the last
    assert req.output_tokens[2:] == [None, None] and req.ttft_s[2:] == [None, None]
    cap = run.capture
    assert cap.fields == sorted(
        [
            "status",
            "error",
            "send_time",
            "end_time",
            "ttft_s",
            "latency_s",
            "itl_mean_s",
            "chunk_gaps",
            "input_tokens",
            "output_tokens",
        ]
    )
    assert (cap.clock, cap.token_source, cap.sampled) == ("epoch_ns", "client_tokenizer", False)
    assert "was_cancelled" in cap.success_rule
    assert run.info.label == "aiperf aiperf (4 requests)"  # the artifact folder names the run


def test_records_080_schema_and_server_usage(fixtures: Path) -> None:
    art = records(fixtures, "profile_export_080.jsonl")
    assert art.format_version == "1.1"
    (run,) = art.runs
    assert run.capture.token_source == "server_usage"
    assert run.requests.input_tokens == [131, 131] and run.requests.output_tokens == [17, 16]
    assert run.requests.ttft_s == [0.048, 0.049]
    assert "chunk_gaps" not in run.capture.fields and "itl_mean_s" not in run.capture.fields


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_unit.jsonl", "line 1: field 'metrics.time_to_first_token.unit': unknown time unit 'fortnights'"),
        ("bad_value.jsonl", "line 2: field 'metrics.time_to_first_token.value': expected a number, got 'abc'"),
        (
            "truncated.jsonl",
            "line 2 column 61: invalid JSON: Expecting ',' delimiter; the last line has no line end: the file may have been cut while it was written",
        ),
    ],
)
def test_records_errors(fixtures: Path, name: str, message: str) -> None:
    path = fixtures / "aiperf" / name
    with pytest.raises(ParseError) as err:
        aiperf.IMPORTER.parse(path, OPTS)
    assert str(err.value) == f"{path}, {message}"


def test_aggregate_published(fixtures: Path) -> None:
    art = aiperf_aggregate.IMPORTER.parse(fixtures / "aiperf" / "profile_export_aiperf.json", OPTS)
    (run,) = art.runs
    assert run.requests is None and run.capture.fields == [] and run.capture.record_count == 0
    pub = {p.key: p for p in run.published}
    p99 = pub["request_latency.p99"]
    assert (p99.text, p99.value, p99.unit, p99.quantity_kind) == (
        "9381.628943169999",
        Decimal("9381.628943169999"),
        "ms",
        "latency",
    )
    assert p99.locator == "$.request_latency.p99" and p99.flag == "reported"
    assert pub["time_to_first_token.avg"].text == "1588.797775365"
    assert (pub["request_throughput.avg"].unit, pub["request_throughput.avg"].quantity_kind) == (
        "requests/sec",
        "request_rate",
    )
    assert pub["output_token_throughput_per_user.avg"].quantity_kind == "per_stream_token_rate"
    assert pub["benchmark_duration.avg"].quantity_kind == "duration"
    assert (pub["request_count.avg"].text, pub["request_count.avg"].quantity_kind) == ("200.0", "request_count")
    errs = pub["error_summary.0.count"]
    assert (errs.text, errs.locator) == ("81", "$.error_summary[0].count") and "RequestCancellationError" in errs.note
    power = pub["telemetry_data.endpoints.localhost:9401.gpus.gpu_0.metrics.gpu_power_usage.max"]
    assert (power.text, power.unit, power.quantity_kind) == ("299.28", "W", "power")
    assert power.locator == "$.telemetry_data.endpoints['localhost:9401'].gpus.gpu_0.metrics.gpu_power_usage.max"
    assert (
        pub["telemetry_data.endpoints.localhost:9401.gpus.gpu_0.metrics.gpu_memory_used.avg"].quantity_kind
        == "device_memory"
    )
    assert not any(k.startswith("input_config") for k in pub)


def test_aggregate_run_info(fixtures: Path) -> None:
    info = aiperf_aggregate.IMPORTER.parse(fixtures / "aiperf" / "profile_export_aiperf.json", OPTS).runs[0].info
    assert info.label == "aiperf openai/gpt-oss-20b c100"
    assert (info.concurrency, info.output_cap_tokens, info.seed, info.request_count) == (100, 100, 0, 200)
    assert info.started_at == datetime(2025, 10, 17, 20, 22, 8, 939332)
    assert info.duration_s == 15.196591969000002
    assert info.metadata["was_cancelled"] == "True" and info.metadata["endpoint_type"] == "chat"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("aggregate_bad_value.json", "$.request_throughput.avg: field 'avg': expected a number, got 'fast'"),
        ("aggregate_truncated.json", "line 11 column 17: invalid JSON: Unterminated string starting at"),
    ],
)
def test_aggregate_errors(fixtures: Path, name: str, message: str) -> None:
    path = fixtures / "aiperf" / name
    with pytest.raises(ParseError) as err:
        aiperf_aggregate.IMPORTER.parse(path, OPTS)
    assert str(err.value) == f"{path}, {message}"


def test_detection(fixtures: Path) -> None:
    for name in ("profile_export.jsonl", "profile_export_080.jsonl", "bad_unit.jsonl"):
        assert importers.detect(fixtures / "aiperf" / name).name == "aiperf-records"
        assert accepting(fixtures / "aiperf" / name) == ["aiperf-records"]
    for name in ("profile_export_aiperf.json", "aggregate_bad_value.json", "aggregate_truncated.json"):
        assert accepting(fixtures / "aiperf" / name) == ["aiperf-aggregate"]
    assert aiperf.IMPORTER.sniff(b'{"backend": "sglang", "dataset_name": "random"}\n') == (
        "first record has no 'metadata' object"
    )


def test_aggregate_detect_once_registered(fixtures: Path) -> None:
    if "aiperf-aggregate" not in {i.name for i in importers.all_importers()}:
        pytest.skip("aiperf_aggregate is not in importers._MODULES yet")
    assert importers.detect(fixtures / "aiperf" / "profile_export_aiperf.json").name == "aiperf-aggregate"
