"""Commands that list and show what a ledger holds: batches, runs, show run, cards."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    each_batch,
    json_option,
    main,
    table,
    wide_option,
    with_ledger,
)
from bench_ledger.vocab import RUN_FACTORS

__all__ = ["show"]

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


_RUN_COLUMNS = [
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
    type=click.Choice(_RUN_COLUMNS + [f for f in RUN_FACTORS if f not in _RUN_COLUMNS]),
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
        extra = [c for c in dict.fromkeys(columns) if c not in _RUN_COLUMNS]
        table(
            [{**r, **{c: r["factors"][c]["value"] if c in r["factors"] else "n/a" for c in extra}} for r in rows],
            _RUN_COLUMNS + extra,
        )


@main.group()
def show() -> None:
    """Show one entity in detail."""


_SHOW_RUN_SECTIONS = ("run", "artefacts", "reported")
_SHOW_LIMIT = 40  # reported values `show run` prints unless --limit says otherwise


@show.command("run")
@with_ledger
@click.argument("run_id", type=int)
@click.option(
    "--section",
    "sections",
    type=click.Choice(_SHOW_RUN_SECTIONS),
    multiple=True,
    help="Only this part (repeatable): run (workload, warm state, launch), artefacts (captures and their "
    "fields), reported (the tool's values) [default: all].",
)
@click.option("--key", "key", metavar="GLOB", help="Only reported values whose key matches (e.g. '*ttft*').")
@click.option(
    "--limit",
    "limit",
    type=click.IntRange(min=0),
    default=_SHOW_LIMIT,
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
    wanted = set(sections or _SHOW_RUN_SECTIONS)
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
