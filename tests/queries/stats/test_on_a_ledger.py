"""Sampling statistics over a ledger, on DuckDB and PostgreSQL: runs imported through the ledger's own
request format (docs/request-format.md) with TTFT drawn from known distributions (fixed seeds).

* batch pair: runs same-1 and same-2 (one lognormal TTFT distribution) and shift (TTFT x 1.10), 2,000
  requests each, all on deployment h20-1017; run old-w (the same distribution) on h20-old;
* batches rep-a / rep-b: four repeats each of one load point (seeds differ), rep-b's TTFT x 1.10;
* batches t01..t20, sealed: a run at C 8 whose TTFT steps up 10% from t11 on, and a run at C 16 (another
  comparability key) that stays flat; t01 also holds a run with no deployment (no key).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from bench_ledger.queries.audit import audit
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.store import Ledger

from tests.clirun import run

FIXTURES_DIR = Path(__file__).resolve().parents[2] / "fixtures"
HEAD = {
    "tool": "t",
    "input_target_tokens": 100,
    "output_cap_tokens": 20,
    "request_count": 2000,
    "seed": 1,
    "concurrency": 8,
    "request_rate": "inf",
    "dataset": "random",
    "clock": "epoch_s",
}
# what the request format does not record, given by the claims' context so that only the weights differ
SAME = {
    "engine_options": "as declared",
    **{w: "warm" for w in ("warm_prefix_cache", "warm_process", "warm_compile", "warm_file_cache")},
}


def _write(path: Path, header: dict, ttft: np.ndarray) -> Path:
    lines = [json.dumps({"ledger_requests": 1, **header})]
    lines += [
        json.dumps({"status": "ok", "output_tokens": 20, "send_time": 1000 + i, "ttft_s": round(float(t), 6)})
        for i, t in enumerate(ttft)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def stats_ledger(module_ledger_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Built through the Python API on one open ledger (`ledger import` / `ledger close` each, as the CLI does)."""
    import bench_ledger as bl

    url, tmp = module_ledger_url, tmp_path_factory.mktemp("stats")
    for f in ("system.yaml", "report.txt"):
        shutil.copy(FIXTURES_DIR / "manifest" / f, tmp / f)
    rng = np.random.default_rng(41)
    draw = lambda n: rng.lognormal(np.log(0.5), 0.4, n)  # noqa: E731
    with bl.connect(url, read_only=False) as led:
        bl.declare_file(led, tmp / "system.yaml")

        def put(path: Path, batch: str, deployment: str | None = "h20-1017") -> None:
            bl.import_file(led, path, batch=batch, deployment=deployment)

        for label, scale in (("same-1", 1.0), ("same-2", 1.0), ("shift", 1.1)):
            put(_write(tmp / f"{label}.jsonl", {"run": label, **HEAD}, scale * draw(2000)), "pair")
        put(_write(tmp / "old-w.jsonl", {"run": "old-w", **HEAD}, draw(2000)), "pair", "h20-old")
        for side, scale in (("rep-a", 1.0), ("rep-b", 1.1)):
            for k in range(4):
                head = {**HEAD, "run": f"r{k}", "seed": 100 + k, "request_count": 300}
                put(_write(tmp / f"{side}-{k}.jsonl", head, scale * draw(300)), side)
        for b in range(1, 21):
            batch = f"t{b:02d}"
            step = 1.1 if b >= 11 else 1.0
            for conc, scale in ((8, step), (16, 1.0)):
                head = {**HEAD, "run": f"c{conc}", "concurrency": conc, "request_count": 200}
                put(_write(tmp / f"{batch}-{conc}.jsonl", head, scale * rng.lognormal(np.log(0.5), 0.15, 200)), batch)
            if b == 1:  # a run with no deployment recorded: comparable to nothing
                put(_write(tmp / "nodep.jsonl", {**HEAD, "run": "nodep"}, draw(50)), batch, None)
            bl.close(led, batch)
    return url


def _ids(url: str, batch: str) -> dict[str, int]:
    out = json.loads(run("runs", "--db", url, "--batch", batch, "--json").output)
    return {r["label"]: r["id"] for r in out}


def _stats(url: str, a: str, b: str, *extra: str) -> dict[str, dict]:
    out = json.loads(run("compare", "--db", url, a, b, "--stats", "--json", *extra).output)
    return {m["metric"]: m for m in out["stats"]["metrics"]}


def test_compare_stats_one_distribution_is_within_sampling_error(stats_ledger: str) -> None:
    ids = _ids(stats_ledger, "pair")
    got = _stats(stats_ledger, f"run:{ids['same-1']}", f"run:{ids['same-2']}")
    for name in ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99"):
        assert got[name]["change"]["verdict"] == "within sampling error", got[name]
        assert got[name]["run_test"]["significant"] is None  # one run against one: never significant
    assert got["total_tpm"]["change"]["verdict"] == "unknown sampling error"


def test_compare_stats_a_ten_percent_ttft_shift_differs(stats_ledger: str) -> None:
    ids = _ids(stats_ledger, "pair")
    got = _stats(stats_ledger, f"run:{ids['same-1']}", f"run:{ids['shift']}")
    for name in ("ttft_mean", "ttft_p50", "ttft_p90"):
        ch = got[name]["change"]
        assert ch["verdict"] == "differs" and ch["low"] > 0 and 5 < ch["estimate"] < 15, ch
    text = run(
        "compare",
        "--db",
        stats_ledger,
        f"run:{ids['same-1']}",
        f"run:{ids['shift']}",
        "--stats",
        "--metric",
        "ttft_p50",
    ).output
    assert "ttft_p50" in text and "differs: +" in text and "no test: one run on a side (never significant)" in text


def test_compare_stats_with_repeats_tests_over_runs(stats_ledger: str) -> None:
    got = _stats(stats_ledger, "batch:rep-a", "batch:rep-b", "--metric", "ttft_p50")
    t = got["ttft_p50"]["run_test"]
    assert (t["runs_a"], t["runs_b"], t["significant"]) == (4, 4, True) and got["ttft_p50"]["change"] is None
    res = run("compare", "--db", stats_ledger, "batch:pair", "batch:rep-b", "--stats", code=3)
    assert "refused (R7): treat the runs of batch:pair as replicates" in res.output
    assert "its 4 runs are of 2 comparability keys" in res.output


def test_compare_stats_refuses_an_attribution_within_sampling_error(stats_ledger: str) -> None:
    ids = _ids(stats_ledger, "pair")
    a, b = f"run:{ids['same-1']}", f"run:{ids['old-w']}"
    res = run(
        "compare",
        "--db",
        stats_ledger,
        a,
        b,
        "--stats",
        "--metric",
        "ttft_p50",
        "--attribute-to",
        "weights_version",
        code=3,
    )
    assert f"refused (R6): attribute the change of ttft_p50 from {a} to {b} to weights_version" in res.output
    assert "why: the change is not shown to differ from sampling error (within sampling error: " in res.output


def test_audit_gives_comparisons_a_sampling_verdict(stats_ledger: str) -> None:
    """Two runs differing only in the weights: a percent change within sampling error attributed to the
    weights is refused (R6); the shifted pair is not; a quoted operand makes the sampling error unknown."""

    def metric(cid: str, run: str) -> dict:
        return {
            "id": cid,
            "text": "0.5",
            "unit": "s",
            "kind": "latency",
            "context": SAME,
            "metric": {"name": "ttft_p50", "scope": {"batch": "pair", "run": run}},
        }

    claims = [
        metric("new", "same-1"),
        metric("old", "old-w"),
        metric("up", "shift"),
        {
            "id": "w",
            "text": "0%",
            "unit": "%",
            "kind": "percent_change",
            "derived": {"op": "percent_change", "operands": ["old", "new"], "attributes_to": "weights_version"},
        },
        {"id": "quoted", "text": "0.5", "unit": "s", "kind": "latency", "quoted": {"source": "elsewhere"}},
        {
            "id": "q",
            "text": "0%",
            "unit": "%",
            "kind": "percent_change",
            "derived": {"op": "percent_change", "operands": ["quoted", "new"]},
        },
        {
            "id": "s",
            "text": "+10%",
            "unit": "%",
            "kind": "percent_change",
            "derived": {"op": "percent_change", "operands": ["new", "up"]},
        },
    ]
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    with Ledger(stats_ledger) as led:
        r = {x.claim_id: x for x in audit(cf, led).results}
    assert (r["w"].verdict, r["w"].rule) == ("refused", "R6")
    assert r["w"].why.startswith("the change is attributed to weights_version, but it is within sampling error")
    assert r["w"].sampling["verdict"] == "within sampling error"
    assert r["w"].notes[-1].startswith("sampling: within sampling error: ")
    assert r["q"].sampling["verdict"] == "unknown sampling error"
    assert r["q"].sampling["reason"].startswith("quoted has no per-request records here")
    assert r["s"].sampling["verdict"] == "differs" and r["s"].sampling["low"] > 0


def test_metrics_ci_and_json_carry_intervals(stats_ledger: str) -> None:
    ids = _ids(stats_ledger, "pair")
    out = json.loads(run("metrics", "--db", stats_ledger, "--run", ids["same-1"], "--json").output)[0]["metrics"]
    p50 = out["ttft_p50"]["sampling"]
    assert p50["status"] == "interval" and p50["low"] < out["ttft_p50"]["value"] < p50["high"] and p50["n"] == 2000
    assert out["total_tpm"]["sampling"]["status"] == "n/a"
    text = run("metrics", "--db", stats_ledger, "--run", ids["same-1"], "--ci", "--confidence", "0.9").output
    assert "== sampling intervals" in text and "90% interval" in text and "ttft_p99" in text
    bad = run("metrics", "--db", stats_ledger, "--ci", "--confidence", "95", code=2)
    assert "95.0 is not between 0 and 1 (e.g. 0.95)" in bad.output


def test_trend_finds_the_step_and_keeps_keys_apart(stats_ledger: str) -> None:
    batches = [a for b in range(1, 21) for a in ("--batch", f"t{b:02d}")]
    got = json.loads(run("trend", "--db", stats_ledger, "ttft_p50", *batches, "--json").output)
    assert len(got) == 2  # two comparability keys (C 8 and C 16): two series, never pooled
    by_label = {s["points"][0]["label"]: s for s in got}
    step, flat = by_label["c8"], by_label["c16"]
    assert [p["batch"] for p in step["points"]] == [f"t{b:02d}" for b in range(1, 21)]
    assert len(step["change_points"]) == 1 and abs(step["change_points"][0]["index"] + 1 - 11) <= 1
    assert flat["change_points"] == [] and flat["verdict"] == "0 change point(s)"
    text = run("trend", "--db", stats_ledger, "ttft_p50", "--key", step["key"][:12]).output
    assert "change point at #11 (batch t11)" in text
    nodep = _ids(stats_ledger, "t01")["nodep"]
    assert f"note: left out, no deployment recorded (no comparability key): run(s) {nodep} nodep (batch t01)" in text
    short = run("trend", "--db", stats_ledger, "ttft_p50", *batches[:10], "--key", step["key"][:12]).output
    assert "insufficient data: 5 points; change points are looked for from 8 points on" in short
    res = run("trend", "--db", stats_ledger, "ttft_p50", "--batch", "pair", code=3)
    assert "refused (R10): a trend over batch 'pair'" in res.output


def test_plan_from_a_pilot_run(stats_ledger: str) -> None:
    ids = _ids(stats_ledger, "pair")
    got = json.loads(
        run(
            "plan", "--db", stats_ledger, "--detect", "5%", "--run", ids["same-1"], "--metric", "ttft_p50", "--json"
        ).output
    )[0]
    # lognormal, sigma 0.4: se of the log median ~ 1.2533 * 0.4 / sqrt(n), so 80% power at 95% for a 5% change
    # takes n = 2 (1.2533 * 0.4)^2 (1.96 + 0.8416)^2 / ln(1.05)^2 = 1,660 requests per run
    assert got["runs_per_side"] == 4 and 1300 < got["requests_per_run"] < 2100, got
    bad = run("plan", "--db", stats_ledger, "--detect", "five", "--run", ids["same-1"], code=2)
    assert "'five' is not a relative change such as 5% or 0.05" in bad.output


def test_report_draws_intervals_and_the_trend(stats_ledger: str, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    batches = [a for b in range(1, 21) for a in ("--batch", f"t{b:02d}")]
    run("report", "--db", stats_ledger, *batches, "--out", out)
    html = out.read_text()
    assert 'id="plot-trend-ttft_p50"' in html and 'id="plot-cdf-ttft-t01"' in html
    assert "error bars: each run&#39;s 95% sampling interval of its p50 and p99" in html
    assert "1 change point(s); at point 11 (batch t11)" in html and "0 change point(s)" in html


def test_python_api_gives_the_same_statistics(stats_ledger: str) -> None:
    import bench_ledger as bl

    ids = _ids(stats_ledger, "pair")
    cli = _stats(stats_ledger, f"run:{ids['same-1']}", f"run:{ids['shift']}", "--metric", "ttft_p50")
    with bl.connect(stats_ledger) as led:
        got = bl.compare_stats(led, f"run:{ids['same-1']}", f"run:{ids['shift']}", ["ttft_p50"]).as_dict()
        rows = bl.run_metrics(led, run_id=ids["same-1"], intervals=True)
        series = bl.trend(led, "ttft_p50", batches=[f"t{b:02d}" for b in range(1, 21)])
        plans = bl.plan(led, ids["same-1"], 0.05, ["ttft_p50"])
    assert got["metrics"][0] == cli["ttft_p50"]
    assert rows[0].sampling["ttft_p50"].status == "interval"
    assert sorted(len(t.changes or []) for t in series) == [0, 1]
    assert plans[0].runs_per_side == 4
