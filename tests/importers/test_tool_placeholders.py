"""A tool's placeholder is n/a with the tool's reason, never a measurement (issue 37; docs/formats.md,
"Tool placeholders"): genai-bench's 0.001 s TTFT with streaming off and its end-time fallback, vLLM's
and SGLang's statistics over no values (written as 0), vLLM's rtfx 0.0 without audio, trtllm-bench's
'Unknown' GPU."""

from __future__ import annotations

import json
from pathlib import Path

from bench_ledger import importers
from bench_ledger.importers import genai_bench, trtllm_bench, vllm_bench
from bench_ledger.importers.base import ParseOptions

from tests.importers.test_factors import GENAI_BENCH, RUN_FILE

TRTLLM = "trtllm-bench/latency_rtx6000_qwen25-0.5b_in128_out40_bs1.json"
SERVE = "vllm-bench-serve/benchmaq_tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d"
# what genai-bench's subtraction leaves of its start + 0.001 s (a monotonic start of ~1000 s)
AT_PLACEHOLDER = (1000.25 + 0.001) - 1000.25


def one_run(path: Path):
    art = importers.detect(path).parse(path, ParseOptions())
    (run,) = list(art.iter_runs())
    return art, run


def pub(run, key: str):
    return next(p for p in run.published if p.key == key)


def streaming_off(samples: Path, folder: Path, flag: bool = True) -> Path:
    """The sample experiment as genai-bench writes it with --disable-streaming: the flag in the
    metadata's command line (``flag``), every TTFT its start + 0.001 s placeholder."""
    meta = json.loads((samples / f"{GENAI_BENCH}experiment_metadata.json").read_text())
    if flag:
        meta["cmd"] = meta["cmd"].replace(" --batch-size 1 ", " --batch-size 1 --disable-streaming ")
    (folder / "experiment_metadata.json").write_text(json.dumps(meta))
    data = json.loads((samples / f"{GENAI_BENCH}{RUN_FILE}").read_text())
    for rec in data["individual_request_metrics"]:
        rec["ttft"] = AT_PLACEHOLDER
    (folder / RUN_FILE).write_text(json.dumps(data))
    return folder / RUN_FILE


def test_genai_bench_streaming_off_ttft_is_the_tools_placeholder(samples: Path, tmp_path: Path) -> None:
    art, run = one_run(streaming_off(samples, tmp_path))
    assert "ttft_s" not in run.capture.fields and "itl_mean_s" not in run.capture.fields
    assert "latency_s" in run.capture.fields
    assert set(run.requests.ttft_s) == {None} and set(run.requests.itl_mean_s) == {None}
    assert run.info.metadata["ttft"] == "n/a: " + genai_bench.PLACEHOLDER
    ttft = pub(run, "stats.ttft.mean")
    assert (ttft.flag, ttft.value, ttft.na_reason) == ("n/a", None, genai_bench.PLACEHOLDER)
    assert pub(run, "stats.tpot.p50").flag == "n/a"
    assert pub(run, "stats.e2e_latency.mean").flag == "reported"
    assert art.note is not None and art.note.endswith("; ttft and tpot are n/a: " + genai_bench.PLACEHOLDER)


def test_genai_bench_every_ttft_at_the_placeholder_without_its_metadata(samples: Path, tmp_path: Path) -> None:
    path = streaming_off(samples, tmp_path, flag=False)  # the metadata does not say it: the records do
    _, run = one_run(path)
    assert "ttft_s" not in run.capture.fields
    assert run.info.metadata["ttft"] == "n/a: " + genai_bench.EVERY_TTFT
    assert pub(run, "stats.ttft.p99").na_reason == genai_bench.EVERY_TTFT
    # one real TTFT among them: nothing is a placeholder (no wrong refusal)
    data = json.loads(path.read_text())
    data["individual_request_metrics"][3]["ttft"] = 0.4
    path.write_text(json.dumps(data))
    _, run = one_run(path)
    assert "ttft_s" in run.capture.fields and "ttft" not in run.info.metadata


def test_genai_bench_end_time_fallback_is_no_ttft(samples: Path, tmp_path: Path) -> None:
    data = json.loads((samples / f"{GENAI_BENCH}{RUN_FILE}").read_text())
    rec = data["individual_request_metrics"][5]
    rec["ttft"], rec["tpot"] = rec["e2e_latency"], 0.0  # time_at_first_token = end_time: tpot (e2e - ttft) / n is 0
    (tmp_path / RUN_FILE).write_text(json.dumps(data))
    _, run = one_run(tmp_path / RUN_FILE)
    assert (run.requests.ttft_s[5], run.requests.itl_mean_s[5]) == (None, None)
    assert run.requests.latency_s[5] == rec["e2e_latency"] and run.requests.ttft_s[4] is not None
    assert run.info.metadata["ttft"] == "n/a for 1 of 64 ok records: " + genai_bench.FALLBACK


def test_vllm_rtfx_without_audio_is_na(samples: Path) -> None:
    _, run = one_run(samples / f"{SERVE}.json")
    rtfx = pub(run, "rtfx")
    assert (rtfx.text, rtfx.flag, rtfx.value, rtfx.na_reason) == ("0.0", "n/a", None, vllm_bench.NO_AUDIO)
    assert pub(run, "mean_itl_ms").flag == "reported"


def test_vllm_statistics_over_no_values_are_na(samples: Path, tmp_path: Path) -> None:
    """A non-streaming endpoint: no ITLs, vLLM writes np.mean(itls or 0) = 0 for every ITL statistic."""
    obj = json.loads((samples / f"{SERVE}.json").read_text())
    for key in ("mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms"):
        obj[key] = 0.0
    obj["std_ttft_ms"] = 0.0  # one zero statistic of a series with real values stays reported
    (tmp_path / "r.json").write_text(json.dumps(obj))
    _, run = one_run(tmp_path / "r.json")
    assert {p.key: (p.flag, p.na_reason) for p in run.published if p.key.endswith("_itl_ms")} == {
        k: ("n/a", vllm_bench.ZERO_STATS) for k in ("mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms")
    }
    assert (pub(run, "std_ttft_ms").flag, pub(run, "std_ttft_ms").value) == ("reported", 0)


def test_vllm_console_and_sglang_statistics_over_no_values_are_na(samples: Path, tmp_path: Path) -> None:
    text = (samples / f"{SERVE}.stdout.txt").read_text()
    for label in ("Mean ITL (ms):", "Median ITL (ms):", "P99 ITL (ms):"):
        start = text.index(label)
        end = text.index("\n", start)
        text = text[:start] + f"{label:<41}0.00" + text[end:]
    (tmp_path / "console.txt").write_text(text)
    _, run = one_run(tmp_path / "console.txt")
    assert {p.key: p.flag for p in run.published if p.key.endswith("_itl_ms")} == {
        "mean_itl_ms": "n/a",
        "median_itl_ms": "n/a",
        "p99_itl_ms": "n/a",
    }
    assert pub(run, "mean_ttft_ms").flag == "reported"
    line = json.loads((samples / "sglang/llama_3_3_70b_online_output.jsonl").read_text().splitlines()[0])
    line["median_ttft_ms"] = 0.0
    (tmp_path / "s.jsonl").write_text(json.dumps(line) + "\n")
    _, run = one_run(tmp_path / "s.jsonl")
    assert (pub(run, "median_ttft_ms").flag, pub(run, "median_ttft_ms").na_reason) == ("n/a", vllm_bench.ZERO_STATS)
    assert pub(run, "median_itl_ms").flag == "reported"


def test_trtllm_unknown_gpu_is_no_hardware(samples: Path, tmp_path: Path) -> None:
    """reporting.py's _query_gpu_info writes name 'Unknown' and memory 0.0 where torch cannot read the GPU."""
    data = json.loads((samples / TRTLLM).read_text())
    data["machine"] = {"name": "Unknown", "memory.total": 0.0, "clocks.mem": None}
    (tmp_path / "r.json").write_text(json.dumps(data))
    _, run = one_run(tmp_path / "r.json")
    assert "hardware" not in run.info.factors
    memory = pub(run, "machine.memory.total")
    assert (memory.flag, memory.na_reason) == ("n/a", trtllm_bench.NO_GPU_MEMORY)
    _, run = one_run(samples / TRTLLM)  # a GPU it read: its name and memory as written
    assert run.info.factors["hardware"].value == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert pub(run, "machine.memory.total").flag == "reported"
