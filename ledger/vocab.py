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

RequestStatus = Literal["ok", "failed", "unknown"]
STATUS: tuple[str, ...] = get_args(RequestStatus)

# The clock that request times are on. Monotonic seconds are never shown as wall-clock times.
Clock = Literal["monotonic_s", "epoch_s", "epoch_ns"]
CLOCKS: tuple[str, ...] = get_args(Clock)
