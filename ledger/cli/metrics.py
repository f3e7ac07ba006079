"""Commands that compute and check figures of runs: metrics, check."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    confidence_option,
    each_batch,
    exit_on,
    json_option,
    main,
    parse_fail_on,
    prose,
    table,
    wide_option,
    with_ledger,
)

__all__ = ["metrics"]

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger


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


_CHECK_OUTCOMES = ("agree", "disagree", "not-re-derivable")  # --fail-on names ("not re-derivable" as one word)


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

    wanted = parse_fail_on(fail_on, _CHECK_OUTCOMES)
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
