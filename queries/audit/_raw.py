"""A derived claim recomputed from the ledger's values of its operands (issue 38).

The verdict lattice (``queries.lattice``) judges a derivation on its printed operands: a claim id stands for
its printed interval. Where an operand is a ledger figure (a metric claim the ledger reproduced, or a derived
claim recomputed so), the derivation is recomputed once more with the ledger's value in its place. When the
printed arithmetic holds but the ledger's values put the result outside the printed rounding, the verdict is
``raw-mismatch`` (a per-GPU figure printed as the printed total / 8 while the raw total / 8 rounds to another
last digit); when they hold too, a note says so. The documented lattice is unchanged: this runs only on a
``consistent`` verdict, and a ``raw-mismatch`` operand is a ``mismatch`` to the claims built on it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench_ledger.errors import Refused
from bench_ledger.queries import intervals as iv
from bench_ledger.queries.audit._rules import Term
from bench_ledger.queries.claims import Claim, Formula
from bench_ledger.queries.intervals import Interval, fmt

__all__ = ["RAW_MISMATCH", "recheck"]

RAW_MISMATCH = "raw-mismatch"
# the verdicts whose value the ledger stands behind (an operand claim's ledger value is used only then)
_BACKED = ("reproduced", "consistent")


def recheck(auditor: Any, c: Claim, r: Any, terms: list[Term]) -> None:
    """Recompute a ``consistent`` derived claim from the ledger's values of its operands (``auditor`` is the
    ``queries.audit.Auditor``); record the result in ``r`` and in ``auditor.ledger_values``."""
    d = c.derived
    if d is None or d.op == "range" or r.verdict != "consistent":
        return
    used: dict[str, Interval] = {}
    try:
        swapped = [_swap(auditor, o, t, used) for o, t in zip(d.operands, terms, strict=True)]
        if not used:
            return
        result = auditor.compute(d.op, swapped, c.unit, d.from_unit)
    except (Refused, ValueError, ZeroDivisionError):
        return
    if not isinstance(result, Interval):
        return
    auditor.ledger_values[c.id] = result
    printed = auditor.printed_interval(c)
    if printed is None:
        return
    chk = iv.check(result, printed)
    names = ", ".join(used)
    of = f"the ledger's value{'s' if len(used) > 1 else ''} of {names}"
    verb = "give" if len(used) > 1 else "gives"
    r.evidence["ledger_operands"] = {
        "operands": {k: str(v) for k, v in used.items()},
        "recomputed": str(result),
        "holds": chk.consistent,
        "margin": chk.margin,
    }
    if chk.consistent:
        r.notes.append(f"recomputed from {of}: {result}, inside the printed rounding too")
        return
    r.verdict = RAW_MISMATCH
    r.why = (
        f"the printed arithmetic holds ({r.recomputed}), but {of} {verb} {result}: "
        f"outside the printed rounding by {fmt(chk.distance)}"
    )


def _swap(auditor: Any, o: Any, t: Term, used: dict[str, Interval]) -> Term:
    """The operand with the ledger's value in place of the printed one, where the ledger has one."""
    if isinstance(o, str):
        value = auditor.ledger_values.get(o)
        if value is None or auditor.result(o).verdict not in _BACKED:
            return t
        used[o] = value
        return replace(t, interval=value)
    if not isinstance(o, Formula) or o.op == "range":
        return t
    before = len(used)
    subs = [_swap(auditor, x, auditor.term(x), used) for x in o.operands]
    if len(used) == before:
        return t
    unit = subs[0].unit if subs and o.op in ("sum", "difference", "divide", "product") else None
    got = auditor.compute(o.op, subs, unit, None)
    return replace(t, interval=got) if isinstance(got, Interval) else t
