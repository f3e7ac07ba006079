"""`check` of genai-bench: statistics recomputed by numpy, rates by identity, the error rate against its
error counts (both backends)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger

from tests.queries.check.importing import files, imp, tally


def test_genai_bench_stats_recomputed_by_numpy_and_rates_by_identity(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, "--batch", "g", *files(samples, "genai-bench"))
    rows = check(ledger, batch="g")
    assert tally(rows) == Counter({(RECORDS, "agree"): 228, (RECORDS, "not re-derivable"): 12, (IDENTITY, "agree"): 12})
    agree = {(r.run[-40:], r.key) for r in rows if r.status == "agree" and r.section == RECORDS}
    for metric in (
        "ttft",
        "tpot",
        "e2e_latency",
        "output_latency",
        "output_inference_speed",
        "num_input_tokens",
        "num_output_tokens",
        "total_tokens",
        "input_throughput",
        "output_throughput",
    ):
        for stat in ("min", "max", "mean", "stddev", "sum", "p25", "p50", "p75", "p90", "p95", "p99"):
            assert ("text-to-text_num_concurrency_16_time_15s", f"stats.{metric}.{stat}") in agree
    why = {r.reason for r in rows if r.status == "not re-derivable"}
    assert why == {
        "the records carry no timestamps: genai-bench's rates divide by its own run_duration (see the "
        "identities), never re-derived from the records"
    }


def test_genai_bench_error_rate_is_checked_against_its_error_counts(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = (
        samples
        / "genai-bench/baseten_training_benchmark__N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"
    )
    data = json.loads(src.read_text())
    for rec in data["individual_request_metrics"][:2]:
        for k in rec:
            rec[k] = None
        rec["error_code"], rec["error_message"] = 500, "Internal Server Error"
    agg = data["aggregated_metrics"]
    agg.update(num_error_requests=2, num_completed_requests=62, error_rate=0, error_codes_frequency={"500": 2})
    f = tmp_path / "N2000_200_200_20_text-to-text_num_concurrency_16_time_15s.json"
    f.write_text(json.dumps(data))
    imp(ledger_url, "--batch", "g", str(f))
    rows = [r for r in check(ledger, batch="g") if r.key == "aggregated_metrics.error_rate"]
    assert [(r.section, r.status, r.recomputed) for r in rows] == [
        (RECORDS, "disagree", 2 / 64),
        (IDENTITY, "disagree", 2 / 64),
    ]
    freq = next(r for r in check(ledger, batch="g") if r.key == "aggregated_metrics.error_codes_frequency.500")
    assert (freq.status, freq.recomputed) == ("agree", 2.0)
