"""How close to the floor can *any* import of the 1M-request vLLM file get on DuckDB? (issue 17)

    .venv/bin/python benchmarks/lower_bound.py [--inputs DIR] [--repeat 3]
    .venv/bin/python benchmarks/lower_bound.py --quick     # 10 runs x 200 requests (seconds; for the tests)
    .venv/bin/python benchmarks/lower_bound.py --ledger [--inputs DIR] [--quick]   # the 1,000 ledger-format files
    .venv/bin/python benchmarks/lower_bound.py --postgresql [--inputs DIR] [--quick]   # the server's share on PostgreSQL

The floor of benchmarks/run.py reads the file with DuckDB's ``read_json`` into one flat table of 7
columns per request. An import must keep what the file captured (R9): the ledger's ``request`` rows
(19 columns) and each request's chunk gaps (``request_gaps``). This script times the least work that
writes those rows: one SQL statement per table, straight from ``read_json`` into the tables of a
freshly initialised ledger (the real schema, its indexes included), committed; no validation, no
exact nanoseconds (a double multiply), no runs, captures, published values or digests, no Python
start-up. It and the floor run alternately in this process, ``--repeat`` times each; the ratio of
the two, paired by repeat, bounds from below what a whole ``ledger import`` can reach.

``--postgresql`` bounds the PostgreSQL import the same way (:func:`pg_main`): the server's share alone,
a binary COPY of the ``request`` and ``request_gaps`` rows a ``ledger import`` of the file made, against
run.py's COPY floor.

``--ledger`` does the same for the ledger's own JSON Lines format (run.py's 1,000 files of one run
each, ``LEDGER_FLAT`` its floor): one ``read_json`` of all files (``filename=true``) into a temporary
table, then one statement per table into ``request`` and ``request_gaps`` (each row's file and place
in it, the ns by a double multiply). It then times, in this process, what any import must do
besides that SQL and what no design can leave out: the files' sha256 (an artefact is its sha256) and
the seal's scheme-3 digest of the rows written (``ledger.encoding.chunks.chunk_digests`` over the request rows
and the chunk_gap rows of the arrays, read back as Arrow); and, in a fresh interpreter, importing the
modules a ``ledger import`` needs. The sum of those CPU seconds is what two cores must share.
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
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from bench_ledger.cli import main; sys.exit(main(sys.argv[1:]))",
            "init",
            "--db",
            f"duckdb:///{ledger_file}",
        ],
        check=True,
        capture_output=True,
    )
    t0 = time.perf_counter()
    con = duckdb.connect(str(ledger_file))
    con.execute(STORE.format(source=SOURCE.format(path=path)))
    con.close()
    secs = time.perf_counter() - t0
    con = duckdb.connect(str(ledger_file))
    rows = con.execute("SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM request_gaps)").fetchone()
    con.close()
    return secs, rows


LEDGER_TYPES = (
    "status: 'VARCHAR', error: 'VARCHAR', retries: 'BIGINT', input_tokens: 'BIGINT', output_tokens: 'BIGINT', "
    "cached_tokens: 'BIGINT', send_time: 'DOUBLE', first_token_time: 'DOUBLE', end_time: 'DOUBLE', "
    "ttft_s: 'DOUBLE', latency_s: 'DOUBLE', queue_s: 'DOUBLE', itl_mean_s: 'DOUBLE', chunk_gaps: 'DOUBLE[]'"
)
# the least SQL around it: the two tables from the one Arrow table of every line of every file (a
# file's lines are consecutive, its header first; its artefact id is its place in the list + 1, its
# requests the lines after the header, numbered in numpy). Measured against a temporary table numbered
# by row_number() OVER () and joined to a table of first lines: 5.5-6.3 s CPU, against 3.7-4.2 s.
LEDGER_READ = "SELECT file_index, * FROM read_json({files}, format='newline_delimited', columns={{{types}}})"
LEDGER_STORE = (
    """INSERT INTO request (artefact_id, idx, run_id, line, status, error, retries, input_tokens, output_tokens,
                    clock, send_ns, first_token_ns, end_ns, ttft_s, latency_s, queue_s, itl_mean_s, chunk_count, cached_tokens)
SELECT art, idx, art, idx + 2, coalesce(status, 'unknown'), error, retries, input_tokens, output_tokens, 'monotonic_s',
       CAST(send_time * 1e9 AS BIGINT), CAST(first_token_time * 1e9 AS BIGINT), CAST(end_time * 1e9 AS BIGINT), ttft_s,
       latency_s, queue_s, itl_mean_s, len(chunk_gaps) + 1, cached_tokens FROM lines""",
    "INSERT INTO request_gaps (artefact_id, request_idx, gaps) SELECT art, idx, chunk_gaps FROM lines "
    "WHERE len(chunk_gaps) > 0",
)
# the modules a `ledger import` of this format imports before it reads a file
IMPORTS = (
    "import time; t = time.perf_counter(); import bench_ledger.cli.setup, bench_ledger.ingest, bench_ledger.store, "
    "bench_ledger.importers.ledger_requests, duckdb, duckdb_sqlalchemy; print(time.perf_counter() - t)"
)


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_ledger_store(files: list[Path], ledger_file: Path) -> tuple[float, float, tuple]:
    """(wall, CPU of this process, (request rows, gap arrays)) of LEDGER_STORE into a fresh ledger."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from bench_ledger.importers.base import sql_text

    ledger_file.unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from bench_ledger.cli import main; sys.exit(main(sys.argv[1:]))",
            "init",
            "--db",
            f"duckdb:///{ledger_file}",
        ],
        check=True,
        capture_output=True,
    )
    listed = "[" + ", ".join(sql_text(str(p)) for p in files) + "]"
    t0, c0 = time.perf_counter(), _cpu()
    con = duckdb.connect(str(ledger_file))
    lines = con.execute(LEDGER_READ.format(files=listed, types=LEDGER_TYPES)).to_arrow_table()
    fi = lines.column("file_index").to_numpy()
    starts = np.flatnonzero(np.r_[True, fi[1:] != fi[:-1]])
    idx = np.arange(len(fi)) - np.repeat(starts, np.diff(np.r_[starts, len(fi)])) - 1  # the header: -1
    lines = lines.append_column("idx", pa.array(idx.astype(np.int32))).append_column(
        "art", pa.array((fi + 1).astype(np.int32))
    )
    lines = lines.filter(pc.greater_equal(lines.column("idx"), 0))  # scanned by name (DuckDB replacement scan)
    con.execute("BEGIN")
    for sql in LEDGER_STORE:
        con.execute(sql)
    con.execute("COMMIT")
    con.close()
    secs, cpu = time.perf_counter() - t0, _cpu() - c0
    con = duckdb.connect(str(ledger_file))
    rows = con.execute("SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM request_gaps)").fetchone()
    con.close()
    return secs, cpu, rows


def timed_unavoidable(files: list[Path], ledger_file: Path) -> tuple[float, float, float]:
    """CPU seconds of (the files' sha256, the scheme-3 digest of the request and chunk_gap rows the
    least import wrote, read back as Arrow: the read not counted), and the wall seconds of importing
    the modules of an import in a fresh interpreter."""
    import hashlib

    import duckdb
    from bench_ledger import gaps as gp
    from bench_ledger.encoding import chunks as dg
    from bench_ledger.seal.scheme3 import table_columns

    c0 = _cpu()
    for p in files:
        hashlib.sha256(p.read_bytes()).hexdigest()
    sha = _cpu() - c0
    con = duckdb.connect(str(ledger_file), read_only=True)
    tables = {
        "request": con.execute("SELECT * FROM request").to_arrow_table(),
        "chunk_gap": gp.rows_of(
            con.execute("SELECT artefact_id, request_idx, gaps FROM request_gaps").to_arrow_table()
        ),
    }
    con.close()
    c0 = _cpu()
    for name, data in tables.items():
        cols = table_columns(name)
        tags = [dg.tag_of(c) for c in cols]
        canon = dg.canonical(data, [c.name for c in cols], tags)
        dg.chunk_digests(name, dg.columns(canon, tags), canon.num_rows)
    digest = _cpu() - c0
    out = subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True, text=True).stdout
    return sha, digest, float(out.strip().splitlines()[-1])


def ledger_main(ns: argparse.Namespace, tmp: Path) -> int:
    ldir = ns.inputs / "ledger_requests" if ns.inputs and not ns.quick else tmp / "ledger_requests"
    if not ldir.exists():
        ldir.mkdir()
        gen.vllm_and_ledger(tmp / "vllm.jsonl", *((10, 200) if ns.quick else (1000, 1000)), 4, ldir)
    files = sorted(ldir.iterdir())
    floors, stores = [], []
    for _ in range(ns.repeat):
        load = os.getloadavg()[0]
        floors.append(run.duck_floor(run.LEDGER_FLAT.format(path=ldir / "*.jsonl"), tmp, "ledger", None)[0])
        secs, cpu, (requests, arrays) = timed_ledger_store(files, tmp / "ledger.duckdb")
        stores.append(secs)
        sha, digest, imports = timed_unavoidable(files, tmp / "ledger.duckdb")
        print(
            f"load {load:.2f}: floor {floors[-1]:.2f} s, least import {secs:.2f} s ({secs / floors[-1]:.2f}x; CPU {cpu:.2f} s; "
            f"{requests:,} request rows, {arrays:,} gap arrays); besides it: sha256 {sha:.2f} s CPU, scheme-3 digest "
            f"{digest:.2f} s CPU, module imports {imports:.2f} s",
            flush=True,
        )
    ratios = [s / f for s, f in zip(stores, floors, strict=True)]
    print(
        f"least import / floor: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x "
        f"over {len(ratios)} pairs; load {os.getloadavg()[0]:.2f} at the end"
    )
    return 0


# the tables an artefact's requests hang on, in the order their keys need (copied before the timed COPYs)
PG_PARENTS = ("source_report", "deployment", "batch", "launch", "artefact", "run")


def pg_main(path: Path, ns: argparse.Namespace, tmp: Path) -> int:
    """--postgresql: the server's share of the least store of the vLLM file. The ledger imports the file
    once (not timed) and its ``request`` and ``request_gaps`` rows are copied out in COPY's binary form;
    then, alternating with run.py's floor (COPY of a CSV of the flat rows), a freshly initialised ledger
    gets the artefact's parent rows and, timed, the binary COPY of both tables and the commit: no parsing,
    no Python, the schema as it is (the ``run_id`` btree, the no-backfill trigger)."""
    from bench_ledger.cli import main as ledger

    pg = run.Pg()
    try:
        source = pg.fresh("lbsrc")
        run.init_schema(source)
        ledger(["import", "--db", source, "--quiet", "--batch", "lb", str(path)], standalone_mode=False)
        src = pg.schemas[-1]
        rows: dict[str, bytes] = {}
        with pg.raw() as c, c.cursor() as cur:
            for table in ("request", "request_gaps"):
                with cur.copy(f"COPY {src}.{table} TO STDOUT (FORMAT binary)") as cp:
                    rows[table] = b"".join(bytes(b) for b in cp)
            counts = [cur.execute(f"SELECT count(*) FROM {src}.{t}").fetchone()[0] for t in rows]
        csv = tmp / "floor_vllm.csv"
        run.duck_floor(run.VLLM_FLAT.format(path=path), tmp, "vllm", csv)  # its CSV, for the floor's COPY
        floors, stores = [], []
        for _ in range(ns.repeat):
            load = os.getloadavg()[0]
            floors.append(run.pg_floor(pg, csv))
            target = pg.fresh("lb")
            run.init_schema(target)
            schema = pg.schemas[-1]
            with pg.psycopg.connect(pg.conninfo, options=f"-csearch_path={schema}") as c, c.cursor() as cur:
                for table in PG_PARENTS:
                    cur.execute(f"INSERT INTO {table} SELECT * FROM {src}.{table}")
                t0 = time.perf_counter()
                for table, data in rows.items():
                    with cur.copy(f"COPY {table} FROM STDIN (FORMAT binary)") as cp:
                        cp.write(data)
                c.commit()
                stores.append(time.perf_counter() - t0)
            print(
                f"load {load:.2f}: floor {floors[-1]:.2f} s, least store {stores[-1]:.2f} s ({stores[-1] / floors[-1]:.2f}x; "
                f"{counts[0]:,} request rows, {counts[1]:,} gap arrays)",
                flush=True,
            )
    finally:
        pg.cleanup()
    ratios = [s / f for s, f in zip(stores, floors, strict=True)]
    print(
        f"least store / floor (PostgreSQL): min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x "
        f"over {len(ratios)} pairs; load {os.getloadavg()[0]:.2f} at the end"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=Path, help="a folder holding vllm_detailed.jsonl (benchmarks/run.py --inputs)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a generated file of 10 runs x 200 requests")
    ap.add_argument("--ledger", action="store_true", help="the ledger's own JSON Lines (one file per run) instead")
    ap.add_argument(
        "--postgresql",
        action="store_true",
        help="the server's share on PostgreSQL: binary COPY of the rows an import made, against COPY's floor",
    )
    ns = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if ns.ledger:
            return ledger_main(ns, tmp)
        path = ns.inputs / "vllm_detailed.jsonl" if ns.inputs and not ns.quick else tmp / "vllm_detailed.jsonl"
        if not path.exists():
            gen.vllm_and_ledger(path, *((10, 200) if ns.quick else (1000, 1000)), 4, None)
        if ns.postgresql:
            return pg_main(path, ns, tmp)
        floors, stores = [], []
        for _ in range(ns.repeat):
            load = os.getloadavg()[0]
            floors.append(run.duck_floor(run.VLLM_FLAT.format(path=path), tmp, "vllm", None)[0])
            secs, (requests, arrays) = timed_store(path, tmp / "ledger.duckdb")
            stores.append(secs)
            print(
                f"load {load:.2f}: floor {floors[-1]:.2f} s, least import {secs:.2f} s ({secs / floors[-1]:.2f}x; "
                f"{requests:,} request rows, {arrays:,} gap arrays)",
                flush=True,
            )
        ratios = [s / f for s, f in zip(stores, floors, strict=True)]
        print(
            f"least import / floor: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x "
            f"over {len(ratios)} pairs; load {os.getloadavg()[0]:.2f} at the end"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
