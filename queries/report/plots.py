"""The plots of `ledger report`, as series (the renderers draw them): throughput and latency curves per
batch, a metric's trend over sealed batches, hardware counters over time, launch timelines.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import LedgerError
from bench_ledger.queries.metrics.registry import METRICS, RunMetrics
from bench_ledger.queries.report.model import (
    NOT_FROM_RECORDS,
    PLOTTED_KINDS,
    SAMPLERS,
    Plot,
    ReportData,
    Series,
    anchor,
)
from bench_ledger.revisions import current
from bench_ledger.store import Ledger

__all__ = ["add_plots", "card_key", "hw_artefacts"]

# --------------------------------------------------------------------------- building


_R, _B, _A, _HS = (t.__table__ for t in (m.Run, m.Batch, m.Artefact, m.HardwareSample))


def hw_artefacts(conn: sa.Connection, batch: str) -> list[int]:
    has = sa.exists().where(_HS.c.artefact_id == _A.c.id)
    return [
        r[0]
        for r in conn.execute(
            sa.select(_A.c.id).join(_B, _B.c.id == _A.c.batch_id).where(_B.c.name == batch, has).order_by(_A.c.id)
        )
    ]


def card_key(card: str) -> tuple:
    node, _, gpu = card.rpartition(":gpu")
    return (node, int(gpu) if gpu.isdigit() else gpu)


# --------------------------------------------------------------------------- plots


def add_plots(ledger: Ledger, data: ReportData, rows: list[RunMetrics]) -> None:
    from bench_ledger.queries.metrics.registry import distribution_values
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
            r[0] for r in conn.execute(sa.select(_B.c.name).where(_B.c.name.in_(data.batches), _B.c.status == "closed"))
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
            arts = hw_artefacts(conn, b)
            if not arts:
                continue
            windows, why = _run_windows(conn, b)
            files = {a.id: a for a in conn.execute(sa.select(_A.c.id, _A.c.format, _A.c.note).where(_A.c.id.in_(arts)))}
            counters = [
                r[0]
                for r in conn.execute(
                    sa.select(_HS.c.counter).distinct().where(_HS.c.artefact_id.in_(arts)).order_by(_HS.c.counter)
                )
            ]
            for counter in sorted(
                (c for c in counters if kind_of(c) in PLOTTED_KINDS), key=lambda c: (PLOTTED_KINDS.index(kind_of(c)), c)
            ):
                power = kind_of(counter) == "power"
                rows = conn.execute(
                    sa.select(_HS.c.node, _HS.c.gpu, _HS.c.artefact_id, _HS.c.ts, _HS.c.value, _HS.c.unit)
                    .where(_HS.c.artefact_id.in_(arts), _HS.c.counter == counter)
                    .order_by(_HS.c.node, _HS.c.gpu, _HS.c.ts, _HS.c.tick)
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
    plot.series = [per[c] for c in sorted(per, key=card_key)]
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
        sa.select(_R.c.label, _R.c.started_at, _R.c.ended_at)
        .join(_B, _B.c.id == _R.c.batch_id)
        .where(_B.c.name == batch, current(_R))
        .order_by(_R.c.id)
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
