"""Commands that hand the evidence over: report (HTML, Markdown), export, import-export, attest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import main, with_ledger

__all__ = ["write_report"]

if TYPE_CHECKING:  # the store loads when a command runs, not for --help
    from bench_ledger.store import Ledger


def write_report(
    ledger: Ledger,
    batches: list[str] | None,
    claims_file: Path | None,
    fmt: str,
    out: Path | None,
    synthetic: bool = False,
    auditor=None,
) -> Path | None:
    """Build and write the report; returns the file written (None: Markdown printed to stdout)."""
    from bench_ledger.queries.report.build import build_report
    from bench_ledger.queries.report.render import render_html, render_markdown

    data = build_report(ledger, batches, claims_file, synthetic=synthetic, auditor=auditor)
    text = render_html(data) if fmt == "html" else render_markdown(data)
    if out is None and fmt == "md":
        click.echo(text)
        return None
    target = out or Path("report.html")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # never a half-written report
    return target


@main.command()
@with_ledger
@click.option(
    "--batch", "batches", metavar="B", multiple=True, help="Batches to show side by side (repeatable) [default: all]."
)
@click.option(
    "--claims",
    "claims_file",
    metavar="CLAIMS.yaml",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also audit this claims file (verdicts grouped, each claim's evidence chain).",
)
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default="html", show_default=True)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write [default: report.html; Markdown goes to stdout].",
)
@click.option("--synthetic", is_flag=True, help="Label every table and plot as synthetic data.")
def report(
    ledger: Ledger, batches: tuple[str, ...], claims_file: Path | None, fmt: str, out: Path | None, synthetic: bool
) -> None:
    """Write one self-contained report: runs, launches, hardware, audit, plots, evidence.

    The HTML file needs no network to open (plots are inline SVG, no scripts, no fonts fetched).
    Every figure links to its evidence chain (metric -> runs -> requests -> artefact sha256 and
    lines -> source report), the same as `ledger explain`. Batches are shown side by side, never
    pooled (R2). `--format md` prints the same tables as Markdown with a footnote per n/a.

    \b
    Example:
      ledger report --batch fx --batch m17 --claims claims.yaml --out report.html
      ledger report --batch fx --format md > report.md
    """
    path = write_report(ledger, list(batches) or None, claims_file, fmt, out, synthetic)
    if path is not None:
        click.echo(f"report: {path}")


@main.command()
@with_ledger
@click.argument("batch")
@click.option(
    "--to",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="New or empty folder for the export.",
)
@click.option("--csv", "csv", is_flag=True, help="Write CSV files beside the Parquet ones.")
def export(ledger: Ledger, batch: str, folder: Path, csv: bool) -> None:
    """Export a batch: every table as Parquet (and CSV), README.json with schema revision and seal.

    The sealed tables hold exactly the rows the seal covers; docs/recompute_seal.py recomputes the
    seal from the folder alone (docs/seals.md). A closed batch also gets statement.intoto.json, an
    unsigned in-toto Statement over its artefacts' digests. DuckDB, pandas and Spark read the files.

    \b
    Example:
      ledger export fx --to fx-export
      duckdb -c "SELECT count(*) FROM 'fx-export/request.parquet'"
    """
    from bench_ledger.transfer import export_batch

    r = export_batch(ledger, batch, folder, csv=csv)
    rows = ", ".join(f"{t} {n:,}" for t, n in r.tables.items())
    click.echo(f"exported batch {batch} to {folder}/ ({len(r.files)} files)\n  rows: {rows}")
    click.echo(f"  seal: {r.seal_digest}" if r.seal_digest else f"  open batch: content Merkle root {r.merkle_root}")


@main.command("import-export")
@with_ledger
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
def import_export_cmd(ledger: Ledger, folder: Path) -> None:
    """Load a `ledger export` folder into this ledger, verifying its seal first.

    The files' sha256 and then the seal (recomputed over the exported rows) must match README.json
    before anything is written; the rows keep their ids, so the target must not hold them already.
    The batch arrives closed with the same seal digest (or open, as exported).

    \b
    Example:
      ledger init --db duckdb:///other.duckdb && ledger import-export fx-export --db duckdb:///other.duckdb
    """
    from bench_ledger.transfer import import_export

    r = import_export(ledger, folder)
    click.echo(f"seal verified and batch {r.batch} loaded: {r.rows:,} sealed rows")
    click.echo(f"  seal: {r.seal_digest}" if r.seal_digest else f"  open batch: content Merkle root {r.merkle_root}")
    for x in r.reused:
        click.echo(f"  already here, same identity: {x}")


@main.command()
@with_ledger
@click.argument("batch")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of stdout.")
def attest(ledger: Ledger, batch: str, out: Path | None) -> None:
    """Print an unsigned in-toto Statement for a closed batch (subjects: its artefacts' sha256; predicate: its seal).

    \b
    Example:
      ledger attest fx --out fx.intoto.json
    """
    import json

    from bench_ledger.intoto import intoto_statement

    text = json.dumps(intoto_statement(ledger, batch), indent=2)
    if out is None:
        click.echo(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")
        click.echo(f"in-toto statement: {out}")
