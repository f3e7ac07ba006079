"""The three real reports of ../shared/real-reports, drafted and audited unedited (issue 38).

The ground truth (tests/fixtures/real_reports/ground_truth.py) is recomputed from the raw files with
plain Python by each tool's own definition; benchmarks/real_reports.py measures the draft and the audit
against it. The figures it prints are pinned here: a change that moves them must say so.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from bench_ledger import api
from bench_ledger.queries.audit import Auditor
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.queries.metrics.execute import apply_stat
from bench_ledger.queries.metrics.reported import tool_keys

from tests.clirun import run
from tests.conftest import SHARED, shared_folder

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "real_reports"))

import ground_truth  # noqa: E402
import real_reports  # noqa: E402

CASES = SHARED / "real-reports"
# case -> (numbers the draft finds, checkable, located, bound, right, false)
PINNED = {
    "wentao274-vllm-h100-concurrency-zh": (339, 310, 310, 285, 285, 0),
    "tonyli15-sglang-pd-disagg": (105, 9, 9, 9, 9, 0),
    "anud18-aiperf-ngrok-endpoint-errors": (228, 24, 24, 21, 21, 0),
}


@pytest.fixture(scope="module")
def cases() -> Path:
    return shared_folder(CASES)


@pytest.mark.parametrize("case", list(PINNED))
def test_ground_truth_locates_every_number_where_the_report_prints_it(cases: Path, case: str) -> None:
    report_rel, _, truth_of = ground_truth.CASES[case]
    lines = (cases / case / report_rel).read_text(encoding="utf-8").splitlines()
    truths = truth_of(cases / case)
    assert truths
    for t in truths:
        assert lines[t.line - 1][t.col : t.col + len(t.text)] == t.text, t
    assert len({(t.line, t.col) for t in truths}) == len(truths)


@pytest.mark.parametrize("case", list(PINNED))
def test_unedited_draft_audits_the_real_report_right(cases: Path, case: str, tmp_path: Path) -> None:
    fig = real_reports.measure(cases / case, tmp_path)
    got = (fig.numbers_found, fig.checkable, fig.found, fig.bound, fig.right, fig.false)
    assert got == PINNED[case], fig.line() + "\n" + "\n".join(fig.misses + fig.false_verdicts)
    assert fig.right_share >= 0.80 and fig.false == 0, fig.line()


def test_the_tools_keys_for_every_published_statistic() -> None:
    ms = Fraction(1, 1000)
    assert tool_keys("vllm-bench", "ttft_p50") == (("median_ttft_ms",), ms)
    assert tool_keys("vllm-bench", "e2e_latency_p99") == (("p99_e2el_ms", "p99_e2e_latency_ms"), ms)
    assert tool_keys("sglang-bench", "total_tokens_per_s") == (("total_token_throughput", "total_throughput"), 1)
    # AIPerf's inter_token_latency is the ledger's TPOT; its inter_chunk_latency the ledger's ITL
    assert tool_keys("aiperf", "tpot_p95") == (("inter_token_latency.p95",), ms)
    assert tool_keys("aiperf", "itl_mean") == (("inter_chunk_latency.avg",), ms)
    assert tool_keys("aiperf", "isl_mean") == (("input_sequence_length.avg",), 1)
    assert tool_keys("aiperf", "ttft_p99_9") == (("time_to_first_token.p99.9",), ms)
    assert tool_keys("vllm-bench", "peak_concurrent_requests") == (("max_concurrent_requests",), 1)
    assert tool_keys("guidellm", "ttft_p50") == ((), 1)


def test_every_statistic_by_numpys_definition() -> None:
    values = [Fraction(v) for v in (1, 2, 3, 4, 10)]
    assert apply_stat("min", values) == 1
    assert apply_stat("p25", values) == 2
    assert apply_stat("p99.9", values) == Fraction(4) + Fraction(996, 1000) * 6  # rank 3.996: 4 + 0.996 x (10 - 4)
    assert apply_stat("std", values) == Fraction(math.sqrt(10))  # population (ddof 0): variance 50 / 5


def _one_claim(claim: dict) -> ClaimsFile:
    return ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "t", "title": "t"}, "claims": [claim]})


@pytest.fixture
def sglang_and_aiperf(cases: Path, ledger_url: str) -> str:
    """Both backends: an aggregate-only SGLang run (batch sg) and an AIPerf run with records (batch ai)."""
    sg = cases / "tonyli15-sglang-pd-disagg" / "benchmarks" / "results" / "agg_local.jsonl"
    ai = cases / "anud18-aiperf-ngrok-endpoint-errors" / "results"
    run("import", "--db", ledger_url, "--batch", "sg", "-q", sg)
    run("import", "--db", ledger_url, "--batch", "ai", "-q", ai)
    return ledger_url


def test_the_tools_figure_backs_a_claim_where_no_records_are(sglang_and_aiperf: str) -> None:
    led = api.connect(sglang_and_aiperf)
    label = api.runs(led).to_pylist()
    sg = next(r["label"] for r in label if r["batch"] == "sg")
    claim = {
        "id": "ttft",
        "text": "618 ms",
        "unit": "ms",
        "kind": "latency",
        "metric": {"name": "ttft_mean", "scope": {"batch": "sg", "run": sg}},
    }
    r = Auditor(_one_claim(claim), led).result("ttft")
    assert (r.verdict, r.provenance) == ("reproduced", "reported by sglang-bench in agg_local.jsonl")
    assert r.evidence["flag"] == "reported" and r.evidence["reported_key"] == "mean_ttft_ms"
    assert r.notes[0].startswith(
        "reported by sglang-bench in agg_local.jsonl as mean_ttft_ms = 618.0076370667666: "
        "the ledger cannot recompute it"
    )
    claim["text"] = "620 ms"  # a wrong print against the tool's own figure
    assert Auditor(_one_claim(claim), led).result("ttft").verdict == "mismatch"


def test_records_recompute_and_the_tools_figure_is_compared(sglang_and_aiperf: str) -> None:
    led = api.connect(sglang_and_aiperf)
    ai = next(r["label"] for r in api.runs(led).to_pylist() if r["batch"] == "ai")
    claim = {
        "id": "p95",
        "text": "82,477.21",
        "unit": "ms",
        "kind": "latency",
        "metric": {"name": "ttft_p95", "scope": {"batch": "ai", "run": ai}},
    }
    r = Auditor(_one_claim(claim), led).result("p95")
    assert (r.verdict, r.provenance) == ("reproduced", "derived")
    tool = r.evidence["tool_figure"]
    assert (tool["key"], tool["file"], tool["inside_printed"]) == (
        "time_to_first_token.p95",
        "profile_export_aiperf.json",
        True,
    )
    assert "the tool's own figure (reported by aiperf in profile_export_aiperf.json" in r.notes[-1]


def test_a_mean_of_token_counts_is_not_held_to_the_integer_rule(sglang_and_aiperf: str) -> None:
    led = api.connect(sglang_and_aiperf)
    ai = next(r["label"] for r in api.runs(led).to_pylist() if r["batch"] == "ai")
    claim = {
        "id": "osl",
        "text": "231.4",
        "unit": "tokens",
        "kind": "token_count",
        "metric": {"name": "osl_mean", "scope": {"batch": "ai", "run": ai}},
    }
    r = Auditor(_one_claim(claim), led).result("osl")
    assert (r.verdict, r.recomputed) == ("reproduced", "231.429")
    quoted = {"id": "q", "text": "0.9", "kind": "other", "quoted": {"source": "the report"}}
    assert Auditor(_one_claim(quoted), led).result("q").verdict == "quoted"


def test_draft_binds_list_members_load_points_and_headings(sglang_and_aiperf: str, tmp_path: Path) -> None:
    report = tmp_path / "r.md"
    report.write_text(
        "# Results\n\n## `agent_flat` c2\n\n| metric | value (14/20 requests) |\n|---|--:|\n"
        "| TTFT avg / p50 (ms) | 37,389.38 / 31,479.67 |\n| OSL avg / p50 (tokens) | 231.4 / 153.5 |\n\n"
        "## `agent_flat` c1\n\n| metric | value |\n|---|--:|\n| TTFT avg (ms) | 37,389.38 |\n\n"
        "The highest TTFT p50 was at 2 concurrent, 31,479.67 ms. About 0.9 requests per second failed.\n",
        encoding="utf-8",
    )
    out = tmp_path / "d.yaml"
    run("claims", "draft", report, "--db", sglang_and_aiperf, "--batch", "ai", "-o", out)
    claims = {(c["evidence"]["place"]["line"], c["text"]): c for c in yaml.safe_load(out.read_text())["claims"]}
    assert claims[(7, "37,389.38")]["metric"]["name"] == "ttft_mean"
    assert claims[(7, "31,479.67")]["metric"]["name"] == "ttft_p50"
    assert claims[(8, "231.4")]["metric"]["name"] == "osl_mean"
    assert claims[(8, "153.5")]["metric"]["name"] == "osl_p50"
    # the c1 heading contradicts the run's concurrency 2 (its folder c2): never bound to it
    assert "quoted" in claims[(14, "37,389.38")]
    assert claims[(16, "2")]["kind"] == "concurrency" and "quoted" in claims[(16, "2")]
    assert claims[(16, "31,479.67 ms")]["metric"]["name"] == "ttft_p50"
    # a fraction is never read as a count: no "a count is an integer" mismatch on a quoted claim
    assert claims[(16, "About 0.9 requests")]["kind"] == "other"


def test_draft_uses_the_default_ledger_and_audit_warns_about_draft_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    report = tmp_path / "r.md"
    report.write_text("# R\n\nWe sent 20 requests.\n", encoding="utf-8")
    res = run("claims", "draft", report, "-o", "d.yaml", code=1)
    assert res.output == (
        "error: no ledger at ledger.duckdb (no such file): `ledger init --db duckdb:///ledger.duckdb` creates one\n"
    )
    run("init")
    assert run("claims", "draft", report, "-o", "d.yaml").output == (
        "wrote d.yaml: 1 numbers found, 0 skipped; by basis: quoted 1; by confidence: low 1\n"
    )
    assert run("claims", "draft", report, "--no-ledger", "-o", "e.yaml").output.endswith(
        "(no ledger: no metric proposals)\n"
    )
    res = run("claims", "draft", report, "--no-ledger", "--db", "duckdb:///x.duckdb", code=2)
    assert "--no-ledger drafts without a ledger: it takes neither --db nor --batch" in res.output
    res = run("audit", "d.yaml")
    assert res.stderr.startswith(
        "warning: 1 of 1 claims say `draft: true` (pre-l3-requests-ok): proposals of "
        "`ledger claims draft`, not reviewed; review each and remove the flag\n"
    )


def test_a_sub_kind_backs_its_kind_and_a_kind_mismatch_cites_the_kind_rule() -> None:
    from bench_ledger.queries.values import MetricValue, Scope

    scope = Scope(batch="b", run="r")

    def hits(ledger, name: str, sc: Scope) -> MetricValue:
        return MetricValue(name, sc, Fraction(120), "tokens", "cache_hit_tokens", "derived", run_ids=[1])

    claim = {
        "id": "hit",
        "text": "120",
        "unit": "tokens",
        "kind": "token_count",
        "metric": {"name": "cache_hit_tokens", "scope": {"batch": "b", "run": "r"}},
    }
    assert Auditor(_one_claim(claim), None, evaluate=hits).result("hit").verdict == "reproduced"
    claim["kind"], claim["unit"], claim["text"] = "latency", "s", "120 s"
    r = Auditor(_one_claim(claim), None, evaluate=hits).result("hit")
    assert (r.verdict, r.rule) == ("refused", "kinds")
    assert scope == Scope(batch="b", run="r")


def test_draft_rejects_a_run_of_another_gpu_or_layout(cases: Path, ledger_url: str, tmp_path: Path) -> None:
    """The run's folder states the GPU (h100x8: ledger.factors), its file the layout (tp 1); a row naming
    another GPU or layout never binds to it, not even as the only run that reproduces the number."""
    folder = tmp_path / "h100x8" / "tp1"
    folder.mkdir(parents=True)
    src = cases / "tonyli15-sglang-pd-disagg" / "benchmarks" / "results" / "agg_local.jsonl"
    (folder / "agg.jsonl").write_bytes(src.read_bytes())
    run("import", "--db", ledger_url, "--batch", "sg", "-q", folder / "agg.jsonl")
    report = tmp_path / "r.md"
    report.write_text(
        "# R\n\n| Configuration | Mean TTFT |\n|---|---|\n| Aggregated (A100) | 618 ms |\n"
        "| Aggregated (H100, TP4) | 618 ms |\n| Aggregated (H100, TP1) | 618 ms |\n"
        "| Aggregated | 618 ms |\n",
        encoding="utf-8",
    )
    out = tmp_path / "d.yaml"
    run("claims", "draft", report, "--db", ledger_url, "-o", out)
    claims = {c["evidence"]["place"]["line"]: c for c in yaml.safe_load(out.read_text())["claims"]}
    assert "quoted" in claims[5] and "quoted" in claims[6]
    assert claims[5]["evidence"]["candidates_not_proposed"][0].endswith("(hardware A100 != H100)")
    assert claims[7]["metric"]["name"] == "ttft_mean"
    assert claims[7]["evidence"]["basis"]["why"].endswith("(hardware H100; tp 1)")
    assert claims[8]["metric"]["name"] == "ttft_mean"  # nothing stated: the only run that reproduces


def test_draft_carries_a_sections_invalid_label(tmp_path: Path) -> None:
    report = tmp_path / "r.md"
    report.write_text(
        "# R\n\n## c2 — INVALID, do not cite\n\nOnly 14 of 20 requests completed.\n\n## c1\n\n"
        "All 20 requests completed.\n",
        encoding="utf-8",
    )
    out = tmp_path / "d.yaml"
    run("claims", "draft", report, "--no-ledger", "-o", out)
    claims = {(c["evidence"]["place"]["line"], c["text"]): c for c in yaml.safe_load(out.read_text())["claims"]}
    assert claims[(5, "14")]["evidence"]["review"][0] == (
        "the report marks its section invalid (c2 — INVALID, do not cite): a record, not a result to cite"
    )
    assert not any("invalid" in r for r in claims[(9, "20 requests")]["evidence"].get("review", []))
