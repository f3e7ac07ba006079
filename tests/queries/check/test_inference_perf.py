"""`check` of inference-perf: its summary identities and its stages recomputed from its per-request file;
Prometheus values never recomputed (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger

from tests.queries.check.importing import files, imp, tally


def test_inference_perf_identities_hold_and_prometheus_is_never_recomputed(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, "--batch", "ip", *files(samples, "inference-perf"))
    rows = check(ledger, batch="ip")
    assert tally(rows)[(IDENTITY, "agree")] == 14 and tally(rows)[(IDENTITY, "disagree")] == 0
    stage6 = {r.definition: r for r in rows if r.section == IDENTITY and r.run.endswith("stage 6")}
    rate = stage6["achieved_rate = count / send_duration"]
    assert (rate.reported, rate.status) == ("106.54759673128557", "agree")
    assert "11002" in rate.reason and "103.25901604094543" in rate.reason
    prom = next(r for r in rows if r.key == "prometheus.successes.count" and r.run.endswith("all stages"))
    assert (prom.reported, prom.status) == ("81418", "not re-derivable")
    assert prom.reason == "no per-request records in this run's artefacts (aggregates only)"
    # no identity mixes a Prometheus value with a lifecycle one (R6)
    assert not any("prometheus" in (r.reason or "") for r in rows if r.section == IDENTITY)


def test_inference_perf_per_request_records_reproduce_the_stage(
    ledger: Ledger, ledger_url: str, fixtures: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "reports-1"
    folder.mkdir()
    src = fixtures / "inference_perf/reports-1/per_request_lifecycle_metrics.json"
    (folder / "per_request_lifecycle_metrics.json").write_bytes(src.read_bytes())
    stage = {
        "load_summary": {
            "count": 2,
            "schedule_delay": {"mean": 0.0},
            "send_duration": 0.5,
            "requested_rate": 4.0,
            "achieved_rate": 4.0,
        },
        "successes": {
            "count": 1,
            "latency": {
                "request_latency": {"mean": 0.4, "median": 0.4, "max": 0.4},
                "time_to_first_token": {"mean": 0.1},
            },
            "throughput": {"requests_per_sec": 1.6666666666666667, "output_tokens_per_sec": 5.0},
            "prompt_len": {"mean": 10.0},
            "output_len": {"mean": 3.0},
        },
        "failures": {"count": 1, "request_latency": {"mean": 0.1}, "prompt_len": {"mean": 12.0}},
    }
    (folder / "stage_0_lifecycle_metrics.json").write_text(json.dumps(stage))
    imp(
        ledger_url,
        "--batch",
        "pr",
        str(folder / "per_request_lifecycle_metrics.json"),
        str(folder / "stage_0_lifecycle_metrics.json"),
    )
    rows = {r.key: r for r in check(ledger, batch="pr") if r.section == RECORDS and r.run.endswith("stage 0")}
    for key in (
        "load_summary.count",
        "load_summary.send_duration",
        "load_summary.achieved_rate",
        "successes.count",
        "failures.count",
        "successes.latency.request_latency.mean",
        "successes.latency.request_latency.max",
        "successes.latency.time_to_first_token.mean",
        "successes.prompt_len.mean",
        "successes.output_len.mean",
        "successes.throughput.requests_per_sec",
        "successes.throughput.output_tokens_per_sec",
        "failures.request_latency.mean",
        "failures.prompt_len.mean",
    ):
        assert rows[key].status == "agree", (key, rows[key])
    assert rows["successes.throughput.requests_per_sec"].reason == "over successes / (last end - first start)"
    assert rows["load_summary.schedule_delay.mean"].reason == (
        "needs each request's scheduled time, which the per-request file does not keep"
    )
    assert rows["load_summary.requested_rate"].status == "not re-derivable"
