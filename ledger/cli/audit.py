"""Commands that audit published numbers: audit, explain, and the case-study demo."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    EXIT_USAGE,
    exit_on,
    json_option,
    main,
    open_ledger,
    parse_fail_on,
    terminal_width,
    with_ledger,
)
from bench_ledger.cli.metrics import metrics
from bench_ledger.cli.setup import import_one
from bench_ledger.errors import InputError

__all__ = ["DEMO_MARKER"]

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger

# what each verdict means, shown above the audit's tables
_LEGEND = (
    ("reproduced", "a metric claim: the ledger's records give a value inside the printed rounding"),
    ("consistent", "a derived claim: recomputed, it meets the printed rounding; never better than its weakest operand"),
    ("mismatch", "the recomputed value falls outside the printed rounding (`ledger explain CLAIMS ID` shows why)"),
    ("not-derivable", "the ledger lacks what the check needs (the reason is shown)"),
    ("quoted", "reported by another source: kept and shown, NOT checked"),
    ("estimated", "computed from targets or estimates: flagged, never verified"),
    ("n/a-kept", "the report marks it n/a and it stays n/a (no backfill, R9)"),
    ("refused", "a rule of the rulebook forbids the derivation (its rule and why)"),
)
_WIDTH = 120
_MAX_WIDTH = {"claim": 30, "printed": 22, "unit": 10, "recomputed": 28, "detail": 54, "expected": 20}


def _load_checked(claims_file: Path, ledger: Ledger):
    """The claims file, validated as a whole and against the ledger's names before any verdict;
    every error at once on stderr and exit 2 otherwise."""
    from bench_ledger.errors import ClaimsInvalid
    from bench_ledger.queries.claims import check_names, load_claims

    try:
        claims = load_claims(claims_file)
        problems = check_names(claims, ledger)
        if problems:
            raise ClaimsInvalid(claims_file, [p.text() for p in sorted(problems, key=lambda p: p.line or 0)])
    except ClaimsInvalid as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    return claims


def _render_table(rows: list[dict], columns: list[str], title: str) -> str:
    """Rows as a table that fits the terminal (_WIDTH columns when piped); cell widths are display widths
    (CJK text aligns)."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    t = Table(title=None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    columns = [c for c in columns if any(r.get(c) not in (None, "") for r in rows)]  # no empty columns
    for c in columns:
        t.add_column(c, overflow="fold", no_wrap=c == "rule", max_width=_MAX_WIDTH.get(c))
    for r in rows:
        t.add_row(*(Text("" if r.get(c) is None else str(r.get(c))) for c in columns))
    buf = io.StringIO()
    Console(
        file=buf,
        width=terminal_width() or _WIDTH,
        color_system=None,
        force_terminal=False,
        legacy_windows=False,
        soft_wrap=False,
    ).print(t)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    return title + "\n" + "\n".join(line for line in lines if line)


def _detail(r) -> str | None:
    parts = [r.why or r.missing or r.margin]
    if r.verdict == "consistent" and r.provenance and r.provenance != "derived":
        parts.append(r.provenance)
    return "; ".join(p for p in parts if p) or ("; ".join(r.notes) or None)


@main.command()
@with_ledger
@click.argument("claims_file", metavar="CLAIMS.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--fail-on",
    "fail_on",
    metavar="VERDICT,...",
    default="",
    help="Exit 1 when one of these verdicts occurs (e.g. mismatch,refused); stderr names the claims.",
)
@json_option
def audit(ledger: Ledger, claims_file: Path, fail_on: str, as_json: bool) -> None:
    """Check every number of a claims file against the ledger; print the verdicts grouped.

    The whole file is validated first (every error with its claim, YAML line and field; unknown
    metric, batch, run, deployment, launch and card names list the valid ones): a file with
    errors exits 2 with no verdicts. Verdicts: reproduced, consistent, mismatch, raw-mismatch (the
    printed arithmetic holds, the ledger's operand values do not), not-derivable, quoted, estimated,
    n/a-kept, refused (with its rule). A refused claim is a verdict, not an error. The format is
    documented in docs/claims.md.

    \b
    Example:
      ledger audit ledger/casestudy/claims.yaml --fail-on mismatch,not-derivable
    """
    from bench_ledger.queries.audit import audit as run_audit
    from bench_ledger.queries.claims import VERDICTS

    wanted = parse_fail_on(fail_on, VERDICTS)
    claims = _load_checked(claims_file, ledger)
    unreviewed = [c.id for c in claims.claims if c.draft]
    if unreviewed:
        shown = ", ".join(unreviewed[:5]) + (f" and {len(unreviewed) - 5} more" if len(unreviewed) > 5 else "")
        click.echo(
            f"warning: {len(unreviewed)} of {len(claims.claims)} claims say `draft: true` ({shown}): "
            "proposals of `ledger claims draft`, not reviewed; review each and remove the flag",
            err=True,
        )
    report = run_audit(claims, ledger)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        _print_audit(report, claims_file)
    found: dict[str, list[str]] = {}
    for r in report.results:
        found.setdefault(r.verdict, []).append(r.claim_id)
    exit_on(wanted, found, "claim(s)")


def _print_audit(report, claims_file: Path) -> None:
    """The legend, the verdicts grouped (one table per verdict, the refusals with their rule), the counts."""
    from bench_ledger.queries.claims import VERDICTS

    src = report.source_report
    click.echo(f"source report {src['slug']}: {src['title']}" + ("   [SYNTHETIC data]" if report.synthetic else ""))
    click.echo("")
    legend = list(_LEGEND)
    if any(r.verdict == "raw-mismatch" for r in report.results):  # shown only where it occurs
        legend.insert(3, ("raw-mismatch", "a derived claim: the printed arithmetic holds, the ledger's values do not"))
    click.echo(_render_table([{"verdict": v, "means": m} for v, m in legend], ["verdict", "means"], "legend"))
    for verdict in VERDICTS:
        rows = [r for r in report.results if r.verdict == verdict]
        if not rows:
            continue
        click.echo("")
        click.echo(
            _render_table(
                [
                    {
                        "claim": r.claim_id,
                        "printed": r.text,
                        "unit": r.unit,
                        "rule": r.rule,
                        "recomputed": r.recomputed,
                        "detail": _detail(r),
                        "expected": None if r.as_expected else f"expected {r.expected_verdict}",
                    }
                    for r in rows
                ],
                ["claim", "printed", "unit", "rule", "recomputed", "detail", "expected"],
                f"{verdict} ({len(rows)})",
            )
        )
        if verdict == "mismatch":
            click.echo("  why each differs:")
            for r in rows:
                click.echo(f"    ledger explain {claims_file} {r.claim_id}")
    click.echo("")
    click.echo("verdicts: " + ", ".join(f"{k} {v}" for k, v in report.counts().items()))
    off = report.unexpected()
    if off:
        click.echo(f"{len(off)} claim(s) differ from their expected verdict: {', '.join(r.claim_id for r in off)}")


@main.command()
@with_ledger
@click.argument("claims_file", metavar="CLAIMS.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("claim_id")
@json_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "prov-json"]),
    default="text",
    show_default=True,
    help="prov-json: the chain as W3C PROV-JSON (entities, activities, agents).",
)
def explain(ledger: Ledger, claims_file: Path, claim_id: str, as_json: bool, fmt: str) -> None:
    """Print the evidence chain of one claim: claim -> formula or metric -> runs -> requests
    (how many, which fields) -> artefacts (sha256, file, lines) -> source report.

    `--format prov-json` gives the same chain as W3C PROV: entities for the artefacts (sha256),
    request records, runs, values and the source report; activities for the imports, the
    evaluations and the audit; agents for the tools, the importers and bench-ledger.

    \b
    Example:
      ledger explain ledger/casestudy/claims.yaml tier-50k-output-tpm
      ledger explain ledger/casestudy/claims.yaml tier-50k-output-tpm --format prov-json > chain.json
    """
    from bench_ledger.queries.audit import explain as run_explain

    claims = _load_checked(claims_file, ledger)
    steps = run_explain(claims, ledger, claim_id, claims_path=claims_file)
    if fmt == "prov-json":
        from bench_ledger.queries.audit import prov_document

        click.echo(
            prov_document(claims, ledger, claim_id, claims_path=claims_file, steps=steps).serialize(
                format="json", indent=2
            )
        )
        return
    if as_json or fmt == "json":
        click.echo(
            json.dumps(
                [{"level": s.level, "text": s.text.strip(), "detail": s.detail} for s in steps],
                indent=2,
                ensure_ascii=False,
                default=str,
            )
        )
        return
    for s in steps:
        click.echo(s.text)


DEMO_MARKER = ".bench-ledger-demo"  # the demo rebuilds only a folder holding this file (one it made)


@main.command()
@click.option(
    "--db",
    "db",
    metavar="URL",
    default=None,
    help="Ledger to build the demo in [default: a fresh bench-ledger-demo/ledger.duckdb].",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-ledger-demo"),
    show_default=True,
    help="Folder for the generated (SYNTHETIC) raw files.",
)
@click.pass_context
def demo(ctx: click.Context, db: str | None, out: Path) -> None:
    """Build the reference report's case study and audit every number it publishes.

    Generates a SYNTHETIC raw data set shaped after the report (vLLM bench results, server logs of
    nine launches, nvidia-smi dmon samples) in the real tools' formats, declares the system under
    test, imports everything through the real importers, prints the per-batch table and audits the
    report's claims (ledger/casestudy/claims.yaml). The same steps by hand are in
    OUT/data/import-commands.sh. OUT must be new or empty, or a folder an earlier `ledger demo`
    made (it holds .bench-ledger-demo): nothing else is ever deleted.

    \b
    Example:
      ledger demo
      ledger demo --db postgresql+psycopg://postgres@127.0.0.1:5432/test
    """
    import shutil
    from importlib import resources

    from bench_ledger.api import build_demo  # private: the demo's one build (decision 0002), not the facade's

    data = out / "data"
    marker = out / DEMO_MARKER
    if out.is_dir() and any(out.iterdir()) and not marker.is_file():
        raise InputError(
            f"{out} is not empty and was not made by `ledger demo` (no {marker.name} in it): "
            "nothing deleted; give a new or empty folder with --out"
        )
    for own in (data, marker, out / "ledger.duckdb", out / "ledger.duckdb.wal", out / "report.html"):
        # what the demo deletes or writes is its own, inside OUT: a link would take it elsewhere
        if own.is_symlink() or (own == data and own.exists() and not own.is_dir()):
            what = "a symbolic link" if own.is_symlink() else "not a folder"
            raise InputError(
                f"{own} is {what}: `ledger demo` deletes and writes only its own files inside {out}; "
                "nothing deleted or written; remove it or give another folder with --out"
            )
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text("made by `ledger demo`: it may delete data/ and ledger.duckdb here when run again\n")
    if data.exists():
        shutil.rmtree(data)
    if db is None:
        file = out / "ledger.duckdb"
        for stale in (file, file.with_name(file.name + ".wal")):
            stale.unlink(missing_ok=True)
        db = f"duckdb:///{file}"
    banner = "SYNTHETIC DATA: generated by bench-ledger, shaped after the report; not the report's raw records"
    click.echo(f"== {banner}\n== raw files: {data}/  ledger: {db}")
    with open_ledger(db, migrated=False, create=True) as ledger:
        ok = build_demo(ledger, data, lambda led, path, fmt, target: import_one(led, path, fmt, target, quiet=True))
    if not ok:
        raise click.ClickException("the demo data did not import cleanly (see above)")
    click.echo(f"\n== per-batch table ({banner})")
    ctx.invoke(metrics, db=db, batches=("fx", "m17"), run_id=None, as_json=False, as_csv=False)
    click.echo(f"\n== audit of the report's published numbers ({banner})")
    claims = Path(str(resources.files("bench_ledger.casestudy") / "claims.yaml"))
    from bench_ledger.cli.share import write_report
    from bench_ledger.queries.audit import Auditor

    with open_ledger(db) as ledger:
        auditor = Auditor(_load_checked(claims, ledger), ledger)  # one audit: printed here, and in the report
        _print_audit(auditor.run(), claims)
        path = write_report(ledger, ["fx", "m17"], claims, "html", out / "report.html", auditor=auditor)
    click.echo(f"\n== explore: ledger --help; e.g. ledger explain {claims} tier-50k-total-tpm --db {db}")
    click.echo(f"== report ({banner}): {path}")
