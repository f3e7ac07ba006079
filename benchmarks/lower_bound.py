"""How close to the floor can *any* import of the 1M-request vLLM file get on DuckDB? (issue 17)

    .venv/bin/python benchmarks/lower_bound.py [--inputs DIR] [--repeat 3]
    .venv/bin/python benchmarks/lower_bound.py --quick     # 10 runs x 200 requests (seconds; for the tests)

The floor of benchmarks/run.py reads the file with DuckDB's ``read_json`` into one flat table of 7
columns per request. An import must keep what the file captured (R9): the ledger's ``request`` rows
(19 columns) and each request's chunk gaps (``request_gaps``). This script times the least work that
writes those rows: one SQL statement per table, straight from ``read_json`` into the tables of a
freshly initialised ledger (the real schema, its indexes included), committed; no validation, no
exact nanoseconds (a double multiply), no runs, captures, published values or digests, no Python
start-up. It and the floor run alternately in this process, ``--repeat`` times each; the ratio of
the two, paired by repeat, bounds from below what a whole ``ledger import`` can reach.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gen  # noqa: E402
import run  # noqa: E402

SOURCE = """read_json('{path}', format='newline_delimited', maximum_object_size=1073741824,
    columns={{label: 'VARCHAR', input_lens: 'BIGINT[]', output_lens: 'BIGINT[]', ttfts: 'DOUBLE[]', itls: 'DOUBLE[][]',
             latencies: 'DOUBLE[]', start_times: 'DOUBLE[]', errors: 'VARCHAR[]'}})"""
# every request of every line: (line, k) and its values, read once
STORE = """
BEGIN;
CREATE TEMP TABLE req AS
SELECT line, unnest(range(len(input_lens))) AS k, unnest(input_lens) AS input_tokens, unnest(output_lens) AS output_tokens,
       unnest(ttfts) AS ttft_s, unnest(latencies) AS latency_s, unnest(start_times) AS send_s, unnest(errors) AS error,
       unnest(itls) AS itl
FROM (SELECT row_number() OVER () AS line, * FROM {source});
INSERT INTO request (artefact_id, idx, run_id, line, status, error, retries, input_tokens, output_tokens, clock, send_ns,
                     first_token_ns, end_ns, ttft_s, latency_s, queue_s, itl_mean_s, chunk_count, cached_tokens)
SELECT 1, CAST(row_number() OVER () - 1 AS INTEGER), CAST(line AS INTEGER), CAST(line AS INTEGER),
       CASE WHEN error = '' THEN 'ok' ELSE 'failed' END, NULLIF(error, ''), NULL, input_tokens, output_tokens,
       'monotonic_s', CAST(send_s * 1e9 AS BIGINT), CAST((send_s + ttft_s) * 1e9 AS BIGINT),
       CAST((send_s + latency_s) * 1e9 AS BIGINT), ttft_s, latency_s, NULL, list_avg(itl), len(itl) + 1, NULL
FROM req;
INSERT INTO request_gaps (artefact_id, request_idx, gaps)
SELECT 1, CAST(i AS INTEGER), itl FROM (SELECT row_number() OVER () - 1 AS i, itl FROM req) WHERE len(itl) > 0;
COMMIT;
"""


def timed_store(path: Path, ledger_file: Path) -> tuple[float, tuple]:
    import duckdb

    ledger_file.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-c", "import sys; from bench_ledger.cli import main; sys.exit(main(sys.argv[1:]))",
                    "init", "--db", f"duckdb:///{ledger_file}"], check=True, capture_output=True)  # fmt: skip
    t0 = time.perf_counter()
    con = duckdb.connect(str(ledger_file))
    con.execute(STORE.format(source=SOURCE.format(path=path)))
    con.close()
    secs = time.perf_counter() - t0
    con = duckdb.connect(str(ledger_file))
    rows = con.execute("SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM request_gaps)").fetchone()
    con.close()
    return secs, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=Path, help="a folder holding vllm_detailed.jsonl (benchmarks/run.py --inputs)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a generated file of 10 runs x 200 requests")
    ns = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        path = ns.inputs / "vllm_detailed.jsonl" if ns.inputs and not ns.quick else tmp / "vllm_detailed.jsonl"
        if not path.exists():
            gen.vllm_and_ledger(path, *((10, 200) if ns.quick else (1000, 1000)), 4, None)
        floors, stores = [], []
        for _ in range(ns.repeat):
            load = os.getloadavg()[0]
            floors.append(run.duck_floor(run.VLLM_FLAT.format(path=path), tmp, "vllm", None)[0])
            secs, (requests, arrays) = timed_store(path, tmp / "ledger.duckdb")
            stores.append(secs)
            print(f"load {load:.2f}: floor {floors[-1]:.2f} s, least import {secs:.2f} s ({secs / floors[-1]:.2f}x; "
                  f"{requests:,} request rows, {arrays:,} gap arrays)", flush=True)
        ratios = [s / f for s, f in zip(stores, floors, strict=True)]
        print(f"least import / floor: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x "
              f"over {len(ratios)} pairs; load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
