"""`ledger claims draft`: a claims file drafted from a report, for a person to review.

Every number the report prints (:mod:`queries.draft._numbers`) becomes one claim with its exact text,
its locator, a guessed unit and kind, and a proposed basis (``_guess``, ``_candidates``, ``_derived``). Each claim
is marked ``draft: true`` with its ``evidence`` (cues, confidence, the candidates considered and
rejected); the file's ``draft`` section lists what was skipped (section numbers, dates, versions,
names) and a coverage summary. Nothing in it is a verdict: ``ledger audit`` gives those once a
person has reviewed the proposals.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from bench_ledger.kinds import INTEGER_KINDS
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.queries.draft._candidates import LedgerView, choose_metric, metric_candidates, significant_digits
from bench_ledger.queries.draft._derived import DerivedProposal, propose_derived
from bench_ledger.queries.draft._facets import facets_with_row
from bench_ledger.queries.draft._guess import Guess, fraction_only, guess
from bench_ledger.queries.draft._numbers import Found, find_numbers
from bench_ledger.queries.draft._segments import Report

__all__ = ["draft_claims"]

TOOL = "ledger claims draft"


@dataclass
class Draft:
    claims: ClaimsFile
    found: list[Found]

    def to_yaml(self) -> str:
        data = self.claims.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        data = {"version": 1, **data}
        head = (
            "# DRAFT claims file written by `ledger claims draft`: every proposal below is a guess for a person\n"
            "# to review (draft: true). Audit it with `ledger audit` only after review; see docs/claims-draft.md.\n"
        )
        return head + _dump(data)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _dump(data: dict) -> str:
    """The YAML of a draft, by libyaml's emitter where PyYAML has it: its output is the Python emitter's
    except that it escapes characters beyond the BMP (an emoji in a heading), so those travel as
    private-use characters the data does not hold and are put back after."""
    kw: dict[str, Any] = {"allow_unicode": True, "sort_keys": False, "width": 120}
    dumper = getattr(yaml, "CSafeDumper", None)
    text = json.dumps(data, ensure_ascii=False)
    astral = sorted(set(_ASTRAL.findall(text)))
    free = [chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text][: len(astral)]
    if dumper is None or len(free) < len(astral):
        return yaml.safe_dump(data, **kw)
    if astral:
        data = json.loads(text.translate({ord(a): f for a, f in zip(astral, free, strict=True)}))
    out = yaml.dump(data, Dumper=dumper, **kw)
    return out.translate({ord(f): a for a, f in zip(astral, free, strict=True)})


# a heading that withdraws its numbers ("`agent_flat` c2 — INVALID, do not cite", "无效数据")
_INVALID = re.compile(r"\binvalid\b|do not cite|not valid|无效|作废|勿引用", re.IGNORECASE)


def _slug(text: str, width: int = 24) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text.lower()).strip("-")
    return s[:width].strip("-") or "n"


def _claim_id(f: Found, g: Guess, used: set[str]) -> str:
    sec = "title" if f.place.section == "title" else ("s" + f.place.section if f.place.section else "pre")
    sec = re.sub(r"[^A-Za-z0-9.]+", "-", sec)[:20].strip("-") or "s"
    stem = _slug(g.metric_stem if g.metric_stem and _stem_fits(g) else g.kind)
    base = f"{sec}-l{f.place.line}-{stem}"
    cid, n = base, 1
    while cid in used:
        n += 1
        cid = f"{base}-{n}"
    used.add(cid)
    return cid


def _stem_fits(g: Guess) -> bool:
    """The cue's metric stem names the claim only when one of its metrics is of the guessed kind."""
    from bench_ledger.queries.metrics.registry import METRICS

    return any(
        mt.quantity_kind == g.kind
        for n, mt in METRICS.items()
        if n == g.metric_stem or n.startswith(f"{g.metric_stem}_")
    )


def _text_between(report: Report):
    def between(a: Found, b: Found) -> str:
        if a.place.line != b.place.line:
            return " "
        return report.lines[a.place.line - 1][a.place.end : b.place.start]

    return between


def _pools(found: list[Found], report: Report) -> dict[tuple, list[Found]]:
    """The numbers of each sentence and of each table row, in the report's order (:func:`_pool`)."""
    out: dict[tuple, list[Found]] = {}
    for o in found:
        row = report.segments[o.segment].row_id
        out.setdefault(("segment", o.segment), []).append(o)
        if row is not None:
            out.setdefault(("row", row), []).append(o)
    return out


def _pool(f: Found, pools: dict[tuple, list[Found]], report: Report) -> list[Found]:
    """The numbers a derivation may use: the same sentence, or the same table row."""
    seg = report.segments[f.segment]
    if seg.kind == "cell":
        return list(pools.get(("row", seg.row_id), [])) if seg.row_id is not None else []
    return list(pools.get(("segment", f.segment), []))


def _reaches(edges: dict[str, list[str]], start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(edges.get(n, []))
    return False


def draft_claims(
    report_path: str | Path,
    ledger: Any = None,
    batches: list[str] | None = None,
    out_path: str | Path | None = None,
    *,
    view: Any = None,
) -> Draft:
    """Draft a claims file for the report at ``report_path`` (against ``ledger`` when given; ``view``
    replaces the ledger's :class:`~queries.draft._candidates.LedgerView`, for tests)."""
    if view is None and ledger is not None:
        with ledger.connection() as conn:  # one read connection for the whole draft
            one = _OneConnection(ledger, conn)
            return _draft_claims(report_path, ledger, batches, out_path, LedgerView(one, batches))
    return _draft_claims(report_path, ledger, batches, out_path, view)


class _OneConnection:
    """The ledger with one read connection for a whole draft: a DuckDB file (opened per connection) is
    opened once, not once per metric and per run. A failed statement rolls the connection back, so the
    next one (PostgreSQL aborts the transaction) reads again."""

    def __init__(self, ledger: Any, conn: Any) -> None:
        self._ledger, self._conn = ledger, conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    @contextmanager
    def connection(self) -> Iterator[Any]:
        try:
            yield self._conn
        except BaseException:
            self._conn.rollback()
            raise


def _draft_claims(
    report_path: str | Path, ledger: Any, batches: list[str] | None, out_path: str | Path | None, view: Any
) -> Draft:
    path = Path(report_path)
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    findings = find_numbers(text)
    report = findings.report
    between = _text_between(report)
    pools = _pools(findings.found, report)
    used: set[str] = set()
    ids: dict[int, str] = {}
    claims: list[dict] = []
    pending: list[tuple[dict, Found, DerivedProposal]] = []
    for f in findings.found:
        g = guess(f)
        cid = _claim_id(f, g, used)
        ids[id(f)] = cid
        seg = report.segments[f.segment]
        evidence: dict[str, Any] = {
            "place": {
                k: v
                for k, v in {
                    "section": f.place.section,
                    "heading": f.place.heading,
                    "line": f.place.line,
                    "span": [f.place.start + 1, f.place.end],
                    "table": f.place.table,
                    "row": f.place.row,
                    "column": f.place.column,
                }.items()
                if v is not None
            },
            "form": f.form,
            "unit_kind": {"confidence": g.confidence, "cues": g.cues},
        }
        review = []
        if _INVALID.search(f.place.heading or ""):
            review.append(f"the report marks its section invalid ({f.place.heading}): a record, not a result to cite")
        if g.confidence != "high":
            review.append(f"unit/kind guessed with {g.confidence} confidence")
        claim: dict[str, Any] = {"id": cid, "text": f.text.strip()}
        if f.value is not None and f.value != claim["text"]:
            claim["value"] = f.value
        if g.unit:
            claim["unit"] = g.unit
        claim["kind"] = g.kind
        claim["locator"] = f.place.locator
        claim["statement"] = f.sentence[:200]
        claim["draft"] = True
        if f.form == "na":
            reason = report.footnotes.get(f.footnote or "", "") if f.footnote else ""
            rest = seg.text[len(f.lead) + len(f.text) :]  # the words after N/A up to the sentence's end
            reason = reason or (rest.lstrip("：:，,;； ").strip() or f.sentence)
            claim["na"] = {"reason": reason[:300]}
            evidence["basis"] = {
                "proposed": "na",
                "confidence": "high" if reason else "low",
                "why": "the report prints N/A" + (f" (footnote {f.footnote})" if f.footnote else ""),
            }
        else:
            pool = _pool(f, pools, report)
            der = propose_derived(f, g, pool, between)
            chosen = None
            explicit = der is not None and der.why.startswith("printed arithmetic")
            if (
                view is not None
                and not explicit
                and f.form not in ("range",)
                and g.kind not in ("percent_change", "ratio")
                and f.value is not None
            ):
                fa = facets_with_row(f, seg.header, seg.row_cells, view.known_words)
                cands = metric_candidates(f, g, view, fa, f.value)
                chosen, conf, rejected = choose_metric(cands, fa, significant_digits(f.value), g.metric_stem, g.stat)
                if chosen is not None:
                    claim["metric"] = {
                        "name": chosen.metric,
                        "scope": chosen.scope,
                        **({"over_cards": chosen.over_cards} if chosen.over_cards else {}),
                    }
                    claim["kind"] = view.metrics[chosen.metric].quantity_kind
                    if g.printed_unit is None and chosen.unit:
                        claim["unit"] = chosen.unit  # the metric's unit: the report prints none
                    evidence["basis"] = {
                        "proposed": "metric",
                        "confidence": conf,
                        "why": chosen.describe(),
                        "context": fa.stated,
                        "rejected": [c.describe() for c in rejected[:8]],
                    }
                    if conf != "high":
                        review.append("metric proposed without a unique named scope")
                elif rejected:
                    evidence["candidates_not_proposed"] = [c.describe() for c in rejected[:8]]
            if chosen is None and der is not None:
                pending.append((claim, f, der))
                evidence["basis"] = {
                    "proposed": "derived",
                    "confidence": "medium" if not explicit else "high",
                    "why": der.why,
                    "recomputed": der.recomputed,
                }
                if der.value is not None:
                    claim["value"] = der.value
                    review.append("the sign of the change comes from the arithmetic")
            elif chosen is None:
                if claim["kind"] in INTEGER_KINDS and fraction_only(f.value or ""):
                    # a statistic of a count printed with a fraction, quoted: not a count (no integer rule)
                    claim["kind"] = "other"
                phrase = (f.before.strip() or f.sentence.strip())[-80:]
                claim["quoted"] = {"source": f"the report ({phrase})" if phrase else "the report"}
                evidence["basis"] = {
                    "proposed": "quoted",
                    "confidence": "low",
                    "why": "no metric of the ledger reproduces it in a named scope and no "
                    "arithmetic of nearby numbers gives it"
                    if view is not None
                    else "no ledger given and no arithmetic of nearby numbers gives it",
                }
        if review:
            evidence["review"] = review
        claim["evidence"] = evidence
        claims.append(claim)
    edges: dict[str, list[str]] = {}
    for claim, f, der in sorted(pending, key=lambda p: not p[2].why.startswith("printed arithmetic")):
        ops = [ids[id(o)] for o in der.operands]
        if any(_reaches(edges, o, claim["id"]) for o in ops):
            # the operands are derived from this number already: keep the first, quote this one
            claim["quoted"] = {"source": f"the report ({(f.before.strip() or f.sentence.strip())[-80:]})"}
            claim["evidence"]["basis"] = {
                "proposed": "quoted",
                "confidence": "low",
                "why": f"{der.why} would make a cycle with the proposals of its operands",
            }
            claim.pop("value", None) if der.value is not None else None
            continue
        edges[claim["id"]] = ops
        claim["derived"] = {"op": der.op, "operands": ops}
    counts_basis = Counter(
        next(k for k in ("metric", "derived", "quoted", "estimated", "na") if k in c) for c in claims
    )
    counts_conf = Counter(c["evidence"]["basis"]["confidence"] for c in claims)
    title = next((s.text.strip() for s in report.segments if s.kind == "title"), path.stem)
    rel = path.name
    if out_path is not None:
        rel = os.path.relpath(path.resolve(), Path(out_path).resolve().parent)
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    data = {
        "version": 1,
        "source_report": {
            "slug": _slug(path.stem.removesuffix(".zh").removesuffix(".en"), 60),
            "title": title,
            "file": rel,
            "language": "zh" if cjk > len(text) * 0.05 else "en",
        },
        "draft": {
            "generated_by": TOOL,
            "report_sha256": hashlib.sha256(raw).hexdigest(),
            "ledger": None if ledger is None else str(getattr(ledger, "url", "")) or None,
            "batches": list(batches or []),
            "coverage": {
                "numbers_found": len(claims),
                "skipped": len(findings.skipped),
                "by_basis": dict(sorted(counts_basis.items())),
                "by_confidence": dict(sorted(counts_conf.items())),
            },
            "skipped": [{"text": s.text, "locator": s.place.locator, "why": s.why} for s in findings.skipped],
        },
        "claims": claims,
    }
    return Draft(ClaimsFile.model_validate(data), findings.found)
