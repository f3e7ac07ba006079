"""Commands that read a ledger: batches, runs, show, metrics, check, compare."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    exit_on,
    json_option,
    main,
    parse_fail_on,
    prose,
    table,
    wide_option,
    with_ledger,
)
from bench_ledger.vocab import RUN_FACTORS


def _confidence(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 < value < 1:
        raise click.BadParameter(f"{value} is not between 0 and 1 (e.g. 0.95)")
    return value


confidence_option = click.option(
    "--confidence",
    type=float,
    default=0.95,
    show_default=True,
    callback=_confidence,
    help="Confidence level of the sampling intervals.",
)

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger


@main.command()
@with_ledger
@json_option
@wide_option
def batches(ledger: Ledger, as_json: bool) -> None:
    """List batches with their status and how many runs, requests and artefacts they hold.

    \b
    Example:
      ledger batches --json
    """
    from bench_ledger.queries.catalog import list_batches, to_json

    rows = [b.as_dict() for b in list_batches(ledger)]
    if as_json:
        click.echo(to_json(rows))
    else:
        table(rows, ["id", "name", "status", "deployment", "runs", "requests", "artefacts", "closed_at"])


RUN_COLUMNS = [
    "id",
    "batch",
    "label",
    "tool",
    "input_target_tokens",
    "output_cap_tokens",
    "concurrency",
    "request_count",
    "requests",
    "artefacts",
]


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option(
    "--column",
    "columns",
    metavar="NAME",
    multiple=True,
    type=click.Choice(RUN_COLUMNS + [f for f in RUN_FACTORS if f not in RUN_COLUMNS]),
    help="Also show this column: a factor the run's files state (model, tp, hardware...) or a run column (repeatable).",
)
@click.option(
    "--as-of", "as_of", type=click.DateTime(), help="As the ledger stood then (UTC): latest revisions recorded by then."
)
@json_option
@wide_option
def runs(ledger: Ledger, batches: tuple[str, ...], columns: tuple[str, ...], as_of, as_json: bool) -> None:
    """List runs (load points), optionally of some batches (each row names its batch). A factor column
    shows what the run's files state (n/a: they do not); --json carries every factor and where it
    was read.

    \b
    Example:
      ledger runs --batch fx --batch m17
      ledger runs --column model --column tp
      ledger runs --as-of 2026-07-08T12:00:00
    """
    from bench_ledger.queries.catalog import list_runs, to_json

    rows = [r.as_dict() for b in each_batch(batches) for r in list_runs(ledger, b, as_of)]
    if as_json:
        click.echo(to_json(rows))
    else:
        extra = [c for c in dict.fromkeys(columns) if c not in RUN_COLUMNS]
        table(
            [{**r, **{c: r["factors"][c]["value"] if c in r["factors"] else "n/a" for c in extra}} for r in rows],
            RUN_COLUMNS + extra,
        )


@main.group()
def show() -> None:
    """Show one entity in detail."""


SHOW_RUN_SECTIONS = ("run", "artefacts", "reported")
SHOW_LIMIT = 40  # reported values `show run` prints unless --limit says otherwise


@show.command("run")
@with_ledger
@click.argument("run_id", type=int)
@click.option(
    "--section",
    "sections",
    type=click.Choice(SHOW_RUN_SECTIONS),
    multiple=True,
    help="Only this part (repeatable): run (workload, warm state, launch), artefacts (captures and their "
    "fields), reported (the tool's values) [default: all].",
)
@click.option("--key", "key", metavar="GLOB", help="Only reported values whose key matches (e.g. '*ttft*').")
@click.option(
    "--limit",
    "limit",
    type=click.IntRange(min=0),
    default=SHOW_LIMIT,
    show_default=True,
    help="Reported values printed at most; 0 prints all (a guidellm file reports thousands).",
)
@json_option
def show_run(
    ledger: Ledger, run_id: int, sections: tuple[str, ...], key: str | None, limit: int, as_json: bool
) -> None:
    """Show a run: workload, warm state, requests and captured fields, the tool's reported aggregates.

    The reported values are listed up to --limit, and a last line says how many were left out;
    --key and --section narrow the listing. --json prints everything.

    \b
    Example:
      ledger show run 3
      ledger show run 3 --section reported --key '*ttft*' --limit 0
    """
    from bench_ledger.queries.catalog import run_detail, to_json

    d = run_detail(ledger, run_id)
    if as_json:
        click.echo(to_json(d.as_dict()))
        return
    r = d.run
    wanted = set(sections or SHOW_RUN_SECTIONS)
    click.echo(f"run {r.id}  {r.label}  (batch {r.batch}, deployment {d.deployment or 'n/a'})")
    if "run" in wanted:
        _show_run_summary(d)
    if "artefacts" in wanted:
        _show_run_captures(d)
    if "reported" in wanted:
        _show_run_reported(d, key, limit)


def _show_run_summary(d) -> None:
    r = d.run
    click.echo(
        f"  tool: {r.tool or 'n/a'}   dataset: {d.dataset or 'n/a'}   seed: {d.seed if d.seed is not None else 'n/a'}"
    )
    click.echo(
        f"  workload: input target {r.input_target_tokens or 'n/a'} tokens, output cap {r.output_cap_tokens or 'n/a'}"
        f" tokens, C {r.concurrency or 'n/a'}, N {r.request_count or 'n/a'}, rate {d.request_rate or 'n/a'}"
    )
    click.echo("  warm state: " + ", ".join(f"{k} {v}" for k, v in d.warm.items()))
    if d.factors:
        click.echo("  stated by its files:")
        for k, f in d.factors.items():
            click.echo(f"    {k:<14} {f['value']}  ({f['at']})")
    la = d.launch
    click.echo(
        f"  launch: {la['deployment']}#{la['attempt']} ({la['label']})" if la else f"  launch: n/a ({d.launch_reason})"
    )
    click.echo(f"  compile cache (measured): {d.warm_compile_measured or 'unknown'} ({d.warm_compile_basis})")
    sc = d.status_counts
    click.echo(f"  requests: {r.requests} ({sc['ok']} ok, {sc['failed']} failed, {sc['unknown']} unknown)")


def _show_run_captures(d) -> None:
    for c in d.captures:
        click.echo(f"  artefact {c.artefact_id} {c.file_name} [{c.format}] sha256 {c.sha256[:12]}…")
        click.echo(f"    records: {c.record_count}{'  (SAMPLED: ' + (c.sample_note or '') + ')' if c.sampled else ''}")
        if c.record_count:
            click.echo(f"    fields captured: {', '.join(c.fields) or 'none'}")
            click.echo(f"    not captured (n/a): {', '.join(c.missing) or 'none'}")
            click.echo(f"    clock: {c.clock or 'no times'}   tokens: {c.token_source}")
            click.echo(f"    success: {c.success_rule}")


def _show_run_reported(d, key: str | None, limit: int) -> None:
    from fnmatch import fnmatchcase

    matching = [p for p in d.published if key is None or fnmatchcase(p.key, key)]
    if not d.published:
        return
    shown = matching[:limit] if limit else matching
    what = f" matching {key!r}" if key is not None else ""
    click.echo(f"  reported by the tool (as printed, not recomputed here): {len(matching):,}{what}")
    width = max((len(p.key) for p in shown), default=0)
    for p in shown:
        text = p.text if p.flag != "n/a" else f"n/a ({p.na_reason})"
        click.echo(f"    {p.key:<{width}}  {text} {p.unit or ''}".rstrip())
    if len(shown) < len(matching):
        click.echo(
            f"  ... {len(matching) - len(shown):,} more reported values{what} left out (--limit {limit}); "
            "--limit 0 prints all, --key GLOB picks some, --json prints everything"
        )


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (value, flag and reason per metric).")
@click.option("--list", "as_list", is_flag=True, help="List every registered metric (name, unit, quantity kind).")
@wide_option
@click.option(
    "--ci", "with_ci", is_flag=True, help="Also show each statistic's sampling interval (docs/statistics.md)."
)
@confidence_option
def metrics(
    ledger: Ledger,
    batches: tuple[str, ...],
    run_id: int | None,
    as_json: bool,
    as_csv: bool,
    as_list: bool = False,
    with_ci: bool = False,
    confidence: float = 0.95,
) -> None:
    """One row per run: workload settings, total and output TPM, TTFT p50, each with its provenance.

    Rows of several batches are shown side by side, each labelled with its batch; nothing is
    totalled or pooled across runs or batches (R2). `--list` lists the metrics a claims file
    can name. `--ci` adds a table of sampling intervals (percentiles: order statistics over the
    effective sample size; means: Student's t); `--json` always carries them.

    \b
    Example:
      ledger metrics --batch fx --batch m17
      ledger metrics --batch m17 --ci --confidence 0.9
      ledger metrics --list
    """
    import csv

    from bench_ledger.queries.metrics.registry import list_metrics, run_metrics
    from bench_ledger.queries.report.model import figure as _cell

    if as_list:
        described = list_metrics()
        if as_json:
            click.echo(json.dumps(described, indent=2))
        else:
            table(described, ["name", "unit", "quantity_kind", "statistic", "family"])
        return

    rows = run_metrics(ledger, list(batches) or None, run_id)
    if as_json or with_ci:
        from bench_ledger.queries.stats.read import add_intervals

        add_intervals(ledger, rows, confidence)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    if as_csv:
        flat = [r.flat() for r in rows]
        writer = csv.DictWriter(sys.stdout, fieldnames=list(flat[0]) if flat else ["run_id"])
        writer.writeheader()
        writer.writerows(flat)
        return
    notes: dict[str, int] = {}
    out = []
    for r in rows:
        v = r.values
        out.append(
            {
                "batch": r.batch,
                "run": f"{r.run_id} {r.label}",
                "in/out": f"{r.input_target_tokens or '?'} / {r.output_cap_tokens or '?'}",
                "C/N": f"{r.concurrency or '?'} / {r.request_count or '?'}",
                "ok/failed": f"{_cell(v['requests_ok'], ',.0f', notes)} / {_cell(v['requests_failed'], ',.0f', notes)}",
                "total TPM": _cell(v["total_tpm"], ",.0f", notes),
                "output TPM": _cell(v["output_tpm"], ",.0f", notes),
                "TTFT p50 s": _cell(v["ttft_p50"], ".4f", notes),
            }
        )
    table(out, ["batch", "run", "in/out", "C/N", "ok/failed", "total TPM", "output TPM", "TTFT p50 s"])
    shown = sorted({r.batch for r in rows})
    if len(shown) > 1:
        click.echo(f"{len(shown)} batches side by side ({', '.join(shown)}): nothing is pooled across batches (R2)")
    prose(
        "d = derived here from the captured records; r = the tool's own figure, or computed from one (reported: the weakest input decides); "
        "in/out = input target / output cap (settings, not actual lengths, R3); C/N = concurrency / requests"
    )
    for text, k in notes.items():
        click.echo(f"[{k}] n/a: {text}")
    if with_ci:
        ci = [
            {
                "batch": r.batch,
                "run": f"{r.run_id} {r.label}",
                "metric": name,
                "estimate": f"{si.estimate:.4g}",
                f"{confidence:.0%} interval": si.text() if si.status == "interval" else si.status,
                "n": si.n,
                "n_eff": f"{si.n_effective:.0f}",
                "reason": si.reason or "",
            }
            for r in rows
            for name, si in r.sampling.items()
            if si.status != "n/a"
        ]
        click.echo("")
        table(
            ci,
            ["batch", "run", "metric", "estimate", f"{confidence:.0%} interval", "n", "n_eff", "reason"],
            title="== sampling intervals (n_eff: effective requests, queueing makes neighbours alike)",
        )
        skipped: dict[str, set[str]] = {}
        for r in rows:
            for name, si in r.sampling.items():
                if si.status == "n/a" and r.values[name].value is not None:
                    skipped.setdefault(si.reason or "", set()).add(name)
        for reason, names in skipped.items():
            click.echo(f"no sampling interval for {', '.join(sorted(names))}: {reason}")


CHECK_OUTCOMES = ("agree", "disagree", "not-re-derivable")  # --fail-on names ("not re-derivable" as one word)


def each_batch(batches: tuple[str, ...]) -> list[str | None]:
    """The batches named by a repeatable --batch, each once, in the order given; none: all (None)."""
    return list(dict.fromkeys(batches)) or [None]


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@click.option(
    "--fail-on",
    "fail_on",
    metavar="STATUS,...",
    default="",
    help="Exit 1 when one of these occurs: agree, disagree, not-re-derivable.",
)
@json_option
@wide_option
def check(ledger: Ledger, batches: tuple[str, ...], run_id: int | None, fail_on: str, as_json: bool) -> None:
    """Check what the tools reported, by each tool's own definitions (R15).

    Two sections. "recomputed from records": each reported value recomputed from the run's
    per-request records by the tool's statistic definition (named in the "definition" column:
    numpy-linear, pandas-linear, guidellm-inverted-cdf...), or not re-derivable with the reason
    (aggregates only, sampled records, field not captured...). "internal identities": the tool's
    own summary identities over its reported values (output_throughput = total_output_tokens /
    duration, median = p50, avg x count = sum...). Agreement is within the printed precision.

    \b
    Example:
      ledger check --batch fx --fail-on disagree
    """
    from bench_ledger.queries.check.checker import check as do_check
    from bench_ledger.queries.check.core import IDENTITY, RECORDS

    wanted = parse_fail_on(fail_on, CHECK_OUTCOMES)
    rows = [r for b in each_batch(batches) for r in do_check(ledger, b, run_id)]
    found: dict[str, list[str]] = {}
    for r in rows:
        found.setdefault(r.status.replace(" ", "-"), []).append(f"run {r.run_id} {r.key}")
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        exit_on(wanted, found, "reported value(s)")
        return
    show = [
        {**r.as_dict(), "run": f"{r.run_id}", "recomputed": "" if r.recomputed is None else repr(r.recomputed)}
        for r in rows
    ]
    statuses = ("agree", "disagree", "not re-derivable")
    for section, title, cols in (
        (
            RECORDS,
            "recomputed from records",
            ["batch", "run", "key", "reported", "recomputed", "tolerance", "status", "definition", "reason"],
        ),
        (
            IDENTITY,
            "internal identities",
            ["batch", "run", "key", "reported", "recomputed", "tolerance", "status", "definition"],
        ),
    ):
        part = [r for r in show if r["section"] == section]
        if section == IDENTITY and not part:
            continue
        table(part, cols, title=f"== {title}", fold=("reason", "definition", "tolerance", "recomputed"))
        counts = {st: sum(r["status"] == st for r in part) for st in statuses}
        click.echo(f"{title}: " + ", ".join(f"{n} {st}" for st, n in counts.items()))
        click.echo("")
    counts = {st: sum(r.status == st for r in rows) for st in statuses}
    click.echo(", ".join(f"{n} {st}" for st, n in counts.items()))
    exit_on(wanted, found, "reported value(s)")


@main.command()
@with_ledger
@click.argument("a")
@click.argument("b")
@click.option("--metric", metavar="M", help="Also give B / A of this metric, labelled with what differs.")
@click.option(
    "--attribute-to", "claim_factor", metavar="FACTOR", help="Claim the difference is due to FACTOR (R6, R8)."
)
@click.option("--equal-resources", is_flag=True, help="Claim an equal-resource comparison (R6).")
@click.option("--paired", is_flag=True, help="Claim a per-request paired comparison (R6).")
@click.option(
    "--stats",
    "with_stats",
    is_flag=True,
    help="Per metric: is the difference beyond sampling error (docs/statistics.md)?",
)
@confidence_option
@json_option
@wide_option
def compare(
    ledger: Ledger,
    a: str,
    b: str,
    metric: str | None,
    claim_factor: str | None,
    equal_resources: bool,
    paired: bool,
    as_json: bool,
    with_stats: bool = False,
    confidence: float = 0.95,
) -> None:
    """List every factor that differs between A and B (run:ID, batch:NAME, deployment:NAME).

    A claim the factors do not support is refused with its rule (exit 3). `--stats` adds, per
    metric, whether B differs from A beyond sampling error: with one run per side, from each run's
    requests (differs / within sampling error / insufficient sample / unknown sampling error); with
    repeated runs of one comparability key per side, a Mann-Whitney test over the runs with
    Benjamini-Hochberg control across the metrics (one run against one is never significant).
    With `--metric M --attribute-to F`, a change of M not shown to differ is refused (R6).

    \b
    Example:
      ledger compare deployment:h20-old deployment:h20-1017 --metric total_tpm
      ledger compare run:3 run:4 --stats
    """
    from dataclasses import asdict

    from bench_ledger.queries.compare import compare as do_compare
    from bench_ledger.queries.compare import ratio

    if with_stats:
        _compare_stats(ledger, a, b, metric, claim_factor, equal_resources, paired, as_json, confidence)
        return
    if metric:
        res = ratio(ledger, metric, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
        cmp = res.comparison
    else:
        res, cmp = None, do_compare(ledger, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
    if as_json:
        click.echo(json.dumps(res.as_dict() if res else asdict(cmp), indent=2, default=str))
        return
    table(
        [{"factor": f.name, "A": f.a, "B": f.b} for f in cmp.differences],
        ["factor", "A", "B"],
        title=f"A = {a}\nB = {b}\nfactors that differ:",
    )
    click.echo(f"attributable to: {cmp.attributable_to or 'none (not exactly one difference)'}")
    click.echo(
        f"stack ratio: {'yes' if cmp.stack_ratio else 'no'}   equal resources: "
        f"{'yes' if cmp.equal_resources else 'no'}   paired: {'yes' if cmp.paired else 'no'}"
    )
    for note in cmp.notes:
        click.echo(f"  note: {note}")
    if res:

        def shown(v) -> str:
            return f"{float(v.value):.6g} {v.unit} ({v.flag})" if v.value is not None else f"n/a ({v.na_reason})"

        click.echo(f"{metric}: A {shown(res.a)}; B {shown(res.b)}")
        click.echo(f"B / A = {'n/a' if res.ratio is None else f'{float(res.ratio):.4g}'}: {res.label}")


def _compare_stats(
    ledger: Ledger,
    a: str,
    b: str,
    metric: str | None,
    claim_factor: str | None,
    equal_resources: bool,
    paired: bool,
    as_json: bool,
    confidence: float,
) -> None:
    from dataclasses import asdict

    from bench_ledger.queries.compare import compare as do_compare
    from bench_ledger.queries.stats.runs import STATS_METRICS, compare_stats

    # the factors first (R6, R8), then, for the one metric named, whether its change is beyond sampling error
    cmp = do_compare(ledger, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
    res = compare_stats(
        ledger, a, b, (metric,) if metric else STATS_METRICS, confidence, claim_factor if metric else None
    )
    if as_json:
        click.echo(json.dumps({"comparison": asdict(cmp), "stats": res.as_dict()}, indent=2, default=str))
        return
    table(
        [{"factor": f.name, "A": f.a, "B": f.b} for f in cmp.differences],
        ["factor", "A", "B"],
        title=f"A = {a}\nB = {b}\nfactors that differ:",
    )
    click.echo(
        f"comparability key: A {(res.key_a or 'none (no deployment recorded)')[:12]}, "
        f"B {(res.key_b or 'none (no deployment recorded)')[:12]}"
    )

    def vals(pairs: list[tuple[int, float | None]]) -> str:
        return ", ".join("n/a" if v is None else f"{v:.4g}" for _, v in pairs)

    rows = [
        {
            "metric": r.metric,
            "A": vals(r.a),
            "B": vals(r.b),
            "sampling verdict (B vs A)": r.change.text()
            if r.change
            else "n/a: repeated runs, the run is the replicate",
            "over runs": r.test.text() if r.test else "",
        }
        for r in res.rows
    ]
    table(
        rows,
        ["metric", "A", "B", "sampling verdict (B vs A)", "over runs"],
        title=f"== statistics ({confidence:.0%}); A, B: each run's value",
        whole=("sampling verdict (B vs A)", "over runs"),
    )


@main.command()
@with_ledger
@click.argument("metric")
@click.option("--key", "key", metavar="KEY", help="The comparability key of the series (12+ characters).")
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this sealed batch (repeatable).")
@confidence_option
@json_option
def trend(
    ledger: Ledger, metric: str, key: str | None, batches: tuple[str, ...], confidence: float, as_json: bool
) -> None:
    """A metric over the sealed batches' runs of one comparability key, in time, with change points.

    Runs of different keys (system, workload, warm state, tool) are separate series, never pooled (R2).
    Change points: ruptures' PELT with a modified-BIC penalty, each with its size and Welch interval;
    fewer points than the stated minimum give "insufficient data" (docs/statistics.md).

    \b
    Example:
      ledger trend ttft_p50 --batch nightly-01 --batch nightly-02
      ledger trend ttft_p50 --key 3f2a9c01d4e5
    """
    from bench_ledger.queries.stats.runs import trend as do_trend

    series = do_trend(ledger, metric, key, batches, confidence)
    if as_json:
        click.echo(json.dumps([t.as_dict() for t in series], indent=2, default=str))
        return
    for t in series:

        def iv(p) -> str:
            return "" if p.low is None else f"[{p.low:.4g}, {p.high:.4g}]"

        table(
            [
                {
                    "#": i + 1,
                    "batch": p.batch,
                    "run": f"{p.run_id} {p.label}",
                    "value": "n/a" if p.value is None else f"{p.value:.4g}",
                    f"{confidence:.0%} interval": iv(p),
                }
                for i, p in enumerate(t.points)
            ],
            ["#", "batch", "run", "value", f"{confidence:.0%} interval"],
            title=f"== {metric} ({t.unit}), key {t.key[:12]}: {len(t.points)} points",
        )
        for note in t.notes:
            click.echo(f"note: {note}")
        if t.changes is None:
            click.echo(f"insufficient data: {t.reason}")
        elif not t.changes:
            click.echo("no change point")
        for c in t.changes or []:
            rel = "" if c.relative is None else f" ({100 * c.relative:+.1f}%)"
            click.echo(
                f"change point at #{c.index + 1} (batch {t.points[c.index].batch}): {c.before:.4g} -> "
                f"{c.after:.4g}{rel}, {confidence:.0%} interval of the step [{c.low:+.4g}, {c.high:+.4g}]"
            )


def _relative(ctx: click.Context, param: click.Parameter, value: str) -> float:
    text = value.strip()
    try:
        x = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a relative change such as 5% or 0.05") from None
    if not 0 < x < 10:
        raise click.BadParameter(f"{value!r}: give a relative change above 0, such as 5%")
    return x


@main.command()
@with_ledger
@click.option(
    "--detect",
    "detect",
    required=True,
    callback=_relative,
    metavar="CHANGE",
    help="The relative change to resolve, e.g. 5%.",
)
@click.option("--run", "run_id", type=int, required=True, metavar="ID", help="The pilot run.")
@click.option("--metric", "metrics", metavar="M", multiple=True, help="Metric(s) to plan for (repeatable).")
@confidence_option
@json_option
def plan(
    ledger: Ledger, detect: float, run_id: int, metrics: tuple[str, ...], confidence: float, as_json: bool
) -> None:
    """How many requests per run (and runs per side) resolve a relative change, from a pilot run.

    \b
    Example:
      ledger plan --detect 5% --run 4
    """
    from bench_ledger.queries.stats.planning import POWER
    from bench_ledger.queries.stats.runs import plan as do_plan

    chosen = metrics or (
        "ttft_p50",
        "ttft_p90",
        "ttft_p99",
        "ttft_mean",
        "e2e_latency_p50",
        "per_stream_decode_rate_median",
    )
    plans = do_plan(ledger, run_id, detect, chosen, confidence)
    if as_json:
        click.echo(json.dumps([p.as_dict() for p in plans], indent=2, default=str))
        return
    table(
        [
            {
                "metric": p.metric,
                "pilot": f"{p.pilot.n} requests, {p.pilot.n_effective or 0:.0f} effective",
                "requests per run": "n/a" if p.requests is None else f"{p.requests:,}",
                "runs per side": p.runs_per_side,
                "reason": p.reason or "",
            }
            for p in plans
        ],
        ["metric", "pilot", "requests per run", "runs per side", "reason"],
        title=f"to resolve a {100 * detect:.3g}% change at {confidence:.0%} confidence with {POWER:.0%} power "
        f"(pilot: run {run_id})",
    )
    click.echo(
        "runs per side: the fewest for which a test over runs can reach the confidence at all; how many more "
        "depends on run-to-run variation, which one pilot run cannot show"
    )


@main.command()
@with_ledger
@click.option("--batch", "batch", metavar="B", help="Only cards with samples in this batch.")
@click.option("--deployment", "deployment", metavar="D", help="Only cards with samples of this deployment.")
@json_option
@wide_option
def cards(ledger: Ledger, batch: str | None, deployment: str | None, as_json: bool) -> None:
    """List the GPU cards with hardware samples, named as a claim's scope `gpu` names them.

    \b
    Example:
      ledger cards --batch fx
    """
    from bench_ledger.queries.catalog import list_cards

    names = list_cards(ledger, batch=batch, deployment=deployment)
    if as_json:
        click.echo(json.dumps(names))
    else:
        table([{"card": c} for c in names], ["card"])
