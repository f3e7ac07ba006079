"""The ledger's closed vocabularies, each written once: importers, the store and the read side all
import them from here (the database's CHECK constraints are built from the same tuples).

A ``Literal`` type for pydantic and mypy, and its values as a tuple (``get_args``) for the schema.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "COMPILE_CACHE_LOAD_SECONDS",
    "ENGINE_ARGS",
    "ENGINE_ERROR",
    "GRAPH_COMPILE_SECONDS",
    "KV_CACHE_TOKENS",
    "LOG_FACT_KINDS",
    "MAX_CONCURRENCY_WINDOW_TOKENS",
    "MAX_MODEL_LEN",
    "MAX_NUM_BATCHED_TOKENS",
    "PROVENANCE",
    "READY",
    "REQUEST_VALUE_FLAGS",
    "RUN_FACTORS",
    "SECONDS_TO_READY",
    "STATUS",
    "WARM",
    "WARM_COMPILE",
    "Clock",
    "Provenance",
    "RequestStatus",
    "RequestValueFlag",
    "RunFactor",
    "WarmState",
    "engine_arg_kind",
]

# Where a value comes from (rulebook: provenance flags). n/a always travels with its reason.
Provenance = Literal["measured", "derived", "estimated", "reported", "n/a"]
PROVENANCE: tuple[str, ...] = get_args(Provenance)

# A cache or process state at a run's start (R7: cold and warm are different workloads).
WarmState = Literal["cold", "warm", "unknown"]
WARM: tuple[str, ...] = get_args(WarmState)

# A per-request value a tool wrote (``request_value``): one it measured (a count, a time) or one it
# computed per request from its measurements (llmperf's request_output_throughput_token_per_s).
RequestValueFlag = Literal["measured", "reported"]
REQUEST_VALUE_FLAGS: tuple[str, ...] = get_args(RequestValueFlag)

RequestStatus = Literal["ok", "failed", "unknown"]
STATUS: tuple[str, ...] = get_args(RequestStatus)

# The clock that request times are on. Monotonic seconds are never shown as wall-clock times.
Clock = Literal["monotonic_s", "epoch_s", "epoch_ns"]
CLOCKS: tuple[str, ...] = get_args(Clock)

# What a result file states about the system under test and its load, kept per run with where it was
# read (``ledger.factors``): the model and the name it was served under, the engine, the hardware and
# the parallel layout, and the load as the file (or its name) states it, beside the run's workload columns.
RunFactor = Literal[
    "model",
    "served_model",
    "engine",
    "engine_version",
    "hardware",
    "gpu_count",
    "tp",
    "dp",
    "pp",
    "ep",
    "dataset",
    "input_len",
    "output_len",
    "concurrency",
    "request_rate",
    "prompt_count",
]
RUN_FACTORS: tuple[str, ...] = get_args(RunFactor)

# Server-log facts (``log_fact.kind``): what the vLLM start-up log importer reads from a log
# (``importers.vllm_log``, formats.md section 8) and the read side selects. The kinds the read side names
# have a constant; every kind is in LOG_FACT_KINDS with its quantity kind (``ledger.kinds.KINDS``; None
# for a text fact) and meaning.
KV_CACHE_TOKENS = "kv_cache_tokens"
MAX_CONCURRENCY_WINDOW_TOKENS = "max_concurrency_window_tokens"
MAX_MODEL_LEN = "max_model_len"
MAX_NUM_BATCHED_TOKENS = "max_num_batched_tokens"
READY = "ready"
SECONDS_TO_READY = "seconds_to_ready"
ENGINE_ERROR = "engine_error"
COMPILE_CACHE_LOAD_SECONDS = "compile_cache_load_seconds"
GRAPH_COMPILE_SECONDS = "graph_compile_seconds"
WARM_COMPILE = "warm_compile"

LOG_FACT_KINDS: dict[str, tuple[str | None, str]] = {
    KV_CACHE_TOKENS: ("kv_pool_tokens", "KV cache capacity of one engine / DP group, in tokens"),
    "max_concurrency_ratio": (
        "capacity_ratio",
        "KV pool tokens / window tokens: a theoretical capacity ratio, never a served concurrency (R5)",
    ),
    MAX_CONCURRENCY_WINDOW_TOKENS: ("token_setting", "the per-request window the ratio is computed for"),
    "model_allocation": ("model_allocation", "per-rank model memory allocation after loading (R1)"),
    "model_load_seconds": ("duration", "seconds the model load took, as the same line prints"),
    "weights_load_seconds": ("duration", "seconds spent loading the weights"),
    "kv_cache_memory": ("kv_cache_memory", "memory left for the KV cache after profiling"),
    "num_gpu_blocks": ("count", "number of KV cache blocks on the GPU"),
    "init_engine_seconds": ("duration", "engine init: profile, create KV cache, warm up"),
    "engine_version": (None, "vLLM version the API server reports (text)"),
    "api_server_start": (None, "the API server's listening URL (text)"),
    READY: (None, "uvicorn's 'Application startup complete.': the server is READY"),
    SECONDS_TO_READY: ("startup_time", "derived: first log timestamp to the ready line (R8), 1 s resolution"),
    ENGINE_ERROR: (None, "an ERROR or CRITICAL record: why a launch failed (text)"),
    MAX_MODEL_LEN: ("token_setting", "'Using max model len': the context window the engine resolved"),
    MAX_NUM_BATCHED_TOKENS: ("token_setting", "the chunked-prefill token budget per step the scheduler uses"),
    "torch_compile_seconds": ("duration", "torch.compile time in total, as vLLM's compilation monitor prints it"),
    "compile_and_profile_seconds": ("duration", "torch.compile plus the initial profiling run, in total"),
    "dynamo_transform_seconds": ("duration", "Dynamo bytecode transform time"),
    COMPILE_CACHE_LOAD_SECONDS: (
        "duration",
        "compiled graphs loaded from the compile cache: evidence of a warm cache",
    ),
    GRAPH_COMPILE_SECONDS: ("duration", "a graph compiled (not loaded from the cache): evidence of a cold cache"),
    "cuda_graph_capture_seconds": ("duration", "CUDA graph capture time (printed to whole seconds)"),
    "cuda_graph_memory": ("device_memory", "device memory the CUDA graphs took (free memory before - after capture)"),
    WARM_COMPILE: (
        None,
        "derived: compile-cache state of the launch (warm, cold, unknown) from the lines above (R8)",
    ),
}

# Engine arguments read from "non-default args: {...}" (a fact of kind arg_<name>), with their quantity kind.
ENGINE_ARGS: dict[str, str] = {
    "max_model_len": "token_setting",
    "max_num_batched_tokens": "token_setting",
    "max_num_seqs": "count",
    "tensor_parallel_size": "count",
    "pipeline_parallel_size": "count",
    "data_parallel_size": "count",
    "gpu_memory_utilization": "ratio",
}


def engine_arg_kind(name: str) -> str:
    """The fact kind of engine argument ``name`` of :data:`ENGINE_ARGS` (``arg_<name>``)."""
    return f"arg_{name}"


for _arg, _kind in ENGINE_ARGS.items():
    LOG_FACT_KINDS[engine_arg_kind(_arg)] = (_kind, f"engine argument {_arg} as the 'non-default args' line prints it")
