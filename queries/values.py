"""Typed results shared by the read side: metric values, scopes, comparisons.

These are the contract between the metric registry (``queries/metrics*.py``), the comparability
analysis (``queries/compare.py``) and the audit (``queries/audit/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from bench_ledger.vocab import Provenance

__all__ = [
    "FACTORS",
    "IDENTITY_FACTORS",
    "UNKNOWN",
    "WARM_FACTORS",
    "Comparison",
    "Factor",
    "MetricValue",
    "Scope",
    "factor_known",
]

Flag = Provenance  # a value's flag on the read side: the one provenance vocabulary

# The one list of factors two scopes can differ in (R6, R8): `ledger compare` resolves them from
# the ledger, a claims file's `context` and `attributes_to` name them (docs/claims.md).
IDENTITY_FACTORS = ("model", "hardware", "gpu_count", "engine", "engine_version", "weights_version", "layout")
WARM_FACTORS = ("warm_prefix_cache", "warm_process", "warm_compile", "warm_file_cache")
FACTORS: tuple[str, ...] = (*IDENTITY_FACTORS, "engine_options", "workload", "seed", *WARM_FACTORS, "batch")
UNKNOWN = "?"  # a factor the ledger did not record


def factor_known(value: str | None) -> bool:
    """A factor value is known when it is recorded, not ``unknown``, one value (not "a | b"), and
    no part of it is unknown (a workload "in ? / out 200" may differ in its unknown part)."""
    if value is None or value in (UNKNOWN, "unknown") or " | " in value:
        return False
    return UNKNOWN not in value.split() and "=" + UNKNOWN not in value


@dataclass(frozen=True)
class Scope:
    """What a metric is computed over. Exactly one of run / batch / deployment / launch is the
    subject; ``batch`` also qualifies a run label (run labels are unique within a batch)."""

    batch: str | None = None
    run: str | None = None  # run label within ``batch``, or "#<id>"
    deployment: str | None = None
    launch: int | None = None  # attempt number within ``deployment``
    window: tuple[str, str] | None = None  # hardware window (ISO timestamps), default: whole artefact
    gpu: str | None = None  # one card for per-card hardware statistics: "3", "gpu3" or "node0:gpu3"

    def describe(self) -> str:
        if self.run is not None:
            return f"run {self.run} (batch {self.batch})"
        if self.launch is not None:
            return f"launch {self.launch} of {self.deployment}"
        if self.batch is not None:
            return f"batch {self.batch}"
        if self.deployment is not None:
            return f"deployment {self.deployment}"
        return "whole ledger"


@dataclass
class MetricValue:
    """One computed value with its provenance.

    ``value`` is exact (Fraction) where the inputs are integers or exact decimals, else a float
    converted with Fraction(float). ``flag`` is ``derived`` (computed here from measured records),
    ``estimated`` (from a setting or estimate), or ``n/a`` with ``na_reason`` (a needed field was
    not captured, the records are a sample, no records...). ``inputs`` says what it was computed
    from: run ids, request counts, fields used, artefact ids, and ``basis`` notes such as
    "wall clock = tool's own duration".
    """

    metric: str
    scope: Scope
    value: Fraction | None
    unit: str
    quantity_kind: str
    flag: Flag
    na_reason: str | None = None
    inputs: dict = field(default_factory=dict)
    run_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Factor:
    """One factor that differs between two scopes (R6)."""

    name: str  # hardware, gpu_count, engine, engine_version, weights_version, layout, engine_options, workload, seed, warm_prefix_cache, warm_process, warm_compile, warm_file_cache, batch
    a: str
    b: str


@dataclass
class Comparison:
    """Every factor that differs between A and B, and what may be concluded (R6, R8)."""

    a: str
    b: str
    differences: list[Factor]
    attributable_to: str | None  # the only differing factor, if exactly one
    stack_ratio: bool  # hardware and software both differ
    equal_resources: bool  # same GPU count
    paired: bool  # same seed (and same workload)
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # factors not known (or not one value) on a side
