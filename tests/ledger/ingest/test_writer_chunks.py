"""ledger.ingest.writer writes runs, captures, capture fields and published values a chunk of runs at a time
(issue 7), and takes the vLLM importer's Arrow rows: both paths must leave the very same rows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger import ingest
from bench_ledger import models as m
from bench_ledger.importers import vllm_bench as vb
from bench_ledger.importers.base import ParseOptions
from bench_ledger.ingest import request_rows, runs, writer  # their limits and bulk calls, set and watched here
from bench_ledger.store import Ledger

from tests.clirun import run as cli


def _file(path: Path, runs: int, n: int, *, starts: bool = True, seed: int = 1, tail: str = "") -> Path:
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for i in range(runs):
            failed = [rng.random() < 0.2 for _ in range(n)]
            obj = {
                "date": "20261129-000000",
                "endpoint_type": "openai-chat",
                "backend": "vllm",
                "label": f"r{i}",
                "num_prompts": n,
                "request_rate": "inf",
                "max_concurrency": 4,
                "duration": 10.5 + i,
                "completed": n - sum(failed),
                "request_throughput": 1 / 3,
                "p99_ttft_ms": 12.25,
                "input_lens": [rng.randint(1, 900) for _ in range(n)],
                "output_lens": [0 if f else rng.randint(1, 90) for f in failed],
                "ttfts": [0.0 if f else rng.random() for f in failed],
                "latencies": [0.0 if f else 1 + rng.random() for f in failed],
                "itls": [[] if f else [rng.random() / 9 for _ in range(rng.randint(0, 4))] for f in failed],
                "errors": ["boom" if f else "" for f in failed],
            }
            if starts:
                obj["start_times"] = [52341.123456789123 + j * 0.0125 + rng.random() for j in range(n)]
            fh.write(json.dumps(obj) + tail + "\n")
    return path


def _import(ledger: Ledger, path: Path, batch: str, *, fast: bool, monkeypatch) -> ingest.ImportResult:
    monkeypatch.setattr(vb, "FAST_PATH", fast)
    monkeypatch.setattr(vb, "FAST_MIN_BYTES", 0)
    sha, size = ingest.check_not_imported(ledger, path)
    parsed = vb.IMPORTER.parse(path, ParseOptions())
    return ingest.write_artefact(ledger, path, sha, size, parsed, "vllm-bench", "t", ingest.ImportTarget(batch=batch))


def _rows(ledger: Ledger, artefact_id: int) -> dict[str, list]:
    skip = {"artefact_id", "run_id", "id", "capture_id", "recorded_at", "batch_id"}
    out = {}
    with ledger.session() as s:
        runs = {r.id: r.label for r in s.scalars(sa.select(m.Run).where(m.Run.artefact_id == artefact_id))}
        for table, order in (
            (m.Request, "idx"),
            (m.ChunkGap, "request_idx, seq"),
            (m.Capture, "run_id"),
            (m.PublishedValue, "run_id, key"),
        ):
            t = table.__table__
            cols = [c for c in t.columns if c.name not in skip]
            rows = s.execute(
                sa.select(*cols, *([t.c.run_id] if "run_id" in t.c else []))
                .where(t.c.artefact_id == artefact_id)
                .order_by(sa.text(order))
            ).all()
            out[t.name] = [(*r[: len(cols)], runs[r[-1]]) if "run_id" in t.c else tuple(r) for r in rows]
        out["fields"] = sorted(
            s.execute(
                sa.select(m.Run.label, m.CaptureField.field)
                .join(m.Capture, m.Capture.id == m.CaptureField.capture_id)
                .join(m.Run, m.Run.id == m.Capture.run_id)
                .where(m.Capture.artefact_id == artefact_id)
            ).all()
        )
    return out


def test_fast_and_python_paths_write_identical_rows(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runs.RunWriter, "RUNS", 3)  # several chunks of runs
    fast = _import(ledger, _file(tmp_path / "a.jsonl", 7, 60), "fast", fast=True, monkeypatch=monkeypatch)
    slow = _import(ledger, _file(tmp_path / "b.jsonl", 7, 60, tail=" "), "slow", fast=False, monkeypatch=monkeypatch)
    assert [(label, n) for _, label, n in fast.runs] == [(label, n) for _, label, n in slow.runs]
    assert fast.published == slow.published == 7 * 4
    a, b = _rows(ledger, fast.artefact_id), _rows(ledger, slow.artefact_id)
    assert len(a["request"]) == 7 * 60 and a["chunk_gap"]
    assert a == b


def test_declared_runs_are_found_a_chunk_at_a_time_and_same_labels_again_are_new_runs(
    ledger: Ledger, tmp_path: Path, monkeypatch
) -> None:
    """A manifest's runs are found by label, chunk by chunk, and learn the file's settings; a second file
    of the same labels is five more results: five new runs, never a second capture of the first five."""
    monkeypatch.setattr(runs.RunWriter, "RUNS", 2)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nbatches:\n  - {name: b}\nruns:\n"
        + "".join(f"  - {{batch: b, label: r{i}, tool: vllm-bench}}\n" for i in range(5))
    )
    cli("declare", manifest, "--db", ledger.url)
    first = _import(ledger, _file(tmp_path / "a.jsonl", 5, 10, starts=False), "b", fast=True, monkeypatch=monkeypatch)
    assert [r[1] for r in first.runs] == [f"r{i}" for i in range(5)]
    again = _import(
        ledger, _file(tmp_path / "c.jsonl", 5, 12, starts=False, seed=2), "b", fast=True, monkeypatch=monkeypatch
    )
    assert [r[1] for r in again.runs] == [f"r{i} n=12" for i in range(5)]  # told apart by the prompt count they state
    with ledger.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(m.Run)) == 10
        assert s.scalar(sa.select(sa.func.count()).select_from(m.Capture)) == 10
        learned = s.scalars(sa.select(m.Run.concurrency).where(m.Run.label.in_([f"r{i}" for i in range(5)]))).all()
    assert learned == [4] * 5


def test_each_table_pooled_to_its_own_limit(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """Requests and chunk gaps are pooled per table (issue 17: the 1M-request file's requests in one
    statement instead of ten): a table is written when its own pool is full, and the rows are those of
    one statement for the whole file."""
    monkeypatch.setattr(runs.RunWriter, "RUNS", 2)
    whole = _import(ledger, _file(tmp_path / "a.jsonl", 6, 40), "whole", fast=True, monkeypatch=monkeypatch)
    written: list[tuple[str, int]] = []
    real = request_rows.bulk_insert

    def counted(conn, backend, table, data, held=None):
        written.append((table, data.num_rows))
        return real(conn, backend, table, data, held)

    monkeypatch.setattr(request_rows, "bulk_insert", counted)
    monkeypatch.setattr(request_rows.PendingRows, "REQUEST_LIMIT", 100)
    monkeypatch.setattr(request_rows.PendingRows, "PG_REQUEST_LIMIT", 100)
    monkeypatch.setattr(request_rows.PendingRows, "LIMIT", 30)
    pooled = _import(ledger, _file(tmp_path / "b.jsonl", 6, 40, tail=" "), "pooled", fast=True, monkeypatch=monkeypatch)
    requests = [n for t, n in written if t == "request"]
    gaps = [n for t, n in written if t == "request_gaps"]
    assert requests == [
        160,
        80,
    ]  # 2 runs of 40 a chunk, one part of 80: written once 100 are pooled, the rest at the end
    assert len(gaps) > 2 and all(
        n >= 30 for n in gaps[:-1]
    )  # the gaps' own, smaller pool (request_gaps rows: one per request)
    assert _rows(ledger, whole.artefact_id) == _rows(ledger, pooled.artefact_id)


def test_statistics_refreshed_for_the_tables_the_import_wrote(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """After a large import PostgreSQL's statistics are refreshed for the bulk tables that got rows,
    not for the others (a ledger's millions of hardware samples were sampled after every request import)."""
    analyzed: list[tuple[str, ...]] = []
    monkeypatch.setattr(writer, "ANALYZE_AFTER_ROWS", 1)
    monkeypatch.setattr(Ledger, "refresh_statistics", lambda self, tables: analyzed.append(tables))
    _import(ledger, _file(tmp_path / "a.jsonl", 2, 30), "stats", fast=True, monkeypatch=monkeypatch)
    assert analyzed == [("request", "request_gaps")]  # chunk_gap is a view of request_gaps (migration 0014)


def test_statistics_after_an_import_sample_at_the_ledgers_own_target(
    pg_ledger: Ledger, tmp_path: Path, monkeypatch
) -> None:
    """PostgreSQL's ANALYZE after a bulk load samples 300 x STATISTICS_TARGET rows, not the server's 300 x
    100: a histogram of at most STATISTICS_TARGET buckets (160 requests of ~150 distinct input lengths)."""
    from bench_ledger.store import STATISTICS_TARGET

    monkeypatch.setattr(writer, "ANALYZE_AFTER_ROWS", 1)
    _import(pg_ledger, _file(tmp_path / "a.jsonl", 2, 80), "stats", fast=True, monkeypatch=monkeypatch)
    with pg_ledger.engine.connect() as conn:
        bounds = conn.exec_driver_sql(
            "SELECT array_length(histogram_bounds::text::int[], 1) FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = 'request' "
            "AND attname = 'input_tokens'"
        ).scalar()
        target = conn.exec_driver_sql("SHOW default_statistics_target").scalar()
    assert target == "100" and bounds == STATISTICS_TARGET + 1


def test_a_large_import_leaves_the_run_index_summarised(
    unwritten_pg_ledger: Ledger, tmp_path: Path, monkeypatch
) -> None:
    """PostgreSQL's request.run_id index is a block-range index (migration 0017): a range no summary covers
    matches every run, so a reader right after an import would read all its rows. The large import
    summarises what it filled (nothing is left for brin_summarize_new_values); a small one leaves it to
    autovacuum (autosummarize), as below the ANALYZE threshold. (That the index is BRIN: test_store.)"""
    led = unwritten_pg_ledger

    def unsummarised() -> int:  # summarises them, and says how many ranges it found (an error on a btree)
        with led.engine.begin() as conn:
            return conn.exec_driver_sql("SELECT brin_summarize_new_values('ix_request_run_id')").scalar()

    monkeypatch.setattr(writer, "ANALYZE_AFTER_ROWS", 5_000)
    # past the first range of 32 pages (~2,000 rows; the empty table's index summarised that one when built)
    _import(led, _file(tmp_path / "small.jsonl", 2, 2_000), "small", fast=True, monkeypatch=monkeypatch)
    assert unsummarised() >= 1
    _import(led, _file(tmp_path / "large.jsonl", 4, 2_000), "large", fast=True, monkeypatch=monkeypatch)
    assert unsummarised() == 0


def test_rows_written_while_the_next_runs_are_parsed(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """PostgreSQL: the pooled COPYs run in a writer thread while the import parses on (issue 17); the
    rows are those of a synchronous write, and a COPY's own error is what the import raises."""
    from bench_ledger.errors import StoreError

    monkeypatch.setattr(runs.RunWriter, "RUNS", 2)
    whole = _import(ledger, _file(tmp_path / "a.jsonl", 6, 40), "whole", fast=True, monkeypatch=monkeypatch)
    monkeypatch.setattr(request_rows.PendingRows, "PG_REQUEST_LIMIT", 50)
    monkeypatch.setattr(request_rows.PendingRows, "REQUEST_LIMIT", 50)
    monkeypatch.setattr(request_rows.PendingRows, "LIMIT", 30)
    pooled = _import(ledger, _file(tmp_path / "b.jsonl", 6, 40, tail=" "), "pooled", fast=True, monkeypatch=monkeypatch)
    assert _rows(ledger, whole.artefact_id) == _rows(ledger, pooled.artefact_id)
    if ledger.backend != "postgresql":
        return
    import psycopg

    real = request_rows.bulk_insert

    def failing(conn, backend, table, data, held=None):
        if table == "request":
            raise psycopg.errors.DiskFull("could not extend file: No space left on device")
        return real(conn, backend, table, data, held)

    monkeypatch.setattr(request_rows, "bulk_insert", failing)
    with pytest.raises(StoreError, match="No space left on device"):
        _import(ledger, _file(tmp_path / "c.jsonl", 6, 40, seed=4), "failed", fast=True, monkeypatch=monkeypatch)
    with ledger.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(m.Artefact)) == 2


def test_request_tables_of_several_artefacts_are_those_of_each_artefact_concatenated() -> None:
    """A group's files go to the database as one pair of tables (ingest.artefacts_request_tables,
    profile note 27): the very rows one call per artefact gives, in the same order, for runs with and
    without gaps, with an empty gaps list, on two clocks and without one."""
    import pyarrow as pa
    from bench_ledger import records as rec

    def run(n: int, gaps: list | None, seed: int) -> rec.ArrowRequests:
        rng = random.Random(seed)
        table = pa.table(
            {
                "idx": pa.array(range(n), pa.int32()),
                "line": pa.array(range(2, n + 2), pa.int32()),
                "status": ["ok"] * n,
                "error": pa.nulls(n, pa.string()),
                "retries": pa.nulls(n, pa.int32()),
                "input_tokens": pa.array([rng.randint(1, 99) for _ in range(n)], pa.int32()),
                "output_tokens": pa.array([rng.randint(1, 99) for _ in range(n)], pa.int32()),
                "send_ns": pa.array([rng.randint(1, 10**12) for _ in range(n)], pa.int64()),
                "first_token_ns": pa.nulls(n, pa.int64()),
                "end_ns": pa.nulls(n, pa.int64()),
                "ttft_s": pa.array([rng.random() for _ in range(n)]),
                "latency_s": pa.nulls(n, pa.float64()),
                "queue_s": pa.nulls(n, pa.float64()),
                "itl_mean_s": pa.nulls(n, pa.float64()),
                "chunk_count": pa.array([None if g is None else len(g) + 1 for g in (gaps or [None] * n)], pa.int32()),
                "cached_tokens": pa.nulls(n, pa.int32()),
            }
        )
        if gaps is None:
            return rec.ArrowRequests(table=table)
        return rec.ArrowRequests(
            table=table,
            gaps=pa.table({"request_idx": table.column("idx"), "gaps": pa.array(gaps, pa.list_(pa.float64()))}),
        )

    runs = [
        (4, 10, "monotonic_s", run(3, [[0.1, 0.2], [], None], 1)),
        (4, 11, "monotonic_s", run(2, None, 2)),
        (5, 12, "epoch_s", run(2, [[0.3], [0.4, 0.5, 0.6]], 3)),
        (7, 13, None, run(1, None, 4)),
        (9, 14, "monotonic_s", run(2, [None, [0.7]], 5)),
    ]
    requests, gaps = ingest.artefacts_request_tables(runs)
    one = [ingest.artefacts_request_tables([x for x in runs if x[0] == a]) for a in (4, 5, 7, 9)]  # one artefact each
    assert requests.schema == one[0][0].schema
    assert requests.to_pylist() == [row for t, _ in one for row in t.to_pylist()]
    assert gaps is not None and gaps.to_pylist() == [row for _, g in one if g is not None for row in g.to_pylist()]
    assert [r["artefact_id"] for r in gaps.to_pylist()] == [4, 5, 5, 9]
    assert ingest.artefacts_request_tables([runs[1], runs[3]])[1] is None  # no run with a gap: no gaps table
