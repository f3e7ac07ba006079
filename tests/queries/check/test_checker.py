"""`check`: tool-reported aggregates recomputed by each tool's own definition (R15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_ledger.cli import main
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import (
    IDENTITY,
    RECORDS,
    _RunRows,
    tolerance,
)  # private: check's run rows, built directly
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.clirun import run


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, *args])
    assert res.exit_code == 0, res.output


def test_tolerance_is_half_a_unit_in_the_last_printed_place() -> None:
    from fractions import Fraction

    assert tolerance("2,791") == Fraction(1, 2)
    assert tolerance("0.22") == Fraction(5, 1000)
    assert tolerance("1.5e-05") == Fraction(5, 10**7)
    assert tolerance("{}") is None


@pytest.mark.parametrize("name", ["groq", "together"])
def test_real_llmperf_every_results_statistic_agrees(ledger: Ledger, ledger_url: str, samples: Path, name: str) -> None:
    d = samples / "llmperf"
    imp(
        ledger_url,
        str(d / f"individual_{name}_70b.json"),
        str(d / f"summary_{name}_70b.json"),
        "--batch",
        "lp",
        "--run",
        name,
    )
    rows = [r for r in check(ledger, batch="lp") if r.section == RECORDS]
    assert {r.definition for r in rows if r.status == "agree"} == {"pandas-linear"}
    by_status: dict[str, list[str]] = {}
    for r in rows:
        by_status.setdefault(r.status, []).append(r.key)
    assert by_status.get("disagree") is None
    agree = set(by_status["agree"])
    for metric in (
        "ttft_s",
        "inter_token_latency_s",
        "end_to_end_latency_s",
        "number_input_tokens",
        "number_output_tokens",
    ):
        for stat in (
            "mean",
            "min",
            "max",
            "stddev",
            "quantiles_p25",
            "quantiles_p50",
            "quantiles_p75",
            "quantiles_p90",
            "quantiles_p95",
            "quantiles_p99",
        ):
            assert f"results_{metric}_{stat}" in agree
    assert {
        "results_num_completed_requests",
        "results_number_errors",
        "results_num_requests_started",
        "results_error_rate",
        "results_error_code_frequency",
    } <= agree
    # what cannot be recomputed says why
    why = {r.key: r.reason for r in rows if r.status == "not re-derivable"}
    assert why["results_mean_output_throughput_token_per_s"] == (
        "divides by llmperf's own start-to-end monotonic time of the run; the records carry no times "
        "(see the identity linking the two)"
    )


def test_real_vllm_samples_are_aggregates_only(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, *map(str, sorted((samples / "vllm").glob("*.json"))), "--batch", "v")
    rows = check(ledger, batch="v")
    records = [r for r in rows if r.section == RECORDS]
    assert records and {r.status for r in records} == {"not re-derivable"}
    assert {r.reason for r in records} == {"no per-request records in this run's artefacts (aggregates only)"}
    # ... but vLLM's own summary identities hold on every file: 3 rates + 3 median = p50 + completed +
    # failed = num_prompts, per file
    ident = [r for r in rows if r.section == IDENTITY]
    assert [(r.run, r.key, r.status) for r in ident if r.run_id == ident[0].run_id] == [
        (ident[0].run, k, "agree")
        for k in (
            "request_throughput",
            "output_throughput",
            "total_token_throughput",
            "median_ttft_ms",
            "median_tpot_ms",
            "median_e2el_ms",
            "completed",
        )
    ]
    assert len(ident) == 21 and {r.status for r in ident} == {"agree"}
    first = ident[1]
    assert first.definition == "output_throughput = total_output_tokens / duration"
    assert first.reason == (
        "output_throughput = total_output_tokens / duration: 120.42068482753697 from the "
        "reported total_output_tokens 19581, duration 162.604954689"
    )


def test_vllm_records_recomputed_by_vllm_definition(
    ledger: Ledger, ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    obj = {
        "date": "20260301-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "model_id": "m",
        "num_prompts": 4,
        "request_rate": "inf",
        "max_concurrency": 2,
        "duration": 4.0,
        "completed": 3,
        "failed": 1,
        "total_input_tokens": 30,
        "total_output_tokens": 9,
        "request_throughput": 0.75,
        "output_throughput": 2.25,
        "total_token_throughput": 9.75,
        "input_lens": [10, 10, 10, 10],
        "output_lens": [4, 3, 2, 0],
        "ttfts": [0.04, 0.05, 0.125, 0.0],
        "itls": [[0.01, 0.02, 0.03], [0.02, 0.02], [0.5], []],
        "latencies": [1.5, 0.25, 0.75, 0.0],
        "errors": ["", "", "", "HTTP 500"],
        "mean_ttft_ms": 71.67,
        "median_ttft_ms": 50.0,
        "std_ttft_ms": 38.9,
        "p99_ttft_ms": 123.5,
        "mean_tpot_ms": 456.25,
        "median_itl_ms": 20.0,
        "std_e2el_ms": 999.0,
    }
    (tmp_path / "v.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "v.json"), "--batch", "v")
    reads: list[str] = []
    real_read = _RunRows.read
    monkeypatch.setattr(_RunRows, "read", lambda self, sql, *a: reads.append(sql) or real_read(self, sql, *a))
    rows = {r.key: r for r in check(ledger, batch="v") if r.section == RECORDS}
    # the request columns of every statistic in one scan of the run's rows (one per column cost most of
    # a PostgreSQL check); the gaps are read on their own
    assert len([q for q in reads if "FROM request q" in q]) == 1, reads
    for key in (
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "median_ttft_ms",
        "p99_ttft_ms",
        "median_itl_ms",
    ):
        assert rows[key].status == "agree", (key, rows[key])
    # mean TTFT = (40 + 50 + 125) / 3 = 71.666..: printed 71.67 agrees within ±0.005
    assert rows["mean_ttft_ms"].status == "agree"
    # population std of [40, 50, 125] ms = 37.97...: 38.9 disagrees
    assert rows["std_ttft_ms"].status == "disagree"
    # TPOT: (1.5-0.04)/3, (0.25-0.05)/2, (0.75-0.125)/1 -> mean 0.4756.. s, not 456.25 ms
    assert rows["mean_tpot_ms"].status == "disagree"
    assert rows["std_e2el_ms"].status == "disagree"
    assert rows["duration"].status == "not re-derivable"


def test_cli_check(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    d = samples / "llmperf"
    imp(
        ledger_url,
        str(d / "individual_groq_70b.json"),
        str(d / "summary_groq_70b.json"),
        "--batch",
        "lp",
        "--run",
        "groq",
    )
    res = CliRunner().invoke(main, ["check", "--db", ledger_url, "--batch", "lp"])
    assert res.exit_code == 0, res.output
    assert "results_ttft_s_quantiles_p99" in res.output
    lines = res.output.strip().splitlines()
    # main: 55 agree, 12 not re-derivable (llmperf's per-request throughput was not kept)
    assert "recomputed from records: 65 agree, 0 disagree, 2 not re-derivable" in lines
    assert "internal identities: 3 agree, 0 disagree, 0 not re-derivable" in lines
    assert lines[-1] == "68 agree, 0 disagree, 2 not re-derivable"


def test_a_hand_edited_summary_breaks_its_identity(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
    obj = json.loads(src.read_text())
    obj["output_throughput"] = 121.0  # edited by hand; total_output_tokens / duration is 120.42...
    (tmp_path / "edited.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "edited.json"), "--batch", "v")
    bad = [r for r in check(ledger, batch="v") if r.status == "disagree"]
    assert [(r.section, r.key, r.recomputed) for r in bad] == [(IDENTITY, "output_throughput", 120.42068482753697)]


def test_real_sglang_and_aiperf_identities(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, str(samples / "sglang" / "llama_3_3_70b_online_output.jsonl"), "--batch", "s")
    imp(ledger_url, str(samples / "aiperf" / "aiperf-repo-examples-run1__profile_export_aiperf.json"), "--batch", "a")
    sg = [r for r in check(ledger, batch="s") if r.section == IDENTITY]
    assert [(r.key, r.status) for r in sg] == [("output_throughput", "agree")] * 7
    ai = {r.key: r for r in check(ledger, batch="a") if r.section == IDENTITY}
    assert {k: r.status for k, r in ai.items()} == {
        "records.request_throughput.avg": "agree",
        "records.output_token_throughput.avg": "agree",
        "records.benchmark_duration.avg": "agree",
        "records.request_count.avg": "agree",
        "records.total_isl.avg": "agree",
        "records.total_osl.avg": "agree",
        "records.total_output_tokens.avg": "agree",
        "records.total_reasoning_tokens.avg": "agree",
    }
    # AIPerf 0.1's output token throughput is its total OSL (output + reasoning) over the duration
    assert ai["records.output_token_throughput.avg"].recomputed == pytest.approx(21624 / 9.317788951, rel=1e-12)


def test_an_identity_beyond_a_double_disagrees_instead_of_failing(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    """A reported duration of 1e-320 s makes vLLM's rates about 1e323 per second: compared exactly, the
    identities disagree, and the table and --json say so (it was an OverflowError, exit 70)."""
    data = json.loads((samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json").read_text())
    data["duration"] = 1e-320
    (tmp_path / "tiny.json").write_text(json.dumps(data))
    run("init", "--db", ledger_url)
    run("import", "--db", ledger_url, "--batch", "b", "-q", tmp_path / "tiny.json")
    rows = json.loads(run("check", "--db", ledger_url, "--json").output)
    rate = next(r for r in rows if r["section"] == "identity" and r["key"] == "output_throughput")
    assert (rate["status"], rate["recomputed"]) == ("disagree", None)
    assert "(beyond a double)" in rate["reason"]
    assert run("check", "--db", ledger_url, "--fail-on", "disagree", code=1).exit_code == 1
