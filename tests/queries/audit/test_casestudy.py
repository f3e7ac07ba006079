"""End to end: the synthetic case study, imported through the real importers, gives every claim of
ledger/casestudy/claims.yaml its pinned verdict (and the CLI's audit / explain work on it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("bench_ledger.casestudy.generate", reason="the case-study generator has not landed yet")
pytest.importorskip("bench_ledger.queries.metrics.registry", reason="the metric registry has not landed yet")

from bench_ledger.cli import main  # noqa: E402
from bench_ledger.queries.claims import load_claims  # noqa: E402

CLAIMS = Path(__file__).resolve().parents[3] / "ledger" / "casestudy" / "claims.yaml"


@pytest.fixture
def demo_url(demo_copy: str) -> str:
    """The case study as the session's one `ledger demo` built it (generated, declared, every file
    imported through the real importers), in a private copy: it is not built a second time here."""
    return demo_copy


@pytest.fixture(scope="module")
def audit_json(demo_built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What `ledger audit CLAIMS --json` prints for the demo ledger (a copy), run once for the tests reading it."""
    path = tmp_path_factory.mktemp("audit-json") / "ledger.duckdb"
    shutil.copyfile(demo_built / "ledger.duckdb", path)
    out = CliRunner().invoke(main, ["audit", "--db", f"duckdb:///{path}", str(CLAIMS), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_every_claim_gets_its_expected_verdict(audit_json: dict):
    """queries.audit.audit() as `ledger audit --json` prints it (the same report, serialised): every claim
    of the file, each with its pinned verdict."""
    results = audit_json["results"]
    assert [r["claim_id"] for r in results] == [c.id for c in load_claims(CLAIMS).claims]
    wrong = [
        f"{r['claim_id']}: got {r['verdict']}{' ' + r['rule'] if r['rule'] else ''} "
        f"({r['why'] or r['missing'] or r['margin']}), expected {r['expected_verdict']}"
        f"{' ' + r['expected_rule'] if r['expected_rule'] else ''}"
        for r in results
        if not r["as_expected"]
    ]
    assert not wrong, "\n".join(wrong)


def test_c64_stream_median_change_gets_its_sampling_verdict(audit_json: dict):
    """§4's C64 per-stream median 52.07 -> 51.03 tok/s (-2.0%): the old figure is quoted from an earlier summary
    (no requests here), so the change's sampling error is unknown, never taken as zero; the ledger's side has
    its interval from the run's 64 requests."""
    r = next(x for x in audit_json["results"] if x["claim_id"] == "c64-stream-median-change")
    s = r["sampling"]
    assert (r["verdict"], s["verdict"]) == ("consistent", "unknown sampling error")
    assert s["reason"] == (
        "old-c64-stream-median has no per-request records here (a quoted or aggregate-only "
        "figure): its sampling error is unknown, not zero"
    )
    assert s["operands"]["old-c64-stream-median"] is None
    new = s["operands"]["c64-stream-median-1017"]
    assert new["status"] == "interval" and new["n"] == 64 and new["low"] < 51.03 < new["high"]
    assert "sampling: unknown sampling error: old-c64-stream-median has no per-request records here" in " ".join(
        r["notes"]
    )


def test_cli_audit_groups_and_gates(demo_url: str, audit_json: dict):
    runner = CliRunner()
    ids = {v: [r["claim_id"] for r in audit_json["results"] if r["verdict"] == v] for v in ("mismatch", "refused")}
    assert ids["mismatch"] and len(ids["refused"]) > 10
    # one audit, gated on two verdicts: the grouped verdicts are printed all the same, then each gate
    # names its claims (the first ten and how many more) and the command fails
    gated = runner.invoke(main, ["audit", "--db", demo_url, str(CLAIMS), "--fail-on", "mismatch,refused"])
    assert gated.exit_code == 1, gated.output
    assert "SYNTHETIC" in gated.output
    for verdict in ("reproduced", "consistent", "quoted", "estimated", "n/a-kept", "refused", "not-derivable"):
        assert f"\n{verdict} (" in gated.output
    refused = ", ".join(ids["refused"][:10]) + f" and {len(ids['refused']) - 10} more"
    assert gated.stderr == (
        f"failing (--fail-on mismatch): {len(ids['mismatch'])} claim(s) mismatch: {', '.join(ids['mismatch'])}\n"
        f"failing (--fail-on refused): {len(ids['refused'])} claim(s) refused: {refused}\n"
    )
    # without a gate the same audit exits 0: the audit_json fixture's `--json` run asserts it
    bad = runner.invoke(main, ["audit", "--db", demo_url, str(CLAIMS), "--fail-on", "nonsense"])
    assert bad.exit_code == 2


def test_cli_explain_chain(demo_url: str):
    out = CliRunner().invoke(main, ["explain", "--db", demo_url, str(CLAIMS), "tier-50k-output-tpm"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "metric output_tpm" in text
    assert "run " in text and "50k-200-c4n8" in text
    assert "requests: 8 of 8" in text
    assert "sha256" in text and "SYNTHETIC-fx-50k-200-c4n8.json" in text
    assert text.rstrip().splitlines()[-1].startswith("source report h20-dsv41-flash")
