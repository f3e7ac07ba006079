"""A registered metric proposed for a found number: a metric over a ledger scope whose value lies in the
printed interval, when the row / column / sentence names that scope (tier, C/N, label words, batch, launch),
or when it is the only candidate that reproduces and nothing in the context contradicts it.

A candidate is checked by running the audit itself (:class:`queries.audit.Auditor`) on a one-claim file, so
the draft and the audit agree on intervals, units and integer kinds. A named scope whose metric is n/a is
proposed too (the audit will say not-derivable: the evidence the ledger lacks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bench_ledger.errors import LedgerError, Refused
from bench_ledger.queries.draft._facets import IDENTITY, Facets, RunScope, names_run
from bench_ledger.queries.draft._guess import Guess
from bench_ledger.queries.draft._numbers import Found

__all__ = ["LedgerView", "choose_metric", "metric_candidates", "significant_digits"]

# ----------------------------------------------------------------------------- the ledger side


class LedgerView:
    """The scopes of a ledger a draft may name, and its metric values (:class:`queries.metrics.Evaluator`)."""

    @property
    def known_words(self) -> set[str]:
        return (
            {b.lower() for b in self.batches}
            | {r.label.lower() for r in self.runs}
            | {d.lower() for d, _ in self.launches}
        )

    def __init__(self, ledger: Any, batches: list[str] | None = None) -> None:
        import sqlalchemy as sa
        from bench_ledger import models as m
        from bench_ledger.queries.metrics.registry import METRICS, Evaluator, run_metrics
        from bench_ledger.revisions import not_superseded

        self.ledger = ledger
        self.metrics = METRICS
        self._evaluate = Evaluator()  # each (metric, scope) once; the run scopes of a batch together
        from bench_ledger.factors import of_metadata, run_metadata
        from bench_ledger.queries.metrics.reported import Reported

        self.reported = Reported()  # the tools' own figures, read once per run
        # (metric, scope, cards, printed text, unit) -> (verdict, recomputed, metric unit): one audit each
        self.checked: dict[tuple, tuple[str, str | None, str | None]] = {}
        rows = run_metrics(ledger, batches or None, metrics=())
        with ledger.connection() as conn:
            R = m.Run.__table__
            ids = [r.run_id for r in rows]
            stated = (
                {
                    rid: of_metadata(run_metadata(text))
                    for rid, text in conn.execute(sa.select(R.c.id, R.c.metadata_json).where(R.c.id.in_(ids)))
                }
                if ids
                else {}
            )

        def setting(value: int | None, rid: int, factor: str) -> int | None:
            # the run's column, else what its file (or its names) state (ledger.factors)
            if value is not None:
                return value
            said = stated.get(rid, {}).get(factor)
            return int(said.value) if said is not None and said.value.isdigit() else None

        self.runs = [
            RunScope(
                r.batch,
                r.label,
                setting(r.input_target_tokens, r.run_id, "input_len"),
                setting(r.output_cap_tokens, r.run_id, "output_len"),
                setting(r.concurrency, r.run_id, "concurrency"),
                setting(r.request_count, r.run_id, "prompt_count"),
                tuple(
                    (k, v.value)
                    for k, v in stated.get(r.run_id, {}).items()
                    if k in ("hardware", "tp", "dp", "pp", "ep", *IDENTITY)
                ),
            )
            for r in rows
        ]
        self.batches = sorted({r.batch for r in self.runs} | set(batches or []))
        with ledger.connection() as conn:
            L, D = m.Launch.__table__, m.Deployment.__table__
            q = sa.select(D.c.name, L.c.attempt).join(D, D.c.id == L.c.deployment_id).where(not_superseded(L))
            self.launches = sorted({(r[0], r[1]) for r in conn.execute(q)})
            if not batches:
                self.batches = sorted(set(self.batches) | {r[0] for r in conn.execute(sa.select(m.Batch.name))})

    def cards(self, name: str, batch: str) -> list[str]:
        """The cards of a batch a per-card hardware metric names (empty when it is one value)."""
        from bench_ledger.queries.values import Scope

        try:
            v = self.evaluate(self.ledger, name, Scope(batch=batch))
        except (LedgerError, Refused, KeyError, ValueError):
            return []
        per_card = (v.inputs or {}).get("per_card") if v.value is None else None
        return sorted(per_card) if isinstance(per_card, dict) else []

    def evaluate(self, ledger: Any, name: str, scope: Any) -> Any:
        return self._evaluate(ledger, name, scope)


@dataclass
class Candidate:
    metric: str
    scope: dict
    verdict: str  # what the audit gives it: reproduced | mismatch | not-derivable | refused
    recomputed: str | None
    named: bool
    score: int
    why: list[str]
    over_cards: str | None = None
    unit: str | None = None  # the metric value's unit ("unconfirmed" for an unread dmon column)

    def describe(self) -> str:
        sc = ", ".join(f"{k}={v}" for k, v in self.scope.items())
        shown = f" = {self.recomputed}" if self.recomputed else ""
        return f"{self.metric} over {{{sc}}}{shown}: {self.verdict}" + (f" ({'; '.join(self.why)})" if self.why else "")


def metric_names(g: Guess, metrics: dict) -> list[str]:
    """The registered metrics a guess points at: the cue's stem (with the statistic when one is
    printed), else every metric of the guessed kind."""
    names = []
    if g.metric_stem:
        if g.metric_stem in metrics:
            names = [g.metric_stem]
        else:
            names = [n for n in metrics if n.startswith(g.metric_stem + "_")]
            if g.stat:
                narrowed = [n for n in names if n.endswith("_" + g.stat) or f"_{g.stat}_" in n]
                names = narrowed or names
    names = [n for n in names if metrics[n].quantity_kind == g.kind]
    hardware = [n for n in names if metrics[n].family == "hardware" and n.endswith(("_mean", "_max"))]
    if hardware and not g.stat and len(hardware) == len(names):
        # a hardware counter printed without a statistic word is read as its window mean (the summary)
        names = [n for n in names if n.endswith("_mean")]
    if not names:
        names = [
            n
            for n, mt in metrics.items()
            if mt.quantity_kind == g.kind and g.kind not in ("count", "other", "ratio", "percent_change")
        ]
    return names


def metric_candidates(f: Found, g: Guess, view: LedgerView, fa: Facets, claim_text: str) -> list[Candidate]:
    """Every (metric, scope) the guess allows, checked by the audit on a one-claim file."""
    from bench_ledger.queries.audit import Auditor
    from bench_ledger.queries.claims import ClaimsFile

    names = metric_names(g, view.metrics)
    if g.kind == "power" and f.unit not in ("W", "kW"):
        names = []  # a power statistic needs its unit printed ("功耗归一化比值" is not a power)
    out: list[Candidate] = []
    for name in names:
        mt = view.metrics[name]
        scopes: list[tuple[dict, bool, int, list[str], str | None]] = []
        if mt.family in ("requests", "reported"):
            for r in view.runs:
                named, score, why = names_run(fa, r)
                scopes.append(({"batch": r.batch, "run": r.label}, named, score, why, None))
            for b in view.batches if mt.pools and mt.family == "requests" else ():
                scopes.append(
                    ({"batch": b}, b.lower() in fa.words, 1, [f"batch {b}"] if b.lower() in fa.words else [], None)
                )
        elif mt.family == "hardware":
            for b in view.batches:
                named = b.lower() in fa.words
                over = "mean" if name.endswith("_mean") and not name.startswith("power_sum") else None
                scopes.append(({"batch": b}, named, 1 if named else 0, [f"batch {b}"] if named else [], over))
                if not name.startswith("power_sum") and not name.startswith("power_peak"):
                    # a per-card statistic over several cards: each card is a scope of its own
                    for card in view.cards(name, b):
                        scopes.append(
                            ({"batch": b, "gpu": card}, named, 1 if named else 0, [f"batch {b}"] if named else [], None)
                        )
        else:
            for dep, attempt in view.launches:
                named = fa.launch == attempt or dep.lower() in fa.words
                scopes.append(
                    (
                        {"deployment": dep, "launch": attempt},
                        named,
                        1 if named else 0,
                        [f"launch {attempt}"] if fa.launch == attempt else [],
                        None,
                    )
                )
        for scope, named, score, why, over in scopes:
            if fa.launch is not None and "launch" in scope and scope["launch"] != fa.launch:
                continue
            key = (name, repr(sorted(scope.items())), over, claim_text, g.printed_unit)
            done = view.checked.get(key) if hasattr(view, "checked") else None
            if done is not None:  # the same number against the same scope: audited once per draft
                out.append(Candidate(name, scope, done[0], done[1], named, score, why, over, done[2]))
                continue
            claim = {
                "id": "candidate",
                "text": claim_text,
                "kind": mt.quantity_kind,
                "unit": g.printed_unit,
                "metric": {"name": name, "scope": scope, **({"over_cards": over} if over else {})},
            }
            cf = ClaimsFile.model_validate(
                {"version": 1, "source_report": {"slug": "draft", "title": "draft"}, "claims": [claim]}
            )
            res = None
            shown: str | None
            try:
                res = Auditor(cf, view.ledger, evaluate=view.evaluate, reported=getattr(view, "reported", None)).result(
                    "candidate"
                )
            except Exception as exc:  # noqa: BLE001 - a candidate the audit cannot run is not proposed
                verdict, shown = "refused", str(exc)[:80]
            else:
                verdict, shown = res.verdict, res.recomputed
            unit = (res.evidence or {}).get("metric_unit") if res is not None else None
            if hasattr(view, "checked"):
                view.checked[key] = (verdict, shown, unit)
            out.append(Candidate(name, scope, verdict, shown, named, score, why, over, unit))
    return out


_STAT_ORDER = ("p50", "mean", "", "p90", "p95", "p99", "max", "min", "p25", "p75", "std", "p99_9")
# what a number printed without a statistic word may be taken for: a level, a median, a mean
_PLAIN_STATS = ("", "p50", "mean")


def _stat_of(metric: str) -> str:
    hit = re.search(r"_(p\d+(?:_\d+)?|mean|max|min|std)$", metric)
    return hit.group(1) if hit and hit.group(1) in _STAT_ORDER else ""


def significant_digits(value: str) -> int:
    digits = re.sub(r"[^0-9]", "", re.split(r"[A-Za-z%×倍\s]", value.strip().lstrip("+-−"))[0])
    return len(digits.lstrip("0"))


def choose_metric(
    cands: list[Candidate],
    fa: Facets,
    significant: int = 0,
    stem: str | None = None,
    stat: str | None = None,
) -> tuple[Candidate | None, str, list[Candidate]]:
    """The proposal among the candidates: (chosen, confidence, rejected)."""
    reproduced = [c for c in cands if c.verdict == "reproduced"]
    if any(c.over_cards for c in reproduced):
        # the summary over the cards reproduces: one card matching it too is a coincidence
        reproduced = [c for c in reproduced if c.over_cards or "gpu" not in c.scope]
    named_rep = [c for c in reproduced if c.named]
    if named_rep:
        best = max(c.score for c in named_rep)
        top = [c for c in named_rep if c.score == best]
        if len({(c.metric, str(c.scope)) for c in top}) > 1 and len({str(c.scope) for c in top}) == 1:
            # one scope, several statistics agree (one request: mean = median = max): the median
            top = sorted(top, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))[:1]
        if len(top) == 1:
            return top[0], "high", [c for c in cands if c is not top[0] and (c.named or c.verdict == "reproduced")]
        if len({str(c.scope) for c in top}) > 1:
            # runs tied on what names them: listed, never guessed
            return None, "", [c for c in cands if c.named or c.verdict == "reproduced"]
        return top[0], "low", [c for c in cands if c is not top[0] and (c.named or c.verdict == "reproduced")]
    named_na = [c for c in cands if c.named and c.verdict == "not-derivable" and c.score >= 2]
    if named_na:
        best = max(c.score for c in named_na)
        top = [c for c in named_na if c.score == best]
        # only when a cue named the metric: a kind alone would pick any n/a metric of that kind
        if stem and len({str(c.scope) for c in top}) == 1 and all(c.metric.startswith(stem) for c in top):
            top = sorted(top, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))
            return top[0], "medium", [c for c in cands if c.named and c is not top[0]]
    # few scopes of that shape were tried (2 batches, not 20 runs): a unique match is not a coincidence
    few = (
        reproduced
        and len(
            {
                str(c.scope)
                for c in cands
                if c.metric == reproduced[0].metric and set(c.scope) == set(reproduced[0].scope)
            }
        )
        <= 3
    )
    if stat is None:
        # nothing names the scope and no statistic is printed: a tail statistic (p90, max, std...) that
        # happens to match is a coincidence among the many tried, not a basis
        reproduced = [c for c in reproduced if _stat_of(c.metric) in _PLAIN_STATS]
    # a run the context contradicts (another GPU, another layout) is never the unique match
    reproduced = [c for c in reproduced if not any("!=" in w or "not in the context" in w for w in c.why)]
    if len({str(c.scope) for c in reproduced}) == 1 and not fa.stated and (significant >= 3 or few):
        one = sorted(reproduced, key=lambda c: _STAT_ORDER.index(_stat_of(c.metric)))[0]
        return one, "low", [c for c in cands if c.named]
    return None, "", [c for c in cands if c.named or c.verdict == "reproduced"]
