"""Small valid inputs of the real formats, built in code, for the edge tests and the fuzz corpus.

Each builder returns (file name, bytes) of a file the importers take as it is; the tests change one
thing in it. Shapes follow the fixtures in tests/fixtures (themselves cut from the tools' real output).
"""

from __future__ import annotations

import json


def vllm(**change) -> dict:
    """A vLLM `bench serve` result of 3 requests (the second failed), as a dict to change."""
    obj = {
        "date": "20260301-130000",
        "endpoint_type": "openai",
        "backend": "vllm",
        "label": "r1",
        "model_id": "m",
        "num_prompts": 3,
        "request_rate": "inf",
        "max_concurrency": 2,
        "duration": 2.5,
        "completed": 2,
        "failed": 1,
        "total_input_tokens": 30,
        "total_output_tokens": 12,
        "mean_ttft_ms": 150.0,
        "input_lens": [10, 10, 10],
        "output_lens": [6, 0, 6],
        "ttfts": [0.1, 0.0, 0.2],
        "itls": [[0.01, 0.02], [], [0.03]],
        "latencies": [0.5, 0.0, 0.7],
        "errors": ["", "HTTP 500", ""],
        "start_times": [1000.25, 1000.5, 1001.0],
    }
    obj.update(change)
    return obj


def vllm_file(**change) -> tuple[str, bytes]:
    return "vllm.json", json.dumps(vllm(**change)).encode()


def vllm_lines(*objs: dict) -> tuple[str, bytes]:
    return "vllm.jsonl", b"".join(json.dumps(o).encode() + b"\n" for o in objs)


DMON_DT = (
    "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk\n"
    "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz\n"
    "20260301    13:54:35      0    100     50      -     10      1      0      0   1593   1980\n"
    "20260301    13:54:35      1    101     51      -     11      2      0      0   1593   1980\n"
    "20260301    13:54:36      0    102     52      -     12      3      0      0   1593   1980\n"
    "20260301    13:54:36      1    103     53      -     13      4      0      0   1593   1980\n"
)
DMON_T = (
    "#Time        gpu    pwr  gtemp     sm    mem\n"
    "#HH:MM:SS    Idx      W      C      %      %\n"
    "13:54:35       0    100     50     10      1\n"
    "13:54:35       1    101     51     11      2\n"
    "13:54:36       0    102     52     12      3\n"
)


def dmon_file(text: str = DMON_DT) -> tuple[str, bytes]:
    return "dmon.txt", text.encode()


VLLM_LOG = (
    "INFO 09-04 02:00:00 [__init__.py:241] Automatically detected platform cuda.\n"
    "(APIServer pid=500) INFO 09-04 02:00:05 [api_server.py:1805] vLLM API server version 0.10.1.1\n"
    "(EngineCore_0 pid=600) INFO 09-04 02:00:20 [gpu_worker.py:276] Available KV cache memory: 21.13 GiB\n"
    "(EngineCore_0 pid=600) INFO 09-04 02:00:21 [kv_cache_utils.py:849] GPU KV cache size: 464,848 tokens\n"
    "(EngineCore_0 pid=600) INFO 09-04 02:00:21 [kv_cache_utils.py:853] Maximum concurrency for 8,192 tokens per request: 56.74x\n"
    "(APIServer pid=500) INFO:     Application startup complete.\n"
)


def log_file(text: str = VLLM_LOG) -> tuple[str, bytes]:
    return "server.log", text.encode()


LEDGER_CSV = (
    '# ledger_requests v1 run="c64" tool=mybench clock=epoch_s token_source=server_usage concurrency=64\n'
    "status,error,input_tokens,output_tokens,send_time,end_time,ttft_s,latency_s\n"
    "ok,,2048,512,1751880000.5,1751880009.5,0.1,9.0\n"
    'failed,"HTTP 503",2048,,1751880001,1751880001.25,,0.25\n'
)


def ledger_csv(text: str = LEDGER_CSV) -> tuple[str, bytes]:
    return "requests.csv", text.encode()


def llmperf_individual(**change) -> tuple[str, bytes]:
    rec = {
        "error_code": None,
        "error_msg": "",
        "inter_token_latency_s": 0.02,
        "ttft_s": 0.5,
        "end_to_end_latency_s": 3.0,
        "request_output_throughput_token_per_s": 50.0,
        "number_total_tokens": 700,
        "number_output_tokens": 150,
        "number_input_tokens": 550,
    }
    return "individual_responses.json", json.dumps([rec, {**rec, **change}], indent=4).encode()


def llmperf_summary(**change) -> tuple[str, bytes]:
    obj = {
        "version": "2023-08-31",
        "name": "tiny_550_150_summary",
        "model": "tiny",
        "mean_input_tokens": 550,
        "stddev_input_tokens": 0,
        "mean_output_tokens": 150,
        "stddev_output_tokens": 0,
        "num_concurrent_requests": 2,
        "results_ttft_s_quantiles_p50": 0.5625,
        "results_ttft_s_mean": 0.5625,
        "results_end_to_end_latency_s_mean": 3.0,
        "results_num_completed_requests": 2,
    }
    obj.update(change)
    return "summary.json", json.dumps(obj, indent=4).encode()


NVIDIA_SMI_CSV = (
    "timestamp, name, utilization.gpu [%], utilization.memory [%], memory.used [MiB], power.draw [W]\n"
    "2026/01/03 15:36:53.507, NVIDIA GeForce RTX 4090, 1 %, 2 %, 1129 MiB, 33.09 W\n"
    "2026/01/03 15:36:54.512, NVIDIA GeForce RTX 4090, 0 %, 2 %, 1123 MiB, 33.14 W\n"
)
DCGMI_DMON = (
    "#Entity   GPUTL             MCUTL             POWER             TMPTR\n"
    "ID                                             W                 C\n"
    "GPU 0     0                 0                 20.891            22\n"
    "GPU 0     1                 0                 20.991            22\n"
)
