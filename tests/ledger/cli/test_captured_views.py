"""`ledger show artefact`, `ledger hardware`, `ledger logs` on the shared real samples (issue 14 item 8,
issue 15: nvidia-smi CSV and dcgmi dmon summarised by the hardware view), both backends."""

from __future__ import annotations

import csv
import json
import shutil
from fractions import Fraction
from pathlib import Path

from bench_ledger.queries.metrics.registry import evaluate
from bench_ledger.queries.values import Scope
from bench_ledger.store import Ledger

from tests.clirun import run

LOG = "vllm-server-log/vllm-7B-1gpuA10080GB-0.5GRAM.log"
DMON = "dmon/dmon_3gpu_rtx30xx.txt"
SMI = "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv"
DCGM = "dcgmi-dmon/agi-hpc_dcgm_dmon_rtx2080ti.txt"
VLLM = "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"


def test_logs_of_a_batch(ledger_url: str, samples: Path) -> None:
    run("import", str(samples / LOG), "--batch", "logs", "--db", ledger_url)
    out = run("logs", "--batch", "logs", "--db", ledger_url).output.splitlines()
    assert out[:5] == [
        "server logs of batch logs: 1",
        "  artefact 1 vllm-7B-1gpuA10080GB-0.5GRAM.log",
        "    launch: n/a (no launch names this log (a manifest's launch names its log: `log:` under the launch, "
        "`ledger declare`))",
        "    runs: n/a (no launch names this log (a manifest's launch names its log: `log:` under the launch, "
        "`ledger declare`))",
        "    warm_compile: warm (measured: compiled graphs loaded from the compile cache (line 35), none compiled)",
    ]
    assert out[5:8] == [
        "    engine settings, log vs deployment n/a:",
        "      max_model_len: n/a (declared n/a, logged 16384; the log has no deployment to compare with)",
        "      tp: n/a (declared n/a, logged n/a; the log has no deployment to compare with)",
    ]
    start = out.index("== facts (value as printed)") + 2
    rows = {(ln.split()[0], ln.split()[3]): ln.split()[4] for ln in out[start:]}  # process: "APIServer pid=2739"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:3", "arg_max_model_len")] == "16384"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:3", "arg_gpu_memory_utilization")] == "0.5"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:7", "max_model_len")] == "16384"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:35", "compile_cache_load_seconds")] == "7.088"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:37", "torch_compile_seconds")] == "8.82"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:46", "cuda_graph_memory")] == "0.50"
    assert rows[("vllm-7B-1gpuA10080GB-0.5GRAM.log:43", "kv_cache_tokens")] == "464,848"
    only = json.loads(run("logs", "--batch", "logs", "--kind", "warm_compile", "--json", "--db", ledger_url).output)
    assert [(f["line"], f["text"]) for f in only["facts"]] == [(35, "warm")]
    assert only["logs"][0]["launch"] is None and only["logs"][0]["runs"] is None


def test_logs_of_a_deployment_name_its_launch(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    shutil.copyfile(samples / LOG, tmp_path / "launch1.log")
    (tmp_path / "m.yaml").write_text(
        "version: 1\ndeployments:\n  - name: a100-qwen\n    max_model_len: 16384\n    tp: 1\n"
        "    chunked_prefill_tokens: 4096\n    launches:\n"
        "      - {attempt: 1, outcome: ready, log: launch1.log}\n",
        encoding="utf-8",
    )
    run("declare", str(tmp_path / "m.yaml"), "--db", ledger_url)
    got = json.loads(run("logs", "--deployment", "a100-qwen", "--json", "--db", ledger_url).output)
    assert got["scope"] == "deployment a100-qwen"
    assert [(lg["launch"], lg["launch_reason"], lg["warm_compile"]) for lg in got["logs"]] == [
        ("a100-qwen#1", None, "warm")
    ]
    text = run("logs", "--deployment", "a100-qwen", "--db", ledger_url).output
    assert "    launch: a100-qwen#1\n" in text
    settings = {st["setting"]: (st["status"], st["logged"], st["lines"]) for st in got["logs"][0]["settings"]}
    assert settings == {
        "max_model_len": ("agree", "16384", [7]),
        "tp": ("n/a", None, []),
        "pp": ("n/a", None, []),
        "dp": ("n/a", None, []),
        "max_num_seqs": ("n/a", None, []),
        "chunked_prefill_tokens": ("differ", "2048", [8]),
    }
    assert (
        "      chunked_prefill_tokens: differ (declared 4096, logged 2048; max_num_batched_tokens at line 8)\n" in text
    )
    assert (
        "      tp: n/a (declared 1, logged n/a; the log prints none of arg_tensor_parallel_size (an engine argument "
        "left at vLLM's default is not printed))\n"
    ) in text
    assert "      pp: n/a (declared n/a, logged n/a; deployment a100-qwen does not declare pp)\n" in text


def test_logs_errors(ledger_url: str) -> None:
    assert (
        run("logs", "--db", ledger_url, code=2).output
        == "error: name the logs: --batch B or --deployment D (one of them)\n"
    )
    assert run("logs", "--batch", "a", "--deployment", "b", "--db", ledger_url, code=2).output.startswith(
        "error: name the logs"
    )
    assert run("logs", "--batch", "nope", "--db", ledger_url, code=1).output == (
        "error: no batch named 'nope'; `ledger batches` lists them\n"
    )
    assert run("logs", "--deployment", "nope", "--db", ledger_url, code=1).output == (
        "error: no deployment named 'nope'; declare it first (`ledger declare FILE.yaml`)\n"
    )
    assert run("logs", "--batch", "a", "--kind", "kv_tokens", "--db", ledger_url, code=2).output.startswith(
        "error: --kind 'kv_tokens': not a log fact kind; known: api_server_start, arg_data_parallel_size, "
    )


def _smi_power(samples: Path) -> list[Fraction]:
    with open(samples / SMI, encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    col = [c.strip() for c in rows[0]].index("power.draw [W]")
    return [Fraction(float(r[col].strip().removesuffix(" W"))) for r in rows[1:] if r]  # stored as a double


def test_hardware_view_dmon_nvidia_smi_dcgmi(ledger_url: str, samples: Path) -> None:
    run("import", *(str(samples / name) for name in (DMON, SMI, DCGM)), "--batch", "hw", "--db", ledger_url)
    got = json.loads(run("hardware", "--batch", "hw", "--json", "--db", ledger_url).output)
    assert [(a["id"], a["format"]) for a in got["artefacts"]] == [
        (1, "nvidia-smi-dmon"),
        (2, "nvidia-smi-csv"),
        (3, "dcgmi-dmon"),
    ]
    card = {(c["card"], c["counter"]): c for c in got["cards"]}
    assert [card[(f"artefact1:gpu{g}", "pwr")]["mean"] for g in range(3)] == [
        119,
        159,
        219,
    ]  # MANIFEST: 119, 159, 219 W
    assert card[("artefact1:gpu0", "sm")]["quantity_kind"] == "activity_time_percent"
    assert (card[("artefact1:gpu0", "mtemp")]["values"], card[("artefact1:gpu0", "mtemp")]["mean"]) == (0, None)  # '-'
    power = _smi_power(samples)
    smi = card[("artefact2:gpu0", "power.draw")]
    assert (smi["samples"], smi["unit"], smi["exact_mean"], smi["max"]) == (
        len(power),
        "W",
        str(sum(power) / len(power)),
        float(max(power)),
    )
    assert smi["lines"] == f"2-{len(power) + 1}"
    dcgm = card[("artefact3:gpu0", "POWER")]
    assert (dcgm["unit"], dcgm["samples"]) == ("W", 5)
    assert card[("artefact3:gpu0", "GPUTL")]["unit"] == "unconfirmed"  # no unit under the column (R12)
    across = {a["counter"]: a for a in got["across_cards"]}
    pwr = {v["metric"]: (v["value"], v["flag"]) for v in across["pwr"]["values"]}
    # one file, no timestamps: ticks aligned by index within it (another sampler in the batch does not matter)
    assert pwr == {
        "power_sum_of_card_means_w": (497, "derived"),
        "power_peak_of_sum_w": (497, "derived"),
        "power_sum_of_card_peaks_w": (497, "derived"),
    }
    draw = {v["metric"]: v for v in across["power.draw"]["values"]}
    assert draw["power_sum_of_card_means_w"]["exact"] == str(sum(power) / len(power))
    assert draw["power_peak_of_sum_w"]["value"] == float(max(power))
    assert (across["sm"]["allowed"], across["sm"]["rule"]) == ("none (per card only)", "R13")
    assert across["utilization.gpu"]["rule"] == "R13" and across["POWER"]["rule"] == "R14"
    assert got["notes"][0] == (
        "power counters pwr, power.draw, POWER are different counters (R14): each has its own "
        "statistics; none is substituted for another or combined"
    )
    text = run("hardware", "--batch", "hw", "--db", ledger_url).output
    assert (
        "  pwr [W] (power, 3 card(s)): across cards: sum of card means, peak of the simultaneous sum, sum of card "
        "peaks (R14: three different numbers, each printed with its name; a mean over cards is none of them, and "
        "average and instantaneous power are different counters, never combined)\n"
        "    measures: board power draw of the card at the sample (W); one card, one instant (R14)\n"
        "    power_sum_of_card_means_w: 497 W (derived)\n"
    ) in text
    assert across["power.draw"]["meaning"].startswith("board power as the driver reports it (averaged")
    assert "measured: artefact 2 [nvidia-smi-csv] lines 2-" in text

    # the registered power metrics over the batch: several power counters, never combined (R14)
    led = Ledger(ledger_url)
    v = evaluate(led, "power_sum_of_card_means_w", Scope(batch="hw"))
    assert (v.flag, v.na_reason) == (
        "n/a",
        "several power counters in this scope (pwr, power.draw, POWER): average and "
        "instantaneous power are different counters, never combined (R14); `ledger "
        "hardware` shows each",
    )


def test_metrics_power_of_nvidia_smi_and_dcgmi(ledger_url: str, samples: Path) -> None:
    run("import", str(samples / SMI), "--batch", "smi", "--db", ledger_url)
    run("import", str(samples / DCGM), "--batch", "dcgm", "--db", ledger_url)
    led = Ledger(ledger_url)
    power = _smi_power(samples)
    v = evaluate(led, "power_sum_of_card_means_w", Scope(batch="smi"))
    assert (v.flag, v.value, v.unit, v.inputs["counter"]) == ("derived", sum(power) / len(power), "W", "power.draw")
    peak = evaluate(led, "power_peak_of_sum_w", Scope(batch="dcgm"))
    assert (peak.flag, peak.inputs["counter"], peak.inputs["aligned_by"]) == ("derived", "POWER", "tick index")


def test_hardware_errors(ledger_url: str) -> None:
    assert run("hardware", "--batch", "nope", "--db", ledger_url, code=1).output == (
        "error: no batch named 'nope'; `ledger batches` lists them\n"
    )
    assert "Missing option '--batch'" in run("hardware", "--db", ledger_url, code=2).output


def test_show_artefact(ledger_url: str, samples: Path) -> None:
    run("import", str(samples / VLLM), "--batch", "v", "--db", ledger_url)
    run("import", str(samples / SMI), "--batch", "v", "--db", ledger_url)
    out = run("show", "artefact", "1", "--db", ledger_url).output.splitlines()
    assert out[0] == "artefact 1  openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json  [vllm-bench]"
    assert out[1] == "  sha256: 6479033e1773377cfc571d127e813093c7e5480141f5693fd5640bbc07e7d53f"
    assert out[2] == f"  size: {(samples / VLLM).stat().st_size:,} bytes   stored copy: none (not stored)"
    assert (
        "  rows produced: capture 1, request 0, chunk_gap 0, hardware_sample 0, log_fact 0, published_value 30" in out
    )
    assert "  published values by flag: n/a 2, reported 28" in out  # request_goodput null, rtfx 0.0 (no audio)
    got = json.loads(run("show", "artefact", "1", "--json", "--db", ledger_url).output)
    assert [(r["run"], r["batch"], r["records"], r["sampled"]) for r in got["runs"]] == [(1, "v", 0, False)]
    assert {d["table"]: d["rows"] for d in got["digest"]} == {
        "artefact": 1,
        "capture": 1,
        "capture_field": 0,
        "chunk_gap": 0,
        "hardware_sample": 0,
        "log_fact": 0,
        "request": 0,
    }
    smi = json.loads(run("show", "artefact", "2", "--json", "--db", ledger_url).output)
    n = len(_smi_power(samples))
    assert smi["units"] == {"%": 2 * n, "MiB": n, "W": n} and smi["rows"]["hardware_sample"] == 4 * n
    assert smi["format"] == "nvidia-smi-csv" and smi["runs"] == []
    assert run("show", "artefact", "99", "--db", ledger_url, code=1).output == (
        "error: no artefact with id 99; `ledger show run ID` names a run's artefacts\n"
    )


def _requests_run(tmp_path: Path) -> Path:
    """A run of the ledger's own request format whose wall clock (UTC+8) falls inside the nvidia-smi sample."""
    path = tmp_path / "r1.jsonl"
    path.write_text(
        json.dumps(
            {
                "ledger_requests": 1,
                "run": "r1",
                "tool": "t",
                "clock": "epoch_s",
                "started_at": "2026-01-03T15:37:00+08:00",
                "ended_at": "2026-01-03T15:38:00+08:00",
            }
        )
        + "\n"
        + json.dumps({"status": "ok", "input_tokens": 1, "output_tokens": 2})
        + "\n"
    )
    return path


def test_a_run_s_power_needs_the_samples_time_zone(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    """nvidia-smi CSV times are host-local: with --time-zone they become UTC and a run's window cuts them;
    without it a run-scoped power metric is n/a (the zone is unconfirmed), never a guess."""
    run("import", str(_requests_run(tmp_path)), "--batch", "z", "--db", ledger_url)
    run("import", str(samples / SMI), "--batch", "z", "--db", ledger_url)
    led = Ledger(ledger_url)
    v = evaluate(led, "power_sum_of_card_means_w", Scope(batch="z", run="r1"))
    assert (v.flag, v.na_reason) == (
        "n/a",
        "samples of artefact(s) 2 carry host-local times with an unconfirmed time "
        "zone: they cannot be placed in the run's window (import them with --time-zone)",
    )


def test_a_run_s_power_over_samples_of_a_declared_zone(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    from datetime import datetime

    run("import", str(_requests_run(tmp_path)), "--batch", "z2", "--db", ledger_url)
    run("import", str(samples / SMI), "--batch", "z2", "--time-zone", "Asia/Shanghai", "--db", ledger_url)
    led = Ledger(ledger_url)
    with open(samples / SMI, encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    lo, hi = datetime(2026, 1, 3, 15, 37), datetime(2026, 1, 3, 15, 38)  # local (UTC+8) = the run's window
    inside = [
        Fraction(float(r[5].strip().removesuffix(" W")))
        for r in rows
        if r and lo <= datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f") <= hi
    ]
    v2 = evaluate(led, "power_sum_of_card_means_w", Scope(batch="z2", run="r1"))
    assert (v2.flag, v2.value, v2.inputs["counter"]) == ("derived", sum(inside) / len(inside), "power.draw")


def test_nvidia_smi_declared_zone_converts_to_utc_and_a_bad_zone_is_refused(samples: Path, tmp_path: Path) -> None:
    from datetime import datetime

    from bench_ledger.errors import ParseError
    from bench_ledger.importers.gpu_telemetry import IMPORTERS
    from bench_ledger.records import ParseOptions

    smi = next(i for i in IMPORTERS if i.name == "nvidia-smi-csv")
    parsed = smi.parse(samples / SMI, ParseOptions(time_zone="Asia/Shanghai"))
    (cols,) = list(parsed.samples)
    assert cols.ts[0] == datetime(2026, 1, 3, 7, 36, 53, 507000)  # printed 15:36:53.507 at UTC+8
    assert parsed.note.startswith(
        "timestamps: host local wall-clock time converted to UTC; time zone declared by the user: Asia/Shanghai"
    )
    try:
        smi.parse(samples / SMI, ParseOptions(time_zone="Mars/Olympus"))
    except ParseError as exc:
        assert str(exc) == f"{samples / SMI}, option --time-zone: not an IANA time zone: 'Mars/Olympus'"
    else:
        raise AssertionError("a bad zone was accepted")


def test_hardware_statistics_equal_the_rows_definition_without_a_fraction_per_sample(
    ledger: Ledger, ledger_url: str, tmp_path: Path, monkeypatch
) -> None:
    """`hardware_view` and the power statistics read the samples grouped (one numpy array per card and
    counter: a day of 16 cards' dmon is 16.6M rows; the row-by-row view took 255 s and 9.4 GB): every card's
    samples, lines, mean (exact), min and max equal the definition over the raw rows, with two files of
    one node (the same cards) and '-' values, and no Fraction is made per sample."""
    import fractions
    import sys

    import sqlalchemy as sa
    from bench_ledger import models as m
    from bench_ledger.queries.captured import hardware_view

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import gen

    gen.dmon(tmp_path / "a.txt", tmp_path / "a.csv", 4, 600)  # card 3's 'mem' is '-' throughout
    gen.dmon(tmp_path / "b.txt", tmp_path / "b.csv", 2, 300, seed=7)  # node n0 again: cards 0 and 1 once more
    for name in ("a.txt", "b.txt"):
        run("import", str(tmp_path / name), "--batch", "hw", "--node", "n0", "--db", ledger_url)
    HS = m.HardwareSample.__table__
    with ledger.connection() as conn:
        rows = conn.execute(
            sa.select(HS.c.artefact_id, HS.c.gpu, HS.c.counter, HS.c.unit, HS.c.value, HS.c.line, HS.c.ts)
        ).all()
    want: dict[tuple, list] = {}
    for r in rows:
        want.setdefault((r.artefact_id, f"n0:gpu{r.gpu}", r.counter, r.unit), []).append(r)
    made = [0]
    real_new = fractions.Fraction.__new__

    def counted(cls, *a, **k):  # noqa: ANN001, ANN202
        made[0] += 1
        return real_new(cls, *a, **k)

    monkeypatch.setattr(fractions.Fraction, "__new__", counted)
    view = hardware_view(ledger, "hw")
    monkeypatch.setattr(fractions.Fraction, "__new__", real_new)
    assert len(rows) == (4 * 600 + 2 * 300) * len(gen.COUNTERS)
    assert made[0] < 20 * len(view.cards), made[0]  # a handful per card, not one per sample
    got = {(c.artefact, c.card, c.counter, c.unit): c for c in view.cards}
    assert set(got) == set(want)
    for key, rs in want.items():
        vals = [Fraction(r.value) for r in rs if r.value is not None]
        mu = sum(vals, Fraction(0)) / len(vals) if vals else None
        c = got[key]
        assert (c.samples, c.values, c.lines, c.timed) == (
            len(rs),
            len(vals),
            f"{min(r.line for r in rs)}-{max(r.line for r in rs)}",
            all(r.ts is not None for r in rs),
        ), key
        assert (c.exact_mean, c.mean, c.min, c.max) == (
            (str(mu), float(mu), float(min(vals)), float(max(vals))) if vals else (None, None, None, None)
        ), key
    assert any(c.values == 0 for c in view.cards)  # the '-' card is kept, with no value
    # the power statistics over both files' cards (R14), by the definition over the raw rows
    pwr = [r for r in rows if r.counter == "pwr" and r.value is not None]
    cards: dict[str, list[Fraction]] = {}
    for r in pwr:
        cards.setdefault(f"n0:gpu{r.gpu}", []).append(Fraction(r.value))
    ticks: dict[object, dict[str, Fraction]] = {}
    for r in sorted(pwr, key=lambda r: (r.artefact_id, r.line)):
        ticks.setdefault(r.ts, {})[f"n0:gpu{r.gpu}"] = Fraction(r.value)
    full = {k: sum(v.values(), Fraction(0)) for k, v in ticks.items() if len(v) == len(cards)}
    expect = {
        "power_sum_of_card_means_w": sum((sum(v, Fraction(0)) / len(v) for v in cards.values()), Fraction(0)),
        "power_sum_of_card_peaks_w": sum((max(v) for v in cards.values()), Fraction(0)),
        "power_peak_of_sum_w": max(full.values()),
    }
    for name, value in expect.items():
        assert evaluate(ledger, name, Scope(batch="hw")).value == value, name
