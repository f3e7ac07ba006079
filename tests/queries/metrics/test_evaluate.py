"""Every metric on hand-computed fixtures, on DuckDB and PostgreSQL (the `ledger` fixture)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import pytest
from bench_ledger import models as m
from bench_ledger.cli import main
from bench_ledger.errors import Refused
from bench_ledger.queries.metrics.definitions import percentile_linear
from bench_ledger.queries.metrics.registry import METRICS, evaluate, run_metrics
from bench_ledger.queries.values import Scope
from bench_ledger.store import Ledger
from click.testing import CliRunner

F = Fraction


def write_requests(path: Path, header: dict, records: list[dict]) -> Path:
    lines = [json.dumps({"ledger_requests": 1, **header})] + [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


# Run A (epoch seconds): three ok requests (5, 1 and 0 output tokens) and one failed.
RUN_A = [
    {
        "status": "ok",
        "input_tokens": 10,
        "output_tokens": 5,
        "send_time": 100.0,
        "first_token_time": 100.5,
        "end_time": 102.5,
        "ttft_s": 0.5,
        "latency_s": 2.5,
        "chunk_gaps": [0.5, 0.5, 0.25, 0.75],
    },
    {
        "status": "ok",
        "input_tokens": 20,
        "output_tokens": 1,
        "send_time": 101.0,
        "first_token_time": 101.2,
        "end_time": 101.2,
        "ttft_s": 0.2,
        "latency_s": 0.2,
        "chunk_gaps": [],
    },
    {
        "status": "ok",
        "input_tokens": 30,
        "output_tokens": 0,
        "send_time": 101.5,
        "first_token_time": None,
        "end_time": 103.0,
        "ttft_s": None,
        "latency_s": 1.5,
        "chunk_gaps": [],
    },
    {
        "status": "failed",
        "input_tokens": 40,
        "output_tokens": None,
        "send_time": 102.0,
        "first_token_time": None,
        "end_time": None,
        "ttft_s": None,
        "latency_s": None,
        "chunk_gaps": None,
    },
]


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, *args])
    assert res.exit_code == 0, res.output


@pytest.fixture
def two_batches(ledger: Ledger, ledger_url: str, tmp_path: Path) -> Ledger:
    """The two batches (:func:`build_two_batches`) in the test's own ledger, for a test that adds to them."""
    return build_two_batches(ledger, ledger_url, tmp_path)


@pytest.fixture(scope="module")
def _two_batches_url(module_ledger_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    with Ledger(module_ledger_url) as led:
        build_two_batches(led, module_ledger_url, tmp_path_factory.mktemp("two-batches"))
    return module_ledger_url


@pytest.fixture
def two_batches_read(_two_batches_url: str) -> Iterator[Ledger]:
    """The two batches built once per module and backend, for the tests that only read them."""
    with Ledger(_two_batches_url) as led:
        yield led


def build_two_batches(ledger: Ledger, ledger_url: str, tmp_path: Path) -> Ledger:
    """Batch b1: run A (timed), run B (two captures, untimed), an empty run, a sampled run.
    Batch b2: run A again (same deployment d1 as b1's run A)."""
    with ledger.session() as s:
        s.add(m.Deployment(name="d1", fingerprint="0" * 64, recorded_at=datetime(2026, 1, 1), max_model_len=16384))
    head = {
        "clock": "epoch_s",
        "input_target_tokens": 50,
        "output_cap_tokens": 8,
        "concurrency": 2,
        "request_count": 4,
        "seed": 1,
    }
    a = write_requests(tmp_path / "a.jsonl", {"run": "A", "tool": "t", **head}, RUN_A)
    imp(ledger_url, str(a), "--batch", "b1", "--deployment", "d1")
    b1 = write_requests(
        tmp_path / "b1.jsonl",
        {"run": "B", "tool": "t", "duration_s": 10.0},
        [
            {"status": "ok", "input_tokens": 100, "output_tokens": 10, "cached_tokens": 64},
            {"status": "ok", "input_tokens": 100, "output_tokens": 20, "cached_tokens": 0},
        ],
    )
    b2 = write_requests(
        tmp_path / "b2.jsonl",
        {"run": "B", "tool": "t"},
        [
            {"status": "ok", "input_tokens": 100, "output_tokens": 30},
        ],
    )
    imp(ledger_url, str(b1), "--batch", "b1")
    imp(ledger_url, str(b2), "--batch", "b1", "--run", "B")
    empty = write_requests(tmp_path / "e.jsonl", {"run": "E", "tool": "t"}, [])
    imp(ledger_url, str(empty), "--batch", "b1")
    sampled = write_requests(
        tmp_path / "s.jsonl",
        {"run": "S", "tool": "t", "sampled": True, "sample_note": "sample_size=2"},
        [{"status": "ok", "input_tokens": 1, "output_tokens": 2}],
    )
    imp(ledger_url, str(sampled), "--batch", "b1")
    a2 = write_requests(tmp_path / "a2.jsonl", {"run": "A", "tool": "t", **head}, RUN_A[:2])
    imp(ledger_url, str(a2), "--batch", "b2", "--deployment", "d1")
    return ledger


def ev(ledger: Ledger, metric: str, run: str = "A", batch: str = "b1"):
    return evaluate(ledger, metric, Scope(batch=batch, run=run))


# ------------------------------------------------------------------ percentile method


def test_percentile_is_numpy_linear_by_hand() -> None:
    xs = [F(1), F(2), F(4), F(8)]
    # numpy.percentile([1,2,4,8], q): h = 3q/100; q=50 -> 3; q=90 -> 6.8; q=99 -> 7.88; q=0 -> 1; q=100 -> 8
    assert percentile_linear(xs, 50) == 3
    assert percentile_linear(xs, 90) == F(68, 10)
    assert percentile_linear(xs, 99) == F(788, 100)
    assert percentile_linear(xs, 0) == 1 and percentile_linear(xs, 100) == 8
    assert percentile_linear([F(5)], 99) == 5


def test_percentile_is_the_textbook_interpolation_exactly() -> None:
    # percentile_linear folds a + frac·(b - a) into one fraction: the same rational, on values from doubles
    rng = random.Random(3)
    for _ in range(3000):
        xs = sorted(
            F(rng.choice([rng.random(), rng.uniform(0, 1e6), float(rng.randint(0, 5))]))
            for _ in range(rng.randint(1, 40))
        )
        for p in (0, 1, 50, 90, 99, 100, F(1, 3), F(999, 10)):
            q = F(p)
            h = (len(xs) - 1) * q / 100
            lo = int(h)
            want = xs[-1] if lo + 1 >= len(xs) else xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo])
            got = percentile_linear(xs, p)
            assert got == want and type(got) is F, (xs, p)


# ------------------------------------------------------------------ requests


def test_counts_and_totals(two_batches_read: Ledger) -> None:
    led = two_batches_read
    assert ev(led, "requests_ok").value == 3
    assert ev(led, "requests_failed").value == 1
    assert ev(led, "requests_unknown").value == 0
    assert ev(led, "input_tokens").value == 60  # ok requests only: 10 + 20 + 30
    assert ev(led, "output_tokens").value == 6  # 5 + 1 + 0
    v = ev(led, "output_tokens")
    assert v.flag == "derived" and v.inputs["requests_ok"] == 3 and "output_tokens" in v.inputs["fields"]
    # record groups are runs, never requests (R2)
    rg = evaluate(led, "record_groups", Scope(batch="b1"))
    assert rg.value == 4 and rg.quantity_kind == "record_count"
    assert METRICS["requests_ok"].quantity_kind == "request_count"


def test_wall_clock_and_tpm(two_batches_read: Ledger) -> None:
    led = two_batches_read
    wall = ev(led, "wall_clock_s")
    assert wall.value == 3 and wall.flag == "derived"  # first send 100.0 -> last end 103.0
    assert ev(led, "total_tpm").value == F(60 * 66, 3)  # 1,320 tokens/min
    assert ev(led, "output_tpm").value == 120
    assert ev(led, "output_tokens_per_s").value == 2
    # no times: the tool's own duration, flagged
    wb = ev(led, "wall_clock_s", run="B")
    assert wb.value == 10 and wb.flag == "reported" and "tool's own duration" in wb.inputs["basis"]
    tpm = ev(led, "total_tpm", run="B")
    assert tpm.value == F(60 * 360, 10) and "tool's own duration" in tpm.inputs["basis"]


def test_latency_distributions(two_batches_read: Ledger) -> None:
    led = two_batches_read
    # TTFT over ok requests with output: [0.2, 0.5]
    assert ev(led, "ttft_mean").value == F(0.2) / 2 + F(0.5) / 2
    assert ev(led, "ttft_p50").value == (F(0.2) + F(0.5)) / 2
    assert ev(led, "ttft_p90").value == F(0.2) + F(9, 10) * (F(0.5) - F(0.2))
    assert ev(led, "ttft_max").value == F(0.5)
    # TPOT only for output > 1: (2.5 - 0.5) / 4
    assert ev(led, "tpot_mean").value == F(0.5)
    # chunk gaps flattened: [0.25, 0.5, 0.5, 0.75]
    assert ev(led, "itl_p50").value == F(0.5) and ev(led, "itl_mean").value == F(0.5)
    assert ev(led, "itl_p99").value == F(0.5) + F(97, 100) * F(0.25)
    # e2e over ok: [0.2, 1.5, 2.5]
    assert ev(led, "e2e_latency_p50").value == F(1.5)
    assert ev(led, "e2e_latency_p99").value == F(1.5) + F(98, 100) * (F(2.5) - F(1.5))
    # per-stream decode rate: (5 - 1) / (2.5 - 0.5) = 2 tokens/s, a per-stream rate (R4)
    d = ev(led, "per_stream_decode_rate_median")
    assert d.value == 2 and d.quantity_kind == "per_stream_token_rate"


def test_decode_rate_is_double_arithmetic_on_both_backends(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    # the span 0.4 - 0.1 is the double 0.30000000000000004; PostgreSQL once divided by it cast to NUMERIC
    # (15 significant digits: 0.3), so its rate differed from DuckDB's and from the definition
    path = write_requests(
        tmp_path / "r.jsonl",
        {"run": "R", "tool": "t"},
        [{"status": "ok", "output_tokens": 3, "ttft_s": 0.1, "latency_s": 0.4}],
    )
    imp(ledger_url, str(path), "--batch", "b")
    want = F((3 - 1) / (0.4 - 0.1))
    assert want != F(2 / 0.3)
    assert evaluate(ledger, "per_stream_decode_rate_median", Scope(batch="b", run="R")).value == want
    assert run_metrics(ledger, ["b"])[0].values["per_stream_decode_rate_median"].value == want


def test_missing_fields_are_na_never_zero(two_batches_read: Ledger) -> None:
    led = two_batches_read
    v = ev(led, "cache_hit_tokens")
    assert v.value is None and v.flag == "n/a" and v.na_reason == "cached_tokens not captured"
    # run B: one capture has cached_tokens, the other not -> coverage, never a partial sum (R9)
    v = ev(led, "cache_hit_tokens", run="B")
    assert v.value is None and v.na_reason == "cached_tokens captured for 2 of 3 requests"
    assert ev(led, "ttft_p50", run="B").na_reason == "ttft_s or send_time + first_token_time not captured"
    assert ev(led, "itl_mean", run="B").na_reason == "chunk_gaps not captured"


def test_empty_sampled_and_one_token(two_batches: Ledger, ledger_url: str, tmp_path: Path) -> None:
    led = two_batches
    assert (
        ev(led, "requests_ok", run="E").na_reason
        == "no per-request records in this scope's artefacts (aggregates only)"
    )
    assert ev(led, "total_tpm", run="E").value is None
    s = ev(led, "output_tokens", run="S")
    assert s.value is None and s.na_reason.startswith("records are a sample (sample_size=2)")
    # a run whose only ok request has one output token: no TPOT, no decode rate
    one = write_requests(
        tmp_path / "one.jsonl",
        {"run": "O", "tool": "t"},
        [{"status": "ok", "output_tokens": 1, "ttft_s": 0.1, "latency_s": 0.1}],
    )
    imp(ledger_url, str(one), "--batch", "b1")
    assert ev(led, "tpot_mean", run="O").na_reason == "no ok requests with more than one output token"
    assert ev(led, "per_stream_decode_rate_median", run="O").value is None
    assert ev(led, "ttft_p50", run="O").value == F(0.1)


def test_no_ok_requests(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    f = write_requests(
        tmp_path / "f.jsonl", {"run": "F", "tool": "t"}, [{"status": "failed", "input_tokens": 5, "output_tokens": 0}]
    )
    imp(ledger_url, str(f), "--batch", "b")
    assert evaluate(ledger, "requests_failed", Scope(batch="b", run="F")).value == 1
    assert evaluate(ledger, "input_tokens", Scope(batch="b", run="F")).na_reason == "no ok requests"
    assert (
        evaluate(ledger, "ttft_mean", Scope(batch="b", run="F")).na_reason
        == "ttft_s or send_time + first_token_time not captured"
    )


# ------------------------------------------------------------------ refusals


def test_r2_no_computation_across_batches(two_batches_read: Ledger) -> None:
    with pytest.raises(Refused) as exc:
        evaluate(two_batches_read, "requests_ok", Scope(deployment="d1"))
    assert exc.value.rule == "R2"
    assert str(exc.value) == (
        "refused by R2: requests_ok over deployment d1: the scope spans batches b1, b2: no total, rate, percentile "
        "or series is computed across batches. Instead: evaluate it per batch (Scope(batch=...)) and show the rows "
        "side by side, each labelled"
    )
    # within one batch the deployment scope is fine
    assert evaluate(two_batches_read, "requests_ok", Scope(deployment="d1", batch="b2")).value == 2


def test_r7_no_percentile_pooled_over_runs(two_batches_read: Ledger) -> None:
    with pytest.raises(Refused) as exc:
        evaluate(two_batches_read, "ttft_p50", Scope(batch="b1"))
    assert exc.value.rule == "R7"
    assert exc.value.why == (
        "the scope holds 4 runs (different load points); a percentile pooled over them mixes loads"
    )
    # counts add up within a batch; runs without records make it n/a, not a partial count
    v = evaluate(two_batches_read, "requests_ok", Scope(batch="b1"))
    assert v.value is None and v.na_reason.startswith("no per-request records for run(s)")


# ------------------------------------------------------------------ run_metrics


def test_run_metrics_rows(two_batches_read: Ledger) -> None:
    rows = run_metrics(two_batches_read, ["b1", "b2"])
    assert [(r.batch, r.label) for r in rows] == [("b1", "A"), ("b1", "B"), ("b1", "E"), ("b1", "S"), ("b2", "A")]
    assert rows[0].values["total_tpm"].value == 1320
    assert rows[4].values["requests_ok"].value == 2  # b2's run A alone, never pooled with b1's
    assert rows[0].input_target_tokens == 50 and rows[0].concurrency == 2


def test_run_metrics_as_arrow(two_batches_read: Ledger) -> None:
    from bench_ledger.queries.metrics.registry import to_arrow

    table = to_arrow(run_metrics(two_batches_read, ["b1", "b2"]))
    assert table.num_rows == 5
    assert table.column("batch").to_pylist() == ["b1", "b1", "b1", "b1", "b2"]
    assert table.column("total_tpm").to_pylist()[0] == 1320.0
    assert table.column("total_tpm_flag").to_pylist()[0] == "derived"
    assert "total_tpm_na_reason" in table.column_names


# ------------------------------------------------------------------ hardware and logs

DMON = """# gpu    pwr  gtemp     sm    mem
# Idx      W      C      %      %
    0    100     50     90      5
    1    300     60     80      6
    0    200     51     70      7
    1    100     61     60      8
"""


def test_power_three_statistics_and_counters(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    (tmp_path / "dmon.txt").write_text(DMON)
    imp(ledger_url, str(tmp_path / "dmon.txt"), "--batch", "hw", "--node", "n0")
    sc = Scope(batch="hw")
    # cards: gpu0 [100, 200], gpu1 [300, 100]
    assert evaluate(ledger, "power_sum_of_card_means_w", sc).value == 150 + 200
    peak = evaluate(ledger, "power_peak_of_sum_w", sc)
    assert peak.value == 400 and peak.inputs["aligned_by"] == "tick index"  # ticks: 400, 300
    assert evaluate(ledger, "power_sum_of_card_peaks_w", sc).value == 200 + 300
    assert evaluate(ledger, "power_sum_of_card_means_w", sc).quantity_kind == "power_card_mean_sum"
    # sm is activity time (R13), per card only
    v = evaluate(ledger, "gpu_activity_time_pct_mean", sc)
    assert v.value is None and v.inputs["per_card"] == {"n0:gpu0": 80.0, "n0:gpu1": 70.0}
    one = evaluate(ledger, "gpu_activity_time_pct_mean", Scope(batch="hw", gpu="1"))
    assert one.value == 70 and one.unit == "%" and one.quantity_kind == "activity_time_percent"
    assert evaluate(ledger, "memory_busy_pct_max", Scope(batch="hw", gpu="0")).value == 7
    assert not any("utilization" in name or "mfu" in name for name in METRICS)


def test_unconfirmed_units_are_carried(ledger: Ledger, ledger_url: str, fixtures: Path) -> None:
    imp(ledger_url, str(fixtures / "dmon" / "no_units.txt"), "--batch", "hw")
    v = evaluate(ledger, "power_sum_of_card_peaks_w", Scope(batch="hw"))
    assert v.unit == "unconfirmed"


def test_kv_capacity_ratio_and_seconds_to_ready(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    with ledger.session() as s:
        dep = m.Deployment(name="a100", fingerprint="1" * 64, recorded_at=datetime(2026, 1, 1))
        s.add(dep)
        s.flush()
        s.add(
            m.Launch(
                deployment_id=dep.id,
                attempt=1,
                outcome="ready",
                seconds_to_ready=None,
                seconds_to_ready_flag="n/a",
                recorded_at=datetime(2026, 1, 1),
            )
        )
        s.add(
            m.Launch(
                deployment_id=dep.id,
                attempt=2,
                outcome="ready",
                seconds_to_ready=__import__("decimal").Decimal("390"),
                seconds_to_ready_flag="reported",
                recorded_at=datetime(2026, 1, 1),
            )
        )
    imp(ledger_url, str(samples / "vllm-server-log" / "vllm-7B-1gpuA10080GB-0.5GRAM.log"), "--deployment", "a100")
    v = evaluate(ledger, "kv_capacity_ratio", Scope(deployment="a100"))
    assert v.value == F(464848, 16384) and v.quantity_kind == "capacity_ratio"  # 28.37x: a capacity (R5)
    r = evaluate(ledger, "seconds_to_ready", Scope(deployment="a100", launch=2))
    assert r.value == 390 and r.flag == "reported"
    assert evaluate(ledger, "seconds_to_ready", Scope(deployment="a100")).na_reason.startswith("per launch: 2 launches")


# ------------------------------------------------------------------ CLI


def test_cli_metrics_two_batches_juxtaposed(_two_batches_url: str) -> None:
    ledger_url = _two_batches_url
    res = CliRunner().invoke(main, ["metrics", "--db", ledger_url, "--batch", "b1", "--batch", "b2"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split() == [
        "batch",
        "run",
        "in/out",
        "C/N",
        "ok/failed",
        "total",
        "TPM",
        "output",
        "TPM",
        "TTFT",
        "p50",
        "s",
    ]
    a1 = next(line for line in lines if line.startswith("b1") and " A " in line)
    assert "50 / 8" in a1 and "2 / 4" in a1 and "3 d / 1 d" in a1 and "1,320 d" in a1 and "120 d" in a1
    assert "0.3500 d" in a1  # TTFT p50 of [0.2, 0.5]
    a2 = next(line for line in lines if line.startswith("b2"))
    assert "2 d / 0 d" in a2
    assert "2 batches side by side (b1, b2): nothing is pooled across batches (R2)" in res.output
    assert any(line.startswith("[1] n/a: ") for line in lines)
    js = CliRunner().invoke(main, ["metrics", "--db", ledger_url, "--run", "1", "--json"])
    assert js.exit_code == 0, js.output
    row = json.loads(js.output)[0]
    assert row["metrics"]["total_tpm"] == {
        **row["metrics"]["total_tpm"],
        "value": 1320.0,
        "exact": "1320",
        "flag": "derived",
    }
    csv_out = CliRunner().invoke(main, ["metrics", "--db", ledger_url, "--batch", "b2", "--csv"])
    assert csv_out.exit_code == 0 and "total_tpm_flag" in csv_out.output.splitlines()[0]


def test_named_card_reads_only_its_rows_and_checks_every_card(
    ledger: Ledger, ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench_ledger.queries.metrics import hardware as mh

    (tmp_path / "a.txt").write_text(DMON)
    (tmp_path / "b.txt").write_text(DMON.replace("   90 ", "   30 "))  # node n0 again: the same cards
    (tmp_path / "c.txt").write_text(DMON.replace("   80 ", "   20 "))  # no node: cards named by artefact
    for f, *node in (("a.txt", "--node", "n0"), ("b.txt", "--node", "n0"), ("c.txt",)):
        imp(ledger_url, str(tmp_path / f), "--batch", "hw", *node)
    seen: list[int] = []  # the samples each read brings back
    read_cards = mh.read_cards
    monkeypatch.setattr(
        mh,
        "read_cards",
        lambda conn, where: (got := read_cards(conn, where), seen.append(sum(g.samples for g in got)))[0],
    )
    all_cards = evaluate(ledger, "gpu_activity_time_pct_mean", Scope(batch="hw"))
    art = sorted(c for c in all_cards.inputs["per_card"] if c.startswith("artefact"))
    assert all_cards.inputs["per_card"] == {"n0:gpu0": 65.0, "n0:gpu1": 70.0, art[0]: 80.0, art[1]: 40.0}
    assert seen == [12]
    one = evaluate(ledger, "gpu_activity_time_pct_mean", Scope(batch="hw", gpu="n0:gpu0"))
    assert one.value == 65 and one.inputs["samples"] == 4 and one.inputs["card"] == "n0:gpu0"
    assert seen == [12, 4]  # both files of node n0, not the other cards' rows
    other = evaluate(ledger, "gpu_activity_time_pct_max", Scope(batch="hw", gpu=art[1]))
    assert other.value == 60 and seen == [12, 4, 2]
    amb = evaluate(ledger, "gpu_activity_time_pct_mean", Scope(batch="hw", gpu="1"))
    assert amb.na_reason == f"card '1' ambiguous; cards: {sorted(all_cards.inputs['per_card'])}"
    gone = evaluate(ledger, "gpu_activity_time_pct_mean", Scope(batch="hw", gpu="n1:gpu0"))
    assert gone.na_reason == f"card 'n1:gpu0' not found; cards: {sorted(all_cards.inputs['per_card'])}"
    assert seen == [12, 4, 2]


def _random_dmon(rng: random.Random, timed: bool) -> str:
    """dmon text of 3 cards whose ticks miss cards, repeat a card (a second line of one card at one time)
    and tie: powers of 2 or 3 W, the last two ticks all 3 W (the largest sum, so at least two ticks have it)."""
    head = (
        "#Date       Time        gpu    pwr     sm\n#YYYYMMDD   HH:MM:SS    Idx      W      %\n"
        if timed
        else "# gpu    pwr     sm\n# Idx      W      %\n"
    )
    lines = [head]
    n = rng.randint(5, 40)
    for t in range(n + 2):
        stamp = f" 20240105   00:{t // 60:02d}:{t % 60:02d}   " if timed else ""
        gpus = sorted(rng.sample(range(3), rng.choice((1, 2, 3, 3, 3)))) if t < n else [0, 1, 2]
        if timed and t < n and rng.random() < 0.3:
            gpus.append(gpus[-1])  # the card printed again at the same time: its later line counts
        for g in gpus:  # the last two ticks: every card at 3 W, the largest sum (a tie at least)
            lines.append(f"{stamp} {g:>3} {rng.choice((2, 3)) if t < n else 3:>6} {rng.randint(0, 100):>6}\n")
    return "".join(lines)


@pytest.mark.parametrize("seed", range(6))
def test_peak_of_sum_equals_its_definition_over_the_rows(
    ledger: Ledger, ledger_url: str, tmp_path: Path, seed: int
) -> None:
    """power_peak_of_sum_w (read as one array per card, summed in numpy, the near-largest sums exactly)
    equals the definition over the raw rows: per aligned tick (the timestamp, else the tick index) each
    card's last row, the ticks where every card printed, the largest exact sum, and of equal sums the
    tick that occurs first; timed with two files of one node, untimed with one file."""
    import sqlalchemy as sa

    rng = random.Random(seed)
    timed = seed % 2 == 0
    files = 2 if timed else 1
    for i in range(files):
        (tmp_path / f"d{i}.txt").write_text(_random_dmon(rng, timed))
        imp(ledger_url, str(tmp_path / f"d{i}.txt"), "--batch", "hw", "--node", "n0")
    HS = m.HardwareSample.__table__
    with ledger.connection() as conn:
        rows = conn.execute(
            sa.select(HS.c.artefact_id, HS.c.line, HS.c.gpu, HS.c.tick, HS.c.ts, HS.c.value)
            .where(HS.c.counter == "pwr", HS.c.value.is_not(None))
            .order_by(HS.c.artefact_id, HS.c.line)
        ).all()
    cards = {r.gpu for r in rows}
    ticks: dict[object, dict[int, Fraction]] = {}
    for r in rows:
        ticks.setdefault(r.ts if timed else r.tick, {})[r.gpu] = Fraction(r.value)
    full = {k: sum(v.values(), Fraction(0)) for k, v in ticks.items() if len(v) == len(cards)}
    got = evaluate(ledger, "power_peak_of_sum_w", Scope(batch="hw"))
    top = max(full.values())
    first = next(k for k, v in full.items() if v == top)
    assert (got.value, got.inputs["at"], got.inputs["ticks"], got.inputs["ticks_incomplete"]) == (
        top,
        str(first),
        len(full),
        len(ticks) - len(full),
    )
    assert got.inputs["aligned_by"] == ("timestamp" if timed else "tick index")
    assert sum(v == top for v in full.values()) > 1  # a tie (the file ends in two): the first tick is named


def test_the_first_run_metrics_of_a_process_imports_nothing(tmp_path: Path, fixtures: Path) -> None:
    """A cold `ledger metrics` pays for every module its first call imports: numpy's np.unique imported
    numpy.ma there (~20 ms of a 0.5 s target, issue 17). Run in a fresh process, as the benchmark does."""
    import subprocess
    import sys

    ledger_url = f"duckdb:///{tmp_path / 'm.duckdb'}"  # the DuckDB read path (Arrow, numpy) is the one timed
    assert CliRunner().invoke(main, ["init", "--db", ledger_url]).exit_code == 0
    imp(ledger_url, str(fixtures / "vllm_bench" / "detailed_start_times.json"), "--batch", "b")
    code = (
        "import sys\nfrom bench_ledger.store import Ledger\nfrom bench_ledger.queries.metrics.registry import run_metrics\n"
        f"ledger = Ledger({ledger_url!r})\nbefore = set(sys.modules)\nrows = run_metrics(ledger, ['b'])\n"
        "assert rows and rows[0].values['requests_ok'].value\nprint(sorted(set(sys.modules) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"
