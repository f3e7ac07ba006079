"""The ``closed`` batch the seal tests start from."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger.store import Ledger

from tests.batches import bench_json, cli


@pytest.fixture
def closed(ledger: Ledger, tmp_path: Path) -> tuple[Ledger, Path]:
    """Batch fx: one per-request vLLM file (the same with or without ../shared); closed with a seal file."""
    cli("import", bench_json(tmp_path / "bench.json"), "--batch", "fx", "--db", ledger.url)
    seals = tmp_path / "seals.jsonl"
    out = cli("close", "fx", "--seal-file", seals, "--db", ledger.url).output
    assert "closed batch fx" in out and "appended to" in out
    return ledger, seals
