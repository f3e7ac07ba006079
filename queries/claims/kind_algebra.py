"""The kind algebra: for each operation of a formula, which operand kinds give which result kind.

The table is closed: a combination that no row gives is refused. The refusal cites the rulebook
rule that forbids it (:func:`rule_for`: R1 memory, R2 records vs requests, R3 settings vs actual
tokens, R4 per-stream vs aggregate, R5 capacity, R8 launch stages, R9 cache from latency, R13
counters, R14 power) or, when no rule applies, ``kinds`` (a named kind error: the operation is not
defined over those kinds).

Wildcards in :data:`ROWS`: ``K`` is any one kind (every operand the same kind), ``S`` a scaling
kind (:data:`SCALAR_KINDS`: a count, a ratio, an exact constant), so ``K / S -> K`` is "a value
divided by a count stays what it is". ``python -m bench_ledger.queries.claims.kind_algebra`` prints the
table that docs/claims.md embeds (a test keeps the two equal).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from bench_ledger.kinds import (
    CACHE_KINDS,
    COUNTER_KINDS,
    KINDS,
    LOAD_KINDS,
    MEMORY_KINDS,
    POWER_KINDS,
    SCALAR_KINDS,
    SUB_KINDS,
    TIME_KINDS,
)

__all__ = ["infer", "markdown", "ratio_conflict", "ratio_of", "rule_for", "undefined"]

OPS = ("ratio", "percent_change", "difference", "sum", "product", "convert", "divide", "range")


@dataclass(frozen=True)
class Row:
    """One row of the table: ``op(operands) -> result``, with the definition it encodes."""

    op: str
    operands: tuple[str, ...]  # kinds, or the wildcards K / S
    result: str  # a kind, or K
    why: str


# cross-kind quotients (op ratio or divide): numerator, denominator -> result
QUOTIENTS: dict[tuple[str, str], tuple[str, str]] = {
    ("token_count", "duration"): ("aggregate_token_rate", "R3: tokens over the run's common wall clock"),
    ("token_count", "latency"): ("per_stream_token_rate", "R3: one stream's tokens over its own interval"),
    ("request_count", "duration"): ("request_rate", "requests over a wall clock"),
    ("kv_pool_tokens", "token_setting"): ("capacity_ratio", "R5: KV pool tokens / window tokens, a capacity"),
    ("aggregate_token_rate", "power"): ("power_normalized_rate", "a token rate per watt of one board"),
    ("aggregate_token_rate", "power_card_mean_sum"): ("power_normalized_rate", "a token rate per watt of the cards"),
    ("token_count", "request_count"): ("token_count", "mean tokens per request"),
    ("cache_hit_tokens", "token_count"): ("ratio", "R9: a hit ratio from captured cache fields"),
}
# cross-kind products (order free): {a, b} -> result
PRODUCTS: dict[frozenset[str], tuple[str, str]] = {
    frozenset({"aggregate_token_rate", "duration"}): ("token_count", "a rate over a span gives tokens"),
    frozenset({"request_rate", "duration"}): ("request_count", "a request rate over a span gives requests"),
    frozenset({"cache_hit_tokens", "price_per_token"}): ("cache_cost", "R9: captured hit tokens at their price"),
    frozenset({"token_count", "price_per_token"}): ("cost", "tokens at their price"),
}

ROWS: tuple[Row, ...] = (
    Row("ratio", ("K", "K"), "ratio", "a dimensionless ratio within one kind"),
    *(Row("ratio", k, v[0], v[1]) for k, v in QUOTIENTS.items()),
    Row("divide", ("K", "S"), "K", "a value divided by a count, a ratio or a constant stays its kind"),
    Row("divide", ("K", "K"), "ratio", "within one kind (K not a scaling kind)"),
    *(Row("divide", k, v[0], v[1]) for k, v in QUOTIENTS.items()),
    Row("percent_change", ("K", "K"), "percent_change", "(b - a) / a x 100 within one kind"),
    Row("difference", ("K", "K"), "K", "within one kind; an exact constant takes the kind of a count or ratio"),
    Row("sum", ("K", "K", "..."), "K", "within one kind; an exact constant takes the kind of a count or ratio"),
    Row("range", ("K", "K", "..."), "K", "the smallest and largest of values of one kind"),
    Row("convert", ("K",), "K", "a unit conversion keeps the kind"),
    Row("product", ("K", "S", "..."), "K", "at most one operand not a scaling kind; it gives the kind"),
    Row(
        "product",
        ("S", "S", "..."),
        "S",
        "count x count is a count; with a ratio, a ratio; constants alone, a constant",
    ),
    *(Row("product", tuple(sorted(k)), v[0], v[1]) for k, v in PRODUCTS.items()),
)


def _scalar_product(kinds: list[str]) -> str:
    if "ratio" in kinds:
        return "ratio"
    if "count" in kinds:
        return "count"
    return "constant"


def infer(op: str, kinds: list[str]) -> str | None:
    """The result kind of ``op`` over operands of these kinds, or None when no row gives one."""
    if not kinds or op not in OPS:
        return None
    if op in ("sum", "difference", "range") and "constant" in kinds:
        # an exact constant takes the kind of the dimensionless values it is added to (1 - a ratio)
        other = next((k for k in kinds if k != "constant"), "constant")
        if other in SCALAR_KINDS or other == "percent_change":
            kinds = [other if k == "constant" else k for k in kinds]
    if op in ("ratio", "divide"):
        if len(kinds) != 2:
            return None
        a, b = kinds
        if (a, b) in QUOTIENTS:
            return QUOTIENTS[(a, b)][0]
        if op == "divide" and b in SCALAR_KINDS:
            return a
        return "ratio" if a == b else None
    if op == "percent_change":
        return "percent_change" if len(kinds) == 2 and kinds[0] == kinds[1] else None
    if op == "difference":
        return kinds[0] if len(kinds) == 2 and kinds[0] == kinds[1] else None
    if op in ("sum", "range"):
        return kinds[0] if len(set(kinds)) == 1 else None
    if op == "convert":
        return kinds[0] if len(kinds) == 1 else None
    # product
    dims = [k for k in kinds if k not in SCALAR_KINDS]
    if not dims:
        return _scalar_product(kinds)
    if len(dims) == 1:
        return dims[0]
    if len(dims) == 2 and frozenset(dims) in PRODUCTS and len(set(dims)) == 2:
        return PRODUCTS[frozenset(dims)][0]
    return None


TOKEN_KINDS = frozenset({"token_count", "cache_hit_tokens", "token_setting", "kv_pool_tokens"})


def ratio_of(op: str, kinds: list[str], of: list[frozenset[str]]) -> frozenset[str]:
    """What a dimensionless result of ``op`` is a ratio of: the operands' kind for a ratio within one kind,
    the cache-hit tokens of a hit ratio, carried through sums, differences, products and scalings of
    ratios (``of`` holds what each operand is a ratio of; empty when not known or not a ratio)."""
    if op in ("ratio", "divide") and len(kinds) == 2:
        a, b = kinds
        if (a, b) == ("cache_hit_tokens", "token_count"):
            return frozenset({"cache_hit_tokens"})
        if a == b and a not in SCALAR_KINDS:
            return frozenset({a})
        return of[0] if a == "ratio" and b in SCALAR_KINDS else frozenset()
    if op in ("sum", "difference", "range", "product", "convert"):
        return frozenset().union(*(x for k, x in zip(kinds, of, strict=True) if k == "ratio"))
    return frozenset()


def _same_quantity(x: str, y: str) -> bool:
    return x == y or SUB_KINDS.get(x) == y or SUB_KINDS.get(y) == x


def ratio_conflict(op: str, kinds: list[str], of: list[frozenset[str]]) -> tuple[str, str] | None:
    """(rule, why) when a product scales a value by a ratio of another quantity: a dimensionless ratio
    carries what it is a ratio of, so a latency ratio times input tokens is not a count of tokens (R9:
    hit tokens are never estimated from TTFT), whatever kind the result is declared as."""
    if op != "product":
        return None
    dims = [k for k in kinds if k not in SCALAR_KINDS]
    for k, x in zip(kinds, of, strict=True):
        if k != "ratio":
            continue
        for what in sorted(x):
            for y in dims:
                if _same_quantity(what, y):
                    continue
                why = f"a ratio of {what} times {y} is not a {y}: a dimensionless ratio carries what it is a ratio of"
                if what in TIME_KINDS and y in TOKEN_KINDS:
                    return "R9", why + (
                        "; TTFT includes scheduling and fixed overheads, so hit tokens are never estimated from it"
                    )
                return rule_for({what, y}), why
    return None


def rule_for(kinds: set[str]) -> str:
    """The rulebook id that forbids combining these kinds (operands' and the claimed result's),
    most specific first; ``kinds`` when no rule of the rulebook applies (a plain kind error)."""
    if kinds & CACHE_KINDS and kinds - CACHE_KINDS - SCALAR_KINDS - {"price_per_token"}:
        return "R9"
    if len(kinds & MEMORY_KINDS) > 1:
        return "R1"
    if len(kinds & POWER_KINDS) > 1:
        return "R14"
    if kinds & COUNTER_KINDS and (kinds - COUNTER_KINDS - SCALAR_KINDS):
        return "R13"
    if "capacity_ratio" in kinds and kinds & LOAD_KINDS:
        return "R5"
    if "per_stream_token_rate" in kinds and ("aggregate_token_rate" in kinds or "concurrency" in kinds):
        return "R4"
    if {"record_count", "request_count"} <= kinds:
        return "R2"
    if {"token_setting", "token_count"} <= kinds:
        return "R3"
    if "startup_time" in kinds and kinds & {"latency", "duration"}:
        return "R8"
    return "kinds"


def undefined(op: str, kinds: list[str]) -> str:
    """Why no row gives ``op`` over these kinds, in words."""
    base = f"no row of the kind table gives {op}({', '.join(kinds)})"
    if op in ("ratio", "percent_change", "difference", "sum", "range", "convert"):
        return base + ": these values combine only within one quantity kind"
    if op == "product":
        return base + ": at most one operand may be other than a count, ratio or constant, except the listed products"
    return base + ": a value is divided by a count, a ratio or a constant, by one of its own kind, or as listed"


def markdown() -> str:
    """The kind table of docs/claims.md: every kind, then every row of the algebra."""
    lines = ["| kind | what it is |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in KINDS.items()]
    lines += [
        "",
        f"Scaling kinds (`S`): {', '.join(f'`{k}`' for k in sorted(SCALAR_KINDS))}. "
        "`K` is any one kind; `...` more operands of the same pattern.",
        "",
        "| op | operand kinds | result kind | definition |",
        "|---|---|---|---|",
    ]
    for op in OPS:
        for r in ROWS:
            if r.op == op:
                lines.append(f"| `{r.op}` | {', '.join(r.operands)} | {r.result} | {r.why} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(markdown())
