"""The batch path of run_metrics (queries.metrics.grouped) equals evaluate(), metric by metric, run by run.

On both backends (the `ledger` fixture): the hand-computed fixtures of test_evaluate.py (plus runs that
reach the remaining branches: one output token, failed only, legacy chunk gaps only, mixed clocks,
unknown status, a corrected run) and a generated multi-run ledger with fields missing at random.
Equality is exact: value (Fraction), flag, n/a reason, inputs (in order: the CLI prints them as JSON),
run ids and scope. The reference (`run_metrics_per_run`: evaluate() per run and metric) is computed once
per ledger and sliced by batch for a table of some batches. Percentiles are exact too: the batch path
reads the two order statistics numpy's linear method needs and interpolates with Fractions, as evaluate
does.
"""

from __future__ import annotations

import random
from pathlib import Path

from bench_ledger.queries.metrics.grouped import supported
from bench_ledger.queries.metrics.registry import METRICS, ROW_METRICS, RunMetrics, run_metrics, run_metrics_per_run
from bench_ledger.revisions import correct_run
from bench_ledger.store import Ledger

from tests.queries.metrics.test_evaluate import imp, two_batches, write_requests  # noqa: F401  (fixture)

# every request metric the batch path serves, then a mean (computed per run as before)
BATCH = tuple(n for n, mt in METRICS.items() if supported(mt))
ALL = tuple(dict.fromkeys([*ROW_METRICS, *BATCH, "ttft_mean", "record_groups"]))


def reference(led: Ledger) -> list[RunMetrics]:
    """Every run's values of ALL by evaluate() itself, one metric and run at a time: the slow side, computed
    once per ledger state (a run's values do not depend on which batches a table lists)."""
    return run_metrics_per_run(led, None, metrics=ALL)


def assert_same(led: Ledger, ref: list[RunMetrics], batches: list[str] | None = None) -> int:
    """run_metrics (the batch path) of ``batches`` equals the reference's runs of those batches, in order."""
    fast = run_metrics(led, batches, metrics=ALL)
    slow = [r for r in ref if batches is None or r.batch in batches]
    assert [(r.run_id, r.batch, r.label) for r in fast] == [(r.run_id, r.batch, r.label) for r in slow]
    for f, s in zip(fast, slow, strict=True):
        assert list(f.values) == list(s.values) == list(ALL)
        for name in ALL:
            a, b = f.values[name], s.values[name]
            where = f"run {f.run_id} ({f.batch}/{f.label}) {name}"
            assert (a.value, a.flag, a.na_reason) == (b.value, b.flag, b.na_reason), where
            assert list(a.inputs.items()) == list(b.inputs.items()), where
            assert a == b, where
            assert type(a.value) is type(b.value), where
        assert f.as_dict() == s.as_dict()
    return len(fast)


def test_batch_path_covers_the_row_metrics() -> None:
    assert set(ROW_METRICS) - {"record_groups"} <= set(BATCH)
    assert "ttft_mean" not in BATCH  # an exact mean needs every value: computed per run


def test_batch_equals_evaluate_on_hand_fixtures(two_batches: Ledger, ledger_url: str, tmp_path: Path) -> None:  # noqa: F811
    led = two_batches
    one = write_requests(
        tmp_path / "one.jsonl",
        {"run": "O", "tool": "t"},
        [{"status": "ok", "output_tokens": 1, "ttft_s": 0.1, "latency_s": 0.1}],
    )
    failed = write_requests(
        tmp_path / "f.jsonl",
        {"run": "F", "tool": "t", "duration_s": 0.0},
        [{"status": "failed", "input_tokens": 5, "output_tokens": 0}],
    )
    # legacy writer: chunk gaps, no latency / TTFT / times: the decode span is the sum of the gaps
    gaps = write_requests(
        tmp_path / "g.jsonl",
        {"run": "G", "tool": "t", "duration_s": 7.5},
        [
            {"status": "ok", "input_tokens": 3, "output_tokens": 4, "chunk_gaps": [0.1, 0.2, 0.3]},
            {"status": "ok", "input_tokens": 3, "output_tokens": 9, "chunk_gaps": [0.25, 0.5]},
            {"status": "ok", "input_tokens": 3, "output_tokens": 1, "chunk_gaps": []},
            {"input_tokens": 3, "output_tokens": 2},
        ],
    )
    imp(ledger_url, str(one), "--batch", "b1")
    imp(ledger_url, str(failed), "--batch", "b2")
    imp(ledger_url, str(gaps), "--batch", "b2")
    # two captures of one run on different clocks: no common wall clock
    c1 = write_requests(
        tmp_path / "c1.jsonl",
        {"run": "C", "tool": "t", "clock": "epoch_s"},
        [{"status": "ok", "input_tokens": 1, "output_tokens": 2, "send_time": 1.0, "end_time": 2.0}],
    )
    c2 = write_requests(
        tmp_path / "c2.jsonl",
        {"run": "C", "tool": "t", "clock": "monotonic_s"},
        [{"status": "ok", "input_tokens": 1, "output_tokens": 2, "send_time": 5.0, "end_time": 9.0}],
    )
    imp(ledger_url, str(c1), "--batch", "b2")
    imp(ledger_url, str(c2), "--batch", "b2", "--run", "C")
    # a corrected run: the current revision is shown, captured rows stay on the first one
    rid = run_metrics(led, ["b2"], metrics=())[0].run_id
    correct_run(led, rid, "typo in the duration", duration_s=99.0)
    ref = reference(led)
    assert assert_same(led, ref) == 9
    assert assert_same(led, ref, ["b2"]) == 4
    rows = run_metrics(led, ["b2"])
    corrected = next(r for r in rows if r.values["requests_ok"].run_ids == [rid])
    assert corrected.run_id != rid and corrected.values["requests_ok"].value == 2
    g = next(r for r in rows if r.label == "G")
    assert g.values["per_stream_decode_rate_median"].flag == "derived"  # from the gap sums
    assert g.values["wall_clock_s"].flag == "reported"
    c = next(r for r in rows if r.label == "C")
    assert c.values["wall_clock_s"].na_reason == "requests are on different clocks: no common wall clock"


FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "ttft_s", "latency_s", "chunk_gaps")


def _run_records(rng: random.Random, n: int, drop: set[str], clock_s: float) -> list[dict]:
    out = []
    for _ in range(n):
        status = rng.choices(["ok", "failed", "unknown", None], [90, 6, 2, 2])[0]
        out_tok = rng.choice([0, 1, 2, rng.randint(3, 400)])
        ttft = round(rng.uniform(0.01, 0.4), 6)
        gaps = [round(rng.uniform(0.002, 0.05), 6) for _ in range(rng.randint(0, 5))]
        lat = round(ttft + sum(gaps) + rng.random() * 0.01, 6)
        send = round(clock_s + rng.uniform(0, 30), 6)
        rec = {
            "status": status,
            "input_tokens": rng.randint(1, 4000),
            "output_tokens": out_tok,
            "cached_tokens": rng.choice([0, 16, 64]),
            "ttft_s": ttft,
            "latency_s": lat,
            "chunk_gaps": gaps,
            "send_time": send,
            "first_token_time": round(send + ttft, 6),
            "end_time": round(send + lat, 6),
        }
        if rng.random() < 0.05:  # a value missing here and there (the field is still captured)
            rec[rng.choice(["ttft_s", "latency_s", "output_tokens", "input_tokens", "end_time"])] = None
        if status is None:
            del rec["status"]
        out.append({k: v for k, v in rec.items() if k not in drop})
    return out


def test_batch_equals_evaluate_on_generated_ledger(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    rng = random.Random(7)
    files = []
    for i in range(14):
        drop: set[str] = set()
        if i % 3 == 1:
            drop |= set(rng.sample(["cached_tokens", "ttft_s", "latency_s", "chunk_gaps", "first_token_time"], 2))
        if i % 4 == 2:
            drop |= {"send_time", "first_token_time", "end_time"}
        head = {"run": f"r{i}", "tool": "gen", "concurrency": 2 ** (i % 5)}
        if not drop >= {"send_time"}:
            head["clock"] = "epoch_s"
        if i % 2:
            head["duration_s"] = round(rng.uniform(10, 40), 3)
        if i == 5:
            head |= {"sampled": True, "sample_note": "every 10th request"}
        recs = _run_records(rng, rng.choice([0, 1, 2, 7, 60]) if i != 3 else 0, drop, 1000.0 * i)
        files.append(str(write_requests(tmp_path / f"r{i}.jsonl", head, recs)))
        if i == 8:  # a second capture of run r8 lacking some fields: coverage reasons
            more = write_requests(
                tmp_path / "r8b.jsonl",
                {"run": "r8", "tool": "gen", "clock": "epoch_s"},
                _run_records(rng, 9, {"cached_tokens", "chunk_gaps"}, 8000.0),
            )
    # runs r0..r13 get ids 1..14 in file order; g0 = r0-r4 and r12-r13 (ids 1-5, 13, 14: not a range, the
    # batch-filtered statements take run_filter's IN path), g1 = r5-r11 (ids 6-12: BETWEEN)
    imp(ledger_url, *files[:5], "--batch", "g0")
    imp(ledger_url, *files[5:12], "--batch", "g1")
    imp(ledger_url, *files[12:], "--batch", "g0")
    imp(ledger_url, str(more), "--batch", "g1", "--run", "r8")
    ref = reference(ledger)
    assert {r.label: (r.batch, r.run_id) for r in ref} == {
        f"r{i}": ("g1" if 5 <= i < 12 else "g0", i + 1) for i in range(14)
    }
    assert assert_same(ledger, ref) == 14
    assert assert_same(ledger, ref, ["g1"]) == 7
    assert assert_same(ledger, ref, ["g0"]) == 7
    # the generated runs reach the branches: derived, reported, and n/a for each kind of reason
    values = [v for r in ref for v in r.values.values()]
    assert {v.flag for v in values} == {"derived", "reported", "n/a"}
    reasons = " | ".join(v.na_reason for v in values if v.na_reason)
    for part in (
        "not captured",
        "captured for",
        "value missing for",
        "records are a sample",
        "no per-request records",
        "reported for",
    ):
        assert part in reasons, part
    assert sum(1 for v in values if v.flag == "derived" and v.metric.endswith(("_p50", "_p99", "_median"))) > 20


def test_batch_equals_evaluate_with_ties_nulls_and_sizes(ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    """Order statistics where they are easy to get wrong: values drawn from a few (so ties at the ranks
    read), runs of the same size (one matrix, one partition), of one request, of two (p50 between them),
    runs with failed requests only, with a NULL value (n/a, the run's other distributions still read)."""
    rng = random.Random(11)
    few = [0.1, 0.2, 0.25, 0.30000000000000004, 1.5]
    sizes = [1, 2, 2, 3, 5, 5, 5, 8, 40, 40, 101]
    files = []
    for i, n in enumerate(sizes):
        recs = []
        for j in range(n):
            ttft = rng.choice(few)
            rec = {
                "status": "ok" if (i != 3 or j) else "failed",
                "input_tokens": 7,
                "output_tokens": rng.choice([1, 2, 9]),
                "ttft_s": ttft,
                "latency_s": ttft + rng.choice(few),
            }
            if i == 6 and j == 2:
                rec["latency_s"] = None  # a missing value: e2e n/a for this run, TTFT still derived
            recs.append(rec)
        files.append(str(write_requests(tmp_path / f"t{i}.jsonl", {"run": f"t{i}", "tool": "t"}, recs)))
    failed = [{"status": "failed", "input_tokens": 3, "output_tokens": 0, "ttft_s": 0.0, "latency_s": 0.0}] * 4
    files.append(str(write_requests(tmp_path / "f.jsonl", {"run": "f", "tool": "t"}, failed)))
    imp(ledger_url, *files, "--batch", "ties")  # one command: the runs in file order, as one at a time
    ref = reference(ledger)
    assert [r.label for r in ref] == [f"t{i}" for i in range(len(sizes))] + ["f"]
    assert assert_same(ledger, ref, ["ties"]) == len(sizes) + 1
    rows = {r.label: r.values for r in ref}
    assert rows["t6"]["e2e_latency_p50"].na_reason == "value missing for 1 of 5 ok requests"
    assert rows["t6"]["ttft_p50"].flag == "derived"
    assert rows["f"]["ttft_p50"].na_reason == "no ok requests with output"
    assert rows["t0"]["ttft_p99"].value == rows["t0"]["ttft_max"].value  # one value: every percentile is it


def test_run_filter_between_only_for_a_range_of_ids() -> None:
    """run_filter reads a range of ids by BETWEEN (zone maps, stored order) and anything else by the semi-join."""
    import sqlalchemy as sa
    from bench_ledger.queries.metrics.grouped import run_filter

    sel = sa.select(sa.literal(1))
    assert (
        str(run_filter(sel, [3, 1, 2, 2]).compile(compile_kwargs={"literal_binds": True}))
        == "request.run_id BETWEEN 1 AND 3"
    )
    for ids in ([1, 3], [], None):
        assert " IN " in str(run_filter(sel, ids).compile()), ids


def test_order_stats_equal_a_partition_per_run() -> None:
    """_order_stats (runs of one size as one matrix, one np.sort) reads the same order statistics as
    np.partition per run: sizes 1, 2 and repeated, ties, -0.0 beside 0.0, runs with a NULL value."""
    import numpy as np
    from bench_ledger.queries.metrics.grouped import (
        _order_stats,
        ranks_read,
    )  # private: the grouped path's order statistics

    rng = np.random.default_rng(5)
    sizes = [1, 2, 2, 3, 7, 7, 7, 50, 50, 101, 1000, 1000]
    few = np.array([-0.0, 0.0, 0.1, 0.2, 0.30000000000000004, 1.5])
    run = np.repeat(np.arange(10, 10 + len(sizes)), sizes)
    vals = np.where(rng.random(len(run)) < 0.5, rng.choice(few, len(run)), rng.random(len(run)))
    null = np.zeros(len(run), bool)
    null[np.flatnonzero(run == 14)[3]] = True  # one NULL in a run of 7
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    ps = {50, 90, 99, 100}
    for nulls in (null, None):
        got = _order_stats(run, starts, nulls, vals, ps)
        for rid, s, n in zip(run[starts].tolist(), starts.tolist(), sizes, strict=True):
            nn = 0 if nulls is None else int(nulls[s : s + n].sum())
            if nn:
                assert got[rid] == (n, nn, {}), rid
                continue
            ranks = ranks_read(n, ps)
            want = dict(zip(ranks, np.partition(vals[s : s + n], ranks)[ranks].tolist(), strict=True))
            assert got[rid][:2] == (n, 0) and got[rid][2] == want, rid
            assert all(type(v) is float for v in got[rid][2].values())


def test_pg_shares_read_the_runs_on_one_snapshot(pg_ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """PostgreSQL reads the run-by-run statement over 1 + max_parallel_workers_per_gather connections at
    once, every run in exactly one share, all on the snapshot the caller's connection exported: a run
    committed after the export, before the shares read, is in none of them (and in the next read)."""
    import sqlalchemy as sa
    from bench_ledger import models as m
    from bench_ledger.queries.metrics import arrays as mb

    url = pg_ledger.url
    rec = {"status": "ok", "input_tokens": 1, "output_tokens": 2, "ttft_s": 0.1, "latency_s": 0.3}
    imp(
        url,
        *(str(write_requests(tmp_path / f"s{i}.jsonl", {"run": f"s{i}", "tool": "t"}, [rec])) for i in range(7)),
        "--batch",
        "s",
    )
    late = write_requests(tmp_path / "late.jsonl", {"run": "late", "tool": "t"}, [rec])
    runs = sa.select(m.Run.__table__.c.id)
    calls: list[int] = []
    real = mb.pg_rows

    def rows(conn: sa.Connection, stmt: sa.Select) -> list:
        if not calls:  # this share's connection has imported the snapshot: a commit now is after it
            imp(url, str(late), "--batch", "s")
        calls.append(1)
        return real(conn, stmt)

    monkeypatch.setattr(mb, "pg_rows", rows)

    def statement(share: sa.Select) -> sa.Select:
        return sa.select(share.subquery().c[0].label("run_id"))

    with pg_ledger.connection() as conn:
        conn.exec_driver_sql("SET max_parallel_workers_per_gather = 2")  # the server's default, whatever it is set to
        assert mb.pg_shares(conn, 7) == 3 and mb.pg_shares(conn, 2) == 2
        assert mb.pg_shares(conn, 1) == 1
        got = [r["run_id"] for r in mb.pg_rows_shared(conn, runs, statement, 7)]
        assert len(calls) == 3
        assert sorted(got) == list(range(1, 8))
    with pg_ledger.connection() as conn:
        assert sorted(r["run_id"] for r in mb.pg_rows_shared(conn, runs, statement, 8)) == list(range(1, 9))
    with pg_ledger.connection() as conn:
        conn.exec_driver_sql("SET max_parallel_workers_per_gather = 0")
        assert mb.pg_shares(conn, 8) == 1
