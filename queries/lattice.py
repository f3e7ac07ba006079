"""The verdict lattice: a derivation is never better than its weakest input.

A derived claim's verdict combines two things: what its own arithmetic gave (``refused`` by a type
rule, ``not-derivable`` when a value is missing, ``mismatch`` or ``consistent`` against the printed
interval) and the evidence level of each operand. Levels, worst first (:data:`LEVELS`):

refused < n/a < not-derivable < mismatch < estimated < reported < rounded < measured

An operand claim's level is its own verdict (a ``quoted`` claim is ``reported``; a ``reproduced`` or
``consistent`` one is ``rounded`` when its printed interval has a width, ``reported``/``estimated``
when it was derived from such values, else ``measured``); a literal is ``measured`` (exact),
``rounded`` (printed), or its flag; a metric operand ``measured`` or ``not-derivable`` (n/a).

:func:`combine` is the one place the two meet; docs/claims.md shows its table (generated from
:data:`CAP` and :data:`VERDICT_ORDER`, kept current by a test).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["LEVELS", "Evidence", "combine", "derived_flag", "markdown", "weakest"]

LEVELS: tuple[str, ...] = (
    "refused",
    "n/a",
    "not-derivable",
    "mismatch",
    "estimated",
    "reported",
    "rounded",
    "measured",
)
# the best verdict a derivation can have with an operand at this level
CAP: dict[str, str] = {
    "refused": "refused",
    "n/a": "refused",  # R9: from any n/a input it is n/a; a printed number for it would be a backfill
    "not-derivable": "not-derivable",
    "mismatch": "mismatch",
    "estimated": "estimated",
    "reported": "consistent",
    "rounded": "consistent",
    "measured": "consistent",
}
# verdicts of a derived claim, worst first
VERDICT_ORDER: tuple[str, ...] = ("refused", "not-derivable", "mismatch", "estimated", "consistent")
# the provenance a derivation carries, by its weakest operand's level
PROVENANCE: dict[str, str] = {
    "refused": "n/a",
    "n/a": "n/a",
    "not-derivable": "n/a",
    "mismatch": "n/a",
    "estimated": "estimated",
    "reported": "derived from reported",
    "rounded": "derived from rounded",
    "measured": "derived",
}


@dataclass(frozen=True)
class Evidence:
    """How good one operand is, and why (the operand's rule and reason when it is not good)."""

    level: str
    source: str  # the operand (claim id, literal label, metric)
    rule: str | None = None
    why: str | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown evidence level {self.level!r}")


@dataclass(frozen=True)
class Outcome:
    """A derived claim's verdict after its operands are taken into account."""

    verdict: str
    provenance: str
    weakest: Evidence | None  # the operand that capped the verdict (None: its own arithmetic decided)
    rule: str | None = None
    why: str | None = None


def weakest(inputs: list[Evidence]) -> Evidence | None:
    """The worst operand (the first of equals)."""
    return min(inputs, key=lambda e: LEVELS.index(e.level)) if inputs else None


def combine(own: str, inputs: list[Evidence]) -> Outcome:
    """The verdict of a derivation whose own arithmetic gave ``own`` (refused, not-derivable,
    mismatch, consistent) over operands of these evidence levels: the worse of ``own`` and the cap
    of the weakest operand; on a tie the derivation's own reason is the one given."""
    if own not in VERDICT_ORDER:
        raise ValueError(f"unknown verdict of a derivation {own!r}")
    w = weakest(inputs)
    rounded = any(e.level == "rounded" for e in inputs)
    provenance = PROVENANCE[w.level] if w is not None else "derived"
    if provenance == "derived from reported" and rounded:
        provenance += " (rounded)"
    if w is None or VERDICT_ORDER.index(CAP[w.level]) >= VERDICT_ORDER.index(own):
        return Outcome(own, provenance, None)
    cap = CAP[w.level]
    rule = w.rule if w.level == "refused" else "R9" if w.level == "n/a" else None
    why = (
        f"operand {w.source} is {w.level}"
        + (f" ({w.rule})" if w.rule and w.level == "refused" else "")
        + (f": {w.why}" if w.why else "")
    )
    if cap == "estimated":
        why = f"derived from an estimate ({w.source}): an estimate, never verified"
    return Outcome(cap, provenance, w, rule, why)


# a metric value's flag (ledger.vocab.Provenance) as an evidence level, and back
_FLAG_LEVEL = {
    "measured": "measured",
    "derived": "measured",
    "reported": "reported",
    "estimated": "estimated",
    "n/a": "n/a",
}
_LEVEL_FLAG = {"measured": "derived", "reported": "reported", "estimated": "estimated", "n/a": "n/a"}


def derived_flag(flags: list[str]) -> str:
    """The flag of a value computed from inputs with these flags: the weakest input decides (a TPM
    over the tool's reported duration is ``reported``, never ``derived`` as if measured here)."""
    return _derived_flag(tuple(flags))


@functools.cache
def _derived_flag(flags: tuple[str, ...]) -> str:  # a few flags, asked for three rates of every run
    w = weakest([Evidence(_FLAG_LEVEL[f], f) for f in flags])
    return "derived" if w is None else _LEVEL_FLAG[w.level]


def markdown() -> str:
    """The lattice as docs/claims.md shows it: own verdict x weakest operand level -> verdict."""
    head = "| own arithmetic \\ weakest operand | " + " | ".join(LEVELS) + " |"
    lines = [head, "|---" * (len(LEVELS) + 1) + "|"]
    for own in ("refused", "not-derivable", "mismatch", "consistent"):
        cells = [combine(own, [Evidence(lv, "x")]).verdict for lv in LEVELS]
        lines.append(f"| {own} | " + " | ".join(cells) + " |")
    lines.append("| provenance carried | " + " | ".join(PROVENANCE[lv] for lv in LEVELS) + " |")
    return "\n".join(lines) + "\n"
