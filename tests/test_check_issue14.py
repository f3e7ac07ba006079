"""Issue 14 on the real samples (both backends): every statistic the files allow is agree/disagree,
"not re-derivable" only for a reason the file's content gives; each tool's own definition is named."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench_ledger.cli import main
from bench_ledger.queries.check import IDENTITY, RECORDS, check
from bench_ledger.store import Ledger
from click.testing import CliRunner

GUIDELLM = "guidellm/guidellm-bench_sanity_20260302_1856_Qwen3-4B-Thinking-2507_tp4_fp8_benchmarks.json"


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, "-q", *args])
    assert res.exit_code == 0, res.output


def test_guidellm_statistics_recomputed_by_its_distribution_summary(ledger: Ledger, ledger_url: str,
                                                                    samples: Path) -> None:  # fmt: skip
    imp(ledger_url, str(samples / GUIDELLM), "--batch", "g")
    rows = check(ledger, batch="g")
    rec = [r for r in rows if r.section == RECORDS]
    # main gave 80 agree, 3288 not re-derivable (and no row for duration, which the import dropped)
    assert Counter(r.status for r in rec) == {"agree": 1848, "not re-derivable": 1521}
    assert Counter(r.status for r in rows if r.section == IDENTITY) == {"agree": 547}
    assert {r.definition for r in rec if r.status == "agree"} == {"guidellm-inverted-cdf"}
    by = {r.key: r for r in rec}
    # the errored and incomplete groups hold no records: guidellm summarises no values as 0 (840 each)
    assert Counter(r.reason for r in rec if r.status == "agree")["no errored records: guidellm's summary of no values is 0"] == 840
    zero = by["metrics.requests_per_second.errored.mean"]
    assert (zero.status, zero.recomputed) == ("agree", 0.0)
    # successful and total by DistributionSummary.from_values: inverted-CDF percentiles, population std
    p50 = by["metrics.time_to_first_token_ms.successful.percentiles.p50"]
    assert (p50.status, p50.reported) == ("agree", "171.52166366577148")
    std = by["metrics.request_latency.total.std_dev"]
    assert (std.status, std.reason) == ("agree", "over the total records")
    assert by["metrics.prompt_token_count.successful.mode"].recomputed == 76.0  # first of the most probable
    for group in ("successful", "errored", "incomplete", "total"):
        assert by[f"metrics.request_totals.{group}"].status == "agree"
        assert by[f"scheduler_metrics.requests_made.{group}"].status == "agree"
    # what stays not re-derivable says what the file lacks
    why = Counter(r.reason for r in rec if r.status == "not re-derivable")
    assert why[("needs each streamed iteration's time and token count (guidellm's per-iteration token timings); "
                "the file keeps per request only its first/last iteration times and iteration counts")] == 200
    assert by["duration"].reason == ("guidellm's measurement window (the benchmark's end_time - start_time, "
                                     "scheduler times that no record holds)")
    assert not [r for r in rec if "not known to the check" in (r.reason or "")]


def test_guidellm_duration_and_synthetic_data_settings_are_kept(ledger: Ledger, ledger_url: str, samples: Path,
                                                                tmp_path: Path) -> None:  # fmt: skip
    obj = json.loads((samples / GUIDELLM).read_text())
    obj["args"]["data"] = ["prompt_tokens=256,output_tokens=128"]
    (tmp_path / "synthetic.json").write_text(json.dumps(obj))
    imp(ledger_url, str(samples / GUIDELLM), "--batch", "real")
    imp(ledger_url, str(tmp_path / "synthetic.json"), "--batch", "syn")
    with ledger.connection() as conn:
        got = conn.exec_driver_sql(
            "SELECT b.name, r.input_target_tokens, r.output_cap_tokens, r.dataset, p.text, p.unit FROM run r "
            "JOIN batch b ON b.id = r.batch_id JOIN published_value p ON p.run_id = r.id AND p.key = 'duration' "
            "ORDER BY b.name").all()  # fmt: skip
    assert [tuple(g) for g in got] == [
        ("real", None, None, "/root/aime_2024_v2.jsonl", "24.909644603729248", "s"),
        ("syn", 256, 128, None, "24.909644603729248", "s"),
    ]


def test_vllm_completed_plus_failed_is_num_prompts(ledger: Ledger, ledger_url: str, samples: Path,
                                                   tmp_path: Path) -> None:  # fmt: skip
    src = samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
    imp(ledger_url, str(src), "--batch", "v")
    (row,) = [r for r in check(ledger, batch="v") if r.section == IDENTITY and r.key == "completed"]
    assert (row.status, row.definition) == ("agree", "completed = num_prompts - failed (completed + failed = "
                                                     "num_prompts 150)")
    assert row.reason.endswith("150 from the reported failed 0")
    obj = json.loads(src.read_text())
    obj["completed"] = 149  # a mis-merged summary: one request neither completed nor failed
    (tmp_path / "edited.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "edited.json"), "--batch", "e")
    bad = [(r.key, r.definition.split(" (")[0]) for r in check(ledger, batch="e") if r.status == "disagree"]
    assert ("completed", "completed = num_prompts - failed") in bad
    assert ("request_throughput", "request_throughput = completed / duration") in bad
