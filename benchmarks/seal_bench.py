"""Seal benchmark (issue 11): `ledger close` and `ledger verify` of a 3.4M-row batch against its
`ledger import`, and the cost of the per-artefact digest inside the import, all from one run.

    .venv/bin/python benchmarks/seal_bench.py                # 200 runs x 1000 requests x 16 gaps
    .venv/bin/python benchmarks/seal_bench.py --quick        # 10 x 200 x 16 (seconds; for CI)
    .venv/bin/python benchmarks/seal_bench.py --repeat 2 --write   # two whole runs; rewrite BENCHMARKS.md's seal section
                                                             # (figures, then benchmarks/seal_notes.md)

Every command runs as a subprocess (start to exit, peak RSS from os.wait4). The digest's share of
the import is timed inside that import's own process (``ledger.seal.import_digests.artefact_digest_rows``, the
function the import calls: it hashes the Arrow tables handed to the bulk path and reads back the
small tables); its share is digest / (import - digest). Targets: close <= import with peak RSS < 1 GB, verify <= import,
digest <= 20% of the import without it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gen  # noqa: E402

PG_BASE = os.environ.get("LEDGER_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
MARK_BEGIN, MARK_END = "<!-- seal-bench begin -->", "<!-- seal-bench end -->"


CLI = "import sys; from bench_ledger.cli import main; sys.exit(main(sys.argv[1:]))"
# the import as a user runs it, with the time spent in the artefact digest (the function the
# import calls, ledger.seal.import_digests.artefact_digest_rows) added up and printed at the end
TIMED_IMPORT = """import sys, time
from bench_ledger import seal
from bench_ledger.cli import main
spent, real = [0.0], seal.artefact_digest_rows
def timed(*a, **k):
    t0 = time.perf_counter()
    try:
        return real(*a, **k)
    finally:
        spent[0] += time.perf_counter() - t0
seal.artefact_digest_rows = timed
try:
    sys.exit(main(sys.argv[1:]))
finally:
    print(f"digest seconds: {spent[0]:.6f}", flush=True)
"""


def run(args: list[str], code: str = CLI) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, output) of one `ledger` command; raises on a non-zero exit."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ledger {' '.join(args[:2])} failed:\n{text[-2000:]}")
    return wall, ru.ru_maxrss / 1024, text


def one_backend(backend: str, data: Path, tmp: Path) -> dict:
    if backend == "duckdb":
        tmp.mkdir(parents=True, exist_ok=True)
        url, drop = f"duckdb:///{tmp / 'seal.duckdb'}", None
    else:
        import sqlalchemy as sa

        schema = f"sb_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(PG_BASE, poolclass=sa.pool.NullPool)
        with admin.begin() as c:
            c.exec_driver_sql(f"CREATE SCHEMA {schema}")
        url = f"{PG_BASE}{'&' if '?' in PG_BASE else '?'}options=-csearch_path%3D{schema}"

        def drop() -> None:
            with admin.begin() as c:
                c.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")

    try:
        run(["init", "--db", url])
        imp = run(["import", str(data), "--batch", "b", "--db", url], TIMED_IMPORT)
        dig = float(re.search(r"digest seconds: ([\d.]+)", imp[2]).group(1))
        close = run(["close", "b", "--db", url])
        verify = run(["verify", "b", "--db", url])
        assert ": ok, seal " in verify[2], verify[2]
        rows = int(re.search(r"over ([\d,]+) rows", verify[2]).group(1).replace(",", ""))  # the sealed parts' rows
    finally:
        if drop:
            drop()
    return {
        "backend": backend,
        "rows": rows,
        "import_s": imp[0],
        "import_mb": imp[1],
        "digest_s": dig,
        "close_s": close[0],
        "close_mb": close[1],
        "verify_s": verify[0],
        "verify_mb": verify[1],
    }


def ratios(r: dict) -> dict:
    """The figures of one backend in one run, with the ratios computed from those same figures."""
    return {
        **r,
        "digest_share": r["digest_s"] / max(r["import_s"] - r["digest_s"], 1e-9),
        "close_ratio": r["close_s"] / r["import_s"],
        "verify_ratio": r["verify_s"] / r["import_s"],
    }


HEADER = (
    "| backend | import | digest inside it | digest / (import - digest) (target <= 20%) | close | close / import "
    "(target <= 1) | close peak RSS (target < 1 GB) | verify | verify / import (target <= 1) |"
)


def row(r: dict) -> str:
    return (
        f"| {r['backend']} | {r['import_s']:.2f} s | {r['digest_s']:.2f} s | {r['digest_share']:.1%} | "
        f"{r['close_s']:.2f} s | {r['close_ratio']:.2f}x | {r['close_mb']:,.0f} MB | {r['verify_s']:.2f} s | "
        f"{r['verify_ratio']:.2f}x |"
    )


def table(runs: list[dict], sizes: dict) -> str:
    """Markdown: one table per run (start time, then a row per backend), each ratio against that run's import."""
    lines = [
        f"Batch: {sizes['runs']} vLLM runs x {sizes['per_run']} requests x {sizes['gaps']} chunk gaps each, one file "
        f"({runs[0]['results'][0]['rows']:,} rows under the batch's seal). Each figure is one subprocess, start to exit, "
        "measured one after the other; every ratio is against the import of the same run and backend.",
    ]
    for n, one in enumerate(runs, 1):
        lines += [
            "",
            f"**Run {n} of {len(runs)} (started {one['started']})**",
            "",
            HEADER,
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [row(r) for r in one["results"]]
    return "\n".join(lines)


def write_section(text: str) -> None:
    path = ROOT / "BENCHMARKS.md"
    body = path.read_text()
    notes = (ROOT / "benchmarks" / "seal_notes.md").read_text().strip("\n")  # hand-written, kept with the figures
    section = f"{MARK_BEGIN}\n## Seals (issue 11): close and verify against the import\n\n{text}\n\n{notes}\n{MARK_END}"
    if MARK_BEGIN in body:
        body = re.sub(re.escape(MARK_BEGIN) + ".*?" + re.escape(MARK_END), lambda _: section, body, flags=re.S)
    else:
        body = body.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="whole runs, one after the other (each with its own import)")
    ap.add_argument("--write", action="store_true", help="rewrite the seal section of BENCHMARKS.md")
    ap.add_argument("--backend", action="append", choices=["duckdb", "postgresql"])
    ns = ap.parse_args(argv)
    sizes = dict(runs=10, per_run=200, gaps=16) if ns.quick else dict(runs=200, per_run=1000, gaps=16)
    runs = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        data = tmp / "vllm_gaps16.jsonl"
        gen.vllm_and_ledger(data, sizes["runs"], sizes["per_run"], sizes["gaps"], None)
        for _ in range(max(1, ns.repeat)):
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            load = os.getloadavg()[0]
            results = [
                ratios(one_backend(b, data, tmp / f"r{len(runs)}")) for b in (ns.backend or ["duckdb", "postgresql"])
            ]
            runs.append({"started": started, "load_1min": round(load, 2), "results": results})
    text = table(runs, sizes)
    print(text)
    print(json.dumps({"sizes": sizes, "runs": runs}))
    if ns.write:
        write_section(
            f"Generated by `python benchmarks/seal_bench.py{' --quick' if ns.quick else ''} --repeat "
            f"{len(runs)}` ({os.cpu_count()} CPUs; 1-minute load average at the start "
            f"of each run: {', '.join(str(r['load_1min']) for r in runs)}).\n\n{text}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
