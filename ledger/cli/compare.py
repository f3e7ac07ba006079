"""Commands that compare runs and plan them: compare, trend, plan."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    confidence_option,
    json_option,
    main,
    table,
    wide_option,
    with_ledger,
)

__all__: list[str] = []  # its commands register on the ledger group; nothing here is imported by name

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger


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
