"""guidellm benchmarks.json importer: v2 and v0.3 shapes, statuses, cached_tokens, sampling."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers import guidellm
from bench_ledger.importers.base import ParseOptions, read_head

OPTS = ParseOptions()


def parse(fixtures: Path, name: str):
    return guidellm.IMPORTER.parse(fixtures / "guidellm" / name, OPTS)


def test_v2_one_run_per_benchmark(fixtures: Path) -> None:
    art = parse(fixtures, "benchmarks_v2.json")
    assert art.format == "guidellm" and art.format_version == "2"
    first, second = art.runs
    assert first.info.label == "guidellm #0 concurrent streams=4" and first.info.concurrency == 4
    assert second.info.label == "guidellm #1 constant rate=2.5" and second.info.request_rate == "2.5"
    assert first.info.tool_version == "0.4.0" and first.info.request_count == 4
    assert first.info.started_at == datetime(2025, 7, 1, 20, 0, tzinfo=UTC)
    assert first.info.locator == "$.benchmarks[0]"


def test_v2_requests(fixtures: Path) -> None:
    run = parse(fixtures, "benchmarks_v2.json").runs[0]
    req = run.requests
    assert req.idx == [0, 1, 2, 3]  # successful, then incomplete, then errored
    assert req.status == ["ok", "ok", "unknown", "failed"]
    assert req.error == [
        None,
        None,
        "incomplete: cut off when the benchmark ended",
        "HTTPStatusError: 500 Internal Server Error",
    ]
    # epoch seconds -> exact integer ns (Decimal of the printed float)
    assert req.send_ns[0] == 1751400000100000000 and req.end_ns[0] == 1751400001100000000
    assert req.first_token_ns[0] == 1751400000149999900  # the file prints 1751400000.1499999
    assert req.ttft_s[:2] == [0.05, 0.075] and req.latency_s[:2] == [1.0, 1.5]
    assert req.itl_mean_s[0] == 0.0125
    assert req.input_tokens == [128] * 4 and req.output_tokens == [64, 64, 10, None]
    cap = run.capture
    assert (cap.clock, cap.token_source, cap.sampled, cap.record_count) == ("epoch_s", "unknown", False, 4)
    assert "incomplete -> unknown" in cap.success_rule


def test_cached_tokens_only_where_reported(fixtures: Path) -> None:
    first, second = parse(fixtures, "benchmarks_v2.json").runs
    # present with a value on one record, null on the others: captured, None where not reported
    assert "cached_tokens" in first.capture.fields
    assert first.requests.cached_tokens == [32, None, None, None]
    # key absent from every record: not captured (n/a), never zero
    assert "cached_tokens" not in second.capture.fields
    assert second.requests.cached_tokens == [None] * 4


def test_v2_published(fixtures: Path) -> None:
    run = parse(fixtures, "benchmarks_v2.json").runs[0]
    pub = {p.key: p for p in run.published}
    p99 = pub["metrics.time_to_first_token_ms.successful.percentiles.p99"]
    assert (p99.text, p99.value, p99.unit, p99.quantity_kind) == ("75.0", Decimal("75.0"), "ms", "latency")
    assert p99.locator == "$.benchmarks[0].metrics.time_to_first_token_ms.successful.percentiles.p99"
    mean = pub["metrics.request_latency.successful.mean"]
    assert (mean.text, mean.unit, mean.flag) == ("1.25", "s", "reported")
    assert pub["metrics.request_latency.total.count"].quantity_kind == "request_count"
    assert pub["metrics.output_tokens_per_second.successful.mean"].quantity_kind == "aggregate_token_rate"
    assert pub["scheduler_metrics.requests_made.errored"].text == "1"
    assert not any("cumulative_distribution_function" in k for k in pub)


def test_sample_size_marks_sampled(fixtures: Path) -> None:
    (run,) = parse(fixtures, "benchmarks_sampled.json").runs
    assert run.capture.sampled is True
    assert run.capture.sample_note == (
        "guidellm kept only a sample of the request records (sample_size=1; records kept: successful 1 of 2): "
        "its aggregates cannot be re-derived from these records; they stay as reported"
    )
    assert run.capture.record_count == 3 and run.info.request_count == 4


def test_fewer_records_than_counted_marks_sampled(fixtures: Path) -> None:
    (run,) = parse(fixtures, "benchmarks_short.json").runs
    assert run.capture.sampled is True and "errored 0 of 1" in run.capture.sample_note


def test_v03_shape(fixtures: Path) -> None:
    art = parse(fixtures, "benchmarks_v03.json")
    assert art.format_version == "0.3"
    (run,) = art.runs
    assert run.info.label == "guidellm #0 synchronous" and run.info.concurrency == 1
    assert run.info.tool_version is None and run.info.request_count == 3
    req = run.requests
    assert req.status == ["ok", "ok", "failed"] and req.error[2] == "TimeoutError"
    assert req.send_ns[0] == 1740000000123456000 and req.first_token_ns[0] == 1740000000223456000
    assert req.end_ns[0] == 1740000000623456000 and req.first_token_ns[2] is None
    assert req.ttft_s[:2] == [0.1, 0.12]
    assert run.capture.sampled is False
    assert "cached_tokens" not in run.capture.fields


def test_bad_timing(fixtures: Path) -> None:
    path = fixtures / "guidellm" / "bad_timing.json"
    with pytest.raises(ParseError) as err:
        guidellm.IMPORTER.parse(path, OPTS)
    assert str(err.value) == (
        f"{path}, $.benchmarks[0].requests.successful[1]: field 'info.timings.request_start': "
        "expected a number, got 'later'"
    )


def test_truncated(fixtures: Path) -> None:
    path = fixtures / "guidellm" / "truncated.json"
    with pytest.raises(ParseError) as err:
        guidellm.IMPORTER.parse(path, OPTS)
    assert str(err.value).startswith(f"{path}, line 80 column 10: invalid JSON")


def test_detection(fixtures: Path) -> None:
    for path in sorted((fixtures / "guidellm").iterdir()):
        assert importers.detect(path).name == "guidellm"
        assert [i.name for i in importers.all_importers() if i.sniff(read_head(path)) is None] == ["guidellm"]
    assert guidellm.IMPORTER.sniff(b'{"experiments": []}') == "no 'benchmarks' key"
    assert guidellm.IMPORTER.sniff(b'{"benchmarks": [{"x": 1}]}') == (
        "benchmarks lack guidellm's keys (guidellm_version, scheduler_metrics, ...)"
    )
