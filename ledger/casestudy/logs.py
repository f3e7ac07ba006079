"""vLLM server start-up logs of the nine launches (formats.md section 8).

The report keeps only the outcome of each launch and three times to READY (390, 270, 450 s); the
logs here are written so that an importer reading them finds exactly that: for a READY launch the
first timestamped line and the last timestamped line before uvicorn's ``Application startup
complete.`` are that many seconds apart; launch 5's log starts mid-way (no process-start line), so
its time to READY is unknown. Launch 4's log is hard-wrapped at 140 columns like a pasted capture.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["LAUNCHES", "Launch", "launch_log"]

_WRAP_COLUMNS = 140
_API, _DP0, _DP1, _BARE = "(APIServer pid=1) ", "(EngineCore_DP0 pid=412) ", "(EngineCore_DP1 pid=418) ", ""
_OLD_WEIGHTS, _NEW_WEIGHTS = "/models/DeepSeek-V4.1-Flash", "/models/DeepSeek-V4.1-Flash-1017"
_MAX_LEN = 262_144


@dataclass(frozen=True)
class Launch:
    """One start attempt: what the manifest declares and what its log shows."""

    attempt: int
    outcome: str  # "failed" | "ready"
    cause: str
    start: datetime
    # First timestamped line -> Application startup complete. For a partial log (launch 5) it only
    # lays out the kept tail; the log itself cannot tell it.
    ready_s: int | None = None
    weights: str = _OLD_WEIGHTS
    max_num_seqs: int = 32
    dspark: bool = True
    kv_tokens: int = 16_593_113
    kv_gib: str = "52.30"
    partial: bool = False  # log kept only from mid-start
    wrapped: bool = False

    @property
    def log_name(self) -> str:
        return f"logs/SYNTHETIC-launch-{self.attempt}.log"


LAUNCHES: tuple[Launch, ...] = (
    Launch(
        1,
        "failed",
        "missing data-parallel-size-local: local rank out of range",
        datetime(2026, 10, 16, 8, 40, 5),
        max_num_seqs=16,
        dspark=False,
    ),
    Launch(
        2,
        "failed",
        "head start-rank triggered a mismatched load-balancing mode",
        datetime(2026, 10, 16, 9, 2, 11),
        max_num_seqs=16,
        dspark=False,
    ),
    Launch(
        3,
        "failed",
        "first load of the large weights did not finish within the ready timeout",
        datetime(2026, 10, 16, 9, 30, 40),
        max_num_seqs=16,
        dspark=False,
    ),
    Launch(
        4,
        "ready",
        "ready timeout raised (max-num-seqs 16, no speculative decoding yet)",
        datetime(2026, 10, 16, 10, 21, 8),
        ready_s=390,
        max_num_seqs=16,
        dspark=False,
        kv_tokens=18_612_224,
        kv_gib="58.66",
        wrapped=True,
    ),
    Launch(
        5,
        "ready",
        "max-num-seqs 16 -> 32 (log kept only from mid-start: time to ready unknown)",
        datetime(2026, 10, 16, 11, 40, 17),
        ready_s=300,
        dspark=False,
        kv_tokens=18_612_224,
        kv_gib="58.66",
        partial=True,
    ),
    Launch(6, "failed", "entrypoint duplicated in the container arguments", datetime(2026, 10, 16, 13, 15, 2)),
    Launch(
        7,
        "failed",
        "model given both as positional argument and --model (mismatched)",
        datetime(2026, 10, 16, 13, 24, 36),
    ),
    Launch(8, "ready", "dspark configuration fixed", datetime(2026, 10, 16, 13, 40, 2), ready_s=270),
    Launch(
        9, "ready", "weights switched to 1017", datetime(2026, 10, 17, 8, 50, 12), ready_s=450, weights=_NEW_WEIGHTS
    ),
)


class _Log:
    def __init__(self, start: datetime) -> None:
        self.start = start
        self.lines: list[str] = []

    def at(self, offset: float, who: str, level: str, where: str, msg: str) -> None:
        ts = self.start + timedelta(seconds=offset)
        self.lines.append(f"{who}{level} {ts:%m-%d %H:%M:%S} [{where}] {msg}")

    def raw(self, who: str, text: str) -> None:
        self.lines.append(f"{who}{text}")

    def traceback(self, offset: float, who: str, where: str, frames: list[str], exc: str) -> None:
        self.at(offset, who, "ERROR", where, "EngineCore failed to start.")
        self.at(offset, who, "ERROR", where, "Traceback (most recent call last):")
        for frame in frames:
            self.at(offset, who, "ERROR", where, frame)
        self.at(offset, who, "ERROR", where, exc)

    def text(self, wrap: bool) -> str:
        out: list[str] = []
        for line in self.lines:
            while wrap and len(line) > _WRAP_COLUMNS:
                out.append(line[:_WRAP_COLUMNS])
                line = line[_WRAP_COLUMNS:]
            out.append(line)
        return "\n".join(out) + "\n"


def _args(launch: Launch, local: bool = True, start_rank: bool = False) -> str:
    parts = [
        f"'model_tag': '{launch.weights}'",
        "'host': '0.0.0.0'",
        "'port': 8000",
        f"'model': '{launch.weights}'",
        "'trust_remote_code': True",
        f"'max_model_len': {_MAX_LEN}",
        "'tensor_parallel_size': 8",
        "'data_parallel_size': 2",
    ]
    if local:
        parts.append("'data_parallel_size_local': 1")
    if start_rank:
        parts.append("'data_parallel_start_rank': 0")
    parts += [
        "'data_parallel_address': '10.20.0.11'",
        "'data_parallel_rpc_port': 13345",
        "'enable_expert_parallel': True",
        "'kv_cache_dtype': 'fp8'",
        "'enable_prefix_caching': True",
        "'max_num_batched_tokens': 8192",
        f"'max_num_seqs': {launch.max_num_seqs}",
        "'gpu_memory_utilization': 0.9",
    ]
    if launch.dspark:
        parts.append("'speculative_config': {'method': 'dspark', 'num_speculative_tokens': 3}")
    return "non-default args: {" + ", ".join(parts) + "}"


def _preamble(log: _Log, launch: Launch, **args: bool) -> None:
    log.at(0, _BARE, "INFO", "__init__.py:241", "Automatically detected platform cuda.")
    log.at(6, _API, "INFO", "api_server.py:1885", "vLLM API server version 0.31.0")
    log.at(6, _API, "INFO", "utils.py:328", _args(launch, **args))
    log.at(14, _API, "INFO", "model.py:547", "Resolved architecture: DeepseekV4ForCausalLM")
    log.at(14, _API, "INFO", "model.py:1510", f"Using max model len {_MAX_LEN}")
    log.at(
        15,
        _API,
        "INFO",
        "cache.py:180",
        "Using fp8 data type to store kv cache. It reduces the GPU memory footprint and boosts the performance.",
    )
    log.at(15, _API, "INFO", "scheduler.py:222", "Chunked prefill is enabled with max_num_batched_tokens=8192.")


def _engine_init(log: _Log, launch: Launch, t: float) -> None:
    spec = "SpeculativeConfig(method='dspark', num_spec_tokens=3)" if launch.dspark else "None"
    for who in (_DP0, _DP1):
        log.at(t, who, "INFO", "core.py:654", "Waiting for init message from front-end.")
    for who in (_DP0, _DP1):
        log.at(
            t + 1,
            who,
            "INFO",
            "core.py:76",
            f"Initializing a V1 LLM engine (v0.31.0) with config: model='{launch.weights}', "
            f"speculative_config={spec}, tokenizer='{launch.weights}', skip_tokenizer_init=False,"
            f" tokenizer_mode=auto, trust_remote_code=True, dtype=torch.bfloat16, "
            f"max_seq_len={_MAX_LEN}, load_format=auto, tensor_parallel_size=8, "
            "pipeline_parallel_size=1, data_parallel_size=2, quantization=None, "
            "enforce_eager=False, kv_cache_dtype=fp8, device_config=cuda, seed=0, "
            "enable_prefix_caching=True, chunked_prefill_enabled=True",
        )
    log.at(
        t + 8,
        _DP0,
        "INFO",
        "parallel_state.py:1165",
        "rank 0 in world size 16 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
    )
    log.at(
        t + 8,
        _DP1,
        "INFO",
        "parallel_state.py:1165",
        "rank 8 in world size 16 is assigned as DP rank 1, PP rank 0, TP rank 0, EP rank 8",
    )
    for who in (_DP0, _DP1):
        log.at(t + 10, who, "INFO", "gpu_model_runner.py:2338", f"Starting to load model {launch.weights}...")
        log.at(
            t + 11,
            who,
            "INFO",
            "fused_marlin_moe.py:118",
            "Using Marlin kernels for MoE: 384 experts, 24 local experts per rank (EP16)",
        )


def _ready_tail(log: _Log, launch: Launch, load_end: float, ready: float) -> None:
    """Weights loaded at ``load_end``; the last timestamped line is at ``ready``."""
    for k, who in enumerate((_DP0, _DP1)):
        took = load_end - 40 + 2.37 * k
        log.at(load_end + k, who, "INFO", "default_loader.py:267", f"Loading weights took {took:.2f} seconds")
        log.at(
            load_end + k + 1,
            who,
            "INFO",
            "gpu_model_runner.py:2370",
            f"Model loading took 21.13 GiB and {took + 3.418207:.6f} seconds",
        )
    mid = load_end + (ready - load_end) * 0.45
    for who in (_DP0, _DP1):
        log.at(
            mid,
            who,
            "INFO",
            "backends.py:548",
            "Using cache directory: /root/.cache/vllm/torch_compile_cache/5f1c0a93e2/rank_0_0/"
            "backbone for vLLM's torch.compile",
        )
    kv = ready - 34
    for who in (_DP0, _DP1):
        log.at(kv - 3, who, "INFO", "monitor.py:34", f"torch.compile takes {(kv - 3 - mid) * 0.8:.2f} s in total")
        log.at(kv, who, "INFO", "gpu_worker.py:298", f"Available KV cache memory: {launch.kv_gib} GiB")
        log.at(kv, who, "INFO", "kv_cache_utils.py:1087", f"GPU KV cache size: {launch.kv_tokens:,} tokens")
        log.at(
            kv,
            who,
            "INFO",
            "kv_cache_utils.py:1091",
            f"Maximum concurrency for {_MAX_LEN:,} tokens per request: {launch.kv_tokens / _MAX_LEN:.2f}x",
        )
    for who in (_DP0, _DP1):
        log.at(ready - 6, who, "INFO", "gpu_model_runner.py:3480", "Graph capturing finished in 26 secs, took 1.87 GiB")
        log.at(
            ready - 5,
            who,
            "INFO",
            "core.py:214",
            f"init engine (profile, create kv cache, warmup model) took {ready - 5 - load_end:.2f} seconds",
        )
    log.at(ready, _API, "INFO", "api_server.py:1611", "Supported_tasks: ['generate']")
    log.at(ready, _API, "INFO", "api_server.py:1880", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    log.at(ready, _API, "INFO", "launcher.py:36", "Available routes are:")
    for route, methods in (
        ("/health", "GET"),
        ("/v1/models", "GET"),
        ("/v1/completions", "POST"),
        ("/v1/chat/completions", "POST"),
        ("/metrics", "GET"),
    ):
        log.at(ready, _API, "INFO", "launcher.py:44", f"Route: {route}, Methods: {methods}")
    log.raw(_API, "INFO:     Started server process [1]")
    log.raw(_API, "INFO:     Waiting for application startup.")
    log.raw(_API, "INFO:     Application startup complete.")


_CORE = '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line {}, in {}'


def launch_log(launch: Launch) -> str:
    """The text of one launch's log."""
    log = _Log(launch.start)
    n = launch.attempt
    if n == 1:
        _preamble(log, launch, local=False)
        log.at(27, _BARE, "INFO", "__init__.py:241", "Automatically detected platform cuda.")
        _engine_init(log, launch, 30)
        log.traceback(
            36,
            _DP1,
            "core.py:718",
            [
                _CORE.format(709, "run_engine_core"),
                "    engine_core = DPEngineCoreProc(*args, **kwargs)",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 171,'
                " in init_device",
                "    torch.cuda.set_device(self.device)",
            ],
            "RuntimeError: local_rank 8 is out of range: this node has 8 visible CUDA devices "
            "(--data-parallel-size-local not given, so both DP ranks were placed on this node)",
        )
        log.at(
            39,
            _API,
            "ERROR",
            "core_client.py:611",
            "Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP1': 1}",
        )
    elif n == 2:
        _preamble(log, launch, start_rank=True)
        log.at(
            16,
            _API,
            "ERROR",
            "api_server.py:1960",
            "ValueError: --data-parallel-start-rank given on the head node selects hybrid "
            "load balancing (data_parallel_hybrid_lb=True), but the headless node serves "
            "internal load balancing; the two modes cannot be mixed.",
        )
    elif n == 3:
        _preamble(log, launch)
        log.at(27, _BARE, "INFO", "__init__.py:241", "Automatically detected platform cuda.")
        _engine_init(log, launch, 30)
        for k, shards in enumerate((9, 17, 25)):
            log.raw(
                _DP0,
                f"Loading safetensors checkpoint shards: {shards * 100 // 48:3d}% Completed"
                f" | {shards}/48 [{(k + 1) * 3:02d}:{(k * 17) % 60:02d}<{12 - 3 * k:02d}:00,"
                f" {20.0 + k:.2f}s/it]",
            )
        log.at(
            641,
            _API,
            "ERROR",
            "core_client.py:611",
            "TimeoutError: engine core processes did not become ready within "
            "VLLM_ENGINE_READY_TIMEOUT_S=600 seconds (weights were still loading: 25/48 shards)",
        )
    elif n in (6, 7):
        log.at(0, _BARE, "INFO", "__init__.py:241", "Automatically detected platform cuda.")
        if n == 6:
            log.raw(_BARE, "usage: vllm serve [model_tag] [options]")
            log.raw(_BARE, f"vllm serve: error: unrecognized arguments: serve {launch.weights}")
        else:
            log.at(
                2,
                _BARE,
                "ERROR",
                "serve.py:54",
                "ValueError: With `vllm serve`, you should provide"
                " the model as a positional argument or in a config file instead of via the "
                f"`--model` option (positional '{launch.weights}', --model "
                f"'{launch.weights}-fp8')",
            )
    else:
        assert launch.ready_s is not None
        ready = float(launch.ready_s)
        load_end = ready * 0.62
        if not launch.partial:
            _preamble(log, launch)
            log.at(27, _BARE, "INFO", "__init__.py:241", "Automatically detected platform cuda.")
            _engine_init(log, launch, 30)
        else:  # kept from mid-start only: the first line is already the weights report
            log.start = launch.start - timedelta(seconds=load_end)
        _ready_tail(log, launch, load_end, ready)
    return log.text(wrap=launch.wrapped)
