"""`check` of MLPerf loadgen: the detail log's rounding against the summary (both backends)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger

from tests.queries.check.importing import files, imp, tally


def test_mlperf_detail_rounding_is_checked_against_the_summary(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    imp(ledger_url, "--batch", "m", *files(samples, "mlperf-loadgen"))
    rows = check(ledger, batch="m")
    # 65 numeric identities + 13 validity identities (Server 7, Offline 6: no performance constraints line)
    assert tally(rows) == Counter({(RECORDS, "not re-derivable"): 310, (IDENTITY, "agree"): 78})
    tok = next(
        r
        for r in rows
        if r.definition == "summary 'Completed tokens per second' = detail "
        "result_completed_tokens_per_second (rounded, R11)"
    )
    assert (tok.reported, tok.recomputed, tok.status, tok.tolerance) == ("99123", 99123.04, "agree", "±0.505")
    offline = next(r for r in rows if (r.definition or "").startswith("result_samples_per_second = result_query_count"))
    assert (offline.reported, offline.status) == ("371.423", "agree")
    assert round(offline.recomputed, 6) == 371.422945
    rep = [r for r in rows if r.definition == "repeated value"]
    assert [(r.key, r.reported, r.status) for r in rep] == [("Completed tokens per second", "99123.04", "agree")]


def test_mlperf_rounded_detail_that_contradicts_the_summary_disagrees(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = samples / "mlperf-loadgen"
    for kind in ("summary", "detail"):
        text = (src / f"NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_{kind}.txt").read_text()
        if kind == "detail":
            text = text.replace(
                '"result_completed_tokens_per_second", "value": 99123,',
                '"result_completed_tokens_per_second", "value": 99124,',
            )
        (tmp_path / f"mlperf_log_{kind}.txt").write_text(text)
    imp(ledger_url, "--batch", "m", str(tmp_path / "mlperf_log_summary.txt"), str(tmp_path / "mlperf_log_detail.txt"))
    bad = [r for r in check(ledger, batch="m") if r.status == "disagree"]
    assert [(r.key, r.reported, r.recomputed) for r in bad] == [
        ("detail.result_completed_tokens_per_second", "99124", 99123.04)
    ]
