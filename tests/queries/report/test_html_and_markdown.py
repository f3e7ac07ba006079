"""`ledger report`: one self-contained HTML file and Markdown tables, on the demo's SYNTHETIC ledger."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path

import pytest
from bench_ledger.cli import main
from bench_ledger.queries.claims import load_claims
from bench_ledger.queries.metrics.registry import ROW_METRICS
from bench_ledger.queries.report.build import build_report
from bench_ledger.queries.report.model import CARD_STATS, POWER_STATS
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests import browser


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_demo_writes_the_report_and_prints_its_path(demo_built: Path) -> None:
    html = (demo_built / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert 'id="synthetic-banner"' in html


def test_report_is_self_contained(demo_built: Path) -> None:
    html = (demo_built / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html  # nothing runs, nothing is fetched
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", html)
    assert "@import" not in html and "url(http" not in html
    # every in-page link has its target
    targets = set(re.findall(r'id="([^"]+)"', html))
    links = set(re.findall(r'href="#([^"]+)"', html))
    assert links and links <= targets, sorted(links - targets)[:5]


def test_every_run_figure_links_to_its_evidence_chain(demo_built: Path) -> None:
    html = (demo_built / "report.html").read_text(encoding="utf-8")
    assert '<a href="#ev-run-7-total_tpm">1,840,234 d</a>' in html
    chain = html[html.index('id="ev-run-7-total_tpm"') :]
    chain = chain[: chain.index("</div>")]
    sha = _sha(demo_built / "data" / "fx" / "SYNTHETIC-fx-50k-200-c4n8.json")
    assert "metric total_tpm over run 7 50k-200-c4n8 (batch fx)" in chain
    assert "formula: 60 × (input_tokens + output_tokens) / wall_clock_s (R3)" in chain
    assert "requests: 8 of 8" in chain
    assert f"SYNTHETIC-fx-50k-200-c4n8.json [vllm-bench] sha256 {sha}" in chain
    # a claim's chain ends at the source report, as `ledger explain` does
    claim = html[html.index('id="ev-claim-tier-50k-total-tpm"') :]
    claim = claim[: claim.index("</div>")]
    assert "claim tier-50k-total-tpm" in claim and "source report h20-dsv41-flash" in claim


def test_na_cells_carry_their_reason(demo_built: Path) -> None:
    html = (demo_built / "report.html").read_text(encoding="utf-8")
    assert '<td class="num na"><a href="#ev-run-19-total_tpm">n/a[1]</a></td>' in html
    assert (
        '<li value="1">n/a: total_tpm: wall_clock_s: no send/end times captured and the tool recorded no duration</li>'
        in html
    )


def test_audit_grouped_by_verdict_with_the_rule_of_each_refusal(demo_built: Path) -> None:
    html = (demo_built / "report.html").read_text(encoding="utf-8")
    assert '<h3 id="verdict-refused">refused (13)</h3>' in html
    refused = html[html.index('data-verdict="refused"') :]
    refused = refused[: refused.index("</table>")]
    assert "<th>rule</th>" in refused
    assert re.search(r"inference-ep-freed-40gb</a></td><td>[^<]*</td><td>GB</td><td>R1</td>", refused)


@pytest.fixture(scope="module")
def demo_report(demo_built: Path):  # noqa: ANN201
    """build_report of the demo's fx and m17 (read-only), built once for the tests that read it."""
    with Ledger(f"duckdb:///{demo_built / 'ledger.duckdb'}") as ledger:
        return build_report(ledger, ["fx", "m17"])


def test_plots_say_what_unit_and_provenance_and_never_pool_batches(demo_report) -> None:  # noqa: ANN001
    data = demo_report
    by_id = {p.id: p for p in data.plots}
    assert sorted(by_id) == [
        "cdf-e2e_latency-fx",
        "cdf-e2e_latency-m17",
        "cdf-ttft-fx",
        "cdf-ttft-m17",
        "hw-pwr-fx",
        "hw-sm-fx",
        "launch-timeline",
        "tpm-output_tpm",
        "tpm-total_tpm",
    ]
    for p in data.plots:
        assert p.what and p.unit and p.provenance and p.synthetic, p.id
    tpm = by_id["tpm-total_tpm"]
    # one series per batch and output cap in each input tier: fx and m17 are never one line (R2)
    assert [(s.group, s.label) for s in tpm.series] == [
        ("input 32", "batch m17, out cap 512 (reported: the tool's figures)"),
        ("input 3400", "batch fx, out cap 2048"),
        ("input 50K", "batch fx, out cap 200"),
        ("input 80K", "batch fx, out cap 600"),
        ("input 160K", "batch fx, out cap 1300"),
    ]
    assert tpm.series[2].x == [1.0, 2.0, 4.0, 8.0, 32.0] and round(tpm.series[2].y[2]) == 1840234
    # m17's legacy files keep no latency: its E2E CDF is n/a for each run, with the metric's reason
    e2e = by_id["cdf-e2e_latency-m17"]
    assert (
        e2e.series == [] and e2e.missing[0] == "run 1 32-512-c4n16: n/a: latency_s or send_time + end_time not captured"
    )
    cdf = by_id["cdf-ttft-fx"]
    assert len(cdf.series) == 16 and all(s.y[-1] == 1.0 for s in cdf.series)
    # demo runs have no wall-clock start/end: the windows are not guessed, and the plot says so
    # and dmon's times are host-local of a zone nobody declared (issue 39: they were labelled UTC)
    assert by_id["hw-pwr-fx"].windows == [] and by_id["hw-pwr-fx"].missing[0] == (
        "run windows not marked: the samples' times are host-local of an unconfirmed time zone (import them with "
        "--time-zone); and 16 of 16 runs have no wall-clock start and end (their files give none; request times on a "
        "monotonic clock cannot be placed against dmon's wall clock, and are not guessed)"
    )
    assert by_id["hw-pwr-fx"].notes[0].endswith("(host local time as printed, time zone unconfirmed)")
    assert len(by_id["hw-pwr-fx"].series) == 16  # one line per card
    assert by_id["launch-timeline"].missing == ["h20-old #6 (failed): no timestamped line read from its log"]


def test_hardware_statistics_keep_three_power_numbers(demo_report) -> None:  # noqa: ANN001
    data = demo_report  # fx's hardware (m17 has no samples: the same power and cards as a report of fx alone)
    assert list(data.power) == ["fx"]
    assert {k: round(float(v.value)) for k, v in data.power["fx"].items()} == {
        "power_sum_of_card_means_w": 3814,
        "power_peak_of_sum_w": 4755,
        "power_sum_of_card_peaks_w": 5072,
    }
    assert len(data.cards) == 16 and data.cards[0].card == "node0:gpu0"


def test_markdown_has_the_same_tables_and_a_footnote_per_na(demo_built: Path) -> None:
    db = f"duckdb:///{demo_built / 'ledger.duckdb'}"
    result = CliRunner().invoke(main, ["report", "--db", db, "--batch", "fx", "--batch", "m17", "--format", "md"])
    assert result.exit_code == 0, result.output
    md = result.output
    assert "| 7 50k-200-c4n8 | 50000 / 200 | 4 / 8 | 8 d | 0 d | 1,840,234 d | 2,791 d |" in md
    assert "| 19 cold-50k-cold | 50000 / ? | 1 / 1 | 1 d | 0 d | n/a[^r1] | n/a[^r2] |" in md
    # the reason is text: Markdown's active characters escaped (it renders as written)
    assert (
        "[^r1]: n/a: total\\_tpm: wall\\_clock\\_s: no send/end times captured and the tool recorded no duration" in md
    )
    assert "### batch fx" in md and "### batch m17" in md
    assert "| h20-old | 4 | ready | 390 d |" in md
    assert "| fx | 3,814.0 d | 4,755.0 d | 5,072.0 d |" in md


def test_report_refuses_an_unknown_batch(demo_built: Path, tmp_path: Path) -> None:
    db = f"duckdb:///{demo_built / 'ledger.duckdb'}"
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", "--db", db, "--batch", "nope", "--out", str(out)])
    assert result.exit_code == 1
    assert result.output == "error: no batch named 'nope'; `ledger batches` lists them\n"
    assert not out.exists()


def test_report_in_a_real_browser(demo_built: Path, tmp_path: Path) -> None:
    """Headless Chromium opens the file: no console errors; tables and plots rendered; a screenshot."""
    b = browser.Browser(*browser.require(), profile=tmp_path / "profile")
    try:
        b.open((demo_built / "report.html").resolve().as_uri())
        counts = b.script("""return {
            tables: document.querySelectorAll('table').length,
            runRows: document.querySelectorAll('table.runs tbody tr').length,
            svgs: document.querySelectorAll('figure.plot svg').length,
            drawn: [...document.querySelectorAll('figure.plot svg')].filter(s => s.getBBox().width > 100).length,
            evidence: document.querySelectorAll('.ev').length,
            title: document.title};""")
        errors = [e for e in b.console() if e.get("level") == "SEVERE"]
        b.screenshot(tmp_path / "report.png")
        b.script("document.getElementById('plots').scrollIntoView()")
        b.screenshot(tmp_path / "report-plots.png")
    finally:
        b.close()
    assert errors == []
    assert counts["title"] == "bench-ledger report: fx, m17"
    assert counts["runRows"] == 20  # 16 fx runs + 4 m17 runs
    assert counts["tables"] == 2 + 1 + 2 + 9  # runs fx/m17, launches, power + cards, one per verdict (raw-mismatch too)
    assert counts["svgs"] == counts["drawn"] == 8  # m17's E2E CDF has nothing to draw (n/a, said in its caption)
    claims = load_claims(Path(str(resources.files("bench_ledger.casestudy") / "claims.yaml"))).claims
    # one evidence entry per run metric, launch, hardware statistic and claim
    assert counts["evidence"] == 20 * len(ROW_METRICS) + 9 + len(POWER_STATS) + len(CARD_STATS) + len(claims)
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_run_windows_are_marked_where_runs_have_wall_clock_times(ledger: Ledger) -> None:
    """Runs with a wall-clock start and end get their window on the hardware plots; none is guessed."""
    from datetime import datetime, timedelta

    from bench_ledger import models as m

    t0 = datetime(2026, 10, 17, 14, 0, 0)
    with ledger.session() as s:
        b = m.Batch(name="hw", created_at=t0)
        s.add(b)
        s.flush()
        s.add_all(
            [
                m.Run(
                    batch_id=b.id,
                    label="a",
                    started_at=t0 + timedelta(seconds=10),
                    ended_at=t0 + timedelta(seconds=40),
                    recorded_at=t0,
                ),
                m.Run(
                    batch_id=b.id,
                    label="b",
                    started_at=t0 + timedelta(seconds=60),
                    ended_at=t0 + timedelta(seconds=90),
                    recorded_at=t0,
                ),
            ]
        )
        art = m.Artefact(
            sha256="0" * 64,
            size_bytes=1,
            file_name="dmon.txt",
            format="nvidia-smi-dmon",
            importer="test",
            importer_version="0",
            imported_at=t0,
            batch_id=b.id,
            node="node0",
        )
        s.add(art)
        s.flush()
        s.add_all(
            [
                m.HardwareSample(
                    artefact_id=art.id,
                    line=i + 1,
                    counter=c,
                    node="node0",
                    gpu=0,
                    tick=i,
                    ts=t0 + timedelta(seconds=i),
                    value=100.0 + i,
                    unit="W" if c == "pwr" else "%",
                )
                for i in range(100)
                for c in ("pwr", "sm")
            ]
        )
    data = build_report(ledger, ["hw"])
    pwr = next(p for p in data.plots if p.id == "hw-pwr-hw")
    assert pwr.windows == [("a", 10.0, 40.0), ("b", 60.0, 90.0)] and pwr.missing == []
    assert pwr.notes == [
        "t = 0 is 2026-10-17 14:00:00 UTC",
        "shaded: each run's wall-clock window, labelled with the run",
    ]


def test_report_of_batches_whose_runs_have_no_records_renders(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    """vLLM and SGLang summaries, llmperf summaries, inference-perf and vLLM sweeps carry the tools' own
    figures and no per-request records: the CDF and TPM plots crashed on them (exit 70, issue 39). Each
    run is now listed under the plot with why it is not drawn; the run table keeps its marked figures."""
    from bench_ledger.queries.report.model import NOT_FROM_RECORDS
    from bench_ledger.queries.report.render import render_html

    from tests.clirun import run

    folders = {
        "vllm": [samples / "vllm"],
        "sglang": [samples / "sglang"],
        "ip": [samples / "inference-perf"],
        "llmperf": sorted((samples / "llmperf").glob("summary_*")),
        "sweep": [samples / "vllm-bench-sweep"],
    }
    for batch, paths in folders.items():
        run("import", "--db", ledger_url, "-q", "--batch", batch, *paths)
    for batch in folders:
        out = tmp_path / f"{batch}.html"
        run("report", "--db", ledger_url, "--batch", batch, "--out", out)
        assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with Ledger(ledger_url) as led:
        data = build_report(led, ["vllm"])
    reason = NOT_FROM_RECORDS.format(flag="reported")
    cdf = next(p for p in data.plots if p.id == "cdf-ttft-vllm")
    assert cdf.series == [] and len(cdf.missing) == 3
    assert cdf.missing[0] == f"run 1 Qwen2.5-Coder-7B-Instruct rate=1.0 c=inf: n/a: {reason}"
    assert [r.values["total_tpm"].flag for r in data.runs] == ["reported"] * 3
    assert render_html(data).count(reason.replace("'", "&#39;")) == 3


def test_every_samplers_cards_are_in_the_hardware_sections(ledger_url: str, samples: Path) -> None:
    """The nvidia-smi CSV card was missing from the per-card table and the plots, whose captions said "dmon
    samples" (issue 39): each sampler's cards are listed with their source, and each counter is plotted
    with its sampler named; its times are host-local of an unconfirmed zone (no --time-zone), so said."""
    from tests.clirun import run

    run("import", "--db", ledger_url, "-q", "--batch", "hw", samples / "nvidia-smi", samples / "dmon")
    with Ledger(ledger_url) as led:
        data = build_report(led, ["hw"])
    rows = [(c.card, c.source, round(c.values["power-mean"], 2), c.units["power-mean"]) for c in data.cards]
    assert rows == [
        ("artefact1:gpu0", "nvidia-smi-csv, artefact 1: power.draw, utilization.gpu, utilization.memory", 280.09, "W"),
        ("artefact2:gpu0", "nvidia-smi-dmon, artefact 2: mem, pwr, sm", 119.0, "W"),
        ("artefact2:gpu1", "nvidia-smi-dmon, artefact 2: mem, pwr, sm", 159.0, "W"),
        ("artefact2:gpu2", "nvidia-smi-dmon, artefact 2: mem, pwr, sm", 219.0, "W"),
    ]
    by_id = {p.id: p for p in data.plots}
    assert sorted(i for i in by_id if i.startswith("hw-")) == [
        "hw-power.2e.draw-hw",
        "hw-pwr-hw",
        "hw-sm-hw",
        "hw-utilization.2e.gpu-hw",
    ]  # ids: report.anchor
    smi = by_id["hw-power.2e.draw-hw"]
    assert smi.provenance == (
        "measured: nvidia-smi --query-gpu (CSV) samples of artefacts [1] (counter 'power.draw', unit as printed)"
    )
    assert [s.label for s in smi.series] == ["artefact1:gpu0"] and len(smi.series[0].x) == 2619
    assert smi.notes == ["t = 0 is 2026-01-03 15:36:53.507000 (host local time as printed, time zone unconfirmed)"]
    assert smi.x_label == "time (host local time as printed, time zone unconfirmed; s from the first sample)"
    assert by_id["hw-pwr-hw"].series == [] and by_id["hw-pwr-hw"].missing[0].startswith("3 samples without a timestamp")
    ev = data.evidence["ev-hw-hw-power-mean"].lines
    assert ev[1] == (
        "  'power.draw' (nvidia-smi --query-gpu (CSV)): board power as the driver reports it (averaged over "
        "the driver's window on current drivers); not power.draw.instant (R14)"
    )
