"""MLPerf loadgen validity (issue 15): the summary's "Result is : VALID/INVALID" and constraint lines are
checked against the detail log's validity keys and each log against its own rule (loadgen results.cc),
on the shared real samples and on copies edited to contradict them; both backends."""

from __future__ import annotations

from pathlib import Path

from bench_ledger.cli import main
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY
from bench_ledger.store import Ledger
from click.testing import CliRunner

SERVER = "NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Server_mlperf_log_{}.txt"
OFFLINE = "NVIDIA_B200-SXM-180GBx8_TRT_llama2-70b-99_Offline_mlperf_log_{}.txt"


def imp(url: str, *paths: Path) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, "-q", "--batch", "m", *map(str, paths)])
    assert res.exit_code == 0, res.output


def validity(ledger: Ledger) -> list[tuple[str, str, str, str]]:
    return [
        (r.run.rsplit("_", 1)[-1], r.key, r.reported, r.status)
        for r in check(ledger, batch="m")
        if r.section == IDENTITY and (r.definition or "").startswith("R15 validity")
    ]


def test_real_summaries_agree_with_their_detail_logs(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    src = samples / "mlperf-loadgen"
    imp(ledger_url, *(src / name.format(kind) for name in (SERVER, OFFLINE) for kind in ("summary", "detail")))
    rows = check(ledger, batch="m")
    got = [
        (r.key, r.reported, r.status, r.definition)
        for r in rows
        if r.section == IDENTITY and (r.definition or "").startswith("R15 validity") and r.run.endswith("Server")
    ]
    assert got == [
        (
            "Performance constraints satisfied",
            "Yes",
            "agree",
            "R15 validity: summary 'Performance constraints "
            "satisfied' = detail result_perf_constraints_met (loadgen results.cc)",
        ),
        (
            "Min duration satisfied",
            "Yes",
            "agree",
            "R15 validity: summary 'Min duration satisfied' = detail result_min_duration_met (loadgen results.cc)",
        ),
        (
            "Min queries satisfied",
            "Yes",
            "agree",
            "R15 validity: summary 'Min queries satisfied' = detail result_min_queries_met (loadgen results.cc)",
        ),
        (
            "Early stopping satisfied",
            "Yes",
            "agree",
            "R15 validity: summary 'Early stopping satisfied' = detail early_stopping_met (loadgen results.cc)",
        ),
        (
            "Result is",
            "VALID",
            "agree",
            "R15 validity: summary 'Result is' = VALID iff its printed constraints are met (loadgen results.cc LogSummary)",
        ),
        (
            "detail.result_validity",
            "VALID",
            "agree",
            "R15 validity: detail result_validity = VALID iff every constraint key is true (loadgen results.cc LogDetail)",
        ),
        (
            "detail.result_validity",
            "VALID",
            "agree",
            "R15 validity: summary 'Result is' = detail result_validity "
            "(loadgen results.cc; 'Skipped' min queries: detail INVALID)",
        ),
    ]
    offline = [(k, t, s) for run, k, t, s in validity(ledger) if run == "Offline"]
    assert offline == [
        ("Min duration satisfied", "Yes", "agree"),
        ("Min queries satisfied", "Yes", "agree"),
        ("Early stopping satisfied", "Yes", "agree"),
        ("Result is", "VALID", "agree"),
        ("detail.result_validity", "VALID", "agree"),
        ("detail.result_validity", "VALID", "agree"),
    ]
    cli = CliRunner().invoke(main, ["check", "--db", ledger_url, "--batch", "m", "--fail-on", "disagree"])
    assert cli.exit_code == 0, cli.output


def _copy(samples: Path, tmp_path: Path, summary: tuple[str, str] | None, detail: tuple[str, str] | None) -> list[Path]:
    out = []
    for kind, edit in (("summary", summary), ("detail", detail)):
        text = (samples / "mlperf-loadgen" / SERVER.format(kind)).read_text(encoding="utf-8")
        if edit is not None:
            assert edit[0] in text
            text = text.replace(edit[0], edit[1])
        path = tmp_path / f"mlperf_log_{kind}.txt"
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


def test_a_summary_edited_to_invalid_disagrees(ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path) -> None:
    imp(ledger_url, *_copy(samples, tmp_path, ("Result is : VALID", "Result is : INVALID"), None))
    bad = [(k, t, s) for _, k, t, s in validity(ledger) if s != "agree"]
    assert bad == [("Result is", "INVALID", "disagree"), ("detail.result_validity", "VALID", "disagree")]
    reason = next(r.reason for r in check(ledger, batch="m") if r.key == "Result is" and r.status == "disagree")
    assert reason == (
        "R15 validity: summary 'Result is' = VALID iff its printed constraints are met (loadgen results.cc "
        "LogSummary): expected 'VALID' (constraints Performance constraints satisfied Yes, Min duration "
        "satisfied Yes, Min queries satisfied Yes, Early stopping satisfied Yes)"
    )
    cli = CliRunner().invoke(main, ["check", "--db", ledger_url, "--batch", "m", "--fail-on", "disagree"])
    assert cli.exit_code == 1


def test_a_detail_constraint_edited_to_false_disagrees(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    imp(
        ledger_url,
        *_copy(
            samples,
            tmp_path,
            None,
            ('"key": "early_stopping_met", "value": true', '"key": "early_stopping_met", "value": false'),
        ),
    )
    bad = [(k, t, s) for _, k, t, s in validity(ledger) if s != "agree"]
    assert bad == [("Early stopping satisfied", "Yes", "disagree"), ("detail.result_validity", "VALID", "disagree")]


def test_an_unknown_word_is_not_derivable(ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path) -> None:
    imp(ledger_url, *_copy(samples, tmp_path, ("Min duration satisfied : Yes", "Min duration satisfied : Maybe"), None))
    rows = {(k, s) for _, k, _, s in validity(ledger)}
    assert ("Min duration satisfied", "not re-derivable") in rows
    assert not any(k == "Result is" for k, _ in rows)  # its rule needs every constraint word
