"""vLLM's peak-second replays (max_output_tokens_per_s, max_concurrent_requests) computed over the
columns (queries/check/serving.py ``_peak_second``) equal the row-by-row rational replay they replaced:
on every real vLLM sample that reports them, and on generated records whose token times sit on, within
and just outside 1 us of second boundaries, with float sums that round (many itls, starts far from
zero, 0.1 + 0.2 gaps)."""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.cli import main
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import RECORDS, Records, StatusCounts
from bench_ledger.queries.check.core import load_records as _records
from bench_ledger.queries.check.serving import (
    BOUNDARY,
    _peak_second,
    peak_inputs,
)  # private: the peak-second rule on hand-made series
from bench_ledger.queries.check.stat_definitions import NotDerivable
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.store import Ledger
from click.testing import CliRunner

KEYS = ("max_output_tokens_per_s", "max_concurrent_requests")


def _row_walk(key: str, rec: Records) -> tuple[Fraction, str]:
    """The replay as main had it before the columns (one Fraction per token, over the row dicts),
    after the same preconditions."""
    peak_inputs(key, rec)
    if not rec.ok:
        return Fraction(0), "no successful request"
    starts = [Fraction(r["send_ns"], 10**9) for r in rec.ok]
    lo = min(starts)
    buckets: dict[int, int] = {}

    def second_of(t: Fraction, r: dict) -> int:
        second, into = divmod(t - lo, 1)
        if into < BOUNDARY or 1 - into < BOUNDARY:
            raise NotDerivable(
                f"request {r['idx']} has a time within 1 us of a second boundary ({float(t - lo):.9f} "
                "s): the start times, kept to the ns, cannot place it"
            )
        return int(second)

    if key == "max_concurrent_requests":
        for start, r in zip(starts, rec.ok, strict=True):
            for second in range(
                second_of(start, r) if start != lo else 0, second_of(start + Fraction(r["latency_s"]), r) + 1
            ):
                buckets[second] = buckets.get(second, 0) + 1
        return Fraction(max(buckets.values())), (
            f"the fullest whole second of the successful requests' spans "
            f"(start to start + latency), of {len(buckets)} seconds"
        )
    for start, r, gaps in zip(starts, rec.ok, rec.record_gaps(), strict=True):
        t = start + Fraction(r["ttft_s"])
        for g in (0.0, *gaps):
            t += Fraction(g)
            second = second_of(t, r)
            buckets[second] = buckets.get(second, 0) + 1
    return Fraction(max(buckets.values())), (
        f"the fullest whole second of the successful requests' token times "
        f"(start + ttft + itls), of {len(buckets)} seconds"
    )


def outcome(fn, key: str, rec: Records) -> tuple:
    try:
        return fn(key, rec)
    except NotDerivable as e:
        return ("not re-derivable", str(e))


class _Rows:
    """A run's records held in memory, read as _RunRows reads a ledger's (columns, gaps, row dicts)."""

    def __init__(self, rows: list[dict], gaps: list[list[float]]) -> None:
        self.rows_ = rows
        self.flat = [g for r, gs in zip(rows, gaps, strict=True) if r["status"] == "ok" for g in gs]

    def ok_column(self, name: str) -> pa.ChunkedArray:
        return pa.chunked_array(
            [
                pa.array(
                    [r[name] for r in self.rows_ if r["status"] == "ok"],
                    type=pa.float64() if name.endswith("_s") else pa.int64(),
                )
            ]
        )

    def status_counts(self) -> StatusCounts:
        return StatusCounts({s: sum(r["status"] == s for r in self.rows_) for s in {r["status"] for r in self.rows_}})

    def gaps(self) -> ExactColumn:
        return ExactColumn(np.array(self.flat, dtype=np.float64))

    def rows(self) -> tuple[list[dict], dict]:
        return self.rows_, {}


def records(
    rows: list[dict], gaps: list[list[float]], fields=("status", "send_time", "ttft_s", "latency_s", "chunk_gaps")
) -> Records:
    return Records(_Rows(rows, gaps), set(fields), None)  # type: ignore[arg-type]


def generated(rng: random.Random) -> tuple[list[dict], list[list[float]]]:
    """Records whose times crowd second boundaries: starts on whole seconds and just off them (in ns,
    far from zero as perf_counter's are), ttfts and itls that sum onto, within and just outside 1 us
    of a boundary, or that round in float (0.1, 0.2, 1/3 repeated)."""
    base = rng.choice((0, 10**9, 987_654 * 10**9, 3 * 10**15 + 7))
    rows, gaps = [], []
    for i in range(rng.randint(1, 12)):
        off = rng.choice((0, 1, 999, 1000, 1001, 10**9 - 1000, 10**9 - 1001, 10**9 - 999, 500_000_000))
        send = base + rng.randint(0, 5) * 10**9 + off
        n = rng.choice((0, 0, 1, 3, 10, 200, 3000))
        step = rng.choice((0.1, 0.2, 1 / 3, 0.25, 0.5, 0.000999, 0.001, 0.0010001, rng.random() * 0.05))
        gs = [
            step if rng.random() < 0.8 else rng.choice((0.0, 1e-6, 9.99e-7, 1.001e-6, rng.random())) for _ in range(n)
        ]
        ttft = rng.choice((0.0, 1.0, 0.5, 1e-6, 9.99e-7, 1 - 1e-6, 0.999999, 0.9999989, 0.1 + 0.2, rng.random()))
        status = "failed" if rng.random() < 0.1 else "ok"
        lat = ttft + sum(gs) + rng.choice((0.0, 1e-6, 0.5, rng.random()))
        rows.append(
            {
                "artefact_id": 1,
                "idx": i,
                "status": status,
                "send_ns": send,
                "ttft_s": ttft,
                "latency_s": lat,
                "chunk_count": (n + 1) if (n or rng.random() < 0.5) else None,
            }
        )
        gaps.append(gs)
    return rows, gaps


@pytest.mark.parametrize("seed", range(300))
def test_columns_equal_the_row_walk_on_generated_boundaries(seed: int) -> None:
    rows, gaps = generated(random.Random(seed))
    for key in KEYS:
        rec_a, rec_b = records(rows, gaps), records(rows, gaps)
        assert outcome(_peak_second, key, rec_a) == outcome(_row_walk, key, rec_b), (seed, key)


def test_generated_cases_reach_both_answers() -> None:
    """The generated cases are adversarial: many are refused at a boundary, many placed. (Counted from
    the columns' answers: the tests above pin them equal to the row walk's, seed by seed.)"""
    seen = {k: {"refused": 0, "placed": 0} for k in KEYS}
    for seed in range(300):
        rows, gaps = generated(random.Random(seed))
        for key in KEYS:
            got = outcome(_peak_second, key, records(rows, gaps))
            seen[key]["refused" if got[0] == "not re-derivable" else "placed"] += 1
    assert all(v["refused"] >= 30 and v["placed"] >= 30 for v in seen.values()), seen


def test_float_rounding_near_a_boundary_placed_exactly() -> None:
    """0.1 added ten times is 0.9999999999999999 in float but 1 exactly as rationals plus the 1 ns the
    start sits past the second... the exact sum decides: here 1 us + 1 ns past the boundary is placed."""
    rows = [
        {
            "artefact_id": 1,
            "idx": 0,
            "status": "ok",
            "send_ns": 10**15,
            "ttft_s": 1.001e-6,
            "latency_s": 2.0,
            "chunk_count": 11,
        }
    ]
    gaps = [[0.1] * 10]
    for key in KEYS:
        assert outcome(_peak_second, key, records(rows, gaps)) == outcome(_row_walk, key, records(rows, gaps))
    assert _peak_second("max_output_tokens_per_s", records(rows, gaps))[0] == 10


VLLM_SAMPLES = (
    "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json",
    "vllm-bench-sweep/vllm_sweep_v0.25.1",
    "vllm",
)


def test_columns_equal_the_row_walk_on_the_real_vllm_samples(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    for i, p in enumerate(VLLM_SAMPLES):
        res = CliRunner().invoke(main, ["import", "--db", ledger_url, "-q", "--batch", f"s{i}", str(samples / p)])
        assert res.exit_code == 0, res.output
    # the serve sample with latencies (as older vLLM writes them), so the concurrency replays too
    obj = json.loads((samples / VLLM_SAMPLES[0]).read_text())
    obj["latencies"] = [t + sum(g) for t, g in zip(obj["ttfts"], obj["itls"], strict=True)]
    obj["date"] = "20260428-091917"
    (tmp_path / "with_latencies.json").write_text(json.dumps(obj))
    res = CliRunner().invoke(
        main, ["import", "--db", ledger_url, "-q", "--batch", "w", str(tmp_path / "with_latencies.json")]
    )
    assert res.exit_code == 0, res.output
    placed = 0
    with ledger.engine.connect() as conn:
        for (run_id,) in conn.execute(sa.select(m.Run.__table__.c.id)).all():
            for key in KEYS:
                rec_a, rec_b = _records(conn, run_id), _records(conn, run_id)
                if isinstance(rec_a, str):
                    continue
                got = outcome(_peak_second, key, rec_a)
                assert got == outcome(_row_walk, key, rec_b), (run_id, key)
                placed += got[0] != "not re-derivable"
    assert placed == 3  # the serve sample's peak, twice, and its concurrency with latencies: 26, 26, 2


def _benchmark_check_input(tmp_path: Path) -> Path:
    """benchmarks/gen.py's check input (one vLLM run reporting its peaks), at 2,000 requests."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import gen

    f = tmp_path / "check.jsonl"
    gen.vllm_and_ledger(f, 1, 2000, 4, None, seed=gen.SEED + 2, peaks=True)
    return f


def test_the_benchmark_check_input_reports_vllms_peaks(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    """benchmarks/gen.py writes max_output_tokens_per_s and max_concurrent_requests by vLLM's float
    definition for the check input, so the benchmark's `ledger check` figure covers the replays."""
    f = _benchmark_check_input(tmp_path)
    obj = json.loads(f.read_text())
    assert (obj["max_output_tokens_per_s"], obj["max_concurrent_requests"]) == (420.0, 104)
    res = CliRunner().invoke(main, ["import", "--db", ledger_url, "-q", "--batch", "c", str(f)])
    assert res.exit_code == 0, res.output
    by = {r.key: r for r in check(ledger, batch="c") if r.section == RECORDS}
    assert [(by[k].recomputed, by[k].status) for k in KEYS] == [(420.0, "agree"), (104.0, "agree")]


def test_postgresql_reads_the_columns_and_gaps_at_once_with_the_same_rows(
    pg_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a vLLM run's check reads the ok records' columns and their chunk gaps at once, on two
    connections of one snapshot (_RunRows.read_ahead); its rows are those of the one-read-at-a-time path
    (the server allowing no parallel read)."""
    import bench_ledger.queries.check.core as qc

    f = _benchmark_check_input(tmp_path)
    res = CliRunner().invoke(main, ["import", "--db", pg_ledger.url, "-q", "--batch", "c", str(f)])
    assert res.exit_code == 0, res.output
    reads: list[int] = []
    real = qc.on_one_snapshot
    monkeypatch.setattr(qc, "on_one_snapshot", lambda conn, tasks: reads.append(len(tasks)) or real(conn, tasks))
    monkeypatch.setattr(qc, "pg_parallel_workers", lambda conn: 3)  # the server's default, whatever it is set to
    together = check(pg_ledger, batch="c")
    assert reads == [2]
    monkeypatch.setattr(qc, "pg_parallel_workers", lambda conn: 1)
    alone = check(pg_ledger, batch="c")
    assert reads == [2]
    assert together == alone
    by = {r.key: r for r in together if r.section == RECORDS}
    assert [(by[k].recomputed, by[k].status) for k in KEYS] == [(420.0, "agree"), (104.0, "agree")]
    assert sum(r.status == "agree" for r in together) == 7
