"""The whole fuzz corpus of issue 39 on both backends: every real sample of ../shared/samples mutated
(tests/edges/fuzz.py: truncation, byte flips, numeric extremes, other types, deep nesting, encodings),
each input imported as `ledger import` does into a batch of its own. Prints the counts: inputs, exit 0,
exit 1 (refused with a message), other exits, tracebacks, failures that wrote rows, inputs whose stored
values are outside their domains (garbage), then each problem with the inputs that show it.

    .venv/bin/python benchmarks/fuzz.py                      # 52 inputs per sample file, both backends
    .venv/bin/python benchmarks/fuzz.py --per-seed 4 --backend duckdb

Rerunnable: the corpus is seeded (--seed), the ledgers are made afresh (a temporary DuckDB file, a
PostgreSQL schema of its own, dropped at the end). Exit 1 when any traceback, half-write or garbage is found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.edges import fuzz  # noqa: E402

PG_URL = os.environ.get("LEDGER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def run_backend(backend: str, inputs: list[tuple[str, str, bytes]], folder: Path) -> dict:
    import sqlalchemy as sa
    from bench_ledger.store import Ledger

    schema = None
    if backend == "duckdb":
        url = f"duckdb:///{folder / f'fuzz-{uuid.uuid4().hex[:8]}.duckdb'}"
    else:
        schema = f"fuzz_{uuid.uuid4().hex[:12]}"
        admin = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    codes: Counter[int] = Counter()
    problems: dict[str, list[str]] = defaultdict(list)
    batches: dict[str, str] = {}
    started = time.perf_counter()
    try:
        with Ledger(url, create=True) as ledger:
            ledger.init()
            for k, (cid, rel, data) in enumerate(inputs):
                path = folder / backend / f"{k:05d}" / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                batches[f"f{k}"] = cid
                outcome = fuzz.try_input(ledger, path, f"f{k}")
                codes[outcome.code] += 1
                if outcome.problem:
                    problems[outcome.problem.replace(str(path), "FILE")[:240]].append(cid)
            found = fuzz.garbage(ledger)
    finally:
        if schema is not None:
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    garbage = {check: sorted(batches[b] for b in names) for check, names in found.items()}
    return {
        "backend": backend,
        "inputs": len(inputs),
        "exit 0": codes[0],
        "exit 1": codes[1],
        "other exits": {c: n for c, n in codes.items() if c not in (0, 1, 70)},
        "tracebacks": codes[70],
        "wrote on failure": sum(len(v) for k, v in problems.items() if k.startswith("failed")),
        "garbage inputs": len({i for ids in garbage.values() for i in ids}),
        "seconds": round(time.perf_counter() - started, 1),
        "problems": dict(problems),
        "garbage": garbage,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-seed", type=int, default=52, help="Mutated inputs per sample file [52].")
    ap.add_argument("--seed", type=int, default=39, help="The corpus seed [39].")
    ap.add_argument("--backend", choices=["duckdb", "postgresql", "both"], default="both")
    ap.add_argument(
        "--samples", type=Path, default=Path(os.environ.get("LEDGER_SHARED") or ROOT.parent / "shared") / "samples"
    )
    ap.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = ap.parse_args(argv)
    os.environ.pop("LEDGER_DEBUG", None)
    inputs = fuzz.real_corpus(args.samples, args.per_seed, args.seed)
    backends = ["duckdb", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="ledger-fuzz-") as tmp:
        results = [run_backend(b, inputs, Path(tmp)) for b in backends]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        files = len(fuzz.real_seeds(args.samples))
        print(
            f"corpus: {len(inputs)} inputs ({args.per_seed} per sample file, {files} files of {args.samples}, seed {args.seed})"
        )
        for r in results:
            print(
                f"{r['backend']}: {r['inputs']} inputs, exit 0 {r['exit 0']}, exit 1 {r['exit 1']}, other exits "
                f"{r['other exits'] or 'none'}, tracebacks {r['tracebacks']}, wrote on failure {r['wrote on failure']}, "
                f"garbage {r['garbage inputs']} ({r['seconds']} s)"
            )
            for problem, ids in sorted(r["problems"].items()):
                print(f"  {len(ids)} x {problem}\n      e.g. {'; '.join(ids[:3])}")
            for check, ids in sorted(r["garbage"].items()):
                print(f"  garbage {check}: {len(ids)} input(s), e.g. {'; '.join(ids[:3])}")
    bad = any(r["tracebacks"] or r["problems"] or r["garbage"] for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
