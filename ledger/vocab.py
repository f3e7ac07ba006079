"""The ledger's closed vocabularies, each written once: importers, the store and the read side all
import them from here (the database's CHECK constraints are built from the same tuples).

A ``Literal`` type for pydantic and mypy, and its values as a tuple (``get_args``) for the schema.
"""

from __future__ import annotations

from typing import Literal, get_args

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
