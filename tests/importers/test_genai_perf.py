"""GenAI-Perf raw export (SSE payloads, one run per experiment) and summary JSON importers."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers import aiperf_aggregate, genai_perf, genai_perf_summary
from bench_ledger.importers.base import ParseOptions, read_head

OPTS = ParseOptions()
T = 1718000000000000000


def accepting(path: Path) -> list[str]:
    found = {
        i.name: i
        for i in [
            *importers.all_importers(),
            genai_perf.IMPORTER,
            genai_perf_summary.IMPORTER,
            aiperf_aggregate.IMPORTER,
        ]
    }
    return [name for name, imp in found.items() if imp.sniff(read_head(path)) is None]


def export(fixtures: Path):
    return genai_perf.IMPORTER.parse(fixtures / "genai_perf" / "profile_export.json", OPTS)


def test_one_run_per_experiment(fixtures: Path) -> None:
    art = export(fixtures)
    first, second = art.runs
    assert first.info.label == "genai-perf llama-3-8b concurrency=2"
    assert (first.info.concurrency, first.info.request_rate, first.info.request_count) == (2, None, 3)
    assert second.info.label == "genai-perf llama-3-8b request_rate=5.0"
    assert (second.info.concurrency, second.info.request_rate) == (None, "5.0")
    assert first.info.tool_version == "0.0.12" and first.info.output_cap_tokens == 3
    assert first.info.metadata["service_kind"] == "openai"
    assert first.info.metadata["window_boundaries"] == f"[{T}, {T + 300_000_000}]"
    assert first.info.locator == "$.experiments[0]"


def test_sse_timing_drops_empty_responses(fixtures: Path) -> None:
    req = export(fixtures).runs[0].requests
    # responses: role-only delta @100ms, "Hel" @150, "lo" @175, "!" @200, usage-only @201, [DONE] @202
    assert req.send_ns[0] == T
    assert req.first_token_ns[0] == T + 150_000_000 and req.end_ns[0] == T + 200_000_000
    assert req.ttft_s[0] == 0.15 and req.latency_s[0] == 0.2
    assert req.chunk_gaps_s[0] == [0.025, 0.025]


def test_usage_only_from_server_payloads(fixtures: Path) -> None:
    first, second = export(fixtures).runs
    assert (first.requests.input_tokens[0], first.requests.output_tokens[0], first.requests.cached_tokens[0]) == (
        12,
        3,
        8,
    )
    assert first.capture.token_source == "server_usage"
    assert "cached_tokens" in first.capture.fields
    # no usage in the second experiment: token counts are not captured, never invented
    assert second.capture.token_source == "unknown"
    assert not {"input_tokens", "output_tokens", "cached_tokens"} & set(second.capture.fields)
    assert second.requests.output_tokens == [None]
    # exact integer-ns difference: 10_000_001 ns
    assert second.requests.chunk_gaps_s == [[0.010000001]]


def test_status_rule(fixtures: Path) -> None:
    run = export(fixtures).runs[0]
    assert run.requests.status == ["ok", "failed", "unknown"]
    assert run.requests.error == [None, "model overloaded", "no response received"]
    assert run.requests.ttft_s[1:] == [None, None]
    assert run.capture.clock == "epoch_ns" and run.capture.record_count == 3
    assert "error" in run.capture.success_rule


def test_bad_timestamp(fixtures: Path) -> None:
    path = fixtures / "genai_perf" / "bad_timestamp.json"
    with pytest.raises(ParseError) as err:
        genai_perf.IMPORTER.parse(path, OPTS)
    assert str(err.value) == f"{path}, $.experiments[0].requests[1]: field 'timestamp': expected an integer, got 'soon'"


def test_truncated(fixtures: Path) -> None:
    path = fixtures / "genai_perf" / "truncated.json"
    with pytest.raises(ParseError) as err:
        genai_perf.IMPORTER.parse(path, OPTS)
    assert str(err.value) == f"{path}, line 24 column 27: invalid JSON: Unterminated string starting at"


def test_summary(fixtures: Path) -> None:
    art = genai_perf_summary.IMPORTER.parse(fixtures / "genai_perf" / "profile_export_genai_perf.json", OPTS)
    (run,) = art.runs
    assert run.capture.fields == [] and run.capture.record_count == 0 and run.requests is None
    pub = {p.key: p for p in run.published}
    ttft = pub["time_to_first_token.p99"]
    assert (ttft.text, ttft.value, ttft.unit, ttft.quantity_kind) == ("61.5", Decimal("61.5"), "ms", "latency")
    assert ttft.locator == "$.time_to_first_token.p99"
    assert pub["request_latency.max"].text == "1200.125"
    assert pub["output_token_throughput.avg"].quantity_kind == "aggregate_token_rate"
    assert pub["output_token_throughput_per_request.avg"].quantity_kind == "per_stream_token_rate"
    assert (pub["request_count.avg"].text, pub["request_count.avg"].quantity_kind) == ("100", "request_count")
    assert pub["output_sequence_length.min"].text == "120"
    info = run.info
    assert info.label == "genai-perf TinyLlama-1.1B-Chat-v1.0 concurrency=4"
    assert (info.concurrency, info.input_target_tokens, info.output_cap_tokens, info.seed) == (4, 128, 128, 123)


def test_detection(fixtures: Path) -> None:
    for name in ("profile_export.json", "bad_timestamp.json", "truncated.json"):
        assert importers.detect(fixtures / "genai_perf" / name).name == "genai-perf-export"
        assert accepting(fixtures / "genai_perf" / name) == ["genai-perf-export"]
    assert accepting(fixtures / "genai_perf" / "profile_export_genai_perf.json") == ["genai-perf-summary"]
    assert genai_perf.IMPORTER.sniff(b'{"benchmarks": []}') == "no 'experiments' key"


def test_summary_detect_once_registered(fixtures: Path) -> None:
    if "genai-perf-summary" not in {i.name for i in importers.all_importers()}:
        pytest.skip("genai_perf_summary is not in importers._MODULES yet")
    path = fixtures / "genai_perf" / "profile_export_genai_perf.json"
    assert importers.detect(path).name == "genai-perf-summary"
