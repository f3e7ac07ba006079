"""vLLM server log importer: facts with process, first physical line, exact numbers, time to READY."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers import by_name
from bench_ledger.importers.base import ParseOptions
from bench_ledger.importers.vllm_log import FACT_KINDS, IMPORTER, elapsed_seconds
from bench_ledger.kinds import KINDS
from bench_ledger.records import LogFact

SAMPLE = "vllm-server-log/vllm-7B-1gpuA10080GB-0.5GRAM.log"


def facts(path: Path) -> list[LogFact]:
    return IMPORTER.parse(path, ParseOptions()).log_facts


def one(found: list[LogFact], kind: str) -> LogFact:
    matches = [f for f in found if f.kind == kind]
    assert len(matches) == 1, (kind, matches)
    return matches[0]


def test_registry_knows_the_importer() -> None:
    assert by_name("vllm-server-log") is IMPORTER


def test_sniff(samples: Path, fixtures: Path) -> None:
    assert IMPORTER.sniff((samples / SAMPLE).read_bytes()) is None
    assert IMPORTER.sniff((fixtures / "vllm_log/failed_launch.log").read_bytes()) is None
    assert IMPORTER.sniff(b"(APIServer pid=1) some text\n") is None
    assert "JSON" in IMPORTER.sniff(
        (samples / "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json").read_bytes()
    )
    assert "dmon" in IMPORTER.sniff((samples / "dmon/dmon_3gpu_rtx30xx.txt").read_bytes())
    assert IMPORTER.sniff(b"hello\nworld\n").startswith("no vLLM log line")


def test_real_sample_facts(samples: Path) -> None:
    got = facts(samples / SAMPLE)
    kv = one(got, "kv_cache_tokens")
    assert (kv.line, kv.process, kv.value, kv.text, kv.unit, kv.logged_at) == (
        43,
        "EngineCore_0 pid=2881",
        Decimal(464848),
        "464,848",
        "tokens",
        "09-04 01:29:26",
    )
    ratio = one(got, "max_concurrency_ratio")
    assert (ratio.line, ratio.value, ratio.text, ratio.unit) == (44, Decimal("28.37"), "28.37", "x")
    window = one(got, "max_concurrency_window_tokens")
    assert (window.line, window.value, window.text, window.unit) == (44, Decimal(16384), "16,384", "tokens")
    alloc = one(got, "model_allocation")
    assert (alloc.line, alloc.value, alloc.unit, alloc.process) == (
        31,
        Decimal("14.2488"),
        "GiB",
        "EngineCore_0 pid=2881",
    )
    assert one(got, "model_load_seconds").value == Decimal("2.993822")
    assert (one(got, "weights_load_seconds").value, one(got, "weights_load_seconds").line) == (Decimal("2.68"), 30)
    mem = one(got, "kv_cache_memory")
    assert (mem.value, mem.unit, mem.line) == (Decimal("24.83"), "GiB", 42)
    blocks = one(got, "num_gpu_blocks")  # wrapped: "num_gpu_blocks is" / ": 29053"
    assert (blocks.line, blocks.value, blocks.text, blocks.process) == (
        48,
        Decimal(29053),
        "29053",
        "APIServer pid=2739",
    )
    assert one(got, "init_engine_seconds").value == Decimal("23.13")
    version = one(got, "engine_version")
    assert (version.text, version.value, version.line) == ("0.10.1.1", None, 2)
    start = one(got, "api_server_start")
    assert (start.text, start.line) == ("http://0.0.0.0:8081", 59)
    ready = one(got, "ready")
    assert (ready.line, ready.process, ready.logged_at) == (94, "APIServer pid=2739", None)
    to_ready = one(got, "seconds_to_ready")
    assert (to_ready.value, to_ready.text, to_ready.unit, to_ready.line) == (Decimal(68), "68", "s", 94)
    assert not [f for f in got if f.kind == "engine_error"]
    assert {f.kind for f in got} <= FACT_KINDS.keys()


def test_dp_ranks_hard_wraps_and_new_year(fixtures: Path) -> None:
    got = facts(fixtures / "vllm_log/dp_wrapped_new_year.log")
    kv = sorted((f.line, f.process, f.value, f.text) for f in got if f.kind == "kv_cache_tokens")
    assert kv == [
        (10, "EngineCore_DP1 pid=202", Decimal(16593113), "16,593,113"),  # wrapped inside the number
        (12, "EngineCore_DP0 pid=201", Decimal(16593113), "16,593,113"),
    ]
    assert one(got, "max_concurrency_ratio").value == Decimal("63.30")
    alloc = one(got, "model_allocation")  # wrapped after "seco" / "nds": still found, first line kept
    assert (alloc.line, alloc.process, alloc.value) == (8, "Worker_TP1 pid=302", Decimal("21.1300"))
    assert one(got, "model_load_seconds").value == Decimal("13.402113")
    assert one(got, "weights_load_seconds").process == "Worker_TP0 pid=301"
    assert one(got, "engine_version").text == "0.11.0"
    # 12-31 23:59:50 (first line) -> 01-01 00:01:04 (last timestamp before ready)
    to_ready = one(got, "seconds_to_ready")
    assert (to_ready.value, to_ready.line) == (Decimal(74), 19)


def test_failed_launch_keeps_errors_and_has_no_time_to_ready(fixtures: Path) -> None:
    got = facts(fixtures / "vllm_log/failed_launch.log")
    errors = [(f.line, f.process, f.text, f.logged_at) for f in got if f.kind == "engine_error"]
    assert errors == [
        (4, "EngineCore_0 pid=600", "EngineCore failed to start.", "09-04 02:00:21"),
        (
            5,
            "EngineCore_0 pid=600",
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "09-04 02:00:21",
        ),
    ]
    assert one(got, "kv_cache_memory").value == Decimal("-1.20")
    assert not [f for f in got if f.kind in ("ready", "seconds_to_ready")]


def test_a_fact_whose_number_does_not_parse(fixtures: Path) -> None:
    path = fixtures / "vllm_log/bad_number.log"
    with pytest.raises(ParseError) as err:
        facts(path)
    assert str(err.value) == f"{path}, line 2: field 'kv_cache_tokens': not a number: '46,48,48'"


@pytest.mark.parametrize(
    ("start", "end", "seconds"),
    [
        ("09-04 01:28:22", "09-04 01:29:30", 68),
        ("09-04 23:59:30", "09-05 00:00:30", 60),
        ("12-31 23:59:50", "01-01 00:01:04", 74),
        ("02-28 23:59:59", "03-01 00:00:00", 1),
        ("02-29 23:59:59", "03-01 00:00:00", 1),
        ("12-31 23:00:00", "02-29 00:00:00", (31 + 28) * 86400 + 3600),
    ],
)
def test_elapsed_seconds_without_a_year(start: str, end: str, seconds: int) -> None:
    assert elapsed_seconds(start, end) == seconds


def test_fact_kinds_are_documented_with_ledger_kinds() -> None:
    assert {k for k, _ in FACT_KINDS.values() if k is not None} <= KINDS.keys()
    assert "never a served concurrency" in FACT_KINDS["max_concurrency_ratio"][1]


def test_ready_before_the_first_timestamp_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.log"
    path.write_text(
        "INFO 09-04 10:00:00 [a.py:1] start\n"
        "(APIServer pid=1) INFO 09-04 09:00:00 [b.py:2] earlier\n"
        "(APIServer pid=1) INFO:     Application startup complete.\n"
    )
    with pytest.raises(ParseError) as err:
        facts(path)
    assert str(err.value) == (
        f"{path}, line 3: field 'seconds_to_ready': last time before ready '09-04 09:00:00' is before the first "
        "'09-04 10:00:00'"
    )


def test_real_sample_engine_args_compile_and_cuda_graph_facts(samples: Path) -> None:
    """Issue 14 item 8: non-default args, resolved max model len, torch.compile, the compile cache, CUDA graphs."""
    got = facts(samples / SAMPLE)
    shown = {f.kind: (f.line, f.text, f.value, f.unit) for f in got if f.kind.startswith("arg_")}
    assert shown == {
        "arg_max_model_len": (3, "16384", Decimal(16384), "tokens"),  # wrapped record, first line 3
        "arg_gpu_memory_utilization": (3, "0.5", Decimal("0.5"), None),
    }  # only what the dict holds
    assert (one(got, "max_model_len").line, one(got, "max_model_len").value) == (7, Decimal(16384))
    assert (one(got, "max_num_batched_tokens").line, one(got, "max_num_batched_tokens").value) == (8, Decimal(2048))
    assert (one(got, "dynamo_transform_seconds").line, one(got, "dynamo_transform_seconds").value) == (
        34,
        Decimal("8.82"),
    )
    load = one(got, "compile_cache_load_seconds")  # wrapped: "..., took" / " 7.088 s"
    assert (load.line, load.value, load.unit, load.process) == (35, Decimal("7.088"), "s", "EngineCore_0 pid=2881")
    assert (one(got, "torch_compile_seconds").line, one(got, "torch_compile_seconds").value) == (37, Decimal("8.82"))
    graphs = one(got, "cuda_graph_memory")
    assert (graphs.line, graphs.text, graphs.unit) == (46, "0.50", "GiB")
    assert one(got, "cuda_graph_capture_seconds").value == Decimal(3)
    warm = one(got, "warm_compile")
    assert (warm.line, warm.text, warm.value, warm.process) == (35, "warm", None, "EngineCore_0 pid=2881")
    assert not [f for f in got if f.kind == "graph_compile_seconds"]


def test_cold_and_mixed_compile_cache(fixtures: Path) -> None:
    """Lines as vLLM's sources print them (backends.py, monitor.py, api_utils.py); values synthetic."""
    cold = facts(fixtures / "vllm_log/synthetic_compile_cold.log")
    assert {f.kind: f.value for f in cold if f.kind.startswith("arg_")} == {
        "arg_max_model_len": Decimal(32768),
        "arg_max_num_batched_tokens": Decimal(8192),
        "arg_max_num_seqs": Decimal(128),
        "arg_tensor_parallel_size": Decimal(4),
        "arg_gpu_memory_utilization": Decimal("0.92"),
    }
    assert (one(cold, "graph_compile_seconds").line, one(cold, "graph_compile_seconds").value) == (7, Decimal("41.27"))
    assert one(cold, "torch_compile_seconds").value == Decimal("52.10")  # "torch.compile took ... in total"
    assert (one(cold, "cuda_graph_memory").value, one(cold, "cuda_graph_capture_seconds").value) == (
        Decimal("1.87"),
        26,
    )
    assert (one(cold, "warm_compile").text, one(cold, "warm_compile").line) == ("cold", 7)
    mixed = facts(fixtures / "vllm_log/synthetic_compile_mixed.log")
    assert one(mixed, "torch_compile_seconds").value == Decimal("21.33")  # older "graph compilation takes"
    assert one(mixed, "compile_and_profile_seconds").value == Decimal("24.80")
    assert (one(mixed, "warm_compile").text, one(mixed, "warm_compile").line) == ("unknown", 2)
    assert not [f for f in facts(fixtures / "vllm_log/failed_launch.log") if f.kind == "warm_compile"]


def test_new_fact_kinds_are_known_kinds() -> None:
    for kind, (qk, _) in FACT_KINDS.items():
        assert qk is None or qk in KINDS, kind
