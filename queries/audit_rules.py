"""Type rules for derivations: which formulas over which quantity kinds, scopes and flags are legal.

Each rule is one function over a :class:`Derivation` (the formula, its resolved operands and the
kind the result claims to be). A rule that is broken raises :class:`ledger.errors.Refused` with its
rulebook id; the audit turns that into a ``refused`` verdict (a refused claim is a finding, not a
crash). :data:`RULES` lists them in the order they are checked: the first refusal wins, so the
most specific rule of a claim is the one shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bench_ledger.errors import Refused
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.types import Comparison, Factor
from bench_ledger.units import UNCONFIRMED

# --------------------------------------------------------------------------- kinds

MEMORY_KINDS = frozenset({"weights_file_size", "model_allocation", "device_memory", "kv_cache_memory"})
POWER_KINDS = frozenset({"power_card_mean_sum", "power_peak_of_sum", "power_sum_of_peaks", "power"})
COUNTER_KINDS = frozenset({"activity_time_percent", "memory_busy_percent", "utilization_percent"})
RATE_KINDS = frozenset({"aggregate_token_rate", "per_stream_token_rate"})
COUNT_KINDS = frozenset({"token_count", "request_count", "record_count", "count"})
# kinds that scale another value without changing what it is (a product or a division by them)
SCALAR_KINDS = frozenset({"count", "concurrency", "ratio"})
LOAD_KINDS = frozenset({"concurrency", "request_count", "request_rate"})
# ratio-like pairs that yield a named kind (R5: KV pool tokens / window tokens)
SPECIAL_QUOTIENTS = {("kv_pool_tokens", "token_setting"): "capacity_ratio"}
# factors of a scope (queries.types.Factor names) that describe the workload (R7)
WORKLOAD_FACTORS = ("workload", "input_target", "output_cap", "concurrency", "request_count")
WARM_FACTORS = ("warm_prefix_cache", "warm_process", "warm_compile", "warm_file_cache")


@dataclass
class Term:
    """One resolved operand of a formula."""

    label: str  # claim id, literal label, or the nested formula's op
    kind: str
    unit: str | None
    interval: Interval | None  # None: not printed / not available
    flag: str  # measured | derived | rounded | reported | estimated | n/a
    claim_id: str | None = None
    scope_ref: str | None = None  # "run:fx/50k-200-c4n8", "batch:fx", "launch:h20-old/4", "deployment:..."
    context: dict[str, str] = field(default_factory=dict)  # factors of its scope (R6)
    na_reason: str | None = None
    kinds_below: frozenset[str] = frozenset()  # every kind of a nested formula's leaves (R1, R5)

    @property
    def batch(self) -> str | None:
        if "batch" in self.context:
            return self.context["batch"]
        if self.scope_ref and self.scope_ref.startswith(("run:", "batch:")):
            return self.scope_ref.split(":", 1)[1].split("/", 1)[0]
        return None

    @property
    def all_kinds(self) -> frozenset[str]:
        return self.kinds_below | {self.kind}


@dataclass
class Derivation:
    """What the rules look at: one formula level of one claim."""

    claim_id: str
    op: str
    terms: list[Term]
    result_kind: str  # the kind the result claims to be
    result_unit: str | None = None
    attributes_to: str | None = None
    claims_equal_resources: bool = False
    claims_paired: bool = False
    claims_speedup: bool = False
    claims_cold_warm: bool = False
    series: bool = False
    says: str | None = None
    compare: Callable[[Term, Term], Comparison | None] | None = None  # comparability of two scopes (R6)

    @property
    def kinds(self) -> list[str]:
        return [t.kind for t in self.terms]

    def asked(self) -> str:
        return f"{self.op}({', '.join(f'{t.label} [{t.kind}]' for t in self.terms)}) as {self.result_kind}"


# --------------------------------------------------------------------------- kind algebra


def infer_kind(op: str, kinds: list[str]) -> str | None:
    """The kind a formula's result has when the operands combine legally, else None."""
    if not kinds:
        return None
    first = kinds[0]
    if op in ("ratio", "divide") and len(kinds) == 2 and tuple(kinds) in SPECIAL_QUOTIENTS:
        return SPECIAL_QUOTIENTS[tuple(kinds)]  # type: ignore[index]
    if op == "ratio":
        return "ratio" if len(set(kinds)) == 1 else None
    if op == "percent_change":
        return "percent_change" if len(set(kinds)) == 1 else None
    if op in ("difference", "sum", "range"):
        return first if len(set(kinds)) == 1 else None
    if op == "convert":
        return first if len(kinds) == 1 else None
    if op == "divide":
        if len(kinds) != 2:
            return None
        a, b = kinds
        if b in SCALAR_KINDS:
            return a
        return "ratio" if a == b else None
    if op == "product":
        dims = [k for k in kinds if k not in SCALAR_KINDS]
        if len(dims) > 1:
            return None
        if dims:
            return dims[0]
        if "concurrency" in kinds:
            return "concurrency"
        return "count" if all(k == "count" for k in kinds) else "ratio"
    return None


def _rule_for(kinds: set[str]) -> str:
    """The rulebook id that forbids mixing these kinds (most specific first)."""
    if kinds & MEMORY_KINDS and len(kinds) > 1:
        return "R1"
    if kinds & POWER_KINDS:
        return "R14"
    if kinds & COUNTER_KINDS:
        return "R13"
    if "capacity_ratio" in kinds:
        return "R5"
    if kinds & RATE_KINDS and "per_stream_token_rate" in kinds:
        return "R4"
    if {"record_count", "request_count"} <= kinds:
        return "R2"
    if {"token_setting", "token_count"} <= kinds:
        return "R3"
    if "startup_time" in kinds:
        return "R8"
    return "R1"


# --------------------------------------------------------------------------- the rules


def rule_no_na_input(d: Derivation) -> None:
    """R9: anything derived from an n/a input is n/a; a number printed for it is a backfill."""
    for t in d.terms:
        if t.flag == "n/a":
            raise Refused(
                "R9", d.asked(), f"operand {t.label} is n/a ({t.na_reason or 'not available'}): a value derived from it "
                "stays n/a", "keep the result n/a; capture the missing field in a new run",
            )  # fmt: skip


def rule_units_confirmed(d: Derivation) -> None:
    """R12: a value whose unit is unconfirmed never converts (whatever unit the claim assumes)."""
    if d.op != "convert":
        return
    for t in d.terms:
        if t.unit == UNCONFIRMED:
            raise Refused(
                "R12", d.asked() + f" in {d.result_unit}", f"{t.label} has an unconfirmed unit (no units line read)",
                "read the tool's header (units line) and record the unit before converting",
            )  # fmt: skip


def rule_memory_kinds(d: Derivation) -> None:
    """R1: weights file size, per-rank allocation and device memory never mix, whatever their units."""
    mem = set()
    for t in d.terms:
        mem |= t.all_kinds & MEMORY_KINDS
    if d.result_kind in MEMORY_KINDS and mem:
        mem.add(d.result_kind)
    if len(mem) > 1:
        raise Refused(
            "R1", d.asked(), f"it mixes {', '.join(sorted(mem))}: different quantity kinds even when the units convert",
            "compare each number only with numbers of its own kind (e.g. allocation with allocation, EP on vs off)",
        )  # fmt: skip


def rule_counter_meaning(d: Derivation) -> None:
    """R13: dmon `sm` is activity time and `mem` memory-controller busy time; they become nothing else."""
    for t in d.terms:
        for k in t.all_kinds & {"activity_time_percent", "memory_busy_percent"}:
            if d.result_kind != k and d.op in ("convert", "sum", "difference", "range", "product", "divide"):
                what = "GPU activity time (not SM active, tensor utilisation or MFU)" if k == "activity_time_percent" \
                    else "memory-controller busy time (not bandwidth utilisation)"  # fmt: skip
                raise Refused(
                    "R13", d.asked(), f"{t.label} is {what}; it cannot stand for {d.result_kind}",
                    "measure the wanted quantity (profiler SM/tensor counters, a bandwidth counter, an MFU model)",
                )  # fmt: skip


def rule_power_statistics(d: Derivation) -> None:
    """R14: sum of card means, peak of the sum and sum of card peaks never stand for each other."""
    stats = set()
    for t in d.terms:
        stats |= t.all_kinds & POWER_KINDS
    if d.result_kind in POWER_KINDS:
        stats.add(d.result_kind)
    if len(stats) > 1:
        raise Refused(
            "R14", d.asked(), f"{', '.join(sorted(stats))} are different power statistics",
            "compute the statistic wanted from the per-card samples (`ledger metrics`)",
        )  # fmt: skip


def rule_capacity_not_concurrency(d: Derivation) -> None:
    """R5: a capacity ratio (KV pool / window) never yields a concurrency or an accepted load."""
    if d.result_kind in LOAD_KINDS and any("capacity_ratio" in t.all_kinds for t in d.terms):
        raise Refused(
            "R5", d.asked(), "a KV capacity ratio is a theoretical stock of tokens, not requests served at once: "
            "scheduling slots, block alignment, output growth, expert traffic and queueing bind first",
            "measure the accepted concurrency with a load test at the target latency",
        )  # fmt: skip


def rule_per_stream_not_aggregate(d: Derivation) -> None:
    """R4: a per-stream rate (x concurrency or not) is never an aggregate rate, nor the reverse."""
    kinds = set()
    for t in d.terms:
        kinds |= t.all_kinds
    if "per_stream_token_rate" in kinds and d.result_kind == "aggregate_token_rate":
        raise Refused(
            "R4", d.asked(), "a single stream's rate measured under one load, multiplied or not, is not the aggregate "
            "rate of many streams under another load",
            "quote the aggregate rate measured at that concurrency and its per-stream median separately",
        )  # fmt: skip
    if "aggregate_token_rate" in kinds and d.result_kind == "per_stream_token_rate":
        raise Refused(
            "R4", d.asked(), "an aggregate rate divided or not is not any one stream's rate",
            "use the per-stream median of the run",
        )  # fmt: skip


def rule_same_kind(d: Derivation) -> None:
    """Ratio, percent change, sums, differences and unit conversion only within one kind."""
    kinds = d.kinds
    got = infer_kind(d.op, kinds)
    if got is None:
        raise Refused(
            _rule_for(set(kinds) | {d.result_kind}), d.asked(),
            f"{d.op} over {', '.join(sorted(set(kinds)))} is not defined: values combine only within one quantity kind",
            "compare values of one kind (same statistic, same definition)",
        )  # fmt: skip
    if d.op == "convert" and got != d.result_kind:
        raise Refused(
            _rule_for({got, d.result_kind}), d.asked(), f"a unit conversion keeps the kind: {got} is not {d.result_kind}",
            "convert units within one kind only",
        )  # fmt: skip
    if got != d.result_kind and not (d.op in ("ratio", "divide") and d.result_kind == "ratio" and got == "ratio"):
        raise Refused(
            _rule_for({got, d.result_kind}), d.asked(), f"{d.op} of {', '.join(sorted(set(kinds)))} gives {got}, "
            f"not {d.result_kind}", "state the result as the kind it is",
        )  # fmt: skip


def rule_one_batch(d: Derivation) -> None:
    """R2: sums (of counts above all) and series stay within one batch; rows of two batches are only
    shown side by side."""
    batches = {t.batch for t in d.terms if t.batch is not None}
    if len(batches) <= 1:
        return
    if d.op == "sum":
        what = "a count" if set(d.kinds) & COUNT_KINDS else "a total"
        raise Refused(
            "R2", d.asked(), f"{what} across batches {', '.join(sorted(batches))}: each batch is its own accounting",
            "show each batch's figure side by side, labelled with its batch",
        )  # fmt: skip
    if d.series:
        raise Refused(
            "R2", d.asked(), f"points from different batches or stages ({', '.join(sorted(batches))}) are not one series",
            "show each stage's comparison on its own, labelled with its batch",
        )  # fmt: skip


def _differences(d: Derivation) -> list[Factor] | None:
    """Factors that differ between the first two operands (compare() for ledger scopes, else contexts)."""
    if len(d.terms) < 2:
        return None
    a, b = d.terms[0], d.terms[1]
    if d.compare is not None and a.scope_ref and b.scope_ref:
        cmp = d.compare(a, b)
        if cmp is not None:
            return list(cmp.differences)
    if not a.context and not b.context and not (a.scope_ref and b.scope_ref):
        return None
    ca, cb = dict(a.context), dict(b.context)
    if a.batch and "batch" not in ca:
        ca["batch"] = a.batch
    if b.batch and "batch" not in cb:
        cb["batch"] = b.batch
    return [Factor(k, ca[k], cb[k]) for k in sorted(set(ca) & set(cb)) if ca[k] != cb[k]]


def rule_comparability(d: Derivation) -> None:
    """R6: a ratio across scopes is attributed to a factor only when it is the only difference; a
    stack ratio is not a hardware ratio; unequal GPU counts are not equal resources; different
    seeds are not paired."""
    if d.op not in ("ratio", "percent_change", "difference"):
        return
    if not (d.attributes_to or d.claims_equal_resources or d.claims_paired):
        return
    diffs = _differences(d)
    if diffs is None:
        return
    names = {f.name for f in diffs}
    listed = ", ".join(f"{f.name} ({f.a} vs {f.b})" for f in diffs) or "nothing"
    if d.claims_equal_resources and "gpu_count" in names:
        f = next(f for f in diffs if f.name == "gpu_count")
        raise Refused("R6", d.asked() + " as an equal-resource comparison",
                      f"GPU counts differ ({f.a} vs {f.b}); differences: {listed}",
                      "compare at equal GPU count, or state the resources of each side")  # fmt: skip
    if d.claims_paired and names & {"seed", "workload"}:
        raise Refused("R6", d.asked() + " as a per-request paired comparison",
                      f"the two sides did not run the same requests; differences: {listed}",
                      "pair only runs with the same seed and workload")  # fmt: skip
    if d.attributes_to and names != {d.attributes_to}:
        stack = "hardware" in names and names & {"engine", "engine_version", "kernel_backend"}
        why = ("a stack ratio (hardware and software both differ) is not a " + d.attributes_to + " ratio"
               if stack else f"{d.attributes_to} is not the only difference")  # fmt: skip
        raise Refused("R6", d.asked() + f" attributed to {d.attributes_to}", f"{why}; differences: {listed}",
                      "list every factor that differs, or compare scopes that differ in that factor only")  # fmt: skip


def rule_range_not_speedup(d: Derivation) -> None:
    """R7: a ratio of values under different loads is a sensitivity to load, not a speed-up."""
    if not d.claims_speedup or d.op not in ("ratio", "percent_change", "range"):
        return
    diffs = _differences(d)
    names = {f.name for f in diffs} if diffs is not None else set()
    if names & set(WORKLOAD_FACTORS):
        listed = ", ".join(f"{f.name} ({f.a} vs {f.b})" for f in diffs if f.name in WORKLOAD_FACTORS)  # type: ignore[union-attr]
        raise Refused(
            "R7", d.asked() + " as a speed-up", f"the values come from different loads: {listed}",
            "call it the range of the metric over loads; a speed-up compares one task under one load",
        )  # fmt: skip


def rule_launch_stages_not_ab(d: Derivation) -> None:
    """R8: startup times of different launch stages are not a cold/warm A/B."""
    if not d.claims_cold_warm:
        return
    stages = {t.scope_ref or t.context.get("launch") or t.context.get("stage") or t.label
              for t in d.terms if t.kind == "startup_time"}
    if len(stages) > 1:
        raise Refused(
            "R8", d.asked() + " as a cold/warm comparison",
            "the launches come from different stages (timeout, configuration, weights changed between them) and "
            "page cache, file system, compilation and initialisation all moved: no single cold/warm state changed",
            "repeat one launch with only the file cache (or the process, or the compile cache) cold vs warm",
        )  # fmt: skip
    diffs = _differences(d)
    if diffs is not None and d.attributes_to in WARM_FACTORS and {f.name for f in diffs} != {d.attributes_to}:
        raise Refused(
            "R8", d.asked() + f" as a {d.attributes_to} cold/warm comparison",
            f"more than the named cold/warm state differs: {', '.join(f.name for f in diffs) or 'nothing'}",
            "name which of the four cold states changed, and keep the others equal",
        )  # fmt: skip


def rule_estimate_not_measured(d: Derivation) -> None:
    """Provenance: an estimate never satisfies a claim that says measured."""
    if d.says == "measured" and any(t.flag == "estimated" for t in d.terms):
        est = ", ".join(t.label for t in d.terms if t.flag == "estimated")
        raise Refused(
            "provenance", d.asked() + " as measured", f"it is computed from estimates ({est})",
            "label it estimated, or measure it",
        )  # fmt: skip


RULES: tuple[Callable[[Derivation], None], ...] = (
    rule_no_na_input,
    rule_units_confirmed,
    rule_memory_kinds,
    rule_counter_meaning,
    rule_power_statistics,
    rule_capacity_not_concurrency,
    rule_per_stream_not_aggregate,
    rule_one_batch,
    rule_same_kind,
    rule_comparability,
    rule_range_not_speedup,
    rule_launch_stages_not_ab,
    rule_estimate_not_measured,
)


def check_rules(d: Derivation) -> None:
    """Apply every rule in order; the first refusal is raised."""
    for rule in RULES:
        rule(d)
