"""Two definitions of one quantity: the verdict names the one that reproduces the number (issue 38).

llmperf's per-request ``request_output_throughput_token_per_s``: token_benchmark_ray.py defines it as the
request's output tokens / its end-to-end latency, but older llmperf kept the client's value, streamed
chunks / end-to-end latency (the together_70b records: value x latency = 149 chunks for 157 tokens), and its
summary's statistics are taken over the stored value. The ledger recomputes the first; a number printed from
the second is reproduced by that definition, and the verdict says which.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger import api
from bench_ledger.queries.audit import Auditor
from bench_ledger.queries.claims import ClaimsFile

from tests.clirun import run
from tests.conftest import SHARED, shared_folder

LLMPERF = SHARED / "samples" / "llmperf"


@pytest.fixture
def together(ledger_url: str, tmp_path: Path) -> tuple[object, str]:
    src = shared_folder(LLMPERF)
    folder = tmp_path / "together"
    folder.mkdir()
    (folder / "individual_together_70b.json").write_bytes((src / "individual_together_70b.json").read_bytes())
    run("import", "--db", ledger_url, "--batch", "lp", "-q", folder)
    led = api.connect(ledger_url)
    label = next(r["label"] for r in api.runs(led).to_pylist() if r["batch"] == "lp")
    return led, label


def claim(text: str, metric: str, label: str) -> ClaimsFile:
    c = {
        "id": "c",
        "text": text,
        "unit": "tokens/s",
        "kind": "per_stream_token_rate",
        "metric": {"name": metric, "scope": {"batch": "lp", "run": label}},
    }
    return ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "t", "title": "t"}, "claims": [c]})


def test_the_stored_older_definition_reproduces_the_summarys_mean(together) -> None:
    led, label = together
    r = Auditor(claim("59.89", "output_tps_mean", label), led).result("c")  # summary mean 59.887
    assert r.verdict == "reproduced"
    assert r.evidence["definition"] == "llmperf's stored request_output_throughput_token_per_s"
    assert r.margin.endswith(
        "by llmperf's stored request_output_throughput_token_per_s (older llmperf: streamed chunks / "
        "end-to-end latency), not output tokens / end-to-end latency (64.1720)"
    )


def test_the_current_definition_reproduces_its_own_number(together) -> None:
    led, label = together
    r = Auditor(claim("64.17", "output_tps_mean", label), led).result("c")
    assert r.verdict == "reproduced" and r.recomputed == "64.1720"
    assert r.evidence["definition"] == "output tokens / end-to-end latency"
    assert "llmperf's stored request_output_throughput_token_per_s gives 59.8871" in r.notes[-1]


def test_neither_definition_is_a_mismatch_naming_both(together) -> None:
    led, label = together
    r = Auditor(claim("62.00", "output_tps_mean", label), led).result("c")
    assert r.verdict == "mismatch"
    assert r.why.endswith("llmperf's stored request_output_throughput_token_per_s gives 59.8871: outside too")


def test_llmperfs_summary_keys_of_the_per_request_throughput() -> None:
    from fractions import Fraction

    from bench_ledger.queries.metrics.reported import tool_keys

    key = "results_request_output_throughput_token_per_s"
    assert tool_keys("llmperf", "output_tps_mean") == ((f"{key}_mean",), Fraction(1))
    assert tool_keys("llmperf", "output_tps_p99") == ((f"{key}_quantiles_p99",), Fraction(1))
    assert tool_keys("llmperf", "output_tps_std") == ((), Fraction(1))  # llmperf's stddev is a sample one


def test_an_unedited_draft_binds_it_and_the_audit_names_the_definition(together, tmp_path: Path) -> None:
    import yaml
    from bench_ledger.queries.audit import audit
    from bench_ledger.queries.claims import load_claims

    led, _ = together
    report = tmp_path / "r.md"
    report.write_text(
        "# llmperf, together 70b\n\n| statistic | request output throughput (tok/s) |\n|---|--:|\n"
        "| mean | 59.89 |\n| p50 | 60.94 |\n",
        encoding="utf-8",
    )
    out = tmp_path / "d.yaml"
    run("claims", "draft", report, "--db", str(led.url), "--batch", "lp", "-o", out)
    drafted = {c["text"]: c for c in yaml.safe_load(out.read_text())["claims"]}
    assert drafted["59.89"]["metric"]["name"] == "output_tps_mean"
    assert drafted["60.94"]["metric"]["name"] == "output_tps_p50"
    got = {r.text: r for r in audit(load_claims(out), led).results}
    assert got["59.89"].verdict == got["60.94"].verdict == "reproduced"
    assert got["60.94"].evidence["definition"] == "llmperf's stored request_output_throughput_token_per_s"
