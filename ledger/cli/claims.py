"""`ledger claims ...`: draft a claims file from a report, and compare drafts with reviewed files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from bench_ledger.cli.app import json_option, main, open_ledger, table, wide_option
from bench_ledger.errors import InputError

__all__: list[str] = []  # its commands register on the ledger group; nothing here is imported by name


@main.group()
def claims() -> None:
    """Draft and compare claims files (docs/claims-draft.md)."""


def _write(path: Path, text: str) -> None:
    """Write all or nothing: a temporary file in the same folder, renamed over the target."""
    import tempfile  # here, not at the top: every command's start-up would pay for it, `ledger --help` too

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@claims.command("draft")
@click.argument("report", metavar="REPORT.md|.txt", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--db",
    "db",
    metavar="URL",
    envvar="LEDGER_DB",
    default=None,
    help="Ledger to check metric proposals against [default: duckdb:///ledger.duckdb; env LEDGER_DB].",
)
@click.option(
    "--no-ledger",
    "no_ledger",
    is_flag=True,
    help="Draft without a ledger: no metric proposals (derivations, n/a and quotes only).",
)
@click.option(
    "--batch", "batches", metavar="B", multiple=True, help="Only consider runs of these batches (repeatable)."
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the draft here [default: standard output].",
)
@click.pass_context
def draft(
    ctx: click.Context, report: Path, db: str | None, no_ledger: bool, batches: tuple[str, ...], output: Path | None
) -> None:
    """Find every number of a report and draft a claims file for a person to review.

    Each number gets its exact text, its locator (section, table row and column, line and span),
    a guessed unit and quantity kind, and a proposed basis (metric, derived, na or quoted), all
    marked `draft: true` with the evidence. Section numbers, dates, versions and names are listed
    as skipped, with why. Nothing is a verdict: review the file, then `ledger audit` it.

    \b
    Example:
      ledger claims draft report.md --db duckdb:///ledger.duckdb --batch fx -o claims.yaml
      ledger claims draft report.md --no-ledger
    """
    from bench_ledger.queries.draft import draft_claims

    try:
        report.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{report}: not UTF-8 text (byte {exc.start})") from None
    if no_ledger:
        if batches or ctx.get_parameter_source("db") == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("--no-ledger drafts without a ledger: it takes neither --db nor --batch")
        result = draft_claims(report, None, [], out_path=output)
    else:
        with open_ledger(db) as ledger:
            result = draft_claims(report, ledger, list(batches), out_path=output)
    text = result.to_yaml()
    cov = result.claims.draft.coverage if result.claims.draft else {}
    summary = (
        f"{cov.get('numbers_found', 0)} numbers found, {cov.get('skipped', 0)} skipped; by basis: "
        + ", ".join(f"{k} {v}" for k, v in cov.get("by_basis", {}).items())
        + "; by confidence: "
        + ", ".join(f"{k} {v}" for k, v in cov.get("by_confidence", {}).items())
        + (" (no ledger: no metric proposals)" if no_ledger else "")
    )
    if output is None:
        click.echo(text, nl=False)
        click.echo(summary, err=True)
        return
    _write(output, text)
    click.echo(f"wrote {output}: {summary}")


@claims.command("diff")
@click.argument("draft_file", metavar="DRAFT.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("reviewed_file", metavar="REVIEWED.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@wide_option
def diff(draft_file: Path, reviewed_file: Path, as_json: bool) -> None:
    """Show what a reviewer changed in a drafted claims file: claims removed, added, accepted as
    proposed, and each changed field (basis, metric and scope, formula, unit, kind, locator).

    \b
    Example:
      ledger claims diff draft.yaml claims.yaml
    """
    from bench_ledger.queries.claims import load_claims
    from bench_ledger.queries.draft import diff as run_diff

    rep = run_diff(load_claims(draft_file), load_claims(reviewed_file))
    if as_json:
        click.echo(json.dumps(rep.as_dict(), indent=2, ensure_ascii=False, default=str))
        return
    s = rep.summary()
    click.echo(
        f"accepted {s['accepted']}, changed {s['changed']} (basis changed {s['basis_changed']}), "
        f"removed {s['removed']}, added {s['added']}"
    )
    if rep.changed:
        click.echo("")
        table(
            [
                {"claim": c.claim_id, "field": c.field, "draft": _short(c.draft), "reviewed": _short(c.reviewed)}
                for c in rep.changed
            ],
            ["claim", "field", "draft", "reviewed"],
            title="changed",
        )
    for title, ids in (("removed (in the draft only)", rep.removed), ("added (in the reviewed file only)", rep.added)):
        if ids:
            click.echo(f"\n{title}: {', '.join(ids)}")
    if rep.renamed:
        click.echo("\nrenamed: " + ", ".join(f"{a} -> {b}" for a, b in rep.renamed.items()))


def _short(v: object) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= 70 else text[:67] + "..."


@claims.command("coverage")
@click.argument("draft_file", metavar="DRAFT.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument(
    "reference_file", metavar="REFERENCE.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@json_option
@wide_option
def coverage(draft_file: Path, reference_file: Path, as_json: bool) -> None:
    """Measure a draft against a hand-written claims file of the same report: the share of its
    claims whose printed numbers the draft finds at the same locator, and the share whose basis it
    proposes the same way; every miss is listed with why (docs/claims-draft.md).

    \b
    Example:
      ledger claims coverage draft.yaml ledger/casestudy/claims.yaml
    """
    from bench_ledger.queries.claims import load_claims
    from bench_ledger.queries.draft import coverage as run_coverage

    ref = load_claims(reference_file)
    if not ref.source_report.file:
        raise InputError(f"{reference_file}: source_report.file is not set; the report's text is needed")
    report = reference_file.parent / ref.source_report.file
    if not report.is_file():
        raise InputError(f"{reference_file}: source_report.file {ref.source_report.file!r} not found next to it")
    cov = run_coverage(load_claims(draft_file), ref, report.read_text(encoding="utf-8"))
    if as_json:
        click.echo(json.dumps(cov.as_dict(), indent=2, ensure_ascii=False))
        return
    click.echo(f"hand-written claims: {cov.total} ({cov.printed} with their text printed verbatim)")
    click.echo(f"located at the same locator: {cov.located}/{cov.total} = {cov.located_share:.1%}")
    click.echo(f"same basis proposed:         {cov.same_basis}/{cov.total} = {cov.basis_share:.1%}")
    for title, misses in (("not located", cov.located_misses), ("basis differs", cov.basis_misses)):
        rows = [m for m in misses if not (title == "basis differs" and m.why == "not located")]
        if rows:
            click.echo("")
            table(
                [{"claim": m.claim_id, "text": m.text, "locator": m.locator, "why": m.why} for m in rows],
                ["claim", "text", "locator", "why"],
                title=f"{title} ({len(rows)})",
            )
