"""Comparability of two scopes: every factor that differs, and what may be concluded (R6, R8).

A side is ``run:ID``, ``batch:NAME`` or ``deployment:NAME``. Each factor is rendered as one string
per side (several runs or deployments with different values give ``"a | b"``, itself a value), so
"differs" is plain string inequality and the listing shows both values. Unknown (not recorded)
values are shown as ``?``; an identity factor unknown on both sides blocks attribution, because it
may differ.

Conclusions, by rule:

* R6 attribution: a ratio is attributed to a factor only when it is the only difference;
* R6 stack ratio: hardware (model or GPU count) and software (engine, version, options, kernel)
  both differ, so the ratio is never a hardware ratio;
* R6 equal resources only with equal, known GPU counts; per-request pairing only with equal,
  known seeds and the same workload;
* R8 a cold/warm claim must name the warm dimension (prefix cache, process, compile, file cache).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from bench_ledger import factors
from bench_ledger import models as m
from bench_ledger.errors import NotFound, Refused, UsageError
from bench_ledger.queries.values import (
    FACTORS,
    IDENTITY_FACTORS,
    UNKNOWN,
    WARM_FACTORS,
    Comparison,
    Factor,
    MetricValue,
    Scope,
    factor_known,
)
from bench_ledger.revisions import current, require_current
from bench_ledger.store import Ledger, unknown

__all__ = ["RatioResult", "Side", "Sides", "compare", "ratio", "run_keys", "side"]

_R, _B, _D = m.Run.__table__, m.Batch.__table__, m.Deployment.__table__
_WARM_DIMS = WARM_FACTORS
_HARDWARE = ("hardware", "gpu_count")
_SOFTWARE = ("engine", "engine_version", "engine_options")
_IDENTITY = IDENTITY_FACTORS


def _t(v: object) -> str:
    return UNKNOWN if v is None or v == "unknown" else str(v)


def _join(values: list[str]) -> str:
    distinct = sorted(set(values))
    return distinct[0] if len(distinct) == 1 else " | ".join(distinct) if distinct else UNKNOWN


def _dep_factors(d) -> dict[str, str]:
    if d is None:
        return {f: UNKNOWN for f in (*_IDENTITY, "engine_options")}
    mem = None if d.gpu_memory is None else f"{d.gpu_memory} {d.gpu_memory_unit or ''}".strip()
    hw = (
        None
        if d.gpu_model is None
        else " ".join(_t(x) for x in (d.gpu_model, mem, d.interconnect_intra, d.interconnect_inter) if x is not None)
    )
    count = None if d.gpus_per_node is None or d.nodes is None else d.gpus_per_node * d.nodes
    layout = (
        None
        if all(x is None for x in (d.tp, d.dp, d.ep, d.pp))
        else f"tp{_t(d.tp)} dp{_t(d.dp)} ep{_t(d.ep)} pp{_t(d.pp)}"
    )
    opts = {
        k: getattr(d, k)
        for k in (
            "kv_cache_dtype",
            "prefix_caching",
            "max_num_seqs",
            "max_model_len",
            "chunked_prefill_tokens",
            "speculative_method",
            "speculative_tokens",
            "kernel_backend",
        )
    }
    options = None if all(v is None for v in opts.values()) else " ".join(f"{k}={_t(v)}" for k, v in opts.items())
    return {
        "model": _t(d.model and factors.model_name(d.model)),
        "hardware": _t(hw),
        "gpu_count": _t(count),
        "engine": _t(d.engine),
        "engine_version": _t(d.engine_version),
        "weights_version": _t(d.weights_version),
        "layout": _t(layout),
        "engine_options": _t(options),
    }


def _stated_factors(r) -> dict[str, str]:
    """The identity factors a run's files state (ledger.factors), as compared: used where the run has
    no deployment, or its deployment does not record the factor."""
    f = {k: v.value for k, v in factors.of_metadata(factors.run_metadata(r.metadata_json)).items()}
    layout = (
        None
        if not {"tp", "dp", "ep", "pp"} & set(f)
        else " ".join(f"{k}{_t(f.get(k))}" for k in ("tp", "dp", "ep", "pp"))
    )
    return {
        k: v
        for k, v in (
            ("model", f.get("model") and factors.model_name(f["model"])),
            ("hardware", f.get("hardware")),
            ("gpu_count", f.get("gpu_count")),
            ("engine", f.get("engine")),
            ("engine_version", f.get("engine_version")),
            ("layout", layout),
        )
        if v is not None
    }


def _run_factors(r) -> dict[str, str]:
    wl = (
        f"rate {_t(r.request_rate)} / in {_t(r.input_target_tokens)} / out {_t(r.output_cap_tokens)} / C {_t(r.concurrency)} / "
        f"N {_t(r.request_count)} / dataset {_t(r.dataset)}"
    )
    return {"workload": wl, "seed": _t(r.seed), **{w: _t(getattr(r, w)) for w in _WARM_DIMS}, "batch": r.batch}


@dataclass
class Side:
    spec: str
    scope: Scope
    factors: dict[str, str]
    run_ids: list[int]
    # runs whose achieved load fell short of the requested one (inference-perf stages), in words
    shortfalls: list[str] = field(default_factory=list)


def _shortfall(r) -> str | None:
    """``run N: achieved x% of the requested rate`` when the importer flagged the run, else None."""
    try:
        meta = json.loads(r.metadata_json) if r.metadata_json else {}
    except ValueError:
        return None
    short = meta.get("rate_shortfall") if isinstance(meta, dict) else None
    return f"run {r.id} ({r.label}): {short}" if short else None


def side(ledger: Ledger, spec: str) -> Side:
    """Resolve ``run:ID`` / ``batch:NAME`` / ``deployment:NAME`` to its factor values."""
    kind, _, name = spec.partition(":")
    q = sa.select(
        _R, _B.c.name.label("batch"), sa.func.coalesce(_R.c.deployment_id, _B.c.deployment_id).label("dep")
    ).join(_B, _B.c.id == _R.c.batch_id)
    with ledger.connection() as conn:
        if kind == "run":
            if not name.isdigit():
                raise NotFound(f"{spec!r}: a run is named by its id, e.g. run:3")
            runs = conn.execute(q.where(_R.c.id == int(name))).all()
            if not runs:
                raise NotFound(f"no run with id {name}; `ledger runs` lists them")
            require_current(conn, "run", int(name))
            scope = Scope(batch=runs[0].batch, run=f"#{name}")
            dep_ids = {runs[0].dep}
        elif kind == "batch":
            bid = conn.execute(sa.select(_B.c.id, _B.c.deployment_id).where(_B.c.name == name)).first()
            if bid is None:
                raise unknown(conn, "batch", name)
            runs = conn.execute(q.where(_B.c.name == name, current(_R)).order_by(_R.c.id)).all()
            scope = Scope(batch=name)
            dep_ids = {r.dep for r in runs} or {bid.deployment_id}
        elif kind == "deployment":
            did = conn.execute(sa.select(_D.c.id).where(_D.c.name == name)).scalar()
            if did is None:
                raise unknown(conn, "deployment", name)
            runs = [r for r in conn.execute(q.where(current(_R)).order_by(_R.c.id)).all() if r.dep == did]
            scope = Scope(deployment=name)
            dep_ids = {did}
        else:
            raise UsageError(f"{spec!r}: write run:ID, batch:NAME or deployment:NAME")
        deps = [conn.execute(sa.select(_D).where(_D.c.id == i)).first() if i is not None else None for i in dep_ids]
    return _side(spec, scope, deps, runs)


def _side(spec: str, scope: Scope, deps: Sequence[Any], runs: Sequence[Any]) -> Side:
    """A side's factors from its deployment rows and run rows (as :func:`side` selects them)."""
    per_dep = [_dep_factors(d) for d in deps] or [_dep_factors(None)]
    per_run = [_run_factors(r) for r in runs]
    out = {f: _join([p[f] for p in per_dep]) for f in per_dep[0]}
    by_run = [_stated_factors(r) for r in runs]
    for f, value in out.items():  # what the runs' files state, where no deployment records it
        if value == UNKNOWN and (stated := [st[f] for st in by_run if f in st]):
            out[f] = _join(stated) if len(stated) == len(runs) else _join([*stated, UNKNOWN])
    for f in ("workload", "seed", *_WARM_DIMS, "batch"):
        out[f] = _join([p[f] for p in per_run]) if per_run else UNKNOWN
    return Side(spec, scope, out, [r.id for r in runs], [s for r in runs if (s := _shortfall(r))])


class Sides:
    """:func:`side` for many specs against a ledger that does not change meanwhile (an audit): each spec
    resolved once, and the first ``run:ID`` of a batch resolves every current run of that batch (two
    statements, the same rows and factors as :func:`side`'s). Anything else, and every error, is
    :func:`side`'s own. A new instance per audit."""

    def __init__(self) -> None:
        self._memo: dict[str, Side | NotFound | Refused | UsageError] = {}
        self._batches: set[int] = set()

    def __call__(self, ledger: Ledger, spec: str) -> Side:
        if spec not in self._memo:
            kind, _, name = spec.partition(":")
            if kind == "run" and name.isdigit():
                self._batch_of(ledger, int(name))
            if spec not in self._memo:
                try:
                    self._memo[spec] = side(ledger, spec)
                except (NotFound, Refused, UsageError) as exc:
                    self._memo[spec] = exc
        v = self._memo[spec]
        if isinstance(v, Exception):
            raise v
        return v

    def _batch_of(self, ledger: Ledger, run_id: int) -> None:
        q = sa.select(
            _R, _B.c.name.label("batch"), sa.func.coalesce(_R.c.deployment_id, _B.c.deployment_id).label("dep")
        ).join(_B, _B.c.id == _R.c.batch_id)
        with ledger.connection() as conn:
            bid = conn.execute(sa.select(_R.c.batch_id).where(_R.c.id == run_id)).scalar()
            if bid is None or bid in self._batches:
                return
            self._batches.add(bid)
            runs = conn.execute(q.where(_R.c.batch_id == bid, current(_R)).order_by(_R.c.id)).all()
            dep_ids = {r.dep for r in runs if r.dep is not None}
            deps = {d.id: d for d in conn.execute(sa.select(_D).where(_D.c.id.in_(dep_ids)))} if dep_ids else {}
        for r in runs:
            spec = f"run:{r.id}"
            self._memo.setdefault(spec, _side(spec, Scope(batch=r.batch, run=f"#{r.id}"), [deps.get(r.dep)], [r]))


# Factors in which replicates of one measurement may differ: the comparability key leaves them out.
_KEY_EXCLUDES = ("seed", "batch")


def run_keys(ledger: Ledger, run_ids: Sequence[int]) -> dict[int, str | None]:
    """Each run's comparability key: sha256 over its deployment's fingerprint, its tool and every factor of
    :data:`values.FACTORS` but :data:`_KEY_EXCLUDES` (so runs of one key are replicates: same system, workload
    and warm state, any seed or batch). None for a run with no deployment recorded: it is comparable to
    nothing (an unrecorded system may differ)."""
    import hashlib

    q = sa.select(
        _R, _B.c.name.label("batch"), sa.func.coalesce(_R.c.deployment_id, _B.c.deployment_id).label("dep")
    ).join(_B, _B.c.id == _R.c.batch_id)
    with ledger.connection() as conn:
        runs = conn.execute(q.where(_R.c.id.in_(list(run_ids)))).all()
        dep_ids = {r.dep for r in runs if r.dep is not None}
        deps = {d.id: d for d in conn.execute(sa.select(_D).where(_D.c.id.in_(dep_ids)))} if dep_ids else {}
    out: dict[int, str | None] = {}
    for r in runs:
        d = deps.get(r.dep)
        if d is None:
            out[r.id] = None
            continue
        f = _side("", Scope(), [d], [r]).factors
        payload = {k: f[k] for k in FACTORS if k not in _KEY_EXCLUDES} | {
            "deployment": d.fingerprint,
            "tool": _t(r.tool),
        }
        out[r.id] = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return out


def compare(
    ledger: Ledger,
    a: str,
    b: str,
    claim_factor: str | None = None,
    *,
    equal_resources: bool = False,
    paired: bool = False,
) -> Comparison:
    """Every factor that differs between A and B; refuses a claimed conclusion the factors forbid."""
    sa_, sb = side(ledger, a), side(ledger, b)
    return _comparison(sa_, sb, claim_factor, equal_resources, paired)


def _comparison(sa_: Side, sb: Side, claim_factor: str | None, equal_resources: bool, paired: bool) -> Comparison:
    fa, fb = sa_.factors, sb.factors
    diffs = [Factor(f, fa[f], fb[f]) for f in FACTORS if fa[f] != fb[f]]
    names = [d.name for d in diffs]
    unknown_both = [f for f in _IDENTITY if fa[f] == UNKNOWN and fb[f] == UNKNOWN]
    notes: list[str] = []
    if unknown_both:
        notes.append(f"not recorded on either side (may differ): {', '.join(unknown_both)}")
    attributable = names[0] if len(names) == 1 and not unknown_both else None
    stack = any(n in _HARDWARE for n in names) and any(n in _SOFTWARE for n in names)
    equal_res = fa["gpu_count"] == fb["gpu_count"] and fa["gpu_count"] != UNKNOWN and " | " not in fa["gpu_count"]
    is_paired = (
        fa["seed"] == fb["seed"]
        and fa["seed"] != UNKNOWN
        and " | " not in fa["seed"]
        and fa["workload"] == fb["workload"]
    )
    if stack:
        notes.append("hardware and software stack both differ: a stack ratio, never a hardware ratio (R6)")
    if not equal_res:
        notes.append(f"GPU count {fa['gpu_count']} vs {fb['gpu_count']}: not an equal-resource comparison (R6)")
    if not is_paired:
        notes.append(f"seed {fa['seed']} vs {fb['seed']}: not a per-request paired comparison (R6)")
    if len(names) > 1:
        notes.append(f"{len(names)} factors differ: a ratio cannot be attributed to one of them (R6)")
    for short in (*sa_.shortfalls, *sb.shortfalls):
        notes.append(
            f"{short}: the load it was offered is not the requested one; compare it as the "
            "achieved load, not the requested rate"
        )
    unknown = [f for f in FACTORS if not (factor_known(fa[f]) and factor_known(fb[f]))]
    cmp = Comparison(sa_.spec, sb.spec, diffs, attributable, stack, equal_res, is_paired, notes, unknown)
    _check_claims(cmp, claim_factor, equal_resources, paired)
    return cmp


def _check_claims(cmp: Comparison, claim_factor: str | None, equal_resources: bool, paired: bool) -> None:
    asked_pair = f"{cmp.a} vs {cmp.b}"
    names = [d.name for d in cmp.differences]
    if claim_factor is not None:
        if claim_factor in ("warm", "cold", "cold/warm", "warm_state"):
            changed = [n for n in names if n in _WARM_DIMS]
            raise Refused(
                "R8",
                f"attribute {asked_pair} to cold vs warm",
                "cold is four things (prefix cache, process, compile, file cache); the claim does not name which "
                f"changed (differing: {', '.join(changed) or 'none recorded'})",
                f"name one dimension: {', '.join(_WARM_DIMS)}",
            )
        if claim_factor not in FACTORS:
            raise UsageError(f"no factor named {claim_factor!r}; factors: {', '.join(FACTORS)}")
        if cmp.attributable_to != claim_factor:
            others = [n for n in names if n != claim_factor]
            why = (
                (
                    f"{claim_factor} does not differ"
                    if claim_factor not in names
                    else f"{claim_factor} is not the only difference: {', '.join(others)} also differ"
                )
                if names
                else "nothing differs"
            )
            if claim_factor in names and not others:
                why = "identity factors are not recorded on either side, so they may differ: " + ", ".join(
                    f for f in _IDENTITY if f not in names
                )
            rule = "R8" if claim_factor in _WARM_DIMS and any(o in _WARM_DIMS for o in others) else "R6"
            raise Refused(
                rule,
                f"attribute {asked_pair} to {claim_factor}",
                why,
                "compare scopes that differ only in that factor, or report it as a ratio with every difference listed",
            )
    if equal_resources and not cmp.equal_resources:
        d = next((f for f in cmp.differences if f.name == "gpu_count"), None)
        counts = f"{d.a} vs {d.b} GPUs" if d else "GPU count not recorded"
        raise Refused(
            "R6",
            f"call {asked_pair} an equal-resource comparison",
            f"GPU counts differ ({counts})",
            "normalise per GPU explicitly and say so, or compare deployments with the same GPU count",
        )
    if paired and not cmp.paired:
        s = next((f for f in cmp.differences if f.name == "seed"), None)
        why = f"seeds differ ({s.a} vs {s.b})" if s else "seeds are not recorded or the workloads differ"
        raise Refused(
            "R6",
            f"pair {asked_pair} per request",
            why,
            "compare distributions (percentiles), not request by request; rerun with the same seed",
        )


@dataclass
class RatioResult:
    metric: str
    a: MetricValue
    b: MetricValue
    ratio: Fraction | None  # b / a
    label: str  # what the ratio may be called
    comparison: Comparison

    def as_dict(self) -> dict:
        def mv(v: MetricValue) -> dict:
            return {
                "value": None if v.value is None else float(v.value),
                "unit": v.unit,
                "flag": v.flag,
                "na_reason": v.na_reason,
                "scope": v.scope.describe(),
            }

        return {
            "metric": self.metric,
            "a": mv(self.a),
            "b": mv(self.b),
            "ratio_b_over_a": None if self.ratio is None else float(self.ratio),
            "label": self.label,
            "comparison": asdict(self.comparison),
        }


def ratio(
    ledger: Ledger,
    metric: str,
    a: str,
    b: str,
    claim_factor: str | None = None,
    *,
    equal_resources: bool = False,
    paired: bool = False,
) -> RatioResult:
    """B / A of one metric, labelled with what differs; refuses an illegal conclusion (R6, R8)."""
    from bench_ledger.queries.metrics.registry import evaluate

    sa_, sb = side(ledger, a), side(ledger, b)
    cmp = _comparison(sa_, sb, claim_factor, equal_resources, paired)
    va, vb = evaluate(ledger, metric, sa_.scope), evaluate(ledger, metric, sb.scope)
    value = None if va.value in (None, 0) or vb.value is None else vb.value / va.value
    if cmp.attributable_to:
        label = f"attributable to {cmp.attributable_to} (the only difference)"
    elif cmp.stack_ratio:
        label = "stack ratio (hardware and software differ): not a hardware ratio"
    elif not cmp.differences:
        label = "no recorded factor differs"
    else:
        label = "ratio across differences: " + ", ".join(d.name for d in cmp.differences)
    return RatioResult(metric, va, vb, value, label, cmp)
