"""`check` of trtllm-bench: its floor-index percentiles and rates (both backends)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger

from tests.queries.check.importing import files, imp, tally


def test_trtllm_floor_index_and_rates(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, "--batch", "t", *files(samples, "trtllm-bench"))
    rows = check(ledger, batch="t")
    assert tally(rows) == Counter({(RECORDS, "not re-derivable"): 79, (IDENTITY, "agree"): 23})
    ident = {r.definition: r for r in rows if r.section == IDENTITY}
    p99 = ident[
        "performance.request_latency_percentiles_ms.p99 = performance.request_latency_percentiles_ms.maximum "
        "(floor index int(20 x 0.99) = 19, the last)"
    ]
    assert (p99.reported, p99.status) == ("93.96171799999999", "agree")
    assert "performance.request_latency_percentiles_ms.p90" not in {r.key for r in rows if r.section == IDENTITY}
    thr = ident["system_output_throughput_tok_s = num_requests x avg_output_length / (total_latency_ms / 1000)"]
    assert (thr.reported, thr.status) == ("556.3859403206322", "agree")
    assert "world_info.issue_rate" not in {r.key for r in rows}  # latency mode: kept n/a, not a claim to check
