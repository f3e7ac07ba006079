"""The coverage of `ledger claims draft` measured, not typed in (docs/claims-draft.md).

1. The case study: the reference report drafted against (a copy of) the session's demo ledger
   (`ledger demo`, SYNTHETIC),
   compared with the hand-written ledger/casestudy/claims.yaml.
2. A second report in English over the real samples of shared/samples (skipped without them),
   compared with its own hand-written claims (tests/fixtures/draft/).

Both figures must meet the targets (>= 95% located, >= 80% same basis), and docs/claims-draft.md must
state the figures measured here and name every miss.
"""

from __future__ import annotations

from pathlib import Path

from bench_ledger.cli import main
from bench_ledger.queries.claims import load_claims
from bench_ledger.queries.draft import Coverage, coverage
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[3]
CASESTUDY = ROOT / "ledger" / "casestudy"
DRAFT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "draft"
DOC = ROOT / "docs" / "claims-draft.md"


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def measure(report: Path, reference: Path, db: str, out: Path, *batches: str) -> Coverage:
    run("claims", "draft", str(report), "--db", db, *[a for b in batches for a in ("--batch", b)], "-o", str(out))
    draft = load_claims(out)
    assert all(c.draft for c in draft.claims)
    return coverage(draft, load_claims(reference), report.read_text(encoding="utf-8"))


def check(cov: Coverage, name: str) -> None:
    located = f"{cov.located}/{cov.total}"
    basis = f"{cov.same_basis}/{cov.total}"
    listing = "\n".join(f"  {m.claim_id}: {m.why}" for m in cov.located_misses + cov.basis_misses)
    assert cov.located_share >= 0.95, f"{name}: located {located}\n{listing}"
    assert cov.basis_share >= 0.80, f"{name}: same basis {basis}\n{listing}"
    doc = DOC.read_text(encoding="utf-8")
    assert f"{name}: located {located}" in doc and f"{name}: same basis {basis}" in doc, (located, basis)
    missing = [m.claim_id for m in cov.located_misses + cov.basis_misses if f"`{m.claim_id}`" not in doc]
    assert not missing, f"misses not explained in docs/claims-draft.md: {missing}"


def test_case_study_coverage(demo_copy: str, tmp_path: Path) -> None:
    cov = measure(
        CASESTUDY / "h20-dsv41-flash-report.zh.txt", CASESTUDY / "claims.yaml", demo_copy, tmp_path / "draft.yaml"
    )
    assert cov.total == len(load_claims(CASESTUDY / "claims.yaml").claims)
    check(cov, "case study")


def test_second_report_over_the_real_samples(tmp_path: Path, samples: Path) -> None:
    db = f"duckdb:///{tmp_path / 'ledger.duckdb'}"
    run("init", "--db", db)
    for qps in ("1.0", "2.0", "4.0"):
        (path,) = (samples / "vllm").glob(f"openai-{qps}qps-*.json")
        run("import", "--db", db, "-q", "--batch", "vllm", "--run", f"qwen7b-{qps[0]}qps", str(path))
    run("import", "--db", db, "-q", "--batch", "sglang", *map(str, sorted((samples / "sglang").iterdir())))
    for provider in ("groq", "together"):
        files = sorted((samples / "llmperf").glob(f"*{provider}*"))
        run("import", "--db", db, "-q", "--batch", "llmperf", "--run", f"{provider}-70b", *map(str, files))
    run("import", "--db", db, "-q", "--batch", "dmon", "--node", "box0", *map(str, (samples / "dmon").iterdir()))
    cov = measure(
        DRAFT_FIXTURES / "serving-samples-report.en.md",
        DRAFT_FIXTURES / "serving-samples-claims.yaml",
        db,
        tmp_path / "draft.yaml",
    )
    check(cov, "second report")
