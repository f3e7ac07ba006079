from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers import detect
from bench_ledger.importers.base import ParseOptions, read_head
from bench_ledger.importers.vllm_bench import IMPORTER
from bench_ledger.kinds import KINDS
from bench_ledger.records import ParsedRun

REAL_1QPS = "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"


def runs(path: Path) -> list[ParsedRun]:
    return list(IMPORTER.parse(path, ParseOptions()).runs)


def pub(run: ParsedRun, key: str):
    (found,) = [p for p in run.published if p.key == key]
    return found


def test_real_sample_aggregates_only(samples: Path) -> None:
    (run,) = runs(samples / REAL_1QPS)
    assert run.capture.fields == []
    assert run.capture.record_count == 0
    assert run.capture.clock is None
    assert run.requests is None
    assert run.info.label == "Qwen2.5-Coder-7B-Instruct rate=1.0 c=inf"
    assert run.info.tool == "vllm-bench"
    assert run.info.request_count == 150
    assert run.info.request_rate == "1.0"
    assert run.info.concurrency is None
    assert run.info.duration_s == 162.604954689
    assert run.info.started_at is None  # `date` is local, zone-less: metadata only
    assert run.info.metadata["date"] == "20260707-093920"
    assert run.info.metadata["tag"] == "base_r1_burstgpt"
    assert run.info.metadata["burstiness"] == "1.0"
    out = pub(run, "output_throughput")
    assert (out.text, out.value, out.flag) == ("120.42068482753697", Decimal("120.42068482753697"), "reported")
    assert (out.unit, out.quantity_kind, out.locator, out.precision) == (
        "tokens/s",
        "aggregate_token_rate",
        "$.output_throughput",
        14,
    )
    completed = pub(run, "completed")
    assert (completed.text, completed.value, completed.quantity_kind) == ("150", Decimal(150), "request_count")
    assert pub(run, "duration").quantity_kind == "duration"
    assert pub(run, "total_output_tokens").text == "19581"
    assert pub(run, "max_concurrent_requests").quantity_kind == "concurrency"
    assert pub(run, "max_output_tokens_per_s").text == "448.0"
    p99 = pub(run, "p99_e2el_ms")
    assert (p99.text, p99.unit, p99.quantity_kind) == ("21613.777367589988", "ms", "latency")
    goodput = pub(run, "request_goodput")
    assert (goodput.flag, goodput.value, goodput.na_reason) == ("n/a", None, "the tool wrote null")
    assert len(run.published) == 30
    assert all(p.quantity_kind in KINDS for p in run.published)


def test_real_samples_are_detected_as_vllm(samples: Path) -> None:
    for path in sorted((samples / "vllm").glob("*.json")):
        assert detect(path).name == "vllm-bench"
        assert len(runs(path)) == 1


def test_sniff_rejects_other_formats(samples: Path) -> None:
    folders = (
        "sglang",
        "llmperf",
        "dmon",
        "vllm-server-log",
        "inference-perf",
        "trtllm-bench",
        "mlperf-loadgen",
        "genai-bench",
        "nvidia-smi",
        "dcgmi-dmon",
    )
    others = [p for d in folders for p in (samples / d).rglob("*") if p.is_file()]
    others += [
        samples
        / "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8/summary.json",
        samples / "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d.stdout.txt",
    ]
    assert others
    for path in others:
        assert IMPORTER.sniff(read_head(path)) is not None, path
    why = IMPORTER.sniff(read_head(samples / "sglang/llama_3_3_70b_online_output.jsonl"))
    assert why == "has SGLang keys (dataset_name / random_input_len / total_output_tokens_retokenized)"
    assert IMPORTER.sniff(b"# gpu pwr\n") == "not a JSON object"
    assert IMPORTER.sniff(b'{"a": 1}\n') == "no 'duration' and 'completed' keys"


def test_legacy_colon_key_pretty_printed(fixtures: Path) -> None:
    path = fixtures / "vllm_bench/legacy_colon.json"
    assert detect(path).name == "vllm-bench"
    (run,) = runs(path)
    goodput = pub(run, "request_goodput:")
    assert (goodput.text, goodput.unit, goodput.quantity_kind) == ("0.6651442035260204", "requests/s", "request_rate")
    assert "colon" in goodput.note
    assert run.info.label == "Llama-3.2-3B-Instruct rate=10.0 c=inf"
    assert run.info.metadata["gpu"] == "4xNVIDIA_L40S"
    assert run.info.metadata["best_of"] == "1"  # a legacy setting, not an aggregate
    assert "best_of" not in {p.key for p in run.published}
    assert run.capture.fields == ["chunk_gaps", "error", "input_tokens", "output_tokens", "status", "ttft_s"]
    assert run.capture.clock is None
    assert run.capture.token_source == "unknown"
    assert "Unreliable: a non-200 reply with an empty reason" in run.capture.success_rule
    req = run.requests
    assert req.status == ["ok", "ok", "failed"]
    assert req.error == [None, None, "Bad Request"]
    assert req.output_tokens == [4, 3, 0]  # 0 of the failure kept as written
    assert req.ttft_s == [0.0421, 0.05, None]  # 0.0 placeholder dropped
    assert req.chunk_gaps_s == [[0.011, 0.012, 0.013], [0.02, 0.021], []]
    assert req.send_ns == [None] * 3
    assert req.line == [None] * 3  # pretty-printed: no single physical line
    assert pub(run, "p99_itl_ms").locator == "$.p99_itl_ms"


def test_append_result_jsonl(fixtures: Path) -> None:
    first, second, third = runs(fixtures / "vllm_bench/append.jsonl")
    assert first.info.request_rate == "inf"
    assert first.info.concurrency == 8
    assert first.info.label == "Qwen2.5-7B-Instruct rate=inf c=8"
    assert second.info.label == "sweep-b"
    assert second.info.concurrency is None
    assert third.info.locator == "line 3 $"
    assert first.info.metadata["hardware"] == "H20"
    assert pub(third, "output_throughput").locator == "line 3 $.output_throughput"
    assert pub(third, "request_goodput").text == "3.5"
    assert pub(first, "request_goodput").flag == "n/a"
    p999 = pub(first, "p99.9_ttft_ms")
    assert (p999.text, p999.unit, p999.quantity_kind) == ("47.5", "ms", "latency")
    assert all(r.capture.record_count == 0 and r.requests is None for r in (first, second, third))


def test_detailed_with_start_times(fixtures: Path) -> None:
    (run,) = runs(fixtures / "vllm_bench/detailed_start_times.json")
    cap = run.capture
    assert cap.clock == "monotonic_s"
    assert cap.record_count == 4
    assert cap.fields == [
        "chunk_gaps",
        "end_time",
        "error",
        "first_token_time",
        "input_tokens",
        "latency_s",
        "output_tokens",
        "queue_s",
        "send_time",
        "status",
        "ttft_s",
    ]
    assert "cached_tokens" not in cap.fields
    req = run.requests
    assert req.idx == [0, 1, 2, 3]
    assert req.line == [1, 1, 1, 1]
    assert req.status == ["ok", "ok", "ok", "failed"]
    assert req.error == [None, None, None, "HTTP 500: Internal Server Error"]
    # exact decimal arithmetic: float 1.005 * 1e9 would give 1004999999
    assert req.send_ns == [52341123456789, 1005000000, 1500000000, 2000000000]
    assert req.first_token_ns == [52341165556789, 1055000000, 1625000000, None]
    assert req.end_ns == [52342623456789, 1255000000, 2250000000, None]
    assert req.latency_s == [1.5, 0.25, 0.75, None]
    assert req.queue_s == [0.001, 0.0, 0.002, 0.0]
    assert req.cached_tokens == [None] * 4
    assert run.info.concurrency == 2
    assert run.info.started_at is None


def test_only_latencies_and_queue_times(fixtures: Path) -> None:
    (run,) = runs(fixtures / "vllm_bench/latencies_only.json")
    assert run.capture.fields == ["latency_s", "queue_s"]
    assert run.capture.success_rule.startswith("no errors array")
    assert run.requests.status == ["unknown", "unknown"]
    assert run.requests.latency_s == [0.5, None]  # exact 0.0 with unknown status: placeholder
    assert run.requests.queue_s == [0.01, 0.02]
    assert run.info.label == "lat-only"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncated.json", "line 1 column 531: invalid JSON: Expecting property name enclosed in double quotes"),
        ("unequal.json", "$.ttfts: field 'ttfts': $.ttfts has 3 entries, $.input_lens has 4"),
        ("wrong_type.json", "$.ttfts[1]: field 'ttfts': input should be a valid number, got str '0.05'"),
        ("bad_start_time.json", "$.start_times[2]: field 'start_times': expected a number, got str 'x'"),
        ("bad_header_type.json", "$.max_concurrency: field 'max_concurrency': expected an integer, got str '8'"),
    ],
)
def test_bad_single_files(fixtures: Path, name: str, message: str) -> None:
    path = fixtures / "vllm_bench" / name
    with pytest.raises(ParseError) as exc:
        runs(path)
    assert str(exc.value) == f"{path}, {message}"


def test_bad_later_line_names_the_line(fixtures: Path) -> None:
    path = fixtures / "vllm_bench/wrong_type_int.jsonl"
    art = IMPORTER.parse(path, ParseOptions())  # first line is fine
    with pytest.raises(ParseError) as exc:
        list(art.runs)
    assert str(exc.value) == (
        f"{path}, line 2 $.output_lens[2]: field 'output_lens': input should be a valid integer, got float 2.0"
    )
    path = fixtures / "vllm_bench/bad_line.jsonl"
    with pytest.raises(ParseError, match=r"line 3 column 1: invalid JSON: Expecting value"):
        list(IMPORTER.parse(path, ParseOptions()).runs)


def test_not_an_object_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"duration": 1.0, "completed": 1}\n[1, 2]\n')
    with pytest.raises(ParseError) as exc:
        list(IMPORTER.parse(path, ParseOptions()).runs)
    assert str(exc.value) == f"{path}, line 2 $: expected a JSON object, got list"
    empty = tmp_path / "empty.json"
    empty.write_text("\n")
    with pytest.raises(ParseError, match="empty file"):
        IMPORTER.parse(empty, ParseOptions())


# ------------------------------------------------------------ the DuckDB-parsed path (issue 7)

import json as _json  # noqa: E402

from bench_ledger.importers import _vllm_bench_duckdb as vbd  # noqa: E402  # private: the DuckDB path's own entry and checks
from bench_ledger.importers import vllm_bench as vb  # noqa: E402
from bench_ledger.records import ParsedArtefact  # noqa: E402


def numbered_across_runs(runs):  # the store numbers records across the runs of an artefact
    return ParsedArtefact(format="vllm-bench", format_version=None, runs=runs).iter_runs()


from bench_ledger.ingest import request_tables  # noqa: E402
from bench_ledger.records import ArrowRequests, RequestColumns  # noqa: E402


def _both(path: Path):
    """(python result, fast result): a list of runs, or the error message."""
    out = []
    for fast in (False, True):
        try:
            out.append(list(numbered_across_runs(vb._runs(path, fast=fast))))
        except ParseError as exc:
            out.append(str(exc))
    return out


def _assert_same(path: Path) -> None:
    py, fast = _both(path)
    if isinstance(py, str) or isinstance(fast, str):
        assert py == fast
        return
    assert len(py) == len(fast)
    for a, b in zip(py, fast, strict=True):
        assert (a.info, a.capture, a.published) == (b.info, b.capture, b.published)
        if a.requests is None:
            assert b.requests is None
            continue
        ra, ga = request_tables(7, 9, a.capture.clock, a.requests)
        rb, gb = request_tables(7, 9, b.capture.clock, b.requests)
        assert ra.combine_chunks().equals(rb.combine_chunks()), path
        assert (ga is None) == (gb is None or gb.num_rows == 0)
        if ga is not None:
            assert ga.combine_chunks().equals(gb.combine_chunks())


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[1] / "fixtures/vllm_bench").iterdir()))
def test_fast_path_gives_identical_rows_or_errors_on_every_fixture(fixtures: Path, name: str) -> None:
    _assert_same(fixtures / "vllm_bench" / name)


def test_fast_path_takes_regular_files_and_leaves_irregular_ones(fixtures: Path) -> None:
    d = fixtures / "vllm_bench"
    for name in ("detailed_start_times.json", "latencies_only.json", "append.jsonl"):
        assert vbd.fast_runs(d / name) is not None, name
    for name in (
        "legacy_colon.json",
        "truncated.json",
        "unequal.json",
        "wrong_type.json",
        "wrong_type_int.jsonl",
        "bad_line.jsonl",
        "bad_start_time.json",
    ):
        assert vbd.fast_runs(d / name) is None, name


def _result(i: int, n: int, rng, *, starts: bool = True, errors: bool = True, gaps: int = 3) -> dict:
    tricky = [52341.123456789123, 1.005, 0.30000000000000004, 1e-07, 123456.0000000005, 0.1, 2.0, 999999.999999999]
    obj = {
        "date": f"20261129-{i:06d}",
        "endpoint_type": "openai-chat",
        "backend": "vllm",
        "label": f"run-{i}",
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 8,
        "duration": 12.5 + i / 3,
        "completed": n,
        "request_throughput": n / 7,
        "mean_ttft_ms": 170.25,
        "p99.9_ttft_ms": 318.0,
        "odd": [1, 2],
        "custom_metric": 3,
    }
    obj["input_lens"] = [rng.randint(1, 4000) for _ in range(n)]
    obj["output_lens"] = [rng.randint(0, 500) for _ in range(n)]
    failed = [rng.random() < 0.2 for _ in range(n)]
    obj["ttfts"] = [
        0.0 if f else (tricky[j % len(tricky)] if j % 5 == 0 else rng.random()) for j, f in enumerate(failed)
    ]
    obj["latencies"] = [0.0 if f else rng.random() * 3 for f in failed]
    obj["itls"] = [[] if f else [rng.random() / 10 for _ in range(rng.randint(0, gaps))] for f in failed]
    if errors:
        obj["errors"] = ['HTTP 500: Internal "Server" Error [x]' if f else "" for f in failed]
    if starts:
        obj["start_times"] = [
            tricky[j % len(tricky)] + j * 0.0125 if j % 3 else 1000.0 + rng.random() * 1e4 for j in range(n)
        ]
    return obj


def test_fast_path_matches_python_on_a_generated_multi_run_file(tmp_path: Path) -> None:
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gen

    rng = random.Random(7)
    path = tmp_path / "multi.jsonl"
    gen.vllm_and_ledger(path, 5, 300, 4, None)
    with open(path, "a") as fh:  # runs of other shapes in the same file: no errors, no start times, no rows
        fh.write(_json.dumps(_result(5, 200, rng)) + "\n")
        fh.write(_json.dumps(_result(6, 150, rng, errors=False)) + "\n")
        fh.write(_json.dumps(_result(7, 120, rng, starts=False)) + "\n")
        fh.write(_json.dumps({**_result(8, 0, rng)}) + "\n")
        fh.write(_json.dumps(_result(9, 90, rng, gaps=0)) + "\n")
    assert vbd.fast_runs(path) is not None
    runs_fast = list(numbered_across_runs(vb._runs(path, fast=True)))
    assert all(isinstance(r.requests, ArrowRequests) for r in runs_fast if r.requests is not None)
    assert [r.info.label for r in runs_fast][:2] == ["run-0000", "run-0001"]
    _assert_same(path)
    runs_py = list(numbered_across_runs(vb._runs(path, fast=False)))
    assert isinstance(runs_py[0].requests, RequestColumns)
    assert runs_fast[6].requests.table.column("idx").to_pylist()[0] == 5 * 300 + 200  # idx continues across runs


def test_fast_path_falls_back_on_irregular_lines(tmp_path: Path) -> None:
    import random

    rng = random.Random(3)
    obj = _result(0, 20, rng)
    good = _json.dumps(obj)
    cases = {
        "string number": ("ttfts", "0.5"),
        "null element": ("latencies", None),
        "float in ints": ("input_lens", 2.0),
        "number in errors": ("errors", 5),
        "tiny time": ("start_times", 1e-12),
        "flat itls": ("itls", 0.5),
        "beyond int32": ("output_lens", 2**40),
        "not a list": ("ttfts", "x"),
    }
    for what, (key, value) in cases.items():
        changed = {**obj, key: [value, *obj[key][1:]] if what != "not a list" else value}
        path = tmp_path / f"{what}.jsonl"
        path.write_text(good + "\n" + _json.dumps(changed) + "\n")
        assert vbd.fast_runs(path) is None, what
        if what != "beyond int32":  # the Python path's rows do not fit the request table either
            _assert_same(path)
    blank = tmp_path / "blank.jsonl"
    blank.write_text(good + "\n\n" + good + "\n")
    assert vbd.fast_runs(blank) is None
    _assert_same(blank)


def test_start_plus_ttft_is_summed_exactly_beyond_decimals_28_digits(tmp_path: Path) -> None:
    """start 1751880000.9999998 s + ttft 1.9999999999999996e-07 s is 1751880000.99999999999999999999996 s
    (33 digits): 1751880000999999999 ns, truncated. Python's Decimal rounds a sum to 28 digits, which
    made it 1751880001.000000000000000000 s, one ns late; both parse paths must give the exact ns."""
    import math

    ttft = math.nextafter(2e-07, 0)
    assert repr(ttft) == "1.9999999999999996e-07"
    obj = {
        "date": "20261201-000000",
        "backend": "vllm",
        "num_prompts": 1,
        "completed": 1,
        "input_lens": [10],
        "output_lens": [3],
        "ttfts": [ttft],
        "latencies": [0.5],
        "itls": [[0.1, 0.1]],
        "errors": [""],
        "start_times": [1751880000.9999998],
    }
    path = tmp_path / "exact.json"
    path.write_text(_json.dumps(obj))
    for fast in (False, True):
        (run,) = numbered_across_runs(vb._runs(path, fast=fast))
        req, _ = request_tables(7, 9, run.capture.clock, run.requests)
        assert req.column("first_token_ns").to_pylist() == [1751880000999999999], fast
        assert req.column("send_ns").to_pylist() == [1751880000999999800], fast


def test_array_keys_are_found_where_a_whole_line_search_finds_them(fixtures: Path, tmp_path: Path, monkeypatch) -> None:
    """The prescan skips the numeric arrays it has checked when it looks for the next array key
    (issue 17); the first match must be the one a search of the whole line finds, also where a key's
    name is a value, sits inside an error text, or comes twice."""
    import random

    real = vbd._find_outside
    calls = []

    def checked(line: bytes, key: bytes, spans: list) -> int:
        got = real(line, key, spans)
        assert got == line.find(key), (key, spans)
        calls.append(bool(spans))
        return got

    monkeypatch.setattr(vbd, "_find_outside", checked)
    rng = random.Random(5)
    obj = _result(0, 30, rng)
    lines = [
        _json.dumps(obj),
        _json.dumps({"label": "ttfts", **obj}),
        _json.dumps({**obj, "errors": ['"start_times": [1]', "ttfts", "start_times", *obj["errors"][3:]]}),
        _json.dumps({**obj, "note": {"itls": [1.5]}}),
        _json.dumps(obj).replace('"latencies"', '"latencies" :  '),
        _json.dumps(obj)[:-1] + ', "ttfts": [0.5]}',
    ]
    path = tmp_path / "keys.jsonl"
    path.write_text("\n".join(lines) + "\n")
    for line in lines:
        vbd._cut_arrays(line.encode())
    for p in [path, *sorted((fixtures / "vllm_bench").iterdir())]:
        vbd._prescan(p)
    assert any(calls)  # spans were skipped
