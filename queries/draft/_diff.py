"""Compare a drafted claims file with a reviewed one.

* :func:`diff` (``ledger claims diff DRAFT REVIEWED``): what a reviewer changed, claim by claim
  (matched by id, else by printed text and locator): removed, added, and the fields that changed
  (basis, metric and scope, formula, unit, kind, text, locator), and which drafts were accepted as
  they were.
* :func:`coverage`: how much of a hand-written claims file a draft reproduces (docs/claims-draft.md):
  the share of hand-written claims whose printed text the draft finds at the same locator, and the
  share whose basis it proposes the same way (metric name and scope; formula and operands, compared
  by the numbers they print since the two files name claims differently; na; quoted). Computed, never
  typed in: tests/queries/draft/test_coverage.py asserts the figures and lists the misses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bench_ledger.queries.claims import Claim, ClaimsFile, Formula, LiteralNumber, MetricOperand
from bench_ledger.queries.draft._numbers import numbers_in

__all__ = ["Coverage", "coverage", "diff"]

# ----------------------------------------------------------------------------- diff


@dataclass
class Change:
    claim_id: str
    field: str
    draft: Any
    reviewed: Any


@dataclass
class DiffReport:
    removed: list[str] = field(default_factory=list)  # drafted, dropped by the reviewer
    added: list[str] = field(default_factory=list)  # written by the reviewer
    changed: list[Change] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)  # kept with the proposed basis, unchanged
    renamed: dict[str, str] = field(default_factory=dict)  # draft id -> reviewed id (matched by text + locator)

    def as_dict(self) -> dict:
        return {
            "removed": self.removed,
            "added": self.added,
            "accepted": self.accepted,
            "renamed": self.renamed,
            "changed": [c.__dict__ for c in self.changed],
            "summary": self.summary(),
        }

    def summary(self) -> dict[str, int]:
        return {
            "removed": len(self.removed),
            "added": len(self.added),
            "accepted": len(self.accepted),
            "changed": len({c.claim_id for c in self.changed}),
            "basis_changed": sum(1 for c in self.changed if c.field == "basis"),
        }


def _basis_value(c: Claim) -> Any:
    b = c.basis
    return getattr(c, b).model_dump(mode="json", exclude_none=True, exclude_defaults=True)


def diff(draft: ClaimsFile, reviewed: ClaimsFile) -> DiffReport:
    """What the reviewer changed in the draft."""
    out = DiffReport()
    d_by, r_by = draft.by_id(), reviewed.by_id()
    unmatched_r = {i for i in r_by if i not in d_by}
    pairs: list[tuple[Claim, Claim]] = []
    for cid, dc in d_by.items():
        rc = r_by.get(cid)
        if rc is None:
            rc = next(
                (
                    r_by[i]
                    for i in sorted(unmatched_r)
                    if r_by[i].text == dc.text and _loc_key(r_by[i].locator) == _loc_key(dc.locator)
                ),
                None,
            )
            if rc is not None:
                unmatched_r.discard(rc.id)
                out.renamed[cid] = rc.id
        if rc is None:
            out.removed.append(cid)
            continue
        pairs.append((dc, rc))
    out.added = sorted(unmatched_r, key=lambda i: [c.id for c in reviewed.claims].index(i))
    for dc, rc in pairs:
        changes = []
        if dc.basis != rc.basis:
            changes.append(Change(rc.id, "basis", dc.basis, rc.basis))
        elif _basis_value(dc) != _basis_value(rc):
            changes.append(Change(rc.id, dc.basis, _basis_value(dc), _basis_value(rc)))
        for f in ("text", "value", "unit", "kind", "locator", "context", "says", "count_of"):
            if getattr(dc, f) != getattr(rc, f):
                changes.append(Change(rc.id, f, getattr(dc, f), getattr(rc, f)))
        out.changed.extend(changes)
        if not changes:
            out.accepted.append(rc.id)
    return out


def _loc_key(loc: str | None) -> str:
    return re.sub(r"\s*\(line [^)]*\)$", "", loc or "")


# ----------------------------------------------------------------------------- coverage against a reference


@dataclass
class Alternative:
    section: str  # "3.3", "title"
    row: str | None  # a table row designator ("32/512", "C64 total"), or None


def parse_locator(loc: str | None) -> list[Alternative]:
    """A hand-written locator: alternatives separated by ';', each '§N.N [row] LABEL' or 'title'.
    Parenthesised remarks are ignored ('§3.5 (16 卡)'); 'footnote N' is kept as a row designator."""
    out = []
    for part in (loc or "").split(";"):
        part = re.sub(r"\([^)]*\)|（[^）]*）", "", part).strip()
        if not part:
            continue
        if part.lower().startswith("title"):
            out.append(Alternative("title", None))
            continue
        m = re.match(r"§\s*(\d+(?:\.\d+)*)\s*(.*)$", part)
        if not m:
            continue
        rest = m.group(2).strip()
        rest = re.sub(r"^row\s+", "", rest)
        out.append(Alternative(m.group(1), rest or None))
    return out


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s).lower()


def place_matches(alt: Alternative, place: dict) -> bool:
    """A draft's place is at a hand-written locator: same section (or below it), and when the
    locator names a row, the draft's table row label contains it (or its first word, the scope
    word: 'C64 total' -> 'C64'); for a prose number a row designator is a phrase of the locator
    only and is not required."""
    sec = str(place.get("section", ""))
    if alt.section == "title":
        return sec == "title"
    if not (sec == alt.section or sec.startswith(alt.section + ".")):
        return False
    if alt.row is None or place.get("row") is None:
        return True
    row = _norm(str(place["row"]))
    want = _norm(alt.row)
    if want in row or row in want:
        return True
    first = _norm(alt.row.split()[0])
    return bool(first) and first in row


@dataclass
class Miss:
    claim_id: str
    text: str
    locator: str | None
    why: str


@dataclass
class Coverage:
    total: int  # hand-written claims
    printed: int  # of them, claims whose text the report prints verbatim (the others are inferences in words)
    located: int  # printed text found by the draft at the same locator
    same_basis: int  # basis proposed the same way
    located_misses: list[Miss] = field(default_factory=list)
    basis_misses: list[Miss] = field(default_factory=list)
    not_printed: list[Miss] = field(default_factory=list)

    @property
    def located_share(self) -> float:
        return self.located / self.total if self.total else 0.0

    @property
    def basis_share(self) -> float:
        return self.same_basis / self.total if self.total else 0.0

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "printed": self.printed,
            "located": self.located,
            "same_basis": self.same_basis,
            "located_share": round(self.located_share, 4),
            "basis_share": round(self.basis_share, 4),
            "located_misses": [m.__dict__ for m in self.located_misses],
            "basis_misses": [m.__dict__ for m in self.basis_misses],
            "not_printed": [m.__dict__ for m in self.not_printed],
        }


def _cores(text: str | None) -> list[tuple[str, ...]]:
    return numbers_in(text or "")


def _draft_cores(c: Claim) -> list[tuple[str, ...]]:
    return _cores(c.text) or _cores(c.value)


def _core_hit(want: tuple[str, ...], have: list[tuple[str, ...]]) -> bool:
    """One number of the hand-written text among a draft claim's numbers (a range's ends count)."""
    for h in have:
        if want == h or (len(want) == 1 and len(h) == 2 and want[0] in h):
            return True
    return False


def locate(ref: Claim, draft: ClaimsFile, report_text: str, used: set[str] = frozenset()) -> list[Claim] | None:  # type: ignore[assignment]
    """The draft claims that print the hand-written claim's numbers at its locator, or None. When
    several hand-written claims print one number at one place, each takes a draft claim not taken yet
    (in file order) while there is one."""
    wants = _cores(ref.text) or _cores(ref.value)
    if not wants:
        return None
    for alt in parse_locator(ref.locator):
        at = [c for c in draft.claims if c.evidence and place_matches(alt, c.evidence.get("place", {}))]
        hits = []
        own = re.sub(r"\s+", "", ref.text)
        # a draft claim in the named table row first, then one whose sentence holds the hand-written text
        at.sort(
            key=lambda c: (
                alt.row is not None and c.evidence.get("place", {}).get("row") is None,  # type: ignore[union-attr]
                own not in re.sub(r"\s+", "", c.statement or ""),
                c.id in used,
            )
        )
        for w in wants:
            hit = next((c for c in at if _core_hit(w, _draft_cores(c))), None)
            if hit is None:
                break
            hits.append(hit)
        else:
            return hits
    return None


def _printed_key(ref_file: ClaimsFile, operand: Any) -> Any:
    """What an operand prints, to compare formulas across files whose claim ids differ."""
    if isinstance(operand, str):
        c = ref_file.by_id().get(operand)
        if c is None:
            return ("?", operand)
        return ("n", tuple(_cores(c.value) or _cores(c.text)))
    if isinstance(operand, LiteralNumber):
        return ("n", tuple(_cores(operand.value))) if operand.value else ("unprinted", operand.kind)
    if isinstance(operand, MetricOperand):
        return ("m", operand.metric, operand.scope.model_dump(exclude_none=True))
    if isinstance(operand, Formula):
        return ("f", operand.op, tuple(_printed_key(ref_file, o) for o in operand.operands))
    return ("?", str(operand))


def same_basis(ref: Claim, ref_file: ClaimsFile, got: Claim, draft: ClaimsFile) -> tuple[bool, str]:
    if ref.basis != got.basis:
        return False, f"proposed {got.basis}, hand-written {ref.basis}"
    if ref.basis == "metric":
        a, b = ref.metric, got.metric
        assert a is not None and b is not None  # a metric basis carries its metric (claims schema)
        ok = a.name == b.name and a.scope.model_dump(exclude_none=True) == b.scope.model_dump(exclude_none=True)
        return ok, "" if ok else (
            f"proposed {b.name} over {b.scope.model_dump(exclude_none=True)}, hand-written "
            f"{a.name} over {a.scope.model_dump(exclude_none=True)}"
        )
    if ref.basis == "derived":
        ka = _printed_key(ref_file, ref.derived)
        kb = _printed_key(draft, got.derived)
        return ka == kb, "" if ka == kb else f"proposed {kb[1]}{list(kb[2])}, hand-written {ka[1]}{list(ka[2])}"
    return True, ""


def coverage(draft: ClaimsFile, reference: ClaimsFile, report_text: str) -> Coverage:
    """The two figures of docs/claims-draft.md for one draft against a hand-written file. Every
    hand-written claim counts; one whose text the report does not print (an inference written in
    English) is located by the numbers its text holds, and is also listed in ``not_printed``."""
    compact = re.sub(r"\s+", "", report_text)
    cov = Coverage(total=len(reference.claims), printed=0, located=0, same_basis=0)
    used: set[str] = set()
    for ref in reference.claims:
        if re.sub(r"\s+", "", ref.text) not in compact:
            cov.not_printed.append(
                Miss(
                    ref.id,
                    ref.text,
                    ref.locator,
                    "the text is not printed in the report (an inference in words, or from another document)",
                )
            )
        else:
            cov.printed += 1
        hits = locate(ref, draft, report_text, used)
        if hits is None:
            why = (
                "no number in the text" if not (_cores(ref.text) or _cores(ref.value)) else "not found at that locator"
            )
            cov.located_misses.append(Miss(ref.id, ref.text, ref.locator, why))
            cov.basis_misses.append(Miss(ref.id, ref.text, ref.locator, "not located"))
            continue
        cov.located += 1
        # the draft claim of the hand-written claim's own number (its value when the text is prose)
        want = (_cores(ref.value) or _cores(ref.text))[-1:] if ref.value else None
        got = next((h for h in hits if want and _core_hit(want[0], _draft_cores(h))), hits[-1])
        used.update(h.id for h in hits)
        ok, why = same_basis(ref, reference, got, draft)
        if ok:
            cov.same_basis += 1
        else:
            cov.basis_misses.append(Miss(ref.id, ref.text, ref.locator, f"{why} (draft {got.id})"))
    return cov
