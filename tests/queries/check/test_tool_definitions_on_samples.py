"""Issue 14 on the real samples (both backends): every statistic the files allow is agree/disagree,
"not re-derivable" only for a reason the file's content gives; each tool's own definition is named."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from bench_ledger.cli import main
from bench_ledger.queries.check.checker import check
from bench_ledger.queries.check.core import IDENTITY, RECORDS
from bench_ledger.store import Ledger
from click.testing import CliRunner

GUIDELLM = "guidellm/guidellm-bench_sanity_20260302_1856_Qwen3-4B-Thinking-2507_tp4_fp8_benchmarks.json"


def imp(url: str, *args: str) -> None:
    res = CliRunner().invoke(main, ["import", "--db", url, "-q", *args])
    assert res.exit_code == 0, res.output


def test_guidellm_statistics_recomputed_by_its_distribution_summary(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, str(samples / GUIDELLM), "--batch", "g")
    rows = check(ledger, batch="g")
    rec = [r for r in rows if r.section == RECORDS]
    # main gave 80 agree and 3288 not re-derivable (no row for duration, which the import dropped);
    # now every one of the 3369 statistics is recomputed by guidellm's own definitions and agrees
    assert Counter(r.status for r in rec) == {"agree": 3369}
    assert Counter(r.status for r in rows if r.section == IDENTITY) == {"agree": 547}
    assert {r.definition for r in rec} == {"guidellm-inverted-cdf"}
    by = {r.key: r for r in rec}
    # the errored and incomplete groups hold no records: guidellm summarises no values as 0 (840 each)
    reasons = Counter(r.reason for r in rec)
    assert reasons["no errored records: guidellm's summary of no values is 0"] == 840
    zero = by["metrics.requests_per_second.errored.mean"]
    assert zero.recomputed == 0.0
    # successful and total by DistributionSummary.from_values: inverted-CDF percentiles, population std
    assert by["metrics.time_to_first_token_ms.successful.percentiles.p50"].reported == "171.52166366577148"
    assert by["metrics.request_latency.total.std_dev"].reason == "over the total records"
    assert by["metrics.prompt_token_count.successful.mode"].recomputed == 76.0  # first of the most probable
    # weighted: TPOT by output tokens (count 4 x 1024), ITL by output tokens - 1 (4 x 1023)
    tpot = by["metrics.time_per_output_token_ms.successful.count"]
    assert (tpot.recomputed, tpot.reason) == (
        4096.0,
        "over the successful records' time_per_output_token_ms, weighted by output_tokens",
    )
    assert by["metrics.inter_token_latency_ms.total.count"].recomputed == 4092.0
    # time-weighted: requests per second over the end times within the measurement window (count 3:
    # guidellm merges the window's end with the last request end), concurrency over (start, end)
    rps = by["metrics.requests_per_second.successful.max"]
    assert (rps.reported, rps.recomputed) == ("7219.111876075732", 7219.111876075732)
    assert by["metrics.requests_per_second.successful.count"].recomputed == 3.0
    assert by["metrics.request_concurrency.successful.mean"].reported == "3.9998399194047565"
    # token rates over iterations evenly spaced between the first and last token (np.linspace)
    out = by["metrics.output_tokens_per_second.successful.percentiles.p99"]
    assert (out.reported, out.status) == ("862.8479736679695", "agree")
    assert by["metrics.output_tokens_per_iteration.successful.max"].reported == "1.0049115913555993"
    assert by["metrics.text.characters.total_per_second.successful.count"].recomputed == 12392.0
    for group in ("successful", "errored", "incomplete", "total"):
        assert by[f"metrics.request_totals.{group}"].status == "agree"
        assert by[f"scheduler_metrics.requests_made.{group}"].status == "agree"
    assert by["duration"].reason == (
        "measure_end_time - measure_start_time (scheduler_metrics: the window its metrics cover)"
    )


def test_guidellm_edited_distribution_disagrees(ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path) -> None:
    obj = json.loads((samples / GUIDELLM).read_text())
    m = obj["benchmarks"][0]["metrics"]
    m["request_concurrency"]["successful"]["mean"] = 3.5  # a hand-edited summary
    m["time_per_output_token_ms"]["total"]["percentiles"]["p90"] = 24.0
    (tmp_path / "edited.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "edited.json"), "--batch", "e")
    bad = {r.key: r.recomputed for r in check(ledger, batch="e") if r.status == "disagree" and r.section == RECORDS}
    assert bad == {
        "metrics.request_concurrency.successful.mean": 3.9998399194047565,
        "metrics.time_per_output_token_ms.total.percentiles.p90": 24.32361408136785,
    }


def test_guidellm_duration_and_synthetic_data_settings_are_kept(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    obj = json.loads((samples / GUIDELLM).read_text())
    obj["args"]["data"] = ["prompt_tokens=256,output_tokens=128"]
    (tmp_path / "synthetic.json").write_text(json.dumps(obj))
    imp(ledger_url, str(samples / GUIDELLM), "--batch", "real")
    imp(ledger_url, str(tmp_path / "synthetic.json"), "--batch", "syn")
    with ledger.connection() as conn:
        got = conn.exec_driver_sql(
            "SELECT b.name, r.input_target_tokens, r.output_cap_tokens, r.dataset, p.text, p.unit FROM run r "
            "JOIN batch b ON b.id = r.batch_id JOIN published_value p ON p.run_id = r.id AND p.key = 'duration' "
            "ORDER BY b.name"
        ).all()
    assert [tuple(g) for g in got] == [
        ("real", None, None, "/root/aime_2024_v2.jsonl", "24.909644603729248", "s"),
        ("syn", 256, 128, None, "24.909644603729248", "s"),
    ]


def test_vllm_completed_plus_failed_is_num_prompts(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    src = samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"
    imp(ledger_url, str(src), "--batch", "v")
    (row,) = [r for r in check(ledger, batch="v") if r.section == IDENTITY and r.key == "completed"]
    assert (row.status, row.definition) == (
        "agree",
        "completed = num_prompts - failed (completed + failed = num_prompts 150)",
    )
    assert row.reason.endswith("150 from the reported failed 0")
    obj = json.loads(src.read_text())
    obj["completed"] = 149  # a mis-merged summary: one request neither completed nor failed
    (tmp_path / "edited.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "edited.json"), "--batch", "e")
    bad = [(r.key, r.definition.split(" (")[0]) for r in check(ledger, batch="e") if r.status == "disagree"]
    assert ("completed", "completed = num_prompts - failed") in bad
    assert ("request_throughput", "request_throughput = completed / duration") in bad


def test_llmperf_per_request_throughput_is_kept_and_its_statistics_agree(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    d = samples / "llmperf"
    imp(
        ledger_url,
        str(d / "individual_groq_70b.json"),
        str(d / "summary_groq_70b.json"),
        "--batch",
        "lp",
        "--run",
        "groq",
    )
    rows = [r for r in check(ledger, batch="lp") if r.section == RECORDS]
    # main: 55 agree, 12 not re-derivable (the 10 throughput statistics had no per-request values)
    assert Counter(r.status for r in rows) == {"agree": 65, "not re-derivable": 2}
    by = {r.key: r for r in rows}
    std = by["results_request_output_throughput_token_per_s_stddev"]
    assert (std.reported, std.status, std.definition) == ("15.697887254302277", "agree", "pandas-linear")
    assert by["results_request_output_throughput_token_per_s_quantiles_p25"].recomputed == 174.12798146848314
    # results_error_code_frequency recomputed from the records' codes: none, so llmperf prints {}
    freq = by["results_error_code_frequency"]
    assert (freq.reported, freq.status, freq.reason) == (
        "{}",
        "agree",
        "no record has an error_code: llmperf prints {}",
    )
    # the token counts agree exactly: no remembered tolerance in any reason
    assert by["results_number_output_tokens_mean"].status == "agree"
    assert {r.reason for r in rows if r.status == "not re-derivable"} == {
        "divides by llmperf's own start-to-end monotonic time of the run; the records carry no times "
        "(see the identity linking the two)"
    }
    with ledger.connection() as conn:
        kept = conn.exec_driver_sql(
            "SELECT key, flag, count(*) FROM request_value GROUP BY key, flag ORDER BY key"
        ).all()
    assert [tuple(k) for k in kept] == [
        ("number_total_tokens", "measured", 150),
        ("request_output_throughput_token_per_s", "reported", 150),
    ]


def test_llmperf_error_codes_counted_from_the_records(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    d = samples / "llmperf"
    records = json.loads((d / "individual_groq_70b.json").read_text())
    for r in records[:3]:
        r["error_code"], r["error_msg"] = 429, "Too Many Requests"
    records[3]["error_code"], records[3]["error_msg"] = 500, "Internal"
    summary = json.loads((d / "summary_groq_70b.json").read_text())
    (tmp_path / "individual_x.json").write_text(json.dumps(records))
    summary["results_error_code_frequency"] = "{429: 3, 500: 1}"
    (tmp_path / "summary_x.json").write_text(json.dumps(summary))
    imp(ledger_url, str(tmp_path / "individual_x.json"), str(tmp_path / "summary_x.json"), "--batch", "x", "--run", "x")
    (freq,) = [r for r in check(ledger, batch="x") if r.key == "results_error_code_frequency"]
    assert (freq.status, freq.reason) == ("agree", "error codes counted over the records: 429 x3, 500 x1")
    summary["results_error_code_frequency"] = "{429: 4}"
    (tmp_path / "summary_y.json").write_text(json.dumps(summary))
    (tmp_path / "individual_y.json").write_text(json.dumps(records) + " ")
    imp(ledger_url, str(tmp_path / "individual_y.json"), str(tmp_path / "summary_y.json"), "--batch", "y", "--run", "y")
    (freq,) = [r for r in check(ledger, batch="y") if r.key == "results_error_code_frequency"]
    assert freq.status == "disagree"
    # llmperf's pandas column of codes with nulls is float: the leaderboard's files print {429.0: 3, 500.0: 1}
    # (a false "disagree" before, issue 39); the same codes compare as numbers
    summary["results_error_code_frequency"] = "{429.0: 3, 500.0: 1}"
    (tmp_path / "summary_z.json").write_text(json.dumps(summary))
    (tmp_path / "individual_z.json").write_text(json.dumps(records) + "  ")
    imp(ledger_url, str(tmp_path / "individual_z.json"), str(tmp_path / "summary_z.json"), "--batch", "z", "--run", "z")
    (freq,) = [r for r in check(ledger, batch="z") if r.key == "results_error_code_frequency"]
    assert (freq.status, freq.reason) == ("agree", "error codes counted over the records: 429 x3, 500 x1")


def test_request_values_are_sealed_exported_and_never_backfilled(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    import sqlalchemy as sa
    from bench_ledger import models as m
    from bench_ledger import seal, transfer
    from bench_ledger.errors import Refused
    from bench_ledger.store import Ledger as L

    d = samples / "llmperf"
    imp(ledger_url, str(d / "individual_groq_70b.json"), "--batch", "s")
    # no backfill: a value for a request of an artefact imported earlier is refused (R9)
    with ledger.session() as s:
        art = s.scalar(sa.select(m.Artefact.id))
        s.add(m.RequestValue(artefact_id=art, request_idx=0, key="x", value=1.0, flag="measured"))
        with pytest.raises(Refused, match="refused by R9: add a request_value row to artefact"):
            s.flush()
        s.rollback()
    res = CliRunner().invoke(main, ["close", "--db", ledger_url, "s", "--seal-file", str(tmp_path / "seals.jsonl")])
    assert res.exit_code == 0, res.output
    assert seal.verify(ledger, seal_file=tmp_path / "seals.jsonl").ok
    with ledger.connection() as conn:
        parts = {
            r[0]: r[1]
            for r in conn.exec_driver_sql("SELECT table_name, row_count FROM artefact_digest WHERE artefact_id = 1")
        }
    assert parts["request_value"] == 300 and parts["request"] == 150
    out = tmp_path / "export"
    transfer.export_batch(ledger, "s", out)
    target = L(f"duckdb:///{tmp_path / 'target.duckdb'}", create=True)
    target.init()
    got = transfer.import_export(target, out)
    assert got.rows > 300
    with target.connection() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM request_value").scalar() == 300


def test_metrics_show_the_tools_reported_equivalents_marked_r(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    from bench_ledger.queries.metrics.registry import run_metrics

    imp(
        ledger_url,
        str(samples / "vllm" / "openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"),
        "--batch",
        "v",
    )
    (row,) = run_metrics(ledger, ["v"])
    v = row.values
    # main: every column n/a (aggregates only)
    assert (v["requests_ok"].value, v["requests_ok"].flag) == (150, "reported")
    assert v["total_tpm"].flag == "reported" and float(v["total_tpm"].value) == 616.1497365908841 * 60
    assert v["total_tpm"].inputs["reported_key"] == "total_token_throughput"
    assert v["total_tpm"].inputs["basis"].startswith("the tool's own total_token_throughput (tok/s) x 60")
    assert float(v["ttft_p50"].value) == 0.07659605500003863
    assert v["e2e_latency_p50"].value is None  # no equivalent named: stays n/a with its reason
    res = CliRunner().invoke(main, ["metrics", "--db", ledger_url, "--batch", "v"])
    assert "36,969 r" in res.output and "150 r / 0 r" in res.output


def test_a_tpm_over_the_tools_reported_duration_is_reported_not_derived(
    ledger: Ledger, ledger_url: str, tmp_path: Path
) -> None:
    from bench_ledger.queries.metrics.registry import run_metrics

    obj = {
        "date": "20260301-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "model_id": "m",
        "num_prompts": 2,
        "request_rate": "inf",
        "duration": 4.0,
        "completed": 2,
        "failed": 0,
        "total_input_tokens": 20,
        "total_output_tokens": 6,
        "input_lens": [10, 10],
        "output_lens": [4, 2],
        "ttfts": [0.04, 0.05],
        "itls": [[0.01, 0.02, 0.03], [0.02]],
        "errors": ["", ""],
    }
    (tmp_path / "v.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "v.json"), "--batch", "v")
    (row,) = run_metrics(ledger, ["v"])
    tpm = row.values["output_tpm"]
    # tokens counted here (derived) over the tool's own duration (reported): main marked it "d"
    assert (tpm.value, tpm.flag) == (90, "reported")
    assert row.values["output_tokens"].flag == "derived"


def test_formats_doc_lists_the_kept_values_definitions_and_equivalents() -> None:
    from bench_ledger.importers import guidellm, llmperf
    from bench_ledger.queries.check.stat_definitions import DEFINITIONS
    from bench_ledger.queries.metrics import reported as metrics_reported

    doc = (Path(__file__).resolve().parents[3] / "docs" / "formats.md").read_text()
    flat = " ".join(doc.split())
    for module in (llmperf, guidellm):
        for key, flag in module.VALUE_KEYS.items():
            assert f"`{key}`" in flat, key
            assert flag in ("measured", "reported")
    for name in DEFINITIONS:
        assert f"`{name}`" in flat, name
    assert metrics_reported.markdown() in doc


def test_a_summary_without_its_records_says_so_for_its_text_statistic(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    imp(ledger_url, str(samples / "llmperf" / "summary_groq_70b.json"), "--batch", "s")
    (freq,) = [r for r in check(ledger, batch="s") if r.key == "results_error_code_frequency"]
    # main: "printed as text, not a number", although the records would recompute it
    assert (freq.status, freq.reason) == (
        "not re-derivable",
        "no per-request records in this run's artefacts (aggregates only)",
    )


def test_aiperf_records_keep_their_metrics_and_reproduce_the_aggregate(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    d = samples / "aiperf"
    imp(
        ledger_url,
        str(d / "aiperf-repo-examples-run1__profile_export_aiperf.json"),
        str(d / "aiperf-repo-examples-run1__profile_export.jsonl"),
        "--batch",
        "a",
    )
    rows = check(ledger, batch="a")
    rec = [r for r in rows if r.section == RECORDS]
    # before (records paired, their per-record metrics not kept): 52 agree, 101 not re-derivable; then
    # 120 agree, 33 not re-derivable (run-level metrics, error_summary, a metric not on every record)
    assert Counter(r.status for r in rec) == {"agree": 153}
    by = {r.key: r for r in rec}
    assert (by["records.ttst.p99"].status, by["records.ttst.p99"].definition) == ("agree", "numpy-linear")
    icl = by["records.inter_chunk_latency.count"]
    assert (icl.recomputed, icl.reason) == (21537.0, "over the ok records' chunk gaps, flattened")
    assert by["records.total_osl.avg"].reason == "sum of the ok records' output_sequence_length"
    otc = by["records.output_token_count.count"]
    assert (otc.status, otc.recomputed, otc.reason) == (
        "agree",
        30.0,
        (
            "over the 30 of 89 ok records that carry output_token_count (AIPerf computes a record's metric only where it has one)"
        ),
    )


AIPERF_RUN_LEVEL = {  # key -> (reported, recomputed, how): AIPerf's run-level metrics, recomputed from the 100 records
    "records.request_count.avg": ("89.0", 89.0, "valid (error-free) records, 1 each (RequestCountMetric)"),
    "records.error_request_count.avg": ("11.0", 11.0, "error records, 1 each (ErrorRequestCountMetric)"),
    "records.min_request_timestamp.avg": (
        "1.759522419154569e+18",
        1759522419154568925.0,
        "earliest request start of the valid records, epoch ns (MinRequestTimestampMetric)",
    ),
    "records.max_response_timestamp.avg": (
        "1.759522428472358e+18",
        1759522428472357876.0,
        "latest last-response time of the valid records, epoch ns (MaxResponseTimestampMetric)",
    ),
    "records.benchmark_duration.avg": (
        "9.317788951",
        9.317788951,
        "max_response_timestamp - min_request_timestamp of the valid records, in s (BenchmarkDurationMetric)",
    ),
    "records.request_throughput.avg": (
        "9.551622221540914",
        89 / 9.317788951,
        "request_count / benchmark_duration, both from the records",
    ),
    "records.output_token_throughput.avg": (
        "2320.7222350404572",
        21624 / 9.317788951,
        "total_osl / benchmark_duration, both from the records",
    ),
    "records.total_output_tokens.avg": (
        "1832.0",
        1832.0,
        "sum of the ok records' output_token_count (30 records carry it, 59 do not)",
    ),
    "records.total_isl.count": (
        "1",
        1.0,
        "a run-level metric is one value: AIPerf writes MetricResult(avg=value, count=1)",
    ),
    "error_summary.0.count": (
        "11",
        11.0,
        "error records whose error is '499 RequestCancellationError: Request was "
        "cancelled after 0.000 seconds' (AIPerf groups errors by code, type and message)",
    ),
}


def test_aiperf_run_level_metrics_and_error_counts_are_recomputed_from_the_records(
    ledger: Ledger, ledger_url: str, samples: Path
) -> None:
    """main: every run-level key "one value over the whole run ... checked by the identities", error_summary
    "not known to the check", output_token_count "missing for 59 of 89": all by AIPerf's definitions now."""
    d = samples / "aiperf"
    imp(
        ledger_url,
        str(d / "aiperf-repo-examples-run1__profile_export_aiperf.json"),
        str(d / "aiperf-repo-examples-run1__profile_export_aiperf.csv"),
        str(d / "aiperf-repo-examples-run1__profile_export.jsonl"),
        "--batch",
        "a",
    )
    rows = [r for r in check(ledger, batch="a") if r.section == RECORDS]
    by = {r.key: r for r in rows}
    for key, (reported, recomputed, how) in AIPERF_RUN_LEVEL.items():
        r = by[key]
        assert (r.reported, r.status, r.reason, r.definition) == (reported, "agree", how, "numpy-linear"), key
        assert r.recomputed == pytest.approx(recomputed, rel=1e-15), key
    csv = by["time_to_second_token.p99"]  # the CSV's new-schema name of the old records' ttst
    assert (csv.reported, csv.status, csv.reason) == ("142.92", "agree", "over ok records (ttst)")
    assert Counter(r.status for r in rows) == {"agree": 284}


def test_aiperf_edited_counts_disagree_with_the_records(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    d = samples / "aiperf"
    data = json.loads((d / "aiperf-repo-examples-run1__profile_export_aiperf.json").read_text())
    data["error_summary"][0]["count"] = 10
    data["records"]["request_count"]["avg"] = 90.0
    data["records"]["error_request_count"]["avg"] = 10.0  # still 100 records in all: the files pair
    (tmp_path / "run1__profile_export_aiperf.json").write_text(json.dumps(data))
    (tmp_path / "run1__profile_export.jsonl").write_bytes(
        (d / "aiperf-repo-examples-run1__profile_export.jsonl").read_bytes()
    )
    imp(ledger_url, str(tmp_path), "--batch", "a")
    by = {r.key: r for r in check(ledger, batch="a") if r.section == RECORDS}
    assert {
        k: (by[k].reported, by[k].recomputed, by[k].status)
        for k in ("error_summary.0.count", "records.request_count.avg", "records.error_request_count.avg")
    } == {
        "error_summary.0.count": ("10", 11.0, "disagree"),
        "records.request_count.avg": ("90.0", 89.0, "disagree"),
        "records.error_request_count.avg": ("10.0", 11.0, "disagree"),
    }


def test_a_per_request_value_outside_its_domain_is_refused_naming_record_and_field(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    text = (samples / "llmperf" / "individual_groq_70b.json").read_text()
    records = json.loads(text)
    records[3]["request_output_throughput_token_per_s"] = 1e308
    (tmp_path / "individual_inf.json").write_text(json.dumps(records).replace("1e+308", "Infinity", 1))
    res = CliRunner().invoke(
        main, ["import", "--db", ledger_url, "-q", str(tmp_path / "individual_inf.json"), "--batch", "x"]
    )
    assert res.exit_code == 1
    assert res.output.strip().endswith(
        "record 3: field 'request_output_throughput_token_per_s': inf is not a finite number"
    )
    # 1e400 is no Infinity the tool wrote: a number beyond a float, refused where it is read (issue 39)
    (tmp_path / "individual_big.json").write_text(json.dumps(records).replace("1e+308", "1e400", 1))
    res = CliRunner().invoke(
        main, ["import", "--db", ledger_url, "-q", str(tmp_path / "individual_big.json"), "--batch", "x"]
    )
    assert res.exit_code == 1
    assert res.output.strip().endswith(
        "line 1 column 1121: field 'request_output_throughput_token_per_s': the number "
        "1e400 is beyond the range of a 64-bit float (about ±1.8e308); refused"
    )
    with Ledger(ledger_url) as led, led.connection() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM request_value").scalar() == 0


# CONSTRUCTED from GenAI-Perf's source (not a real run; there is no real GenAI-Perf sample): the export and
# the summary GenAI-Perf computes from it, written by tests/fixtures/genai_perf/artifact/generate.py after
# genai-perf/genai_perf/profile_data_parser/llm_profile_data_parser.py @00168fe7 (_parse_requests) and
# genai-perf/genai_perf/metrics/statistics.py @0518df11 (Statistics: np.mean, np.percentile, np.std,
# ns x 1e-6 -> ms) of triton-inference-server/perf_analyzer.
GENAI_ARTIFACT = Path(__file__).resolve().parents[2] / "fixtures" / "genai_perf" / "artifact"


@pytest.mark.parametrize("order", ["export first", "summary first"])
def test_genai_perf_summary_recomputed_from_its_export_by_genai_perfs_definitions(
    ledger: Ledger, ledger_url: str, order: str
) -> None:
    files = [str(GENAI_ARTIFACT / "profile_export.json"), str(GENAI_ARTIFACT / "profile_export_genai_perf.json")]
    imp(ledger_url, *(files if order == "export first" else files[::-1]), "--batch", "g")
    rows = check(ledger, batch="g")
    assert {r.run_id for r in rows} == {1}
    by = {r.key: r for r in rows if r.section == RECORDS}
    answered = "over the 5 requests with a response, in ms; 1 without content skipped, as GenAI-Perf does"
    for key, reported, recomputed, how in (
        ("time_to_first_token.avg", "137.000014", 137.000014, answered),
        ("request_latency.p99", "289.04002887999997", 289.04002888, answered),
        ("request_latency.std", "80.44228644438253", 80.44228644438253, answered),
        (
            "time_to_second_token.std",
            "5.8309518948453",
            5.830951894845301,
            "second - first response of the requests with two or more, in ms",
        ),
        # len(requests) = 6 (the skipped one too) over the span of the 5 answered
        (
            "request_throughput.avg",
            "11.53846089497045",
            6 / 0.520000029,
            "all 6 requests / (max last response - min request timestamp of the 5 with a response)",
        ),
    ):
        r = by[key]
        assert (r.reported, r.status, r.reason, r.definition) == (reported, "agree", how, "numpy-linear"), key
        assert r.recomputed == pytest.approx(recomputed, rel=1e-12), key
    itl = by["inter_token_latency.p50"]
    assert (itl.status, itl.reason) == (
        "not re-derivable",
        "GenAI-Perf counts tokens with its own tokenizer over the "
        "request and response texts; they carry no token counts",
    )
    assert Counter(r.status for r in by.values()) == {"agree": 40, "not re-derivable": 53}


def test_genai_perf_summary_pairs_by_folder_and_stem_and_refuses_a_failed_request(
    ledger: Ledger, ledger_url: str, tmp_path: Path
) -> None:
    summary = json.loads((GENAI_ARTIFACT / "profile_export_genai_perf.json").read_text())
    export = json.loads((GENAI_ARTIFACT / "profile_export.json").read_text())
    summary["input_config"]["model"] = ["meta/llama-3-8b"]  # another label: paired by folder and stem, not by label
    export["experiments"][0]["requests"][1]["response_outputs"][2] = {
        "response": 'data: {"error": {"message": "model overloaded"}}\n\n'
    }
    (tmp_path / "run7").mkdir()
    (tmp_path / "run7" / "my_export.json").write_text(json.dumps(export))
    (tmp_path / "run7" / "my_export_genai_perf.json").write_text(json.dumps(summary))
    res = CliRunner().invoke(main, ["import", "--db", ledger_url, "--batch", "g", str(tmp_path / "run7")])
    assert res.exit_code == 0, res.output
    assert (
        "note: my_export_genai_perf.json: attached to run 1 'genai-perf llama-3-8b concurrency=2' by same pairing "
        "key 'genai-perf run7/my_export' and 6 requests"
    ) in res.output
    by = {r.key: r for r in check(ledger, batch="g") if r.section == RECORDS}
    assert (by["time_to_first_token.avg"].status, by["time_to_first_token.avg"].reason) == (
        "not re-derivable",
        "1 of the records failed: GenAI-Perf stops at an error response (GenAIPerfException), so "
        "no summary of it covers a failed request",
    )


SERVE_JSON = "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.json"


def test_vllm_peak_tokens_per_second_replayed_from_start_ttft_and_itls(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    """main: max_output_tokens_per_s "needs per-token arrival times; the records keep chunk gaps only" although
    vLLM's calculate_metrics builds them from start_times + ttfts + itls, which --save-detailed writes."""
    imp(ledger_url, str(samples / SERVE_JSON), "--batch", "v")
    by = {r.key: r for r in check(ledger, batch="v") if r.section == RECORDS}
    peak, conc = by["max_output_tokens_per_s"], by["max_concurrent_requests"]
    assert (peak.reported, peak.recomputed, peak.status, peak.reason) == (
        "26.0",
        26.0,
        "agree",
        ("the fullest whole second of the successful requests' token times (start + ttft + itls), of 294 seconds"),
    )
    assert (conc.status, conc.reason) == (
        "not re-derivable",
        "vLLM counts a request in each second from its start to start + latency; the records carry no latencies",
    )
    # with latencies (older vLLM writes them) the concurrency is recomputed too; an edited peak disagrees
    obj = json.loads((samples / SERVE_JSON).read_text())
    obj["latencies"] = [t + sum(gaps) for t, gaps in zip(obj["ttfts"], obj["itls"], strict=True)]
    obj["max_output_tokens_per_s"], obj["date"] = 27.0, "20260428-091917"
    (tmp_path / "with_latencies.json").write_text(json.dumps(obj))
    imp(ledger_url, str(tmp_path / "with_latencies.json"), "--batch", "w")
    by = {r.key: r for r in check(ledger, batch="w") if r.section == RECORDS}
    assert (by["max_concurrent_requests"].recomputed, by["max_concurrent_requests"].status) == (2.0, "agree")
    assert (by["max_output_tokens_per_s"].recomputed, by["max_output_tokens_per_s"].status) == (26.0, "disagree")
    assert "rtfx" not in by  # 0.0 without audio input is vLLM's placeholder, kept as n/a (vllm_bench.NO_AUDIO)


def test_genai_perf_summary_of_another_load_level_is_not_paired(ledger_url: str, tmp_path: Path) -> None:
    summary = json.loads((GENAI_ARTIFACT / "profile_export_genai_perf.json").read_text())
    summary["input_config"]["concurrency"] = 4
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "profile_export.json").write_bytes((GENAI_ARTIFACT / "profile_export.json").read_bytes())
    (tmp_path / "a" / "profile_export_genai_perf.json").write_text(json.dumps(summary))
    res = CliRunner().invoke(main, ["import", "--db", ledger_url, "--batch", "g", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert (
        "note: profile_export_genai_perf.json: not paired with run 1 'genai-perf llama-3-8b concurrency=2' (same "
        "pairing key 'genai-perf a/profile_export'): load 'concurrency=2' there and 'concurrency=4' in this file "
        "differ"
    ) in res.output
