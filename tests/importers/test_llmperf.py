"""llmperf individual-responses and summary importers, on the real leaderboard samples and fixtures."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import ParseError
from bench_ledger.importers import llmperf, llmperf_summary
from bench_ledger.importers.base import ParseOptions, read_head

EXTRA = [llmperf_summary.IMPORTER]


def accepting(path: Path) -> list[str]:
    """Names of every importer (registered or not yet) whose sniff takes the file."""
    found = {i.name: i for i in [*importers.all_importers(), llmperf.IMPORTER, *EXTRA]}
    return [name for name, imp in found.items() if imp.sniff(read_head(path)) is None]


def parse_individual(path: Path):
    return llmperf.IMPORTER.parse(path, ParseOptions())


def parse_summary(path: Path):
    return llmperf_summary.IMPORTER.parse(path, ParseOptions())


def test_groq_individual_sample(samples: Path) -> None:
    art = parse_individual(samples / "llmperf" / "individual_groq_70b.json")
    (run,) = art.runs
    req = run.requests
    assert len(req) == 150 and run.capture.record_count == 150
    assert req.status == ["ok"] * 150 and req.error == [None] * 150
    assert req.idx[:3] == [0, 1, 2] and req.line == [None] * 150
    assert req.ttft_s[0] == 0.297977801412344
    assert req.latency_s[0] == 0.8900090400129557
    assert req.itl_mean_s[0] == 0.005879949368536472  # a per-request mean, not chunk gaps
    assert set(req.input_tokens) == {550} and set(req.output_tokens) == {150}
    assert req.chunk_gaps_s == [None] * 150 and req.send_ns == [None] * 150
    cap = run.capture
    assert cap.fields == sorted(
        ["status", "error", "input_tokens", "output_tokens", "ttft_s", "latency_s", "itl_mean_s"]
    )
    assert cap.token_source == "client_tokenizer" and cap.clock is None and not cap.sampled
    assert "error_code is null" in cap.success_rule
    assert run.info.label == "llmperf groq_70b"  # the pairing key: the name both files of the run share
    # llmperf's own per-request throughput (its 10 summary statistics are over it) and total tokens
    vals = run.request_values
    assert (vals["request_output_throughput_token_per_s"].flag, vals["number_total_tokens"].flag) == (
        "reported",
        "measured",
    )
    assert vals["request_output_throughput_token_per_s"].values[0] == 167.41402985955182
    assert vals["number_total_tokens"].values[:1] == [700.0] and art.note is None


def test_together_individual_sample(samples: Path) -> None:
    (run,) = parse_individual(samples / "llmperf" / "individual_together_70b.json").runs
    assert len(run.requests) == 150 and run.requests.status.count("ok") == 150
    assert run.requests.output_tokens[:2] == [157, 156]


def test_groq_summary_sample(samples: Path) -> None:
    art = parse_summary(samples / "llmperf" / "summary_groq_70b.json")
    assert art.format == "llmperf-summary" and art.format_version == "2023-08-31"
    (run,) = art.runs
    assert run.requests is None
    assert run.capture.fields == [] and run.capture.record_count == 0
    info = run.info
    assert info.label == "llmperf llama2-70b-4096_550_150_summary"
    assert (info.concurrency, info.input_target_tokens, info.output_cap_tokens) == (5, 550, 150)
    assert info.metadata["model"] == "llama2-70b-4096" and info.metadata["timestamp"] == "1704851704"
    pub = {p.key: p for p in run.published}
    mean = pub["results_ttft_s_mean"]
    assert mean.text == "0.22786034579078357" and mean.value == Decimal("0.22786034579078357")
    assert (mean.unit, mean.quantity_kind, mean.flag, mean.locator) == (
        "s",
        "latency",
        "reported",
        "$.results_ttft_s_mean",
    )
    assert pub["results_ttft_s_quantiles_p99"].text == "0.3500269545800982"
    started = pub["results_num_requests_started"]
    assert (started.text, started.value, started.quantity_kind) == ("150", Decimal(150), "request_count")
    # written with default=str: the integer arrives as the string "550" and keeps that text
    tmin = pub["results_number_input_tokens_min"]
    assert (tmin.text, tmin.value, tmin.unit) == ("550", Decimal("550"), "tokens")
    assert pub["results_number_output_tokens_mean"].text == "150.0"
    assert pub["results_error_code_frequency"].text == "{}" and pub["results_error_code_frequency"].value is None
    rate = pub["results_request_output_throughput_token_per_s_mean"]
    assert (rate.text, rate.quantity_kind) == ("184.16473873302962", "per_stream_token_rate")
    agg = pub["results_mean_output_throughput_token_per_s"]
    assert (agg.text, agg.quantity_kind) == ("441.84737788500206", "aggregate_token_rate")
    assert pub["results_num_completed_requests_per_min"].unit == "requests/min"
    assert pub["results_error_rate"].quantity_kind == "ratio"
    assert all(k.startswith("results_") for k in pub) and len(pub) == 67


def test_fixture_failed_record_and_string_integers(fixtures: Path) -> None:
    (run,) = parse_individual(fixtures / "llmperf" / "individual_responses.json").runs
    req = run.requests
    assert req.status == ["ok", "failed", "ok"]
    assert req.error == [None, "429: Too Many Requests", None]
    # failed: llmperf's zeros are not measurements; the prompt length ("550") is kept
    assert (req.ttft_s[1], req.latency_s[1], req.output_tokens[1], req.input_tokens[1]) == (None, None, None, 550)
    assert req.output_tokens == [150, None, 157] and req.input_tokens == [550, 550, 550]
    assert run.info.metadata["failed_records"] == "1"


def test_fixture_summary(fixtures: Path) -> None:
    (run,) = parse_summary(fixtures / "llmperf" / "summary.json").runs
    pub = {p.key: p for p in run.published}
    assert pub["results_error_code_frequency"].text == "{429: 1}"
    assert pub["results_number_errors"].value == 1
    assert pub["results_ttft_s_stddev"].text == "0.08838834764831845"
    assert run.info.concurrency == 2


def test_bad_value_names_file_index_and_field(fixtures: Path) -> None:
    path = fixtures / "llmperf" / "bad_ttft.json"
    with pytest.raises(ParseError) as err:
        parse_individual(path)
    assert str(err.value) == f"{path}, $[2]: field 'ttft_s': expected a number, got 'abc'"


def test_truncated_file(fixtures: Path) -> None:
    path = fixtures / "llmperf" / "truncated.json"
    with pytest.raises(ParseError) as err:
        parse_individual(path)
    assert str(err.value).startswith(f"{path}, line ") and "invalid JSON" in str(err.value)


def test_wrong_top_level(fixtures: Path) -> None:
    path = fixtures / "llmperf" / "summary.json"
    with pytest.raises(ParseError) as err:
        parse_individual(path)
    assert str(err.value) == f"{path}, $: expected a JSON array of llmperf request records"


def test_detection(samples: Path, fixtures: Path) -> None:
    for name in ("individual_groq_70b.json", "individual_together_70b.json"):
        assert importers.detect(samples / "llmperf" / name).name == "llmperf-individual"
        assert accepting(samples / "llmperf" / name) == ["llmperf-individual"]
    for name in ("summary_groq_70b.json", "summary_together_70b.json"):
        assert accepting(samples / "llmperf" / name) == ["llmperf-summary"]
    assert accepting(fixtures / "llmperf" / "summary.json") == ["llmperf-summary"]
    assert llmperf.IMPORTER.sniff(b'{"results_ttft_s_mean": 1}') == "not a JSON array"
    assert llmperf_summary.IMPORTER.sniff(b'{"duration": 1.0, "completed": 3}') == "no llmperf results_* keys"


def test_summary_detect_once_registered(samples: Path) -> None:
    if "llmperf-summary" not in {i.name for i in importers.all_importers()}:
        pytest.skip("llmperf_summary is not in importers._MODULES yet")
    assert importers.detect(samples / "llmperf" / "summary_groq_70b.json").name == "llmperf-summary"
