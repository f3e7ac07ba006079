"""The `ledger` command: a thin shell over the library.

Each command parses its options, opens the ledger, calls one function of ``ledger``,
``importers`` or ``queries`` and renders the result. This module is the only part of the
``ledger`` package that imports ``importers`` and ``queries`` (it is the shell, not the core).

Exit codes: 0 ok, 1 failure, 2 usage error, 3 refused by a rule of the rulebook.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from ledger.errors import AlreadyImported, LedgerError, Refused
from ledger.store import Ledger

EXIT_FAILURE, EXIT_USAGE, EXIT_REFUSED = 1, 2, 3


class LedgerGroup(click.Group):
    """Turns the ledger's exceptions into one message and the documented exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except Refused as exc:
            click.echo(f"refused ({exc.rule}): {exc.asked}\n  why: {exc.why}\n  instead: {exc.instead}", err=True)
            ctx.exit(EXIT_REFUSED)
        except LedgerError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_FAILURE)


db_option = click.option(
    "--db", "db", metavar="URL", envvar="LEDGER_DB", default=None,
    help="Ledger database URL [default: duckdb:///ledger.duckdb; env LEDGER_DB].",
)  # fmt: skip
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def open_ledger(db: str | None, *, migrated: bool = True) -> Ledger:
    ledger = Ledger(db)
    if migrated:
        try:
            ledger.require_schema()
        except LedgerError:
            ledger.close()
            raise
    return ledger


def with_ledger(fn: Callable) -> Callable:
    """Open the ledger named by --db for the command and close it afterwards."""

    @db_option
    @functools.wraps(fn)
    def wrapper(db: str | None, **kwargs):
        with open_ledger(db) as ledger:
            return fn(ledger, **kwargs)

    return wrapper


def table(rows: list[dict], columns: list[str], title: str | None = None) -> None:
    """Render rows as a plain aligned table (stable for tests and for piping)."""
    if title:
        click.echo(title)
    if not rows:
        click.echo("(none)")
        return
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bench-ledger")
def main() -> None:
    """bench-ledger: where does this benchmark number come from?

    \b
    Example:
      ledger init && ledger status
    """


@main.command()
@db_option
def init(db: str | None) -> None:
    """Create the ledger or upgrade its schema to the latest revision.

    \b
    Example:
      ledger init --db postgresql+psycopg://postgres@127.0.0.1:5432/test
    """
    with open_ledger(db, migrated=False) as ledger:
        before, after = ledger.init()
        if before == after:
            click.echo(f"{ledger.display_url}: schema already at revision {after}")
        else:
            click.echo(f"{ledger.display_url}: schema {before or 'empty'} -> {after}")


@main.command()
@db_option
@json_option
def status(db: str | None, as_json: bool) -> None:
    """Show the ledger's URL, schema revision and row counts per table.

    \b
    Example:
      ledger status --json
    """
    with open_ledger(db, migrated=False) as ledger:
        st = ledger.status()
    if as_json:
        click.echo(json.dumps({"url": st.url, "backend": st.backend, "revision": st.revision, "head": st.head,
                               "counts": st.counts}, indent=2))  # fmt: skip
        return
    click.echo(f"ledger:   {st.url}")
    click.echo(f"backend:  {st.backend}")
    state = "up to date" if st.revision == st.head else "run `ledger init`"
    click.echo(f"schema:   {st.revision or 'none'} (head {st.head}, {state})")
    for name, n in sorted(st.counts.items()):
        click.echo(f"  {name:<16} {n:>10,}")


@main.command()
@with_ledger
@json_option
def batches(ledger: Ledger, as_json: bool) -> None:
    """List batches with their status and how many runs, requests and artefacts they hold.

    \b
    Example:
      ledger batches --json
    """
    from queries.catalog import list_batches, to_json

    rows = [b.as_dict() for b in list_batches(ledger)]
    if as_json:
        click.echo(to_json(rows))
    else:
        table(rows, ["id", "name", "status", "deployment", "runs", "requests", "artefacts", "closed_at"])


@main.command()
@with_ledger
@click.option("--batch", "batch", metavar="B", help="Only runs of this batch.")
@click.option("--as-of", "as_of", type=click.DateTime(), help="As the ledger stood then (UTC): latest revisions recorded by then.")
@json_option
def runs(ledger: Ledger, batch: str | None, as_of, as_json: bool) -> None:
    """List runs (load points), optionally of one batch.

    \b
    Example:
      ledger runs --batch fx
      ledger runs --as-of 2026-07-08T12:00:00
    """
    from queries.catalog import list_runs, to_json

    rows = [r.as_dict() for r in list_runs(ledger, batch)]
    if as_of is not None:
        from ledger.books import current_ids

        keep = current_ids(ledger, "run", as_of)
        rows = [r for r in rows if r["id"] in keep]
    if as_json:
        click.echo(to_json(rows))
    else:
        table(rows, ["id", "batch", "label", "tool", "input_target_tokens", "output_cap_tokens", "concurrency",
                     "request_count", "requests", "artefacts"])  # fmt: skip


@main.group()
def show() -> None:
    """Show one entity in detail."""


@show.command("run")
@with_ledger
@click.argument("run_id", type=int)
@json_option
def show_run(ledger: Ledger, run_id: int, as_json: bool) -> None:
    """Show a run: workload, warm state, requests and captured fields, the tool's reported aggregates.

    \b
    Example:
      ledger show run 3
    """
    from queries.catalog import run_detail, to_json

    d = run_detail(ledger, run_id)
    if as_json:
        click.echo(to_json(d.as_dict()))
        return
    r = d.run
    click.echo(f"run {r.id}  {r.label}  (batch {r.batch}, deployment {d.deployment or 'n/a'})")
    click.echo(f"  tool: {r.tool or 'n/a'}   dataset: {d.dataset or 'n/a'}   seed: {d.seed if d.seed is not None else 'n/a'}")
    click.echo(f"  workload: input target {r.input_target_tokens or 'n/a'} tokens, output cap {r.output_cap_tokens or 'n/a'}"
               f" tokens, C {r.concurrency or 'n/a'}, N {r.request_count or 'n/a'}, rate {d.request_rate or 'n/a'}")  # fmt: skip
    click.echo("  warm state: " + ", ".join(f"{k} {v}" for k, v in d.warm.items()))
    sc = d.status_counts
    click.echo(f"  requests: {r.requests} ({sc['ok']} ok, {sc['failed']} failed, {sc['unknown']} unknown)")
    for c in d.captures:
        click.echo(f"  artefact {c.artefact_id} {c.file_name} [{c.format}] sha256 {c.sha256[:12]}…")
        click.echo(f"    records: {c.record_count}{'  (SAMPLED: ' + (c.sample_note or '') + ')' if c.sampled else ''}")
        if c.record_count:
            click.echo(f"    fields captured: {', '.join(c.fields) or 'none'}")
            click.echo(f"    not captured (n/a): {', '.join(c.missing) or 'none'}")
            click.echo(f"    clock: {c.clock or 'no times'}   tokens: {c.token_source}")
            click.echo(f"    success: {c.success_rule}")
    if d.published:
        click.echo("  reported by the tool (as printed, not recomputed here):")
        width = max(len(p.key) for p in d.published)
        for p in d.published:
            shown = p.text if p.flag != "n/a" else f"n/a ({p.na_reason})"
            click.echo(f"    {p.key:<{width}}  {shown} {p.unit or ''}".rstrip())


@main.command()
@db_option
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def declare(db: str | None, manifest: Path) -> None:
    """Record deployments, launches, batches, runs and source reports from a YAML manifest.

    The format is documented in docs/manifest.md. Launch logs named in the manifest are
    imported with the vLLM server-log importer and linked to their launch.

    \b
    Example:
      ledger declare system.yaml
    """
    from ledger.declare import declare as do_declare
    from ledger.declare import load_manifest
    from ledger.ingest import ImportTarget

    with open_ledger(db) as ledger:
        done = do_declare(ledger, load_manifest(manifest), manifest.parent)
        for kind in sorted(set(done.created) | set(done.unchanged)):
            click.echo(f"{kind}: {done.created.get(kind, 0)} declared, {done.unchanged.get(kind, 0)} already there")
        failed = False
        for dep, attempt, log in done.launch_logs:
            failed |= not import_one(ledger, log, "vllm-server-log", ImportTarget(batch=None, deployment=dep,
                                                                                 launch=(dep, attempt)), quiet=False)  # fmt: skip
    if failed:
        sys.exit(EXIT_FAILURE)


def import_one(ledger: Ledger, path: Path, fmt: str | None, target, quiet: bool) -> bool:
    """Detect, parse and write one file; print what happened. False when the file failed."""
    import importers
    from ledger.ingest import check_not_imported, write_artefact

    try:
        imp = importers.by_name(fmt) if fmt else importers.detect(path)
        sha, size = check_not_imported(ledger, path)
        parsed = imp.parse(path, importers.ParseOptions(node=target.node))
        with RowProgress(path, enabled=not quiet) as shown:
            res = write_artefact(ledger, path, sha, size, parsed, imp.name, importers.version(), target, shown)
    except AlreadyImported as exc:
        click.echo(str(exc))
        return True
    except Refused:
        raise
    except LedgerError as exc:
        click.echo(f"error: {exc}", err=True)
        return False
    parts = [f"{len(res.runs)} run(s)"] if res.runs else []
    parts += [f"{sum(n for _, _, n in res.runs):,} requests"] if res.runs else []
    parts += [f"{res.samples:,} samples"] if res.samples else []
    parts += [f"{res.log_facts} log facts"] if res.log_facts else []
    parts += [f"{res.published} reported values"] if res.published else []
    click.echo(f"{path}: imported as artefact {res.artefact_id} [{res.format}] sha256 {res.sha256[:12]}…: {', '.join(parts) or 'nothing'}")
    if not quiet:
        for run_id, label, n in res.runs:
            click.echo(f"  run {run_id} {label}: {n} requests")
    return True


@main.command("import")
@db_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--batch", "batch", metavar="B", help="Batch the runs belong to (created open if new).")
@click.option("--run", "run", metavar="LABEL", help="Attach to this run label instead of one labelled from the content.")
@click.option("--deployment", metavar="NAME", help="Deployment (system under test) the artefact describes.")
@click.option("--format", "fmt", metavar="F", help="Force a format (see `ledger formats`).")
@click.option("--node", metavar="NODE", help="Node the samples came from (nvidia-smi dmon).")
@click.option("--copy/--no-copy", default=False, help="Keep a content-addressed copy next to the ledger.")
@click.option("--quiet", "-q", is_flag=True, help="No progress, one line per file.")
def import_(db, paths, batch, run, deployment, fmt, node, copy, quiet) -> None:
    """Import benchmark outputs, GPU samples or server logs; the format is detected from content.

    Each file is its own transaction: a bad file leaves nothing behind and the others still
    import. Importing the same bytes again changes nothing.

    \b
    Example:
      ledger import results/*.json --batch fx
      ledger import dmon-node0.txt --batch fx --node node0
    """
    from ledger.ingest import ImportTarget

    with open_ledger(db) as ledger:
        store = ledger.artefact_folder() if copy else None
        target = ImportTarget(batch=batch, run=run, deployment=deployment, node=node, store_copy=store)
        ok = True
        for path in progress(paths, quiet):
            ok &= import_one(ledger, path, fmt, target, quiet)
    if not ok:
        sys.exit(EXIT_FAILURE)


class RowProgress:
    """A one-line row counter on stderr while a file imports: only on a terminal, never with --quiet."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path, self.enabled = path, enabled and sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, rows: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self.last > 0.2:
            self.last = now
            click.echo(f"\r  {self.path.name}: {rows:,} rows written", err=True, nl=False)

    def __enter__(self) -> RowProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.last:
            click.echo("\r\033[K", err=True, nl=False)


def progress(paths, quiet: bool):
    """A progress bar on stderr, only on a terminal and without --quiet."""
    if quiet or not sys.stderr.isatty() or len(paths) < 2:
        yield from paths
        return
    with click.progressbar(paths, label="importing", file=sys.stderr) as bar:
        yield from bar


@main.command()
@json_option
def formats(as_json: bool) -> None:
    """List the formats `ledger import` understands, one line each.

    \b
    Example:
      ledger formats
    """
    import importers

    rows = [{"name": i.name, "description": i.description} for i in importers.all_importers()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            click.echo(f"{r['name']:<{width}}  {r['description']}")


@main.command()
@with_ledger
@click.argument("batch")
@click.option("--seal-file", type=click.Path(dir_okay=False, path_type=Path), help="Append the seal to this file (JSON Lines).")
def close(ledger: Ledger, batch: str, seal_file: Path | None) -> None:
    """Seal a batch and close it: no imports, edits or reopening afterwards (R10).

    Keep the seal file somewhere the ledger's writers cannot edit: it is what makes a change
    behind every guard detectable (docs/seals.md).

    \b
    Example:
      ledger close fx --seal-file ~/seals/ledger.seals
    """
    from ledger.books import close_batch

    r = close_batch(ledger, batch, seal_file)
    click.echo(f"closed batch {r.batch} at {r.closed_at:%Y-%m-%d %H:%M:%S} UTC")
    click.echo(f"  seal:     {r.digest}")
    click.echo(f"  root:     {r.merkle_root} over {r.row_count:,} rows")
    click.echo(f"  previous: {r.previous_digest}")
    click.echo("  rows:     " + ", ".join(f"{t} {n:,}" for t, n in r.tables.items() if n))
    if r.seal_file:
        click.echo(f"  appended to {r.seal_file}")


@main.command()
@with_ledger
@click.argument("batch", required=False)
@click.option("--seal-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Compare with this seal file too.")
def verify(ledger: Ledger, batch: str | None, seal_file: Path | None) -> None:
    """Recompute the seals of closed batches; name the batch, table and rows that differ (exit 1).

    \b
    Example:
      ledger verify --seal-file ~/seals/ledger.seals
    """
    from ledger.books import verify as do_verify

    res = do_verify(ledger, batch, seal_file)
    if not res.checks:
        click.echo("no closed batches to verify")
    for c in res.checks:
        if c.ok:
            click.echo(f"batch {c.batch}: ok, seal {c.digest} over {c.row_count:,} rows")
            continue
        click.echo(f"batch {c.batch}: MISMATCH", err=True)
        for p in c.problems:
            click.echo(f"  {p}", err=True)
        for d in c.diffs:
            click.echo(f"  {d.describe()}", err=True)
    if not res.ok:
        sys.exit(EXIT_FAILURE)


@main.command()
@with_ledger
@click.argument("table_name", metavar="TABLE", type=click.Choice(["run", "published_value", "launch"]))
@click.argument("row_id", type=int)
@json_option
def history(ledger: Ledger, table_name: str, row_id: int, as_json: bool) -> None:
    """Show the correction chain of a run, published value or launch, oldest first.

    \b
    Example:
      ledger history run 3
    """
    from ledger.books import history as chain

    rows = chain(ledger, table_name, row_id)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
    else:
        cols = ["id", "revision", "supersedes_id", "recorded_at", "correction_reason"]
        table([{**r, "recorded_at": f"{r['recorded_at']:%Y-%m-%d %H:%M:%S}"} for r in rows], cols)


MARKERS = {"derived": "d", "reported": "r", "estimated": "e", "measured": "m"}


def _cell(v, fmt: str, notes: dict[str, int]) -> str:
    """A figure with its provenance marker ("1,840,234 d"), or n/a with a footnote number."""
    if v.value is None:
        k = notes.setdefault(f"{v.metric}: {v.na_reason}", len(notes) + 1)
        return f"n/a[{k}]"
    x = float(v.value)
    return f"{format(x, fmt if abs(x) >= 100 or fmt != ',.0f' else '.4g')} {MARKERS.get(v.flag, v.flag)}"


@main.command()
@with_ledger
@click.option("--batch", "batches", metavar="B", multiple=True, help="Only runs of this batch (repeatable).")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (value, flag and reason per metric).")
def metrics(ledger: Ledger, batches: tuple[str, ...], run_id: int | None, as_json: bool, as_csv: bool) -> None:
    """One row per run: workload settings, total and output TPM, TTFT p50, each with its provenance.

    Rows of several batches are shown side by side, each labelled with its batch; nothing is
    totalled or pooled across runs or batches (R2).

    \b
    Example:
      ledger metrics --batch fx --batch m17
    """
    import csv

    from queries.metrics import run_metrics

    rows = run_metrics(ledger, list(batches) or None, run_id)
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
        out.append({
            "batch": r.batch, "run": f"{r.run_id} {r.label}",
            "in/out": f"{r.input_target_tokens or '?'} / {r.output_cap_tokens or '?'}",
            "C/N": f"{r.concurrency or '?'} / {r.request_count or '?'}",
            "ok/failed": f"{_cell(v['requests_ok'], ',.0f', notes)} / {_cell(v['requests_failed'], ',.0f', notes)}",
            "total TPM": _cell(v["total_tpm"], ",.0f", notes), "output TPM": _cell(v["output_tpm"], ",.0f", notes),
            "TTFT p50 s": _cell(v["ttft_p50"], ".4f", notes),
        })  # fmt: skip
    table(out, ["batch", "run", "in/out", "C/N", "ok/failed", "total TPM", "output TPM", "TTFT p50 s"])
    shown = sorted({r.batch for r in rows})
    if len(shown) > 1:
        click.echo(f"{len(shown)} batches side by side ({', '.join(shown)}): nothing is pooled across batches (R2)")
    click.echo("d = derived here from the captured records; r = the tool's own figure (reported); "
               "in/out = input target / output cap (settings, not actual lengths, R3); C/N = concurrency / requests")  # fmt: skip
    for text, k in notes.items():
        click.echo(f"[{k}] n/a: {text}")


@main.command()
@with_ledger
@click.option("--batch", metavar="B", help="Only runs of this batch.")
@click.option("--run", "run_id", type=int, metavar="ID", help="Only this run.")
@json_option
def check(ledger: Ledger, batch: str | None, run_id: int | None, as_json: bool) -> None:
    """Recompute what the tools reported from the records, by each tool's definition (R15).

    Each reported value agrees (within the precision the tool printed), disagrees, or is not
    re-derivable, with the reason (aggregates only, sampled records, field not captured...).

    \b
    Example:
      ledger check --batch fx
    """
    from queries.check import check as do_check

    rows = do_check(ledger, batch, run_id)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    show = [{**r.as_dict(), "run": f"{r.run_id}", "recomputed": "" if r.recomputed is None else repr(r.recomputed)}
            for r in rows]  # fmt: skip
    table(show, ["batch", "run", "key", "reported", "recomputed", "tolerance", "status", "reason"])
    counts = {s: sum(r.status == s for r in rows) for s in ("agree", "disagree", "not re-derivable")}
    click.echo(", ".join(f"{n} {s}" for s, n in counts.items()))


@main.command()
@with_ledger
@click.argument("a")
@click.argument("b")
@click.option("--metric", metavar="M", help="Also give B / A of this metric, labelled with what differs.")
@click.option("--attribute-to", "claim_factor", metavar="FACTOR", help="Claim the difference is due to FACTOR (R6, R8).")
@click.option("--equal-resources", is_flag=True, help="Claim an equal-resource comparison (R6).")
@click.option("--paired", is_flag=True, help="Claim a per-request paired comparison (R6).")
@json_option
def compare(ledger: Ledger, a: str, b: str, metric: str | None, claim_factor: str | None, equal_resources: bool,
            paired: bool, as_json: bool) -> None:  # fmt: skip
    """List every factor that differs between A and B (run:ID, batch:NAME, deployment:NAME).

    A claim the factors do not support is refused with its rule (exit 3).

    \b
    Example:
      ledger compare deployment:h20-old deployment:h20-1017 --metric total_tpm
    """
    from dataclasses import asdict

    from queries.compare import compare as do_compare
    from queries.compare import ratio

    if metric:
        res = ratio(ledger, metric, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
        cmp = res.comparison
    else:
        res, cmp = None, do_compare(ledger, a, b, claim_factor, equal_resources=equal_resources, paired=paired)
    if as_json:
        click.echo(json.dumps(res.as_dict() if res else asdict(cmp), indent=2, default=str))
        return
    table([{"factor": f.name, "A": f.a, "B": f.b} for f in cmp.differences], ["factor", "A", "B"],
          title=f"A = {a}\nB = {b}\nfactors that differ:")  # fmt: skip
    click.echo(f"attributable to: {cmp.attributable_to or 'none (not exactly one difference)'}")
    click.echo(f"stack ratio: {'yes' if cmp.stack_ratio else 'no'}   equal resources: "
               f"{'yes' if cmp.equal_resources else 'no'}   paired: {'yes' if cmp.paired else 'no'}")  # fmt: skip
    for note in cmp.notes:
        click.echo(f"  note: {note}")
    if res:
        def shown(v) -> str:
            return f"{float(v.value):.6g} {v.unit} ({v.flag})" if v.value is not None else f"n/a ({v.na_reason})"

        click.echo(f"{metric}: A {shown(res.a)}; B {shown(res.b)}")
        click.echo(f"B / A = {'n/a' if res.ratio is None else f'{float(res.ratio):.4g}'}: {res.label}")


@main.command()
@with_ledger
@click.argument("claims_file", metavar="CLAIMS.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--fail-on", "fail_on", metavar="VERDICT,...", default="",
              help="Exit 1 when one of these verdicts occurs (e.g. mismatch,refused).")
@json_option
def audit(ledger: Ledger, claims_file: Path, fail_on: str, as_json: bool) -> None:
    """Check every number of a claims file against the ledger; print the verdicts grouped.

    Verdicts: reproduced, consistent, mismatch, not-derivable, quoted, estimated, n/a-kept,
    refused (with its rule). A refused claim is a verdict, not an error. The format is
    documented in docs/claims.md.

    \b
    Example:
      ledger audit ledger/casestudy/claims.yaml --fail-on mismatch,not-derivable
    """
    from queries.audit import audit as run_audit
    from queries.claims import VERDICTS, load_claims

    wanted = [v.strip() for v in fail_on.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in VERDICTS]
    if unknown:
        raise click.BadParameter(f"unknown verdict(s) {', '.join(unknown)}; verdicts: {', '.join(VERDICTS)}",
                                 param_hint="--fail-on")  # fmt: skip
    report = run_audit(load_claims(claims_file), ledger)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        src = report.source_report
        click.echo(f"source report {src['slug']}: {src['title']}" + ("   [SYNTHETIC data]" if report.synthetic else ""))
        for verdict in VERDICTS:
            rows = [r for r in report.results if r.verdict == verdict]
            if not rows:
                continue
            click.echo("")
            table([{"claim": r.claim_id, "printed": r.text, "unit": r.unit, "rule": r.rule,
                    "recomputed": r.recomputed,
                    "detail": r.why or r.missing or r.margin or "; ".join(r.notes)[:100] or None,
                    "expected": None if r.as_expected else f"expected {r.expected_verdict}"}
                   for r in rows],
                  ["claim", "printed", "unit", "rule", "recomputed", "detail", "expected"],
                  title=f"{verdict} ({len(rows)})")  # fmt: skip
        click.echo("")
        click.echo("verdicts: " + ", ".join(f"{k} {v}" for k, v in report.counts().items()))
        off = report.unexpected()
        if off:
            click.echo(f"{len(off)} claim(s) differ from their expected verdict: {', '.join(r.claim_id for r in off)}")
    if any(r.verdict in wanted for r in report.results):
        sys.exit(EXIT_FAILURE)


@main.command()
@with_ledger
@click.argument("claims_file", metavar="CLAIMS.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("claim_id")
@json_option
def explain(ledger: Ledger, claims_file: Path, claim_id: str, as_json: bool) -> None:
    """Print the evidence chain of one claim: claim -> formula or metric -> runs -> requests
    (how many, which fields) -> artefacts (sha256, file, lines) -> source report.

    \b
    Example:
      ledger explain ledger/casestudy/claims.yaml tier-50k-output-tpm
    """
    from queries.claims import load_claims
    from queries.explain import explain as run_explain

    steps = run_explain(load_claims(claims_file), ledger, claim_id, claims_path=claims_file)
    if as_json:
        click.echo(json.dumps([{"level": s.level, "text": s.text.strip(), "detail": s.detail} for s in steps],
                              indent=2, ensure_ascii=False, default=str))  # fmt: skip
        return
    for s in steps:
        click.echo(s.text)


@main.command()
@click.option("--db", "db", metavar="URL", default=None,
              help="Ledger to build the demo in [default: a fresh bench-ledger-demo/ledger.duckdb].")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("bench-ledger-demo"),
              show_default=True, help="Folder for the generated (SYNTHETIC) raw files.")
@click.pass_context
def demo(ctx: click.Context, db: str | None, out: Path) -> None:
    """Build the reference report's case study and audit every number it publishes.

    Generates a SYNTHETIC raw data set shaped after the report (vLLM bench results, server logs of
    nine launches, nvidia-smi dmon samples) in the real tools' formats, declares the system under
    test, imports everything through the real importers, prints the per-batch table and audits the
    report's claims (ledger/casestudy/claims.yaml). The same steps by hand are in
    OUT/data/import-commands.sh.

    \b
    Example:
      ledger demo
      ledger demo --db postgresql+psycopg://postgres@127.0.0.1:5432/test
    """
    import shutil
    from importlib import resources

    from ledger.casestudy.generate import generate
    from ledger.declare import declare as do_declare
    from ledger.declare import load_manifest
    from ledger.ingest import ImportTarget

    data = out / "data"
    if data.exists():
        shutil.rmtree(data)
    if db is None:
        file = out / "ledger.duckdb"
        for stale in (file, file.with_name(file.name + ".wal")):
            stale.unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        db = f"duckdb:///{file}"
    banner = "SYNTHETIC DATA: generated by bench-ledger, shaped after the report; not the report's raw records"
    click.echo(f"== {banner}\n== raw files: {data}/  ledger: {db}")
    generated = generate(data)
    with open_ledger(db, migrated=False) as ledger:
        ledger.init()
        ledger.require_empty()
        done = do_declare(ledger, load_manifest(generated.manifest), generated.manifest.parent)
        ok = True
        for dep, attempt, log in done.launch_logs:
            ok &= import_one(ledger, log, "vllm-server-log", ImportTarget(batch=None, deployment=dep, launch=(dep, attempt)),
                             quiet=True)  # fmt: skip
        for job in generated.imports:
            ok &= import_one(ledger, job.path, None, ImportTarget(batch=job.batch, run=job.run, node=job.node),
                             quiet=True)  # fmt: skip
    if not ok:
        raise click.ClickException("the demo data did not import cleanly (see above)")
    click.echo(f"\n== per-batch table ({banner})")
    ctx.invoke(metrics, db=db, batches=("fx", "m17"), run_id=None, as_json=False, as_csv=False)
    click.echo(f"\n== audit of the report's published numbers ({banner})")
    claims = Path(str(resources.files("ledger.casestudy") / "claims.yaml"))
    ctx.invoke(audit, db=db, claims_file=claims, fail_on="", as_json=False)
    click.echo(f"\n== explore: ledger --help; e.g. ledger explain {claims} tier-50k-total-tpm --db {db}")


if __name__ == "__main__":  # pragma: no cover
    main()
