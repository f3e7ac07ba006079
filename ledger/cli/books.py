"""Commands that close and check the books: close, verify, correct, attach, history (R9, R10)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    EXIT_FAILURE,
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
@click.argument("batch")
@click.option(
    "--seal-file", type=click.Path(dir_okay=False, path_type=Path), help="Append the seal to this file (JSON Lines)."
)
def close(ledger: Ledger, batch: str, seal_file: Path | None) -> None:
    """Seal a batch and close it: no imports, edits or reopening afterwards (R10).

    Keep the seal file somewhere the ledger's writers cannot edit: it is what makes a change
    behind every guard detectable (docs/seals.md).

    \b
    Example:
      ledger close fx --seal-file ~/seals/ledger.seals
    """
    from bench_ledger.seal import close_batch

    r = close_batch(ledger, batch, seal_file)
    click.echo(f"closed batch {r.batch} at {r.closed_at:%Y-%m-%d %H:%M:%S} UTC")
    click.echo(f"  seal:     {r.digest}")
    click.echo(f"  root:     {r.merkle_root} over {r.row_count:,} rows")
    click.echo(f"  previous: {r.previous_digest}")
    click.echo("  rows:     " + ", ".join(f"{t} {n:,}" for t, n in r.tables.items() if n))
    if r.seal_file:
        click.echo(f"  appended to {r.seal_file}")
    for u in r.unchecked:
        click.echo(f"  sealed as found, not compared with its import: {u}")


@main.command()
@with_ledger
@click.argument("batch", required=False)
@click.option(
    "--seal-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Compare with this seal file too."
)
@json_option
def verify(ledger: Ledger, batch: str | None, seal_file: Path | None, as_json: bool) -> None:
    """Recompute the seals of closed batches, the import digests of open batches' artefacts and (DuckDB)
    the digests of declared rows; name the batch, table and rows that differ (exit 1).

    With --json: {"ok", "guard_problems", "merged_runs", "checks": [one verdict per batch: "ok",
    "mismatch" or "not verified", with its seal, rows, problems, differences and unchecked artefacts],
    "declared_rows": the same of the declared rows (DuckDB; null on PostgreSQL)}; same exit codes.

    \b
    Example:
      ledger verify --seal-file ~/seals/ledger.seals
    """
    from bench_ledger.seal import verify as do_verify

    res = do_verify(ledger, batch, seal_file)
    if as_json:
        checks = [
            {
                "batch": None if c.unbatched else c.batch,
                "books": "no batch" if c.unbatched else "open" if c.is_open else "closed",
                "verdict": "ok" if c.ok else "mismatch" if c.problems or c.diffs else "not verified",
                "seal": None if c.is_open else c.digest,
                "rows": c.row_count,
                "artefacts": c.artefacts,
                "problems": c.problems,
                "differences": [d.describe() for d in c.diffs],
                "unchecked": c.unchecked,
            }
            for c in res.checks
        ]
        rows = res.declared
        declared = (
            None
            if rows is None
            else {
                "verdict": "ok" if rows.ok else "mismatch" if rows.problems else "not verified",
                "rows": rows.rows,
                "problems": rows.problems,
                "unchecked": rows.unchecked,
            }
        )
        click.echo(
            json.dumps(
                {
                    "ok": res.ok,
                    "guard_problems": res.guard_problems,
                    "merged_runs": res.merged_runs,
                    "checks": checks,
                    "declared_rows": declared,
                },
                indent=2,
            )
        )
        if not res.ok:
            sys.exit(EXIT_FAILURE)
        return
    if not res.checks:
        click.echo("no closed batches and no seals to verify")
    for p in res.guard_problems:
        click.echo(f"database guards: {p}", err=True)
    for p in res.merged_runs:
        click.echo(f"merged: {p}", err=True)
    for c in res.checks:
        name = (
            "artefacts without a batch"
            if c.unbatched
            else f"batch {c.batch} (open)"
            if c.is_open
            else f"batch {c.batch}"
        )
        if c.ok and c.is_open:
            click.echo(f"{name}: ok, {c.artefacts} artefact(s) match their import digests over {c.row_count:,} rows")
            continue
        if c.ok:
            click.echo(f"{name}: ok, seal {c.digest} over {c.row_count:,} rows")
            continue
        if c.problems or c.diffs:
            click.echo(f"{name}: MISMATCH", err=True)
        else:
            click.echo(
                f"{name}: NOT VERIFIED, {len(c.unchecked)} artefact(s) cannot be checked "
                f"({c.artefacts} checked, they match their import digests)",
                err=True,
            )
        for p in c.problems:
            click.echo(f"  {p}", err=True)
        for d in c.diffs:
            click.echo(f"  {d.describe()}", err=True)
        for u in c.unchecked:
            click.echo(f"  not checked: {u}", err=True)
    if (rows := res.declared) is not None:  # DuckDB: declared rows against the digests the ledger kept
        if rows.ok:
            click.echo(f"declared rows: ok, {rows.rows:,} rows match the digests the ledger kept at its writes")
        else:
            click.echo(f"declared rows: {'MISMATCH' if rows.problems else 'NOT VERIFIED'}", err=True)
            for p in rows.problems:
                click.echo(f"  {p}", err=True)
            for u in rows.unchecked:
                click.echo(f"  not checked: {u}", err=True)
    if not res.ok:
        sys.exit(EXIT_FAILURE)


@main.command()
@with_ledger
@click.argument("table_name", metavar="TABLE", type=click.Choice(["run", "published_value", "launch"]))
@click.argument("row_id", type=int)
@click.option(
    "--set",
    "assignments",
    metavar="FIELD=VALUE",
    multiple=True,
    required=True,
    help="A corrected field (repeatable); `null` empties a nullable field.",
)
@click.option("--reason", required=True, help="Why: kept with the new revision and shown by `ledger history`.")
def correct(ledger: Ledger, table_name: str, row_id: int, assignments: tuple[str, ...], reason: str) -> None:
    """Correct a run, published value or launch of an open batch: a new revision that names what it
    supersedes and why (R10); the old row stays, `ledger history` shows both.

    \b
    Example:
      ledger correct run 3 --set concurrency=8 --reason "the sweep ran at C8, the file name says C4"
    """
    from bench_ledger.revisions import correct as do_correct
    from bench_ledger.revisions import parse_changes

    changes = parse_changes(table_name, list(assignments))
    new_id = do_correct(ledger, table_name, row_id, reason, changes)
    click.echo(
        f"{table_name} {row_id} superseded by {table_name} {new_id}: "
        + ", ".join(f"{k}={v}" for k, v in changes.items())
    )
    click.echo(f"  reason: {reason.strip()}")


@main.command()
@with_ledger
@click.argument("artefact_id", metavar="ARTEFACT", type=int)
@click.option(
    "--run", "run_id", metavar="RUN", type=int, required=True, help="Id of the run it belongs to (`ledger runs`)."
)
@click.option("--reason", required=True, help="Why: kept with the new revisions and shown by `ledger history`.")
def attach(ledger: Ledger, artefact_id: int, run_id: int, reason: str) -> None:
    """Attach an already imported artefact's reported values to another run of its batch.

    A correction, not an edit (R10): each value becomes a new revision on RUN, and RUN a new
    revision recording the attachment (`ledger history run ID`); a closed batch refuses it. Captured
    per-request records never move (R9): attach the summary to the records' run, not the other way.

    \b
    Example:
      ledger attach 3 --run 1 --reason "summary_groq_70b.json is the summary of individual_groq_70b.json"
    """
    from bench_ledger.attach import attach as do_attach

    done = do_attach(ledger, artefact_id, run_id, reason)
    click.echo(
        f"artefact {done.artefact_id}: {done.moved} reported value(s) moved from run {done.from_run_id} to run "
        f"{done.superseded_run_id}, now revision run {done.run_id}"
        + (": learned " + ", ".join(f"{k}={v}" for k, v in done.learned.items()) if done.learned else "")
    )
    if done.not_learned:
        click.echo(f"  settings: {done.not_learned}")
    click.echo(f"  reason: {reason.strip()}")


@main.command()
@with_ledger
@click.argument("table_name", metavar="TABLE", type=click.Choice(["run", "published_value", "launch"]))
@click.argument("row_id", type=int)
@json_option
@wide_option
def history(ledger: Ledger, table_name: str, row_id: int, as_json: bool) -> None:
    """Show the correction chain of a run, published value or launch, oldest first.

    \b
    Example:
      ledger history run 3
    """
    from bench_ledger.revisions import FIXED as _FIXED
    from bench_ledger.revisions import history as chain

    rows = chain(ledger, table_name, row_id)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
    else:
        changed = [""] + [
            ", ".join(f"{k}={r[k]}" for k in r if k not in _FIXED and r[k] != prev[k])
            for prev, r in zip(rows, rows[1:])
        ]
        cols = ["id", "revision", "supersedes_id", "recorded_at", "changed", "correction_reason"]
        table(
            [
                {**r, "recorded_at": f"{r['recorded_at']:%Y-%m-%d %H:%M:%S}", "changed": c}
                for r, c in zip(rows, changed)
            ],
            cols,
        )
