"""The edge cases of issue 13 that must be refused: (id, file name, bytes); tests/edges/test_refused.py pins the message of each."""

from __future__ import annotations

import json
from pathlib import Path

from tests.edges import inputs as I

BIG = 2**70
DIGITS = "9" * 5000


def _replace(data: tuple[str, bytes], old: str, new: str) -> tuple[str, bytes]:
    name, raw = data
    assert old.encode() in raw, old
    return name, raw.replace(old.encode(), new.encode(), 1)


def _pretty_dup() -> tuple[str, bytes]:
    text = json.dumps(I.vllm(), indent=1)
    return "vllm.json", text.replace('"duration": 2.5,', '"duration": 2.5,\n "completed": 5,', 1).encode()


WRONG_DATA = [
    ("negative ttft", *I.vllm_file(ttfts=[0.1, 0.0, -0.2])),
    ("negative latency", *I.vllm_file(latencies=[-0.5, 0.0, 0.7])),
    ("negative gap", *I.vllm_file(itls=[[0.01, -0.02], [], [0.03]])),
    ("negative output tokens", *I.vllm_file(output_lens=[6, 0, -6])),
    ("NaN latency", *_replace(I.vllm_file(), "[0.5, 0.0, 0.7]", "[0.5, 0.0, NaN]")),
    ("1e400 ttft", *_replace(I.vllm_file(), "[0.1, 0.0, 0.2]", "[0.1, 0.0, 1e400]")),
    ("negative duration", *I.vllm_file(duration=-2.5)),
    ("negative completed", *I.vllm_file(completed=-2)),
    ("negative queue time", *I.vllm_file(label="rq", queue_times=[0.01, -0.01, 0.0])),
    ("NaN queue time", *_replace(I.vllm_file(label="rq", queue_times=[0.01, 0.02, 0.03]), "0.02, 0.03]", "NaN, 0.03]")),
    ("1e400 gap", *_replace(I.vllm_file(), "[0.01, 0.02]", "[0.01, 1e400]")),
    ("NaN ttft without start times", *_replace(I.vllm_file(start_times=None), "[0.1, 0.0, 0.2]", "[0.1, 0.0, NaN]")),
    ("llmperf negative ttft", *I.llmperf_individual(ttft_s=-0.5)),
    ("llmperf negative tokens", *I.llmperf_individual(number_output_tokens=-150)),
    ("non-numeric summary value", *I.llmperf_summary(results_ttft_s_mean="fast")),
    ("negative power, dmon -o DT", *_replace(I.dmon_file(), "  101  ", " -101  ")),
    ("negative power, dmon -o T", *_replace(I.dmon_file(I.DMON_T), "  101  ", " -101  ")),
    ("percent above 100", *_replace(I.dmon_file(I.DMON_T), "     11      2", "    911      2")),
    ("negative KV cache size", *_replace(I.log_file(), "464,848 tokens", "-464,848 tokens")),
    ("nvidia-smi CSV negative power", "gpu.csv", I.NVIDIA_SMI_CSV.replace("33.14 W", "-33.14 W").encode()),
    ("dcgmi dmon negative power", "dcgmi.txt", I.DCGMI_DMON.replace("20.991", "-20.991").encode()),
    ("nvidia-smi CSV cut in its last value", "gpu.csv", I.NVIDIA_SMI_CSV.encode()[:-4]),
    ("dcgmi dmon cut in its last value", "dcgmi.txt", I.DCGMI_DMON.encode()[:-2]),
    ("csv negative ttft", *_replace(I.ledger_csv(), ",0.1,9.0", ",-0.1,9.0")),
    ("dmon cut in its last value", "dmon.txt", I.DMON_DT.encode()[:-3]),
    ("log cut in its last line", "server.log", I.VLLM_LOG.encode()[:-10]),
    ("csv cut in its last value", "requests.csv", I.LEDGER_CSV.encode()[:-4]),
    ("jsonl cut in its last line", "vllm.jsonl", I.vllm_lines(I.vllm(), I.vllm(label="r2"))[1][:-40]),
    ("duplicate key, pretty JSON", *_pretty_dup()),
    (
        "duplicate key, JSON Lines",
        "vllm.jsonl",
        I.vllm_lines(I.vllm())[1]
        + json.dumps(I.vllm(label="r2")).replace('"label": "r2"', '"label": "r2", "label": "r3"').encode()
        + b"\n",
    ),
    (
        "duplicate key, ledger JSON Lines",
        "requests.jsonl",
        b'{"ledger_requests": 1, "run": "a", "tool": "t", "clock": "epoch_s"}\n{"status": "ok", "ttft_s": 0.1, "ttft_s": 0.2}\n',
    ),
]

IP_REQUESTS = (
    Path(__file__).parents[1] / "fixtures/inference_perf/reports-1/per_request_lifecycle_metrics.json"
).read_text()
IP_CONFIG = "api:\n  type: completion\nload:\n  type: constant\nserver:\n  type: vllm\n  model_name: m\n"

TRACEBACKS = [
    ("deep nesting", *_replace(I.vllm_file(zz=0), '"zz": 0', '"zz": ' + "[" * 100_000 + "]" * 100_000)),
    (
        "deep nesting in the first line",
        *_replace(I.vllm_file(), '"date"', '"x": ' + "[" * 100_000 + "]" * 100_000 + ', "date"'),
    ),
    ("integer beyond 64 bits in a request", *I.vllm_file(output_lens=[6, 0, BIG])),
    ("integer beyond 64 bits in the header", *I.vllm_file(max_concurrency=BIG)),
    ("5,000-digit integer", *_replace(I.vllm_file(), '"completed": 2', f'"completed": {DIGITS}')),
    ("invalid UTF-8 in CSV", "requests.csv", I.LEDGER_CSV.encode().replace(b"HTTP 503", b"HTTP \xff503")),
    ("lone surrogate in an error", *_replace(I.vllm_file(), "HTTP 500", "HTTP \\ud800")),
    ("lone surrogate in the label", *_replace(I.vllm_file(), '"label": "r1"', '"label": "r\\udc00"')),
    ("lone surrogate in a key", *_replace(I.vllm_file(zz=1), '"zz"', '"z\\udc00"')),
    ("NUL in an error", *_replace(I.vllm_file(), "HTTP 500", "HTTP \\u0000")),
    ("NUL in the label", *_replace(I.vllm_file(), '"label": "r1"', '"label": "r\\u0000"')),
    ("NUL byte in a log", "server.log", I.VLLM_LOG.replace("version 0.10.1.1", "version 0.10\x00").encode()),
    ("label over the index limit", *I.vllm_file(label="L" * 5000)),
    ("error text over the size limit", *I.vllm_file(errors=["", "E" * (2**20 + 1), ""])),
    ("more keys than a run keeps", *I.vllm_file(**{f"k{i}": i for i in range(10_001)})),
    # issue 39: json reads 1e400 as infinity (stored as "the tool wrote Infinity"), inference-perf's NaN
    # and 1e309 times and a Latin-1 byte in its config were internal errors
    ("1e400 duration", *_replace(I.vllm_file(), '"duration": 2.5', '"duration": 1e400')),
    (
        "1e400 duration, JSON Lines",
        "vllm.jsonl",
        I.vllm_lines(I.vllm(), I.vllm(label="r2", duration=1.5))[1].replace(b"1.5", b"-1e400"),
    ),
    (
        "inference-perf NaN end time",
        "per_request_lifecycle_metrics.json",
        IP_REQUESTS.replace('"end_time": 100.4', '"end_time": NaN').encode(),
    ),
    (
        "inference-perf 1e309 start time",
        "per_request_lifecycle_metrics.json",
        IP_REQUESTS.replace('"start_time": 100.5', '"start_time": 1e309').encode(),
    ),
    (
        "inference-perf Infinity token time",
        "per_request_lifecycle_metrics.json",
        IP_REQUESTS.replace("[100.1, 100.2, 100.4]", "[100.1, Infinity, 100.4]").encode(),
    ),
    (
        "Latin-1 byte in inference-perf's config",
        "config.yaml",
        IP_CONFIG.encode().replace(b"name: m", b"name: caf\xe9"),
    ),
    (
        "inference-perf config nested 50,000 deep",
        "config.yaml",
        (IP_CONFIG + "  x: " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
    ),
]
