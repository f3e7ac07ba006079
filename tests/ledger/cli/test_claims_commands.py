"""`ledger claims draft / diff / coverage` end to end from the CLI, on a small ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench_ledger.cli import main
from bench_ledger.queries.claims import load_claims
from bench_ledger.queries.intervals import fmt
from bench_ledger.queries.metrics.registry import evaluate
from bench_ledger.queries.values import Scope
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.clirun import run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A DuckDB ledger with one llmperf run (batch lp, run p1) and a report about it whose numbers
    are computed here from the ledger, so the expected proposals are known."""
    monkeypatch.delenv("LEDGER_DB", raising=False)
    url = f"duckdb:///{tmp_path / 'ledger.duckdb'}"
    run("init", "--db", url)
    run(
        "import",
        "--db",
        url,
        "--batch",
        "lp",
        "--run",
        "p1",
        "-q",
        str(FIXTURES / "llmperf" / "individual_responses.json"),
    )
    with Ledger(url) as led:
        ttft = evaluate(led, "ttft_p50", Scope(batch="lp", run="p1")).value
        ok = evaluate(led, "requests_ok", Scope(batch="lp", run="p1")).value
    report = tmp_path / "report.md"
    report.write_text(
        "# Provider check\n\n## 1. Results\n\n"
        "| Run | Requests ok | TTFT p50 (s) |\n|---|---|---|\n"
        f"| p1 | {ok} | {fmt(round(ttft, 3))} |\n\n"
        "Measured with llmperf 0.3.1 on 2026-07-07. Energy per token: N/A, because no energy counter was read.\n",
        encoding="utf-8",
    )
    return url, report


def test_draft_writes_a_valid_reviewable_file_and_it_audits(small: tuple[str, Path], tmp_path: Path) -> None:
    url, report = small
    out = tmp_path / "draft.yaml"
    res = run("claims", "draft", str(report), "--db", url, "--batch", "lp", "-o", str(out))
    assert res.output == (f"wrote {out}: 3 numbers found, 5 skipped; by basis: metric 2, na 1; by confidence: high 3\n")
    cf = load_claims(out)
    assert all(c.draft for c in cf.claims)
    metrics = {(c.metric.name, c.metric.scope.batch, c.metric.scope.run) for c in cf.claims if c.metric}
    assert metrics == {("requests_ok", "lp", "p1"), ("ttft_p50", "lp", "p1")}
    assert [c.na.reason for c in cf.claims if c.na] == ["because no energy counter was read."]
    skipped = {(s.text, s.why) for s in cf.draft.skipped}
    assert ("0.3.1", "a version string") in skipped and ("2026-07-07", "a date or time") in skipped
    assert cf.source_report.file == "report.md" and cf.draft.batches == ["lp"]
    audited = run("audit", str(out), "--db", url).output
    assert "verdicts: reproduced 2, n/a-kept 1" in audited


def test_draft_without_a_ledger_prints_yaml_and_says_so(small: tuple[str, Path]) -> None:
    _, report = small
    res = CliRunner().invoke(main, ["claims", "draft", str(report), "--no-ledger"], env={"LEDGER_DB": None})
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(res.stdout)
    assert [next(k for k in ("metric", "quoted", "na") if k in c) for c in data["claims"]] == ["quoted", "quoted", "na"]
    assert res.stderr.endswith("(no ledger: no metric proposals)\n")


def test_diff_shows_what_the_reviewer_changed(small: tuple[str, Path], tmp_path: Path) -> None:
    url, report = small
    draft = tmp_path / "draft.yaml"
    run("claims", "draft", str(report), "--db", url, "-o", str(draft))
    data = yaml.safe_load(draft.read_text(encoding="utf-8"))
    claims = data["claims"]
    ttft = next(c for c in claims if c.get("metric", {}).get("name") == "ttft_p50")
    ttft.pop("metric")
    ttft["quoted"] = {"source": "the provider's dashboard"}
    dropped = next(c for c in claims if "na" in c)
    claims.remove(dropped)
    claims.append({"id": "reviewer-added", "text": "150", "kind": "token_count", "quoted": {"source": "the plan"}})
    for c in claims:
        c.pop("draft", None)
    reviewed = tmp_path / "reviewed.yaml"
    reviewed.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    out = run("claims", "diff", str(draft), str(reviewed)).output
    assert out.splitlines()[0] == "accepted 1, changed 1 (basis changed 1), removed 1, added 1"
    assert f"{ttft['id']}  basis  metric  quoted" in out
    assert f"removed (in the draft only): {dropped['id']}" in out
    assert "added (in the reviewed file only): reviewer-added" in out


def test_bad_report_and_bad_reference_are_clear_errors(tmp_path: Path, small: tuple[str, Path]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    res = run("claims", "draft", str(bad), "-o", str(tmp_path / "x.yaml"), code=1)
    assert res.output == f"error: {bad}: not UTF-8 text (byte 3)\n"
    assert not (tmp_path / "x.yaml").exists()
    url, report = small
    res = run("claims", "draft", str(report), "--db", url, "--batch", "nope", "-o", str(tmp_path / "x.yaml"), code=1)
    assert res.output == "error: no batch named 'nope'; `ledger batches` lists them\n"
    assert not (tmp_path / "x.yaml").exists()
    draft = tmp_path / "draft.yaml"
    run("claims", "draft", str(report), "--no-ledger", "-o", str(draft))
    ref = tmp_path / "ref.yaml"
    ref.write_text("version: 1\nsource_report: {slug: s, title: t}\nclaims: []\n", encoding="utf-8")
    res = run("claims", "coverage", str(draft), str(ref), code=1)
    assert res.output == f"error: {ref}: source_report.file is not set; the report's text is needed\n"
