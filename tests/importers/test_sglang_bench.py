from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers import detect
from bench_ledger.importers.base import ParseOptions, read_head
from bench_ledger.importers.sglang_bench import IMPORTER
from bench_ledger.kinds import KINDS
from bench_ledger.records import ParsedRun

REAL = "sglang/llama_3_3_70b_online_output.jsonl"


def runs(path: Path) -> list[ParsedRun]:
    return list(IMPORTER.parse(path, ParseOptions()).runs)


def pub(run: ParsedRun, key: str):
    (found,) = [p for p in run.published if p.key == key]
    return found


def test_real_sample_seven_runs(samples: Path) -> None:
    path = samples / REAL
    assert detect(path).name == "sglang-bench"
    all_runs = runs(path)
    assert len(all_runs) == 7
    first, last = all_runs[0], all_runs[-1]
    # random_range_ratio 0.0: lengths drawn up to 1024, the label says so (the run's actual mean input is
    # total_input_tokens / completed = 152612 / 300 = 508.7 tokens, not 1024)
    assert first.info.label == "sglang random in<=1024 out<=1024 range_ratio=0.0 rate=1.0 c=inf"
    assert pub(first, "total_input_tokens").value / pub(first, "completed").value < 512
    assert (first.info.dataset, first.info.input_target_tokens, first.info.output_cap_tokens) == ("random", 1024, 1024)
    assert first.info.concurrency is None
    assert first.info.duration_s == 298.3675805060193
    assert first.info.metadata == {
        "backend": "sglang",
        "random_input_len": "1024",
        "random_output_len": "1024",
        "random_range_ratio": "0.0",
    }
    out = pub(first, "output_throughput")
    assert (out.text, out.value, out.unit, out.quantity_kind, out.locator) == (
        "537.4142851849319",
        Decimal("537.4142851849319"),
        "tokens/s",
        "aggregate_token_rate",
        "line 1 $.output_throughput",
    )
    assert "requested output length" in out.note
    assert pub(first, "completed").text == "300"
    e2e = pub(first, "mean_e2e_latency_ms")
    assert (e2e.text, e2e.unit, e2e.quantity_kind) == ("7840.616212638561", "ms", "latency")
    assert pub(first, "total_output_tokens_retokenized").text == "160192"
    assert len(first.published) == 10
    # sharegpt lines: the random_* values are unused defaults, not targets
    assert last.info.label == "sglang sharegpt rate=8.0 c=inf"
    assert (last.info.input_target_tokens, last.info.output_cap_tokens) == (None, None)
    assert last.info.metadata == {"backend": "sglang"}
    assert pub(last, "median_itl_ms").text == "17.667690059170127"
    assert pub(last, "duration").locator == "line 7 $.duration"
    for run in all_runs:
        assert run.capture.fields == [] and run.capture.record_count == 0 and run.requests is None
        assert run.capture.token_source == "requested"
        assert all(p.quantity_kind in KINDS for p in run.published)


def test_sniff_rejects_other_formats(samples: Path) -> None:
    others = [p for p in samples.rglob("*") if p.is_file() and p.parent.name != "sglang" and p.suffix != ".md"]
    for path in others:
        assert IMPORTER.sniff(read_head(path)) is not None, path
    assert (
        IMPORTER.sniff(read_head(samples / "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"))
        == "has vLLM's 'endpoint_type' key"
    )
    assert IMPORTER.sniff(b'{"backend": "x", "duration": 1, "completed": 1}\n') == (
        "none of SGLang's keys dataset_name / random_input_len / total_output_tokens_retokenized"
    )


def test_output_details(fixtures: Path) -> None:
    path = fixtures / "sglang_bench/details.jsonl"
    assert detect(path).name == "sglang-bench"
    (run,) = runs(path)
    info = run.info
    assert info.label == "sglang-oai random in=2048 out=512 rate=inf c=64 h20-tp8"
    assert (info.request_rate, info.concurrency, info.input_target_tokens, info.output_cap_tokens) == (
        "inf",
        64,
        2048,
        512,
    )
    assert info.metadata == {
        "tag": "h20-tp8",
        "backend": "sglang-oai",
        "random_input_len": "2048",
        "random_output_len": "512",
        "random_range_ratio": "1.0",
        "ignored_keys": "server_info",
    }
    conc = pub(run, "concurrency")
    assert (conc.text, conc.quantity_kind) == ("2.16012", "concurrency")
    assert conc.note.startswith("SGLang's sum of end-to-end latencies / duration")
    assert "NOT the configured concurrency" in conc.note
    assert pub(run, "accept_length").flag == "n/a"
    assert pub(run, "p95_itl_ms").unit == "ms"
    assert pub(run, "max_itl_ms").quantity_kind == "latency"
    cap = run.capture
    assert cap.fields == ["chunk_gaps", "error", "input_tokens", "output_tokens", "status", "ttft_s"]
    assert (cap.record_count, cap.clock, cap.token_source) == (4, None, "requested")
    assert "requested" in cap.sample_note and "not" in cap.success_rule
    req = run.requests
    assert req.status == ["ok", "ok", "failed", "ok"]
    assert req.error == [None, None, "Connection reset", None]
    assert req.output_tokens == [512, 488, 0, 512]
    assert req.ttft_s == [0.15, 0.13, None, 0.17]
    assert req.chunk_gaps_s == [[0.017, 0.018], [0.016], [], [0.02]]
    assert req.line == [1, 1, 1, 1]
    assert req.send_ns == req.end_ns == req.latency_s == [None] * 4


def test_mixed_versions(fixtures: Path) -> None:
    old, new, oldest = runs(fixtures / "sglang_bench/mixed.jsonl")
    assert old.info.output_cap_tokens == 256  # sharegpt_output_len
    assert old.info.input_target_tokens is None
    assert old.info.metadata == {"backend": "sglang", "sharegpt_output_len": "256"}
    assert new.info.locator == "line 2 $"
    assert new.capture.record_count == 4 and old.capture.record_count == 0
    # no dataset_name: the settings may be defaults of another dataset, so no targets
    assert oldest.info.dataset is None
    assert (oldest.info.input_target_tokens, oldest.info.output_cap_tokens) == (None, None)
    assert oldest.info.metadata["random_range_ratio"] == "0.5"
    assert oldest.info.label == "sglang rate=2.0 c=inf"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("unequal.jsonl", "line 2 $.ttfts: field 'ttfts': $.ttfts has 3 entries, $.input_lens has 4"),
        (
            "wrong_type.jsonl",
            "line 1 $.output_lens[1]: field 'output_lens': input should be a valid integer, got str '488'",
        ),
        (
            "bad_aggregate.jsonl",
            "line 1 $.output_throughput: field 'output_throughput': expected a number, got str '746.07'",
        ),
        ("truncated.jsonl", "line 2 column 299: invalid JSON: Unterminated string starting at"),
    ],
)
def test_bad_files(fixtures: Path, name: str, message: str) -> None:
    path = fixtures / "sglang_bench" / name
    with pytest.raises(ParseError) as exc:
        runs(path)
    assert str(exc.value).startswith(f"{path}, {message}")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text("")
    with pytest.raises(ParseError) as exc:
        IMPORTER.parse(path, ParseOptions())
    assert str(exc.value) == f"{path}: empty file: no JSON Lines runs"
