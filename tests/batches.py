"""A small batch for the seal and revision tests: a vLLM-bench-shaped file, raw SQL behind the ledger,
and the `ledger` command as these tests call it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.store import Ledger

from tests.clirun import run

cli = run  # the name the book-keeping tests (and their importers) use


def bench_json(path: Path, n: int = 5, *, date: str = "20260707-100000", rate: float = 2.0) -> Path:
    """A small vLLM-bench-shaped result with per-request arrays."""
    rnd = random.Random(n)
    ttfts = [round(rnd.uniform(0.02, 0.2), 6) for _ in range(n)]
    data = {
        "date": date,
        "backend": "vllm",
        "model_id": "/models/Qwen2.5-7B",
        "num_prompts": n,
        "request_rate": rate,
        "max_concurrency": 4,
        "duration": 3.5,
        "completed": n,
        "failed": 0,
        "total_input_tokens": 100 * n,
        "total_output_tokens": 20 * n,
        "output_throughput": 28.571428571428573,
        "mean_ttft_ms": sum(ttfts) / n * 1000,
        "input_lens": [100] * n,
        "output_lens": [20] * n,
        "ttfts": ttfts,
        "itls": [[0.01, 0.011, 0.0125] for _ in range(n)],
        "latencies": [t + 0.5 for t in ttfts],
        "errors": [""] * n,
        "start_times": [1000.0 + i * 0.25 for i in range(n)],
    }
    path.write_text(json.dumps(data))
    return path


def raw(ledger: Ledger, sql: str) -> None:
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(sql)


def request_artefact(ledger: Ledger) -> int:
    """The artefact of the ledger's (first) request."""
    with ledger.session() as s:
        return s.scalar(sa.select(m.Request.artefact_id).limit(1))
