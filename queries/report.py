"""What `ledger report` shows, as data: tables, plot series and the evidence chain of every number.

Why a data layer of its own: the HTML page and the Markdown tables (:mod:`queries.report_render`)
must show the very same figures with the same provenance markers and n/a reasons, and each figure
must link to the chain `ledger explain` prints (metric -> runs -> requests -> artefact sha256 and
lines -> source report). So the figures are computed here once, by the metric registry
(:func:`queries.metrics.run_metrics`, :func:`queries.metrics.evaluate`) and the audit
(:class:`queries.audit.Auditor`), and the renderers only format them.

Rules kept here:

* R2: batches are never pooled. Every series belongs to one batch; the throughput plot draws each
  batch as its own series; hardware statistics are per batch.
* R9: a run whose metric is n/a has no curve or point; the plot lists it with the metric's reason.
* R13/R14: dmon ``sm`` is plotted as "GPU activity time", power per card; the three power
  statistics are shown side by side, never one for another.
* Synthetic data says so: a batch whose runs carry a ``synthetic`` metadata key or whose artefacts'
  file names say SYNTHETIC (the case-study generator does both) is labelled synthetic, as is a
  report built with ``synthetic=True`` or from a claims file marked ``synthetic: true``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import LedgerError
from bench_ledger.queries.metrics import METRICS, RunMetrics, evaluate, run_metrics
from bench_ledger.queries.values import MetricValue, Scope
from bench_ledger.revisions import current
from bench_ledger.store import Ledger, unknown

# the run-table columns: (metric, heading, number format)
RUN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("requests_ok", "ok", ",.0f"),
    ("requests_failed", "failed", ",.0f"),
    ("total_tpm", "total TPM", ",.0f"),
    ("output_tpm", "output TPM", ",.0f"),
    ("ttft_p50", "TTFT p50 s", ".4f"),
    ("ttft_p99", "TTFT p99 s", ".4f"),
    ("e2e_latency_p50", "E2E p50 s", ".4f"),
    ("per_stream_decode_rate_median", "decode tok/s per stream (median)", ",.2f"),
)
MARKERS = {"derived": "d", "reported": "r", "estimated": "e", "measured": "m"}
MARKER_LEGEND = (
    "d = derived here from the captured records; r = the tool's own figure, or computed from one (reported: the weakest input decides); "
    "e = estimated; m = measured; n/a[k] = not available, reason in footnote k"
)
# why a run's figure is in the run table but not on a distribution drawn from its per-request records
NOT_FROM_RECORDS = (
    "the run's figure is the tool's own ({flag}), not derived here from per-request records; "
    "it is in the run table, marked, and has no distribution to draw"
)
POWER_STATS = ("power_sum_of_card_means_w", "power_peak_of_sum_w", "power_sum_of_card_peaks_w")
# the per-card columns: (quantity kind, statistic, heading); each sampler's counter of that kind fills it
# (dmon pwr / sm / mem, nvidia-smi power.draw / utilization.gpu / utilization.memory, dcgmi POWER / GPUTL / MCUTL)
CARD_STATS = (
    ("power", "mean", "power mean"),
    ("power", "max", "power max"),
    ("activity_time_percent", "mean", "GPU activity time mean"),
    ("memory_busy_percent", "mean", "memory busy mean"),
)
PLOTTED_KINDS = ("power", "activity_time_percent")  # a plot over time per counter of these kinds
SAMPLERS = {
    "nvidia-smi-dmon": "nvidia-smi dmon",
    "nvidia-smi-csv": "nvidia-smi --query-gpu (CSV)",
    "dcgmi-dmon": "dcgmi dmon",
}


def figure(v: MetricValue, fmt: str, notes: dict[str, int]) -> str:
    """A value with its provenance marker ("1,840,234 d"), or n/a with a footnote number (``notes``
    maps each distinct "metric: reason" to its number, in order of first use)."""
    if v.value is None:
        k = notes.setdefault(f"{v.metric}: {v.na_reason}", len(notes) + 1)
        return f"n/a[{k}]"
    x = float(v.value)
    return f"{format(x, fmt if abs(x) >= 100 or fmt != ',.0f' else '.4g')} {MARKERS.get(v.flag, v.flag)}"


# --------------------------------------------------------------------------- typed results


@dataclass
class Evidence:
    """One numbered chain of the report: what a figure is and where it comes from."""

    id: str
    title: str
    lines: list[str]


@dataclass
class RunRow:
    batch: str
    run_id: int
    label: str
    input_target_tokens: int | None
    output_cap_tokens: int | None
    concurrency: int | None
    request_count: int | None
    values: dict[str, MetricValue]


@dataclass
class LaunchRow:
    deployment: str
    attempt: int
    outcome: str
    cause: str | None
    seconds_to_ready: MetricValue
    log: str | None  # file name and sha256 of the server log
    first_line_at: str | None  # as printed by the log (no year)
    last_line_at: str | None
    ready_at: str | None
    evidence: str = ""


@dataclass
class CardRow:
    """One card's statistics from one sampler's file (evidence: ``ev-hw-BATCH-KIND-STAT``): ``values`` and
    ``units`` keyed by ``card_column(kind, stat)``; ``source`` names the file's format and counters."""

    batch: str
    card: str
    values: dict[str, float | None]
    source: str = ""
    units: dict[str, str] = field(default_factory=dict)


def card_column(kind: str, stat: str) -> str:
    return f"{kind}-{stat}"


@dataclass
class Series:
    """One line of a plot: points (x, y) of one run or one batch; never pooled across batches."""

    label: str
    batch: str
    x: list[float]
    y: list[float]
    group: str = ""  # the panel (input tier, card kind, ...)
    # sampling intervals drawn as error bars: (position, low, high); a CDF's at the share y = position
    # (horizontal), a trend's at the point x = position (vertical)
    bars: list[tuple[float, float, float]] = field(default_factory=list)
    marks: list[float] = field(default_factory=list)  # x of the change points of a trend


@dataclass
class Plot:
    id: str
    title: str
    what: str
    unit: str
    provenance: str
    synthetic: bool
    kind: str  # cdf | tpm | timeseries | timeline | trend
    series: list[Series] = field(default_factory=list)
    windows: list[tuple[str, float, float]] = field(default_factory=list)  # (run label, start, end) on x
    missing: list[str] = field(default_factory=list)  # series left out, each with its reason
    x_label: str = ""
    y_label: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class AuditRow:
    claim_id: str
    printed: str
    unit: str | None
    verdict: str
    rule: str | None
    recomputed: str | None
    detail: str | None
    evidence: str


@dataclass
class ReportData:
    title: str
    batches: list[str]
    generated_at: datetime
    ledger_url: str
    synthetic_batches: list[str]
    runs: list[RunRow]
    launches: list[LaunchRow]
    cards: list[CardRow]
    power: dict[str, dict[str, MetricValue]]  # batch -> the three R14 statistics
    plots: list[Plot]
    audit_source: dict | None = None
    audit_synthetic: bool = False
    audit: dict[str, list[AuditRow]] = field(default_factory=dict)  # verdict -> rows, in VERDICTS order
    evidence: dict[str, Evidence] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        return bool(self.synthetic_batches) or self.audit_synthetic


# --------------------------------------------------------------------------- building


R, B, A, D, L = (t.__table__ for t in (m.Run, m.Batch, m.Artefact, m.Deployment, m.Launch))
Q, CAP, CF, HS, LF = (t.__table__ for t in (m.Request, m.Capture, m.CaptureField, m.HardwareSample, m.LogFact))


def build_report(
    ledger: Ledger,
    batches: list[str] | None = None,
    claims_file: Path | None = None,
    *,
    synthetic: bool = False,
    auditor: Any = None,
) -> ReportData:
    """Everything `ledger report` shows for the named batches (default: every batch), side by side,
    and the audit of ``claims_file`` when given (``auditor``: a :class:`queries.audit.Auditor` of
    that file already run, so its verdicts are not computed twice)."""
    from bench_ledger.store import now

    with ledger.connection() as conn:
        known = [r[0] for r in conn.execute(sa.select(B.c.name).order_by(B.c.id))]
    names = list(batches) if batches else known
    for b in names:
        if b not in known:
            with ledger.connection() as conn:
                raise unknown(conn, "batch", b)
    rows = run_metrics(ledger, names) if names else []
    data = ReportData(
        title="bench-ledger report: " + (", ".join(names) or "no batches"),
        batches=names,
        generated_at=now(),
        ledger_url=ledger.display_url,
        synthetic_batches=[b for b in names if b in _synthetic_batches(ledger)] if names else [],
        runs=[
            RunRow(
                r.batch,
                r.run_id,
                r.label,
                r.input_target_tokens,
                r.output_cap_tokens,
                r.concurrency,
                r.request_count,
                r.values,
            )
            for r in rows
        ],
        launches=[],
        cards=[],
        power={},
        plots=[],
    )
    if synthetic:
        data.synthetic_batches = list(names)
    _run_evidence(ledger, data, rows)
    _launches(ledger, data)
    _hardware(ledger, data)
    _plots(ledger, data, rows)
    if claims_file is not None:
        _audit(ledger, data, claims_file, auditor)
    return data


def _synthetic_batches(ledger: Ledger) -> set[str]:
    out: set[str] = set()
    with ledger.connection() as conn:
        for name, meta in conn.execute(sa.select(B.c.name, R.c.metadata_json).join(R, R.c.batch_id == B.c.id)):
            if meta and "synthetic" in json.loads(meta):
                out.add(name)
        for (name,) in conn.execute(
            sa.select(B.c.name).join(A, A.c.batch_id == B.c.id).where(A.c.file_name.contains("SYNTHETIC"))
        ):
            out.add(name)
    return out


def run_chain(ledger: Ledger, run_ids: list[int]) -> list[str]:
    """runs -> requests (how many, which fields) -> artefacts (sha256, lines): `ledger explain`'s steps."""
    from bench_ledger.queries.explain import records_steps

    return [s.text for s in records_steps(ledger, {"runs": run_ids}, "")]


def _run_evidence(ledger: Ledger, data: ReportData, rows: list[RunMetrics]) -> None:
    for r in rows:
        origins = next((v.run_ids for v in r.values.values() if v.run_ids), [r.run_id])
        chain = run_chain(ledger, list(origins))
        for name, mv in r.values.items():
            mt = METRICS[name]
            head = f"metric {name} over run {r.run_id} {r.label} (batch {r.batch}) = " + (
                f"{float(mv.value):.6g} {mv.unit} ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"
            )
            lines = [head, f"  formula: {mt.formula}", f"  over: {mt.interval}"]
            if mv.inputs:
                lines.append(f"  inputs: {_jsonable(mv.inputs)}")
            lines += ["  " + x for x in chain]
            data.evidence[evidence_id(r.run_id, name)] = Evidence(
                evidence_id(r.run_id, name), f"{name}, run {r.run_id} {r.label}", lines
            )


def anchor(*parts: object) -> str:
    """An id of the page (an evidence entry, a plot and the ids inside its inline SVG) built from
    ``parts``: ASCII letters, digits, ``_`` and ``-`` are kept, every other character is written as
    ``.<hex code point>.``, and the parts are joined by ``-``. Batch names, run labels, claim ids and
    the like are user text: an id never carries them raw (they would land inside attributes)."""
    return "-".join(_ANCHOR_UNSAFE.sub(lambda mo: f".{ord(mo.group()):x}.", str(p)) for p in parts)


_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def evidence_id(run_id: int | str, metric: str) -> str:
    return anchor("ev-run", run_id, metric)


def _jsonable(x: Any) -> str:
    from bench_ledger.queries.audit import jsonable

    return json.dumps(jsonable(x), ensure_ascii=False, default=str)[:600]


def _launches(ledger: Ledger, data: ReportData) -> None:
    with ledger.connection() as conn:
        q = (
            sa.select(
                L.c.id,
                L.c.attempt,
                L.c.outcome,
                L.c.cause,
                L.c.log_artefact_id,
                D.c.name.label("dep"),
                A.c.file_name,
                A.c.sha256,
            )
            .join(D, D.c.id == L.c.deployment_id)
            .outerjoin(A, A.c.id == L.c.log_artefact_id)
            .where(current(L))
            .order_by(D.c.id, L.c.attempt)
        )
        launches = conn.execute(q).all()
        stamps: dict[int, list] = defaultdict(list)
        ids = [x.log_artefact_id for x in launches if x.log_artefact_id is not None]
        if ids:
            for aid, kind, at, line in conn.execute(
                sa.select(LF.c.artefact_id, LF.c.kind, LF.c.logged_at, LF.c.line)
                .where(LF.c.artefact_id.in_(ids), LF.c.logged_at.is_not(None))
                .order_by(LF.c.artefact_id, LF.c.line)
            ):
                stamps[aid].append((kind, at, line))
    for x in launches:
        mv = evaluate(ledger, "seconds_to_ready", Scope(deployment=x.dep, launch=x.attempt))
        facts = stamps.get(x.log_artefact_id, [])
        at = sorted(f[1] for f in facts)
        ready = next((f[1] for f in facts if f[0] == "ready"), None)
        data.launches.append(
            LaunchRow(
                x.dep,
                x.attempt,
                x.outcome,
                x.cause,
                mv,
                f"{x.file_name} sha256 {x.sha256}" if x.file_name else None,
                at[0] if at else None,
                at[-1] if at else None,
                ready,
                anchor("ev-launch", x.id),
            )
        )
        lines = [
            f"launch {x.attempt} of {x.dep}: outcome {x.outcome} (declared)" + (f"; {x.cause}" if x.cause else ""),
            "metric seconds_to_ready = "
            + (f"{float(mv.value):g} s ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"),
            f"  formula: {METRICS['seconds_to_ready'].formula}",
        ]
        if mv.inputs:
            lines.append(f"  inputs: {_jsonable(mv.inputs)}")
        if x.file_name:
            lines.append(
                f"  artefact {x.log_artefact_id} {x.file_name} [vllm-server-log] sha256 {x.sha256}"
                + (f", timestamped lines {facts[0][2]}-{facts[-1][2]}" if facts else "")
            )
        else:
            lines.append("  no server log linked to this launch")
        eid = anchor("ev-launch", x.id)
        data.evidence[eid] = Evidence(eid, f"launch {x.attempt} of {x.dep}", lines)


def _hw_artefacts(conn: sa.Connection, batch: str) -> list[int]:
    has = sa.exists().where(HS.c.artefact_id == A.c.id)
    return [
        r[0]
        for r in conn.execute(
            sa.select(A.c.id).join(B, B.c.id == A.c.batch_id).where(B.c.name == batch, has).order_by(A.c.id)
        )
    ]


def _hardware(ledger: Ledger, data: ReportData) -> None:
    for b in data.batches:
        with ledger.connection() as conn:
            if not _hw_artefacts(conn, b):
                continue
        scope = Scope(batch=b)
        data.power[b] = {s: evaluate(ledger, s, scope) for s in POWER_STATS}
        for s, mv in data.power[b].items():
            eid = anchor("ev-hw", b, s)
            data.evidence[eid] = Evidence(eid, f"{s}, batch {b}", _hw_lines(ledger, mv, s, b))
        data.cards += _card_rows(ledger, data, b)


def _card_rows(ledger: Ledger, data: ReportData, batch: str) -> list[CardRow]:
    """One row per card and sampler file: each card's own statistics of every sampler's counters (never
    pooled across cards, R13/R14); a file with two counters of one kind (power.draw, power.draw.instant)
    gives a row per counter, since they are different quantities (R14)."""
    from bench_ledger.counters import meaning_of
    from bench_ledger.queries.captured import hardware_view

    kinds = {k for k, _, _ in CARD_STATS}
    by: dict[tuple[str, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for c in hardware_view(ledger, batch).cards:
        if c.quantity_kind in kinds:
            by[(c.card, c.artefact)][c.quantity_kind].append(c)
    rows: list[CardRow] = []
    lines: dict[str, list[str]] = defaultdict(list)
    meanings: dict[str, list[str]] = defaultdict(list)
    for (card, art), counters in sorted(by.items(), key=lambda kv: (_card_key(kv[0][0]), kv[0][1])):
        for i in range(max(len(v) for v in counters.values())):
            chosen = {k: v[i] for k, v in counters.items() if i < len(v)}
            fmt = next(iter(chosen.values())).format
            row = CardRow(
                batch, card, {}, f"{fmt}, artefact {art}: " + ", ".join(sorted({x.counter for x in chosen.values()}))
            )
            for kind, stat, _ in CARD_STATS:
                if kind not in chosen:
                    continue
                c = chosen[kind]
                col = card_column(kind, stat)
                row.values[col], row.units[col] = (c.mean if stat == "mean" else c.max), c.unit
                exact = f" (exact mean {c.exact_mean})" if stat == "mean" and c.exact_mean else ""
                lines[col].append(
                    f"  card {card}: {row.values[col]} {c.unit}{exact} of counter {c.counter!r} over {c.values} "
                    f"values of {c.samples} samples; artefact {art} [{fmt}] lines {c.lines}"
                )
                meaning = (
                    f"  {c.counter!r} ({SAMPLERS.get(fmt, fmt)}): {meaning_of(c.counter) or 'no meaning recorded'}"
                )
                if meaning not in meanings[col]:
                    meanings[col].append(meaning)
            rows.append(row)
    for kind, stat, heading in CARD_STATS:
        eid = anchor("ev-hw", batch, card_column(kind, stat))
        head = [
            f"{heading}, batch {batch}: the {stat} of each card's own samples of one counter of kind {kind!r}, in "
            "its unit as printed; cards are never pooled (R13, R14); counters:"
        ]
        col = card_column(kind, stat)
        data.evidence[eid] = Evidence(
            eid, f"{heading} per card, batch {batch}", head + meanings[col] + (lines[col] or ["  none sampled"])
        )
    return rows


def _card_key(card: str) -> tuple:
    node, _, gpu = card.rpartition(":gpu")
    return (node, int(gpu) if gpu.isdigit() else gpu)


def _hw_lines(ledger: Ledger, mv: MetricValue, name: str, batch: str) -> list[str]:
    from bench_ledger.queries.explain import records_steps

    head = f"metric {name} over {mv.scope.describe()}" + (f" card {mv.scope.gpu}" if mv.scope.gpu else "") + " = "
    head += f"{float(mv.value):.6g} {mv.unit} ({mv.flag})" if mv.value is not None else f"n/a ({mv.na_reason})"
    lines = [head, f"  formula: {METRICS[name].formula}"]
    if mv.inputs:
        lines.append(f"  inputs: {_jsonable(mv.inputs)}")
    return lines + ["  " + s.text for s in records_steps(ledger, mv.inputs, "")]


# --------------------------------------------------------------------------- plots


def _plots(ledger: Ledger, data: ReportData, rows: list[RunMetrics]) -> None:
    from bench_ledger.queries.metrics import distribution_values
    from bench_ledger.queries.stats.read import add_intervals

    syn = set(data.synthetic_batches)
    add_intervals(ledger, rows)
    for metric, what in (("ttft_p50", "time to first token"), ("e2e_latency_p50", "end-to-end latency")):
        for b in data.batches:
            mine = [r for r in rows if r.batch == b]
            if not mine:
                continue
            plot = Plot(
                anchor("cdf", metric.split("_p50")[0], b),
                f"{what.capitalize()} per run, batch {b} (CDF)",
                f"cumulative share of the ok requests of each run whose {what} is at most x; one line per run",
                "s",
                "derived here from the per-request records (the same population as "
                f"{metric}: {METRICS[metric].interval})",
                b in syn,
                "cdf",
                x_label=f"{what} (s)",
                y_label="share of requests",
            )
            plot.notes.append(
                "error bars: each run's 95% sampling interval of its p50 and p99, where its sample "
                "supports one (docs/statistics.md)"
            )
            for r in mine:
                mv = r.values[metric]
                if mv.value is None:
                    plot.missing.append(f"run {r.run_id} {r.label}: n/a: {mv.na_reason}")
                    continue
                if mv.flag != "derived":
                    plot.missing.append(f"run {r.run_id} {r.label}: n/a: {NOT_FROM_RECORDS.format(flag=mv.flag)}")
                    continue
                xs = distribution_values(ledger, metric, mv.run_ids)
                n = len(xs)
                base = metric.removesuffix("_p50")
                bars = [
                    (p / 100, si.low, si.high)
                    for p in (50, 99)
                    if (si := r.sampling.get(f"{base}_p{p}")) is not None and si.low is not None and si.high is not None
                ]
                plot.series.append(
                    Series(
                        f"{r.label}",
                        b,
                        xs,
                        [(i + 1) / n for i in range(n)],
                        group=_tier(r.input_target_tokens),
                        bars=bars,
                    )
                )
            data.plots.append(plot)
    for metric, what in (("total_tpm", "total TPM"), ("output_tpm", "output TPM")):
        plot = Plot(
            anchor("tpm", metric),
            f"{what} against concurrency, per input tier",
            f"{what} of each run (60 x tokens / the run's common wall clock, R3) against its concurrency; "
            "one panel per input target, one series per batch and output cap (batches never pooled, R2)",
            "tokens/min",
            "derived here from the per-request records of each run; a series marked "
            "'reported' is computed from the tool's own figures (its duration or throughput, R15)",
            any(b in syn for b in data.batches),
            "tpm",
            x_label="concurrency",
            y_label=f"{what} (tokens/min)",
        )
        plot.notes.append(
            "no error bars: a run's TPM is one run-level rate, whose variation shows only across "
            "repeated runs (ledger compare --stats)"
        )
        groups: dict[tuple, list[RunMetrics]] = defaultdict(list)
        for r in rows:
            mv = r.values[metric]
            if mv.value is None or r.concurrency is None:
                why = mv.na_reason if mv.value is None else "no concurrency declared"
                plot.missing.append(f"run {r.run_id} {r.label} (batch {r.batch}): n/a: {why}")
                continue
            groups[(r.input_target_tokens, r.batch, r.output_cap_tokens, mv.flag)].append(r)
        order = sorted(groups.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1], kv[0][2] or 0, kv[0][3]))
        for (tier, b, cap, flag), rs in order:
            rs.sort(key=lambda r: r.concurrency or 0)
            mark = "" if flag == "derived" else f" ({flag}: the tool's figures)"
            plot.series.append(
                Series(
                    f"batch {b}, out cap {cap if cap is not None else '?'}{mark}",
                    b,
                    [float(r.concurrency or 0) for r in rs],
                    [float(r.values[metric].value or 0) for r in rs],
                    group=_tier(tier),
                )
            )
        data.plots.append(plot)
    _trend_plot(ledger, data)
    _hardware_plots(ledger, data)
    _timeline_plot(data)


def _trend_plot(ledger: Ledger, data: ReportData, metric: str = "ttft_p50") -> None:
    """The metric over the report's sealed batches, one series per comparability key, with its change points."""
    from bench_ledger.queries.stats.runs import trend

    with ledger.connection() as conn:
        sealed = [
            r[0] for r in conn.execute(sa.select(B.c.name).where(B.c.name.in_(data.batches), B.c.status == "closed"))
        ]
    if len(sealed) < 2:
        return
    try:
        series = [t for t in trend(ledger, metric, batches=tuple(sealed)) if len(t.points) > 1]
    except LedgerError:
        return
    if not series:
        return
    plot = Plot(
        f"trend-{metric}",
        f"{metric} over the sealed batches, per comparability key",
        f"{metric} of each run of one comparability key, in the order the batches were sealed, with its 95% "
        "sampling interval; dashed lines: change points (ruptures PELT, docs/statistics.md); keys never pooled",
        METRICS[metric].unit,
        "derived here from the per-request records of each run",
        any(b in data.synthetic_batches for b in sealed),
        "trend",
        x_label="point (batch order)",
        y_label=f"{metric} ({METRICS[metric].unit})",
    )
    for t in series:
        pts = [(i + 1, p) for i, p in enumerate(t.points) if p.value is not None]
        plot.series.append(
            Series(
                f"key {t.key[:12]}",
                ", ".join(sorted({p.batch for p in t.points})),
                [float(i) for i, _ in pts],
                [float(p.value or 0) for _, p in pts],
                bars=[(float(i), p.low, p.high) for i, p in pts if p.low is not None and p.high is not None],
                marks=[float(c.index + 1) for c in t.changes or []],
            )
        )
        plot.notes.append(
            f"key {t.key[:12]}: "
            + (
                f"insufficient data ({t.reason})"
                if t.changes is None
                else f"{len(t.changes)} change point(s)"
                + "".join(
                    f"; at point {c.index + 1} (batch {t.points[c.index].batch}) {c.before:.4g} -> {c.after:.4g}"
                    for c in t.changes
                )
            )
        )
    data.plots.append(plot)


def _tier(tokens: int | None) -> str:
    if tokens is None:
        return "input target n/a"
    return f"input {tokens // 1000}K" if tokens >= 1000 and tokens % 1000 == 0 else f"input {tokens}"


def _hardware_plots(ledger: Ledger, data: ReportData) -> None:
    from bench_ledger.counters import kind_of, meaning_of
    from bench_ledger.records import UNCONFIRMED_ZONE

    for b in data.batches:
        with ledger.connection() as conn:
            arts = _hw_artefacts(conn, b)
            if not arts:
                continue
            windows, why = _run_windows(conn, b)
            files = {a.id: a for a in conn.execute(sa.select(A.c.id, A.c.format, A.c.note).where(A.c.id.in_(arts)))}
            counters = [
                r[0]
                for r in conn.execute(
                    sa.select(HS.c.counter).distinct().where(HS.c.artefact_id.in_(arts)).order_by(HS.c.counter)
                )
            ]
            for counter in sorted(
                (c for c in counters if kind_of(c) in PLOTTED_KINDS), key=lambda c: (PLOTTED_KINDS.index(kind_of(c)), c)
            ):
                power = kind_of(counter) == "power"
                rows = conn.execute(
                    sa.select(HS.c.node, HS.c.gpu, HS.c.artefact_id, HS.c.ts, HS.c.value, HS.c.unit)
                    .where(HS.c.artefact_id.in_(arts), HS.c.counter == counter)
                    .order_by(HS.c.node, HS.c.gpu, HS.c.ts, HS.c.tick)
                ).all()
                mine = sorted({r.artefact_id for r in rows})
                samplers = ", ".join(sorted({SAMPLERS.get(files[a].format, files[a].format) for a in mine}))
                local = {a for a in mine if UNCONFIRMED_ZONE in (files[a].note or "")}
                # host-local times of an unknown zone and UTC times are two clocks: never one axis
                for part, zoned in ((sorted(set(mine) - local), True), (sorted(local), False)):
                    if part:
                        _hardware_plot(
                            data,
                            b,
                            counter,
                            power,
                            [r for r in rows if r.artefact_id in part],
                            part,
                            samplers,
                            meaning_of(counter),
                            zoned,
                            windows,
                            why,
                            "" if zoned or len(part) == len(mine) else "-local",
                        )


def _hardware_plot(
    data: ReportData,
    b: str,
    counter: str,
    power: bool,
    rows: list,
    arts: list[int],
    samplers: str,
    meaning: str | None,
    zoned: bool,
    windows: list,
    why: str | None,
    suffix: str,
) -> None:
    """One counter's samples per card over time; ``zoned``: their times are UTC (else host-local, zone unconfirmed)."""
    units = sorted({r.unit for r in rows})
    clock = "UTC" if zoned else "host local time as printed, time zone unconfirmed"
    plot = Plot(
        anchor("hw", counter, b) + suffix,
        f"{'Power' if power else 'GPU activity time'} per card over time ({counter}), batch {b}",
        f"{meaning or counter} of each card as sampled by {samplers}, one line per card",
        "/".join(units) or "unit n/a",
        f"measured: {samplers} samples of artefacts {arts} (counter {counter!r}, unit as printed)",
        b in data.synthetic_batches,
        "timeseries",
        x_label=f"time ({clock}; s from the first sample)",
        y_label=f"{counter} ({'/'.join(units) or 'unit n/a'})",
    )
    untimed = [r for r in rows if r.ts is None]
    if untimed:
        plot.missing.append(
            f"{len(untimed)} samples without a timestamp (the sampler printed none: dmon without -o DT, "
            "dcgmi dmon without --start and --interval): not placed in time"
        )
    timed = [r for r in rows if r.ts is not None and r.value is not None]
    data.plots.append(plot)
    if not timed:
        return
    t0 = min(r.ts for r in timed)
    per: dict[str, Series] = {}
    for r in timed:
        card = f"{r.node}:gpu{r.gpu}" if r.node else f"artefact{r.artefact_id}:gpu{r.gpu}"
        s = per.setdefault(card, Series(card, b, [], [], group=r.node or ""))
        s.x.append((r.ts - t0).total_seconds())
        s.y.append(float(r.value))
    plot.series = [per[c] for c in sorted(per, key=_card_key)]
    plot.notes.append(f"t = 0 is {t0.isoformat(sep=' ')} {'UTC' if zoned else '(' + clock + ')'}")
    if not zoned:
        why = "the samples' times are host-local of an unconfirmed time zone (import them with --time-zone)" + (
            f"; and {why}" if why else ""
        )
    else:
        plot.windows = [(label, (s - t0).total_seconds(), (e - t0).total_seconds()) for label, s, e in windows]
    if plot.windows:
        plot.notes.append("shaded: each run's wall-clock window, labelled with the run")
    if why:
        plot.missing.append(f"run windows not marked: {why}")


def _run_windows(conn: sa.Connection, batch: str) -> tuple[list[tuple[str, datetime, datetime]], str | None]:
    """Each run's wall-clock window, where the run has one (declared or read from its file); else why not."""
    runs = conn.execute(
        sa.select(R.c.label, R.c.started_at, R.c.ended_at)
        .join(B, B.c.id == R.c.batch_id)
        .where(B.c.name == batch, current(R))
        .order_by(R.c.id)
    ).all()
    out = [(r.label, r.started_at, r.ended_at) for r in runs if r.started_at is not None and r.ended_at is not None]
    if len(out) == len(runs):
        return out, None
    none = len(runs) - len(out)
    return out, (
        f"{none} of {len(runs)} runs have no wall-clock start and end (their files give none; request "
        "times on a monotonic clock cannot be placed against dmon's wall clock, and are not guessed)"
    )


def _timeline_plot(data: ReportData) -> None:
    if not data.launches:
        return
    plot = Plot(
        "launch-timeline",
        "Launch timeline",
        "each engine start attempt, in order, from its first to its "
        "last timestamped log line read (each bar starts at 0; the label gives the log time of its first "
        "line), coloured by declared outcome, with a mark at the READY line; a bar is the span of the log "
        "lines read, a lower bound of the attempt's duration",
        "minutes (log clock)",
        "measured: timestamps of the server-log lines read by the vllm-server-log importer; "
        "outcome declared in the manifest",
        data.synthetic,
        "timeline",
        x_label="log time (the log prints no year)",
        y_label="launch",
    )
    for x in data.launches:
        label = f"{x.deployment} #{x.attempt} ({x.outcome})"
        if x.first_line_at is not None:
            label += f" {x.first_line_at}"
        if x.first_line_at is None:
            plot.missing.append(
                f"{label}: no timestamped line read from its log" if x.log else f"{label}: no log linked"
            )
            continue
        ts = [_log_time(t) for t in (x.first_line_at, x.last_line_at, x.ready_at or x.last_line_at)]
        t0, t1, t2 = ts
        if t0 is None or t1 is None or t2 is None:
            plot.missing.append(
                f"{label}: log timestamps {x.first_line_at!r}..{x.last_line_at!r} not in 'MM-DD HH:MM:SS'"
            )
            continue
        plot.series.append(Series(label, x.deployment, [t0, t1], [1.0 if x.ready_at else 0.0, t2], group=x.outcome))
    data.plots.append(plot)


def _log_time(text: str | None) -> float | None:
    """vLLM's 'MM-DD HH:MM:SS' as seconds in a year (the log prints none; only the order is used)."""
    if text is None:
        return None
    try:
        t = datetime.strptime("2000-" + text.strip(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return (t - datetime(2000, 1, 1)).total_seconds()


# --------------------------------------------------------------------------- audit


def _audit(ledger: Ledger, data: ReportData, claims_file: Path, auditor: Any = None) -> None:
    from bench_ledger.queries.audit import Auditor
    from bench_ledger.queries.claims import VERDICTS, load_claims
    from bench_ledger.queries.explain import claim_steps, source_step

    if auditor is None:
        auditor = Auditor(load_claims(claims_file), ledger)
    claims = auditor.file
    report = auditor.run()
    data.audit_source = report.source_report
    data.audit_synthetic = report.synthetic
    for verdict in VERDICTS:
        rows = [r for r in report.results if r.verdict == verdict]
        if rows:
            data.audit[verdict] = [
                AuditRow(
                    r.claim_id,
                    r.text,
                    r.unit,
                    r.verdict,
                    r.rule,
                    r.recomputed,
                    r.why or r.missing or r.margin or "; ".join(r.notes) or None,
                    anchor("ev-claim", r.claim_id),
                )
                for r in rows
            ]
    source = source_step(claims, ledger, claims_file)
    for r in report.results:
        steps = [*claim_steps(auditor, r.claim_id), source]
        data.evidence[anchor("ev-claim", r.claim_id)] = Evidence(
            anchor("ev-claim", r.claim_id), f"claim {r.claim_id}", [s.text for s in steps]
        )
