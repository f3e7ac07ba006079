"""How far `ledger claims draft` + `ledger audit` get on the real reports of ../shared/real-reports, unedited.

    .venv/bin/python benchmarks/real_reports.py [--shared ../shared] [--keep DIR] [--json] [--list]

For each case: a fresh DuckDB ledger, the case's raw files imported (one batch per case), the report
drafted with `ledger claims draft` (timed) and the draft audited as it is. Every printed number of the
ground truth (tests/fixtures/real_reports/ground_truth.py, recomputed from the raw files without the
ledger's code) is looked up in the draft by its line and column, and counted:

* found: the draft holds a claim at that place;
* bound: its proposed basis is the right one (a metric over a run of the number's raw file; a
  derivation for a number the report derives; not a metric, for a number the files cannot support);
* right: the audit's verdict is the ground truth's (`quoted` / `not-derivable` for an unsupported one);
* false: a verdict that asserts something wrong (`reproduced` / `consistent` / `mismatch` other than
  the ground truth's, or any of them on an unsupported number).

tests/queries/draft/test_real_reports.py pins the figures this prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "real_reports"))

import ground_truth  # noqa: E402

ASSERTING = ("reproduced", "consistent", "mismatch", "raw-mismatch")
# raw-mismatch: the printed arithmetic holds, the raw data does not: a mismatch of the raw data


@dataclass
class Figures:
    case: str
    numbers_found: int = 0  # every number the draft found in the report
    draft_seconds: float = 0.0
    checkable: int = 0  # ground-truth numbers the raw files can check
    unsupported: int = 0  # ground-truth numbers printed without their raw files here
    found: int = 0
    bound: int = 0
    right: int = 0
    false: int = 0
    misses: list[str] = field(default_factory=list)
    false_verdicts: list[str] = field(default_factory=list)

    @property
    def right_share(self) -> float:
        return self.right / self.checkable if self.checkable else 0.0

    def line(self) -> str:
        return (
            f"{self.case}: numbers found {self.numbers_found}, checkable {self.checkable} "
            f"(+{self.unsupported} unsupported), located {self.found}, bound {self.bound}, "
            f"right {self.right}/{self.checkable} ({100 * self.right_share:.1f}%), false {self.false}, "
            f"draft {self.draft_seconds:.1f} s"
        )


def _run_files(ledger, batch: str) -> dict[str, set[str]]:
    """label -> the file names of the run's artefacts."""
    import sqlalchemy as sa
    from bench_ledger import models as m

    out: dict[str, set[str]] = {}
    with ledger.connection() as conn:
        q = (
            sa.select(m.Run.label, m.Artefact.file_name)
            .join(m.Batch, m.Batch.id == m.Run.batch_id)
            .join(m.Capture, m.Capture.run_id == sa.func.coalesce(m.Run.origin_id, m.Run.id))
            .join(m.Artefact, m.Artefact.id == m.Capture.artefact_id)
            .where(m.Batch.name == batch)
        )
        for label, name in conn.execute(q):
            out.setdefault(label, set()).add(Path(name).name)
    return out


def measure(case_dir: Path, work: Path) -> Figures:
    from bench_ledger import api
    from bench_ledger.cli import main
    from bench_ledger.queries.claims import load_claims
    from click.testing import CliRunner

    name = case_dir.name
    report_rel, raw_dirs, truth_of = ground_truth.CASES[name]
    batch = name.split("-")[0]
    db = f"duckdb:///{work / (batch + '.duckdb')}"
    runner = CliRunner()

    def ledger_cli(*args: str) -> str:
        res = runner.invoke(main, list(args), env={"LEDGER_DB": db})
        if res.exit_code != 0:
            raise SystemExit(f"ledger {' '.join(args)}: exit {res.exit_code}\n{res.output}")
        return res.output

    ledger_cli("init")
    for raw in raw_dirs:
        ledger_cli("import", str(case_dir / raw), "--batch", batch, "-q")
    out = work / f"{batch}.draft.yaml"
    t0 = time.perf_counter()
    ledger_cli("claims", "draft", str(case_dir / report_rel), "--batch", batch, "-o", str(out))
    fig = Figures(name, draft_seconds=time.perf_counter() - t0)
    draft = load_claims(out)
    fig.numbers_found = len(draft.claims)
    ledger = api.connect(db)
    report = api.audit(ledger, out)
    verdicts = {r.claim_id: r for r in report.results}
    files = _run_files(ledger, batch)
    at: dict[tuple[int, int], object] = {}
    for c in draft.claims:
        place = (c.evidence or {}).get("place") or {}
        if place.get("line") and place.get("span"):
            at[(int(place["line"]), int(place["span"][0]) - 1)] = c
    for t in truth_of(case_dir):
        if t.expect == "unsupported":
            fig.unsupported += 1
        else:
            fig.checkable += 1
        c = at.get((t.line, t.col))
        where = f"line {t.line} {t.text!r} ({t.what})"
        if c is None:
            if t.expect != "unsupported":
                fig.misses.append(f"{where}: not found")
            continue
        if t.expect != "unsupported":
            fig.found += 1
        verdict = verdicts[c.id].verdict  # type: ignore[attr-defined]
        if t.expect == "unsupported":
            if verdict in ASSERTING:
                fig.false += 1
                fig.false_verdicts.append(f"{where}: {verdict} on a number the raw files do not hold")
            continue
        basis = c.basis  # type: ignore[attr-defined]
        if t.expect == "consistent":
            bound = basis == "derived"
        else:
            scope = c.metric.scope if basis == "metric" else None  # type: ignore[attr-defined]
            bound = (
                scope is not None and Path(t.raw or "").name in files.get(scope.run or "", set())
                if t.raw
                else basis == "metric"
            )
        fig.bound += bound
        if verdict == t.expect or (verdict == "raw-mismatch" and t.expect == "mismatch"):
            fig.right += 1
        else:
            fig.misses.append(f"{where}: {basis} -> {verdict}, expected {t.expect}")
            if verdict in ASSERTING:
                fig.false += 1
                fig.false_verdicts.append(f"{where}: {verdict}, expected {t.expect}")
    return fig


def size_check(case_dir: Path, work: Path, numbers: int = 700) -> tuple[int, float, float]:
    """`ledger claims draft` of a report of at least ``numbers`` numbers: the vLLM sweep report repeated
    (each copy under its own heading) against that case's ledger, built by :func:`measure` in ``work``.
    (numbers found, wall seconds, CPU seconds of this process: DuckDB's threads included)."""
    import resource

    from bench_ledger.cli import main
    from click.testing import CliRunner

    report_rel = ground_truth.CASES[case_dir.name][0]
    text = (case_dir / report_rel).read_text(encoding="utf-8")
    copies = []
    while sum(c.count("|") for c in copies) < numbers * 2 or len(copies) < 2:
        copies.append(text.replace("\n# ", f"\n## copy {len(copies) + 1}: ", 1))
    big = work / "big-report.md"
    big.write_text("\n\n".join(copies), encoding="utf-8")
    db = f"duckdb:///{work / (case_dir.name.split('-')[0] + '.duckdb')}"
    out = work / "big.draft.yaml"

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    res = CliRunner().invoke(main, ["claims", "draft", str(big), "--db", db, "-o", str(out)])
    wall, used = time.perf_counter() - t0, cpu() - c0
    if res.exit_code != 0:
        raise SystemExit(res.output)
    found = int(res.output.split(": ", 1)[1].split(" numbers found")[0])
    return found, wall, used


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--keep", type=Path, help="keep the ledgers and drafts in this folder")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--list", action="store_true", help="list every miss")
    ap.add_argument("--size", action="store_true", help="also time the draft of a report of 700+ numbers")
    args = ap.parse_args(argv)
    cases = args.shared / "real-reports"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = [measure(cases / name, work) for name in ground_truth.CASES]
        big = size_check(cases / next(iter(ground_truth.CASES)), work) if args.size else None
    if args.json:
        print(json.dumps([asdict(f) for f in figures], indent=1, ensure_ascii=False))
        return 0
    if big is not None:
        print(f"draft of a {big[0]}-number report: {big[1]:.1f} s wall, {big[2]:.1f} s CPU")
    for f in figures:
        print(f.line())
        for x in f.false_verdicts:
            print("  FALSE", x)
        if args.list:
            for x in f.misses:
                print("  miss", x)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
