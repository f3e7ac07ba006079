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
from bench_ledger.kinds import CACHE_KINDS, COUNT_KINDS, LOAD_KINDS, MEMORY_KINDS, POWER_KINDS, TIME_KINDS
from bench_ledger.queries.claims import kind_algebra
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.lattice import Evidence
from bench_ledger.queries.values import FACTORS, UNKNOWN, WARM_FACTORS, Factor, MetricValue, factor_known
from bench_ledger.units import UNCONFIRMED

__all__ = ["Derivation", "Term", "check_rules", "infer_kind", "sides"]

# --------------------------------------------------------------------------- kinds

# kinds a cache-hit figure must never be estimated from (R9: TTFT includes scheduling and overheads)


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
    ratio_of: frozenset[str] = frozenset()  # what a ratio operand is a ratio of (kind_algebra.ratio_of)
    evidence: Evidence | None = None  # how good the operand is (queries.lattice)
    factors: dict[str, str] | None = None  # the ledger's recorded factors of its scope (R6), context merged
    conflicts: list[str] = field(default_factory=list)  # context keys that contradict the ledger
    metric_value: MetricValue | None = None  # the ledger's MetricValue behind a metric operand (its sampling interval)

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

    @property
    def kinds(self) -> list[str]:
        return [t.kind for t in self.terms]

    def asked(self) -> str:
        return f"{self.op}({', '.join(f'{t.label} [{t.kind}]' for t in self.terms)}) as {self.result_kind}"


# --------------------------------------------------------------------------- kind algebra


def infer_kind(op: str, kinds: list[str]) -> str | None:
    """The kind a formula's result has when the operands combine legally (the closed table of
    ``queries.claims.kind_algebra``), else None."""
    return kind_algebra.infer(op, kinds)


# --------------------------------------------------------------------------- the rules


def rule_no_na_input(d: Derivation) -> None:
    """R9: anything derived from an n/a input is n/a; a number printed for it is a backfill."""
    for t in d.terms:
        if t.flag == "n/a":
            raise Refused(
                "R9",
                d.asked(),
                f"operand {t.label} is n/a ({t.na_reason or 'not available'}): a value derived from it stays n/a",
                "keep the result n/a; capture the missing field in a new run",
            )


def rule_ratio_carries_its_kind(d: Derivation) -> None:
    """A dimensionless ratio carries what it is a ratio of: a product that scales a value by a ratio of
    another quantity is refused (R9 for a latency ratio times tokens), whatever kind the claim declares."""
    got = kind_algebra.ratio_conflict(d.op, d.kinds, [t.ratio_of for t in d.terms])
    if got is not None:
        raise Refused(
            got[0],
            d.asked(),
            got[1],
            "scale a value only by a ratio of its own quantity; hit tokens come only from a captured cache field",
        )


def rule_cache_from_capture(d: Derivation) -> None:
    """R9: cache-hit tokens (and a cache cost) come only from a captured cache field, never from
    latency or from other token counts."""
    if d.result_kind not in CACHE_KINDS:
        return
    leaves: set[str] = set()
    for t in d.terms:
        leaves |= t.all_kinds
    timed = sorted(leaves & TIME_KINDS)
    if "cache_hit_tokens" in leaves and not timed:
        return
    shown = ", ".join(f"{t.label} [{', '.join(sorted(t.all_kinds))}]" for t in d.terms)
    why = (
        f"it is computed from {', '.join(timed)} ({shown}): TTFT includes scheduling and fixed overheads, so "
        "hit tokens are never estimated from it"
        if timed
        else f"no operand is a captured cache field ({shown}): hit tokens come only from the responses' "
        "cached-tokens field"
    )
    raise Refused(
        "R9",
        d.asked(),
        why,
        "use the cache_hit_tokens metric of a capture that has cached_tokens; else the value stays n/a",
    )


def rule_units_confirmed(d: Derivation) -> None:
    """R12: a value whose unit is unconfirmed never converts (whatever unit the claim assumes)."""
    if d.op != "convert":
        return
    for t in d.terms:
        if t.unit == UNCONFIRMED:
            raise Refused(
                "R12",
                d.asked() + f" in {d.result_unit}",
                f"{t.label} has an unconfirmed unit (no units line read)",
                "read the tool's header (units line) and record the unit before converting",
            )


def rule_memory_kinds(d: Derivation) -> None:
    """R1: weights file size, per-rank allocation and device memory never mix, whatever their units."""
    mem: set[str] = set()
    for t in d.terms:
        mem |= t.all_kinds & MEMORY_KINDS
    if d.result_kind in MEMORY_KINDS and mem:
        mem.add(d.result_kind)
    if len(mem) > 1:
        raise Refused(
            "R1",
            d.asked(),
            f"it mixes {', '.join(sorted(mem))}: different quantity kinds even when the units convert",
            "compare each number only with numbers of its own kind (e.g. allocation with allocation, EP on vs off)",
        )


def rule_counter_meaning(d: Derivation) -> None:
    """R13: dmon `sm` is activity time and `mem` memory-controller busy time; they become nothing else."""
    for t in d.terms:
        for k in t.all_kinds & {"activity_time_percent", "memory_busy_percent"}:
            if d.result_kind != k and d.op in ("convert", "sum", "difference", "range", "product", "divide"):
                what = (
                    "GPU activity time (not SM active, tensor utilisation or MFU)"
                    if k == "activity_time_percent"
                    else "memory-controller busy time (not bandwidth utilisation)"
                )
                raise Refused(
                    "R13",
                    d.asked(),
                    f"{t.label} is {what}; it cannot stand for {d.result_kind}",
                    "measure the wanted quantity (profiler SM/tensor counters, a bandwidth counter, an MFU model)",
                )


def rule_power_statistics(d: Derivation) -> None:
    """R14: sum of card means, peak of the sum and sum of card peaks never stand for each other."""
    stats: set[str] = set()
    for t in d.terms:
        stats |= t.all_kinds & POWER_KINDS
    if d.result_kind in POWER_KINDS:
        stats.add(d.result_kind)
    if len(stats) > 1:
        raise Refused(
            "R14",
            d.asked(),
            f"{', '.join(sorted(stats))} are different power statistics",
            "compute the statistic wanted from the per-card samples (`ledger metrics`)",
        )


def rule_capacity_not_concurrency(d: Derivation) -> None:
    """R5: a capacity ratio (KV pool / window) never yields a concurrency or an accepted load."""
    if d.result_kind in LOAD_KINDS and any("capacity_ratio" in t.all_kinds for t in d.terms):
        raise Refused(
            "R5",
            d.asked(),
            "a KV capacity ratio is a theoretical stock of tokens, not requests served at once: "
            "scheduling slots, block alignment, output growth, expert traffic and queueing bind first",
            "measure the accepted concurrency with a load test at the target latency",
        )


def rule_per_stream_not_aggregate(d: Derivation) -> None:
    """R4: a per-stream rate (x concurrency or not) is never an aggregate rate, nor the reverse."""
    kinds: set[str] = set()
    for t in d.terms:
        kinds |= t.all_kinds
    if "per_stream_token_rate" in kinds and d.result_kind == "aggregate_token_rate":
        raise Refused(
            "R4",
            d.asked(),
            "a single stream's rate measured under one load, multiplied or not, is not the aggregate "
            "rate of many streams under another load",
            "quote the aggregate rate measured at that concurrency and its per-stream median separately",
        )
    if "aggregate_token_rate" in kinds and d.result_kind == "per_stream_token_rate":
        raise Refused(
            "R4",
            d.asked(),
            "an aggregate rate divided or not is not any one stream's rate",
            "use the per-stream median of the run",
        )


def rule_same_kind(d: Derivation) -> None:
    """The closed kind algebra (``queries.claims.kind_algebra``): an operation over operand kinds that no
    row of the table gives, or a result claimed as another kind than the row gives, is refused,
    citing the rule that forbids it (or ``kinds``)."""
    kinds = d.kinds
    got = infer_kind(d.op, kinds)
    if got is None:
        raise Refused(
            kind_algebra.rule_for(set(kinds) | {d.result_kind}),
            d.asked(),
            kind_algebra.undefined(d.op, kinds),
            "combine values as the kind table allows (docs/claims.md), e.g. within one kind",
        )
    if got != d.result_kind:
        raise Refused(
            kind_algebra.rule_for({*kinds, got, d.result_kind}),
            d.asked(),
            f"{d.op}({', '.join(kinds)}) gives {got}, not {d.result_kind}",
            "state the result as the kind it is" if d.op != "convert" else "convert units within one kind only",
        )


def rule_one_batch(d: Derivation) -> None:
    """R2: sums (of counts above all) and series stay within one batch; rows of two batches are only
    shown side by side. A series needs every point shown to come from one stage: a point whose
    batch is not known (no ledger scope, no `batch` in its context) refuses the series."""
    batches = {t.batch for t in d.terms if t.batch is not None}
    if d.series:
        unknown = [t.label for t in d.terms if t.batch is None]
        if unknown:
            raise Refused(
                "R2",
                d.asked(),
                f"nothing shows the points come from one stage: no batch known for {', '.join(unknown)}",
                "give each point's batch (a ledger scope, or `batch` in its context); points of one batch only",
            )
    if len(batches) <= 1:
        return
    if d.op == "sum":
        what = "a count" if set(d.kinds) & COUNT_KINDS else "a total"
        raise Refused(
            "R2",
            d.asked(),
            f"{what} across batches {', '.join(sorted(batches))}: each batch is its own accounting",
            "show each batch's figure side by side, labelled with its batch",
        )
    if d.series:
        raise Refused(
            "R2",
            d.asked(),
            f"points from different batches or stages ({', '.join(sorted(batches))}) are not one series",
            "show each stage's comparison on its own, labelled with its batch",
        )


def side_factors(t: Term) -> dict[str, str]:
    """Every factor of one operand's scope: the ledger's recorded factors (with the claim's context
    where the ledger recorded nothing), or the context alone; the batch of its scope."""
    f = dict(t.factors) if t.factors is not None else dict(t.context)
    if not factor_known(f.get("batch")) and t.batch is not None:
        f["batch"] = t.batch
    return {k: f.get(k, UNKNOWN) for k in FACTORS}


@dataclass
class Sides:
    """The factors of two operands: which differ (known on both sides), which are not known."""

    differ: list[Factor]
    unknown: list[str]

    @property
    def names(self) -> set[str]:
        return {f.name for f in self.differ}

    def listed(self) -> str:
        out = ", ".join(f"{f.name} ({f.a} vs {f.b})" for f in self.differ) or "nothing known"
        return out + (f"; not known on both sides: {', '.join(self.unknown)}" if self.unknown else "")


def sides(d: Derivation) -> Sides | None:
    """Factors of the first two operands over the one factor list (queries.values.FACTORS)."""
    if len(d.terms) < 2:
        return None
    fa, fb = side_factors(d.terms[0]), side_factors(d.terms[1])
    differ = [
        Factor(k, fa[k], fb[k]) for k in FACTORS if factor_known(fa[k]) and factor_known(fb[k]) and fa[k] != fb[k]
    ]
    unknown = [k for k in FACTORS if not (factor_known(fa[k]) and factor_known(fb[k]))]
    return Sides(differ, unknown)


def rule_context_matches_ledger(d: Derivation) -> None:
    """R6: a context that contradicts the factors the ledger recorded for a scope is an error."""
    for t in d.terms:
        if t.conflicts:
            raise Refused(
                "R6",
                d.asked(),
                f"{t.label}: the context contradicts the ledger: {'; '.join(t.conflicts)}",
                "drop the context key (the ledger's recorded factor is used) or correct it",
            )


def rule_comparability(d: Derivation) -> None:
    """R6: a comparison across scopes is attributed to a factor only when that factor is known to
    differ and every other factor is known to be equal; a stack ratio is not a hardware ratio;
    equal resources need known, equal GPU counts; pairing needs known, equal seeds and workloads."""
    if d.op not in ("ratio", "percent_change", "difference"):
        return
    if not (d.attributes_to or d.claims_equal_resources or d.claims_paired):
        return
    sd = sides(d)
    if sd is None:
        return
    names, listed = sd.names, sd.listed()
    if d.claims_equal_resources and ("gpu_count" in names or "gpu_count" in sd.unknown):
        f = next((f for f in sd.differ if f.name == "gpu_count"), None)
        why = f"GPU counts differ ({f.a} vs {f.b})" if f else "the GPU count is not known on both sides"
        raise Refused(
            "R6",
            d.asked() + " as an equal-resource comparison",
            f"{why}; differences: {listed}",
            "compare at equal GPU count, or state the resources of each side",
        )
    if d.claims_paired and (names & {"seed", "workload"} or {"seed", "workload"} & set(sd.unknown)):
        raise Refused(
            "R6",
            d.asked() + " as a per-request paired comparison",
            f"the two sides are not shown to run the same requests (same seed and workload); differences: {listed}",
            "pair only runs with the same seed and workload",
        )
    if d.attributes_to and (names != {d.attributes_to} or sd.unknown):
        stack = "hardware" in names and names & {"engine", "engine_version", "engine_options"}
        if stack:
            why = f"a stack ratio (hardware and software both differ) is not a {d.attributes_to} ratio"
        elif names - {d.attributes_to}:
            why = f"{d.attributes_to} is not the only difference"
        elif sd.unknown:
            why = f"the other factors are not known to be equal (unknown: {', '.join(sd.unknown)})"
        else:
            why = f"{d.attributes_to} does not differ"
        raise Refused(
            "R6",
            d.asked() + f" attributed to {d.attributes_to}",
            f"{why}; differences: {listed}",
            "record every factor of both sides (ledger or context), or compare scopes that differ in that factor only",
        )


def rule_range_not_speedup(d: Derivation) -> None:
    """R7: a ratio of values under different (or not known equal) loads is a sensitivity to load,
    not a speed-up."""
    if not d.claims_speedup or d.op not in ("ratio", "percent_change", "range"):
        return
    sd = sides(d)
    if sd is None:
        return
    if "workload" in sd.names or "workload" in sd.unknown:
        f = next((f for f in sd.differ if f.name == "workload"), None)
        what = (
            f"the values come from different loads: workload ({f.a} vs {f.b})"
            if f
            else "the values are not shown to come from one load (workload not known on both sides)"
        )
        raise Refused(
            "R7",
            d.asked() + " as a speed-up",
            what,
            "call it the range of the metric over loads; a speed-up compares one task under one load",
        )


def rule_launch_stages_not_ab(d: Derivation) -> None:
    """R8: startup times of different launch stages are not a cold/warm A/B; a cold/warm claim
    needs every other factor known equal."""
    if not d.claims_cold_warm:
        return
    stages = {t.scope_ref or t.label for t in d.terms if t.kind == "startup_time"}
    if len(stages) > 1:
        raise Refused(
            "R8",
            d.asked() + " as a cold/warm comparison",
            "the launches come from different stages (timeout, configuration, weights changed between them) and "
            "page cache, file system, compilation and initialisation all moved: no single cold/warm state changed",
            "repeat one launch with only the file cache (or the process, or the compile cache) cold vs warm",
        )
    sd = sides(d)
    if sd is not None and d.attributes_to in WARM_FACTORS and (sd.names != {d.attributes_to} or sd.unknown):
        raise Refused(
            "R8",
            d.asked() + f" as a {d.attributes_to} cold/warm comparison",
            f"more than the named cold/warm state differs or is not known: {sd.listed()}",
            "name which of the four cold states changed, and keep the others equal",
        )


def rule_estimate_not_measured(d: Derivation) -> None:
    """Provenance: an estimate never satisfies a claim that says measured."""
    if d.says == "measured" and any(t.flag == "estimated" for t in d.terms):
        est = ", ".join(t.label for t in d.terms if t.flag == "estimated")
        raise Refused(
            "provenance",
            d.asked() + " as measured",
            f"it is computed from estimates ({est})",
            "label it estimated, or measure it",
        )


RULES: tuple[Callable[[Derivation], None], ...] = (
    rule_no_na_input,
    rule_ratio_carries_its_kind,
    rule_cache_from_capture,
    rule_units_confirmed,
    rule_memory_kinds,
    rule_counter_meaning,
    rule_power_statistics,
    rule_capacity_not_concurrency,
    rule_per_stream_not_aggregate,
    rule_one_batch,
    rule_same_kind,
    rule_context_matches_ledger,
    rule_comparability,
    rule_range_not_speedup,
    rule_launch_stages_not_ab,
    rule_estimate_not_measured,
)


def check_rules(d: Derivation) -> None:
    """Apply every rule in order; the first refusal is raised."""
    for rule in RULES:
        rule(d)
