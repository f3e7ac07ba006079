"""Recompute what benchmark tools reported, by each tool's own definition (R15).

A tool's summary (vLLM's ``output_throughput``, llmperf's ``results_ttft_s_quantiles_p99``...) is
a claim: stored as ``published_value`` with flag ``reported``. For a run whose per-request records
are in the ledger, :func:`check` recomputes each reported value the way *that tool* computes it
(formats.md) and says whether the two agree within the precision the tool printed:

* tolerance = half a unit in the last printed place (``"2,791"`` → ±0.5; ``"0.22"`` → ±0.005), with a
  relative floor of 1e-9 for full-precision floats (their last digit is binary noise, not a claim);
* vLLM / SGLang: statistics over successful requests, numpy linear percentiles, population std,
  TPOT = (latency - ttft) / (output - 1) for output > 1, ITL over the flattened chunk gaps, rates
  over the tool's own ``duration``;
* llmperf: over records with ``error_code`` null, pandas linear quantiles, sample std (n - 1).

Where a value cannot be recomputed the row says "not re-derivable" and why (no per-request records
in the artefacts, the records are a sample, a needed field was not captured, the key needs the
tool's own clock, the key is unknown). Recomputation here is deliberately separate from the metric
registry: it follows each tool's definition, which is not always the ledger's (R3, R4).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.books import current
from bench_ledger.queries.metrics_requests import captures, mean, percentile_linear, std
from bench_ledger.store import Ledger

AGREE, DISAGREE, NOT_DERIVABLE = "agree", "disagree", "not re-derivable"
REL_FLOOR = Fraction(1, 10**9)
PV, R, B, Q, G = (t.__table__ for t in (m.PublishedValue, m.Run, m.Batch, m.Request, m.ChunkGap))


@dataclass
class CheckRow:
    run_id: int
    batch: str
    run: str
    tool: str | None
    key: str
    reported: str
    unit: str | None
    recomputed: float | None
    status: str  # agree | disagree | not re-derivable
    tolerance: str | None
    reason: str | None  # why not re-derivable, or how it was recomputed

    def as_dict(self) -> dict:
        return asdict(self)


class NotDerivable(Exception):
    """Raised inside a recomputation: the reported value cannot be re-derived, and why."""


@dataclass
class Records:
    """The ok/failed records of one run, loaded once (runs are small)."""

    statuses: list[str]
    ok: list[dict]
    gaps: list[float]
    fields: set[str]  # fields captured by every record-holding capture of the run
    duration: Fraction | None

    def column(self, name: str, field: str | None = None) -> list[Fraction]:
        if (field or name) not in self.fields:
            raise NotDerivable(f"needed field {field or name} not captured")
        vals = [r[name] for r in self.ok]
        if any(v is None for v in vals):
            raise NotDerivable(f"{name} missing for {sum(v is None for v in vals)} of {len(vals)} ok requests")
        return [Fraction(v) for v in vals]

    def need_status(self) -> None:
        if "status" not in self.fields or "unknown" in self.statuses:
            raise NotDerivable("request success not captured (status unknown for some records)")


def tolerance(text: str) -> Fraction | None:
    """Half a unit in the last printed place of ``text``; None when it is not a number."""
    try:
        d = Decimal(text.replace(",", "").strip())
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    exp = d.as_tuple().exponent
    return Fraction(5) * Fraction(10) ** (int(exp) - 1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- tool definitions


def _stat(values: list[Fraction], stat: str, ddof: int) -> Fraction:
    if not values:
        raise NotDerivable("no values to recompute from")
    s = sorted(values)
    if stat == "mean":
        return mean(s)
    if stat == "median":
        return percentile_linear(s, 50)
    if stat == "min":
        return s[0]
    if stat == "max":
        return s[-1]
    if stat in ("std", "stddev"):
        if len(s) <= ddof:
            raise NotDerivable("too few values for a standard deviation")
        return Fraction(std(s, ddof))
    if stat.startswith("p"):
        return percentile_linear(s, Fraction(stat[1:]))
    if stat.startswith("quantiles_p"):
        return percentile_linear(s, Fraction(stat[len("quantiles_p"):]))
    raise NotDerivable(f"statistic {stat!r} unknown")


def _serving_series(rec: Records, name: str) -> list[Fraction]:
    """vLLM / SGLang per-request series over successful requests, in seconds."""
    rec.need_status()
    if name == "ttft":
        return rec.column("ttft_s")
    if name in ("e2el", "e2e_latency"):
        return rec.column("latency_s")
    if name == "itl":
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        return [Fraction(g) for g in rec.gaps]
    if name == "tpot":
        out = rec.column("output_tokens")
        ttft, lat = rec.column("ttft_s"), rec.column("latency_s")
        # the tool divides in floats; recompute the same float operations, then exactly
        return [Fraction((float(la) - float(t)) / (int(o) - 1)) for o, t, la in zip(out, ttft, lat) if o > 1]
    raise NotDerivable(f"series {name!r} unknown")


SERVING_STAT = re.compile(r"(?P<stat>mean|median|std|p\d+(?:\.\d+)?)_(?P<series>ttft|tpot|itl|e2el|e2e_latency)_ms")


def _serving(key: str, rec: Records) -> tuple[Fraction, str]:
    """vLLM ``bench serve`` and SGLang ``bench_serving`` aggregates (formats.md sections 1, 2)."""
    if mt := SERVING_STAT.fullmatch(key):
        return 1000 * _stat(_serving_series(rec, mt["series"]), mt["stat"], 0), "over ok requests, ×1000 (ms), population std, numpy linear percentiles"
    if key in ("completed", "failed"):
        rec.need_status()
        return Fraction(rec.statuses.count("ok" if key == "completed" else "failed")), "count of records by status"
    if key == "total_input_tokens":
        rec.need_status()
        return sum(rec.column("input_tokens"), Fraction(0)), "sum over ok requests"
    if key == "total_output_tokens":
        rec.need_status()
        return sum(rec.column("output_tokens"), Fraction(0)), "sum over ok requests"
    if key in ("duration", "max_output_tokens_per_s", "max_concurrent_requests", "request_goodput",
               "request_goodput:", "total_output_tokens_retokenized", "accept_length", "rtfx"):  # fmt: skip
        raise NotDerivable({
            "duration": "the tool's own perf_counter span of the whole run: the base of its rates, not in the records",
            "max_output_tokens_per_s": "needs per-token arrival times; the records keep chunk gaps only",
            "max_concurrent_requests": "needs the tool's own per-second accounting",
            "total_output_tokens_retokenized": "needs the generated texts and the tool's tokenizer",
        }.get(key, "needs the tool's own settings (SLOs, speculative accounting) not in the records"))
    if key in ("request_throughput", "output_throughput", "total_token_throughput", "input_throughput", "concurrency"):
        if rec.duration is None:
            raise NotDerivable("the tool's duration was not reported for this run")
        rec.need_status()
        num = {
            "request_throughput": lambda: Fraction(rec.statuses.count("ok")),
            "output_throughput": lambda: sum(rec.column("output_tokens"), Fraction(0)),
            "input_throughput": lambda: sum(rec.column("input_tokens"), Fraction(0)),
            "total_token_throughput": lambda: sum(rec.column("input_tokens") + rec.column("output_tokens"), Fraction(0)),
            "concurrency": lambda: sum(rec.column("latency_s"), Fraction(0)),
        }[key]()
        return num / rec.duration, "over the tool's own duration"
    raise NotDerivable(f"key {key!r} not known to the check")


LLMPERF_STAT = re.compile(r"results_(?P<metric>.+?)_(?P<stat>quantiles_p\d+|mean|min|max|stddev)")


def _llmperf(key: str, rec: Records) -> tuple[Fraction, str]:
    """llmperf summary: over records with error_code null, pandas quantiles, sample std (formats.md 5)."""
    rec.need_status()
    if key in ("results_mean_output_throughput_token_per_s", "results_num_completed_requests_per_min"):
        raise NotDerivable("needs llmperf's own start/end wall time of the run; the records carry no times")
    if mt := LLMPERF_STAT.fullmatch(key):
        metric = mt["metric"]
        if metric == "ttft_s":
            series = rec.column("ttft_s")
        elif metric == "end_to_end_latency_s":
            series = rec.column("latency_s")
        elif metric == "inter_token_latency_s":
            series = rec.column("itl_mean_s")
        elif metric == "number_input_tokens":
            series = rec.column("input_tokens")
        elif metric == "number_output_tokens":
            series = rec.column("output_tokens")
        elif metric == "number_total_tokens":
            series = [a + b for a, b in zip(rec.column("input_tokens"), rec.column("output_tokens"), strict=True)]
        elif metric == "request_output_throughput_token_per_s":
            raise NotDerivable(
                "llmperf divides its own streamed-token count (not number_output_tokens: on the real samples "
                "they differ by 1 to 39 tokens) by the latency; the per-record value is not kept by the importer"
            )
        else:
            raise NotDerivable(f"metric {metric!r} not known to the check")
        return _stat(series, mt["stat"], 1), "over error_code-null records, sample std, pandas linear quantiles"
    n, failed = len(rec.statuses), rec.statuses.count("failed")
    if key == "results_num_completed_requests":
        return Fraction(n - failed), "records with error_code null"
    if key == "results_number_errors":
        return Fraction(failed), "records with an error_code"
    if key == "results_num_requests_started":
        return Fraction(n), "all records"
    if key == "results_error_rate":
        return Fraction(failed, n) if n else Fraction(0), "records with an error_code / all records"
    raise NotDerivable(f"key {key!r} not known to the check")


DEFINITIONS: dict[str, Callable[[str, Records], tuple[Fraction, str]]] = {
    "vllm-bench": _serving,
    "sglang-bench": _serving,
    "llmperf": _llmperf,
}


# --------------------------------------------------------------------------- loading and the check


def _records(conn: sa.Connection, run_id: int) -> Records | str:
    """The run's records, or why there are none to recompute from."""
    caps = captures(conn, [run_id])
    if not caps:
        return "no per-request records in this run's artefacts (aggregates only)"
    sampled = [c for c in caps if c.sampled]
    if sampled:
        return f"records are a sample ({sampled[0].sample_note or 'sample_size'}): the aggregates cannot be re-derived"
    fields = set.intersection(*(c.fields for c in caps))
    rows = conn.execute(
        sa.select(Q.c.status, Q.c.input_tokens, Q.c.output_tokens, Q.c.ttft_s, Q.c.latency_s, Q.c.itl_mean_s)
        .where(Q.c.run_id == run_id).order_by(Q.c.artefact_id, Q.c.idx)
    ).all()  # fmt: skip
    gaps = [g for (g,) in conn.execute(
        sa.select(G.c.gap_s).select_from(G.join(Q, sa.and_(Q.c.artefact_id == G.c.artefact_id, Q.c.idx == G.c.request_idx)))
        .where(Q.c.run_id == run_id, Q.c.status == "ok").order_by(G.c.artefact_id, G.c.request_idx, G.c.seq))]  # fmt: skip
    duration = conn.execute(
        sa.select(PV.c.value).where(PV.c.run_id == run_id, PV.c.key == "duration", PV.c.flag == "reported")
    ).scalar()
    return Records(
        statuses=[r.status for r in rows], ok=[dict(r._mapping) for r in rows if r.status == "ok"], gaps=gaps,
        fields=fields, duration=None if duration is None else Fraction(Decimal(duration)),
    )  # fmt: skip


def check(ledger: Ledger, batch: str | None = None, run_id: int | None = None) -> list[CheckRow]:
    """Every reported value of the runs in scope: agree / disagree / not re-derivable (R15)."""
    stmt = (
        sa.select(R.c.id.label("run_id"), PV.c.run_id.label("origin"), B.c.name.label("batch"), R.c.label, R.c.tool,
                  PV.c.key, PV.c.text, PV.c.value, PV.c.unit)
        # values hang on a run's first revision (Run.origin_id); the row shown is its current revision
        .select_from(PV).join(R, sa.and_(sa.func.coalesce(R.c.origin_id, R.c.id) == PV.c.run_id, current(R)))
        .join(B, B.c.id == R.c.batch_id)
        .where(PV.c.flag == "reported", current(PV))
        .order_by(B.c.id, R.c.id, PV.c.id)
    )  # fmt: skip
    if batch is not None:
        with ledger.session() as s:
            Ledger.get_batch(s, batch)
        stmt = stmt.where(B.c.name == batch)
    if run_id is not None:
        with ledger.session() as s:
            Ledger.get_run(s, run_id)
        stmt = stmt.where(R.c.id == run_id)
    out: list[CheckRow] = []
    with ledger.connection() as conn:
        loaded: dict[int, Records | str] = {}
        for pv in conn.execute(stmt):
            row = CheckRow(pv.run_id, pv.batch, pv.label, pv.tool, pv.key, pv.text, pv.unit, None, NOT_DERIVABLE,
                           None, None)  # fmt: skip
            out.append(row)
            if pv.origin not in loaded:
                loaded[pv.origin] = _records(conn, pv.origin)
            rec = loaded[pv.origin]
            tol_unit = tolerance(pv.text)
            if pv.value is None or tol_unit is None:
                if pv.key == "results_error_code_frequency" and isinstance(rec, Records) and pv.tool == "llmperf":
                    none_failed = "failed" not in rec.statuses
                    row.status = AGREE if none_failed and pv.text == "{}" else NOT_DERIVABLE
                    row.reason = "no record has an error_code" if none_failed else "error-code text not recomputed"
                else:
                    row.reason = "printed as text, not a number"
                continue
            if isinstance(rec, str):
                row.reason = rec
                continue
            definition = DEFINITIONS.get(pv.tool or "")
            if definition is None:
                row.reason = f"recomputation by {pv.tool or 'an unknown tool'}'s own definition is not implemented"
                continue
            try:
                value, how = definition(pv.key, rec)
            except NotDerivable as exc:
                row.reason = str(exc)
                continue
            reported = Fraction(Decimal(pv.value))
            tol = max(tol_unit, REL_FLOOR * abs(reported))
            row.recomputed = float(value)
            row.tolerance = f"±{float(tol):.3g}"
            row.status = AGREE if abs(value - reported) <= tol else DISAGREE
            row.reason = how
    return out
