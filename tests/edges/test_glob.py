"""Issue 13: a path is never read as a pattern (DuckDB's read_json expands globs in file names)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench_ledger.importers import _vllm_bench_duckdb as vbd  # private: the DuckDB path's own entry and checks
from bench_ledger.importers import vllm_bench as vb
from bench_ledger.ingest import request_tables


def _result(n: int, scale: float, rng: random.Random) -> dict:
    return {
        "endpoint_type": "openai-chat",
        "backend": "vllm",
        "label": "r",
        "num_prompts": n,
        "duration": 10.0,
        "completed": n,
        "input_lens": [rng.randint(1, 99) for _ in range(n)],
        "output_lens": [rng.randint(1, 99) for _ in range(n)],
        "ttfts": [scale * rng.random() for _ in range(n)],
        "latencies": [1 + scale * rng.random() for _ in range(n)],
        "errors": [""] * n,
    }


def test_fast_path_reads_the_named_file_not_a_glob_match(tmp_path: Path) -> None:
    rng = random.Random(5)
    named, other = tmp_path / "x[1].jsonl", tmp_path / "x1.jsonl"
    n = 12_000  # > 1 MiB: the DuckDB-parsed path
    named.write_text(json.dumps(_result(n, 1.0, rng)) + "\n" + json.dumps(_result(n, 1.0, rng)) + "\n")
    other.write_text(json.dumps(_result(n, 50.0, rng)) + "\n" + json.dumps(_result(n, 50.0, rng)) + "\n")
    assert named.stat().st_size >= vb.FAST_MIN_BYTES
    fast = vbd.fast_runs(named)
    assert fast is not None
    fast_rows = [request_tables(1, 1, r.capture.clock, r.requests)[0] for r in fast]
    py_rows = [request_tables(1, 1, r.capture.clock, r.requests)[0] for r in vb._runs(named, fast=False)]
    want = json.loads(named.read_text().splitlines()[0])["ttfts"]
    assert fast_rows[0].column("ttft_s").to_pylist() == want
    assert [t.column("ttft_s").to_pylist() for t in fast_rows] == [t.column("ttft_s").to_pylist() for t in py_rows]


def test_plain_names_are_read_as_given_and_others_through_links(tmp_path: Path) -> None:
    """base.literal_paths: no link for an absolute name of plain characters (1,000 links cost up to a
    second), a link for a glob character, an "=" (a hive partition folder), and a name given twice
    (each name stays its own in DuckDB's filename column)."""
    from bench_ledger.importers.base import literal_paths

    plain, glob, hive = tmp_path / "run-1.jsonl", tmp_path / "x[1].jsonl", tmp_path / "gpu=H20.jsonl"
    for p in (plain, glob, hive):
        p.write_text("{}\n")
    with literal_paths([plain, glob, hive, plain]) as got:
        assert got[0] == plain.absolute()
        assert all(g.parent != tmp_path and g.resolve() == p.resolve() for g, p in zip(got[1:], [glob, hive, plain]))
        assert len(set(got)) == 4
