"""Commands that show captured rows as they are: show artefact, hardware, logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import json_option, main, table, wide_option, with_ledger
from bench_ledger.cli.browse import show

__all__: list[str] = []  # its commands register on the ledger group; nothing here is imported by name

if TYPE_CHECKING:  # the store loads when a command runs, not for --help
    from bench_ledger.store import Ledger


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6g}"


@show.command("artefact")
@with_ledger
@click.argument("artefact_id", type=int)
@json_option
@wide_option
def show_artefact(ledger: Ledger, artefact_id: int, as_json: bool) -> None:
    """Show an artefact: format, sha256, path, size, the rows it produced, its runs, its import digest.

    \b
    Example:
      ledger show artefact 1
    """
    from bench_ledger.queries.captured import artefact_detail
    from bench_ledger.queries.catalog import to_json

    a = artefact_detail(ledger, artefact_id)
    if as_json:
        click.echo(to_json(a.as_dict()))
        return
    click.echo(f"artefact {a.id}  {a.file_name}  [{a.format}{' ' + a.format_version if a.format_version else ''}]")
    click.echo(f"  sha256: {a.sha256}")
    click.echo(f"  size: {a.size_bytes:,} bytes   stored copy: {a.stored_path or 'none (not stored)'}")
    click.echo(f"  imported {a.imported_at} by {a.importer} {a.importer_version}")
    click.echo(f"  batch: {a.batch or 'none'}   deployment: {a.deployment or 'none'}   node: {a.node or 'none'}")
    if a.note:
        click.echo(f"  note: {a.note}")
    click.echo("  rows produced: " + ", ".join(f"{t} {n:,}" for t, n in a.rows.items()))
    table(
        [{**r, "sampled": "yes" if r["sampled"] else "no"} for r in a.runs],
        ["run", "batch", "label", "records", "requests", "sampled"],
        title="  runs:",
    )
    if a.launches:
        click.echo(f"  log of launch: {', '.join(a.launches)}")
    click.echo("  published values by flag: " + (", ".join(f"{k} {n}" for k, n in a.flags.items()) or "none"))
    if a.units:
        click.echo("  hardware sample units: " + ", ".join(f"{u} {n:,}" for u, n in a.units.items()))
    table(a.digest, ["table", "rows", "root"], title="  import digest (seal scheme 3, stored at import):")


@main.command()
@with_ledger
@click.option("--batch", "batch", metavar="B", required=True, help="The batch whose hardware samples to summarise.")
@json_option
@wide_option
def hardware(ledger: Ledger, batch: str, as_json: bool) -> None:
    """Per-card and per-batch statistics of a batch's hardware samples (dmon, nvidia-smi CSV, dcgmi).

    Per card: samples, mean, min and max of each counter, in the unit as printed, with the
    artefact and lines they come from (measured). Across cards: what may be computed for the
    counter's kind and the rule (R13, R14); for power, the three statistics of R14, one set per
    power counter (average and instantaneous power are different counters).

    \b
    Example:
      ledger hardware --batch fx
    """
    from bench_ledger.queries.captured import hardware_view
    from bench_ledger.queries.catalog import to_json

    v = hardware_view(ledger, batch)
    if as_json:
        click.echo(to_json(v.as_dict()))
        return
    table(v.artefacts, ["id", "file", "format", "node"], title=f"hardware samples of batch {batch}: artefacts")
    rows = [
        {
            "card": c.card,
            "counter": c.counter,
            "unit": c.unit,
            "kind": c.quantity_kind,
            "samples": c.samples,
            "values": c.values,
            "mean": _num(c.mean),
            "min": _num(c.min),
            "max": _num(c.max),
            "source": f"measured: artefact {c.artefact} [{c.format}] lines {c.lines}",
        }
        for c in v.cards
    ]
    click.echo("")
    table(
        rows,
        ["card", "counter", "unit", "kind", "samples", "values", "mean", "min", "max", "source"],
        title="== per card (each card's own figures)",
    )
    click.echo("")
    click.echo("== across cards")
    for a in v.across:
        click.echo(
            f"  {a.counter} [{a.unit}] ({a.quantity_kind}, {a.cards} card(s)): across cards: {a.allowed} "
            f"({a.rule}: {a.why})"
        )
        if a.meaning:
            click.echo(f"    measures: {a.meaning}")
        for val in a.values:
            shown = (
                f"{val['value']:.6g} {val['unit']} ({val['flag']})"
                if val["value"] is not None
                else f"n/a ({val['na_reason']})"
            )
            click.echo(f"    {val['metric']}: {shown}")
    for note in v.notes:
        click.echo(f"note: {note}")


@main.command()
@with_ledger
@click.option("--batch", "batch", metavar="B", help="Server logs imported into this batch.")
@click.option("--deployment", "deployment", metavar="D", help="Server logs of this deployment (and of its launches).")
@click.option("--kind", "kinds", metavar="K", multiple=True, help="Only facts of this kind (repeatable).")
@json_option
@wide_option
def logs(ledger: Ledger, batch: str | None, deployment: str | None, kinds: tuple[str, ...], as_json: bool) -> None:
    """Server-log facts with their file and line: KV pool, engine args, compile and CUDA graph times, READY.

    Each log also says which launch it belongs to (the launch that names it) and its compile-cache
    state (warm_compile, measured from its cache-load and compile lines), or n/a with the reason.

    \b
    Example:
      ledger logs --deployment h20-1017
    """
    from bench_ledger.errors import UsageError
    from bench_ledger.queries.catalog import to_json
    from bench_ledger.queries.logs import log_view

    if (batch is None) == (deployment is None):
        raise UsageError("name the logs: --batch B or --deployment D (one of them)")
    from bench_ledger.vocab import LOG_FACT_KINDS

    if unknown := [k for k in kinds if k not in LOG_FACT_KINDS]:
        raise UsageError(f"--kind {unknown[0]!r}: not a log fact kind; known: {', '.join(sorted(LOG_FACT_KINDS))}")
    v = log_view(ledger, batch=batch, deployment=deployment)
    facts = [f for f in v.facts if not kinds or f.kind in kinds]
    if as_json:
        out = v.as_dict()
        out["facts"] = [f.as_dict() for f in facts]
        click.echo(to_json(out))
        return
    click.echo(f"server logs of {v.scope}: {len(v.logs)}")
    for lg in v.logs:
        click.echo(f"  artefact {lg['artefact']} {lg['file']}")
        click.echo(f"    launch: {lg['launch'] or 'n/a (' + lg['launch_reason'] + ')'}")
        runs = ", ".join(f"{r['run']} {r['label']}" for r in lg["runs"] or [])
        click.echo(f"    runs: {runs or 'n/a (' + lg['runs_reason'] + ')'}")
        click.echo(f"    warm_compile: {lg['warm_compile'] or 'unknown'} ({lg['warm_compile_basis']})")
        click.echo(f"    engine settings, log vs deployment {lg['deployment'] or 'n/a'}:")
        for st in lg["settings"]:
            shown = f"declared {st['declared'] or 'n/a'}, logged {st['logged'] or 'n/a'}"
            click.echo(f"      {st['setting']}: {st['status']} ({shown}; {st['reason']})")
    click.echo("")
    table(
        [{**f.as_dict(), "where": f"{f.file}:{f.line}", "value": f.text} for f in facts],
        ["where", "process", "kind", "value", "unit", "logged_at"],
        title="== facts (value as printed)",
    )
