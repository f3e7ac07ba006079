"""Commands that build a ledger: init, status, declare, import, formats."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from bench_ledger.cli.app import (
    EXIT_FAILURE,
    Interrupted,
    db_option,
    interrupt_of,
    json_option,
    main,
    open_ledger,
)
from bench_ledger.errors import AlreadyImported, LedgerError, Refused, UsageError

__all__ = ["RowProgress", "import_one"]

if TYPE_CHECKING:  # the store (SQLAlchemy, DuckDB, Alembic) loads when a command runs, not for --help
    from bench_ledger.store import Ledger


@main.command()
@db_option
def init(db: str | None) -> None:
    """Create the ledger or upgrade its schema to the latest revision.

    \b
    Example:
      ledger init --db postgresql+psycopg://postgres@127.0.0.1:5432/test
    """
    with open_ledger(db, migrated=False, create=True) as ledger:
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
        click.echo(
            json.dumps(
                {
                    "url": st.url,
                    "backend": st.backend,
                    "revision": st.revision,
                    "head": st.head,
                    "counts": st.counts,
                    "guard_problems": st.guard_problems,
                },
                indent=2,
            )
        )
        if st.guard_problems:
            sys.exit(EXIT_FAILURE)
        return
    click.echo(f"ledger:   {st.url}")
    click.echo(f"backend:  {st.backend}")
    state = "up to date" if st.revision == st.head else "run `ledger init`"
    click.echo(f"schema:   {st.revision or 'none'} (head {st.head}, {state})")
    if st.backend == "postgresql" and st.revision == st.head:
        click.echo(
            "guards:   "
            + (
                f"{len(st.guard_problems)} PROBLEM(S)"
                if st.guard_problems
                else "append-only and closed-batch triggers present and enabled"
            )
        )
    elif st.backend == "duckdb":
        click.echo("guards:   session guards only (DuckDB 1.x has no triggers; `ledger verify` detects raw SQL)")
    for name, n in sorted(st.counts.items()):
        click.echo(f"  {name:<16} {n:>10,}")
    for p in st.guard_problems:
        click.echo(f"guard problem: {p}", err=True)
    if st.guard_problems:
        sys.exit(EXIT_FAILURE)


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
    from bench_ledger.declare import declare as do_declare
    from bench_ledger.declare import load_manifest
    from bench_ledger.ingest import ImportTarget

    with open_ledger(db) as ledger:
        done = do_declare(ledger, load_manifest(manifest), manifest.parent)
        for kind in sorted(set(done.created) | set(done.unchanged)):
            click.echo(f"{kind}: {done.created.get(kind, 0)} declared, {done.unchanged.get(kind, 0)} already there")
        failed = False
        for dep, attempt, log in done.launch_logs:
            failed |= not import_one(
                ledger,
                log,
                "vllm-server-log",
                ImportTarget(batch=None, deployment=dep, launch=(dep, attempt)),
                quiet=False,
            )
    if failed:
        sys.exit(EXIT_FAILURE)


def import_one(ledger: Ledger, path: Path, fmt: str | None, target, quiet: bool, force_format: bool = False) -> bool:
    """Import one file through :func:`bench_ledger.ingest.import_file`; print what happened.
    False when the file failed."""
    return _import_outcome(ledger, path, fmt, target, quiet, force_format) != _FAILED


_IMPORTED, _ALREADY, _SKIPPED, _FAILED = "imported", "already imported", "skipped", "failed"


def _import_outcome(
    ledger: Ledger,
    path: Path,
    fmt: str | None,
    target,
    quiet: bool,
    force_format: bool = False,
    found_in_folder: bool = False,
) -> str:
    """:func:`import_one`, saying which of _IMPORTED, _ALREADY, _SKIPPED, _FAILED happened. A file met
    while walking a folder (``found_in_folder``) that no format recognises is _SKIPPED, with the reason;
    a file named on the command line is then _FAILED."""
    from bench_ledger import importers
    from bench_ledger.ingest import import_file

    def outcome(progress):
        return import_file(ledger, path, importers.choose(path, fmt, force=force_format), target, progress)

    return _shown_outcome(ledger, path, target, quiet, outcome, found_in_folder)


def _shown_outcome(
    ledger: Ledger,
    path: Path,
    target,
    quiet: bool,
    outcome,
    found_in_folder: bool = False,
    into: list[dict] | None = None,
) -> str:
    """Print what importing ``path`` did: ``outcome(progress)`` returns its ImportResult or raises what
    the import raised (``bench_ledger.ingest.import_files``); _IMPORTED, _ALREADY, _SKIPPED or _FAILED.
    With ``into`` (``--json``) nothing is printed: the file's result is appended to it as a dict."""
    entry = _file_result(ledger, path, target, quiet, outcome, found_in_folder)
    if into is not None:
        into.append(entry)
        return entry["outcome"]
    if entry["outcome"] != _IMPORTED:
        click.echo(f"error: {entry['error']}" if entry["error"] else entry["message"], err=bool(entry["error"]))
        return entry["outcome"]
    if entry["created_batch"]:
        near = f" (did you mean {', '.join(entry['did_you_mean'])}?)" if entry["did_you_mean"] else ""
        click.echo(
            f"note: batch {entry['created_batch']!r} did not exist: created it (open) for {path.name}{near}; "
            "`ledger batches` lists them",
            err=True,
        )
    for note in entry["notes"]:
        click.echo(f"note: {note}", err=True)
    runs = entry["runs"]
    parts = [f"{len(runs)} run(s)", f"{sum(r['requests'] for r in runs):,} requests"] if runs else []
    parts += [f"{entry['samples']:,} samples"] if entry["samples"] else []
    parts += [f"{entry['log_facts']} log facts"] if entry["log_facts"] else []
    parts += [f"{entry['reported_values']} reported values"] if entry["reported_values"] else []
    click.echo(
        f"{path}: imported as artefact {entry['artefact_id']} [{entry['format']}] sha256 {entry['sha256'][:12]}…: "
        f"{', '.join(parts) or 'nothing'}"
    )
    if not quiet:
        for r in runs:
            click.echo(f"  run {r['id']} {r['label']}: {r['requests']} requests")
    for launch in entry["launches"]:
        click.echo(f"  launch {launch}")
    if entry["launch_note"]:
        click.echo(f"note: {path.name}: {entry['launch_note']}", err=True)
    return _IMPORTED


def _file_result(ledger: Ledger, path: Path, target, quiet: bool, outcome, found_in_folder: bool) -> dict:
    """What importing ``path`` did, as the dict `ledger import --json` prints per file: ``outcome``
    (_IMPORTED, _ALREADY, _SKIPPED, _FAILED), ``error`` (a failure's message) or ``message`` (why it was
    skipped or already imported), and for an imported file its artefact, runs and counts."""
    from bench_ledger.errors import FormatRefused, UnknownFormat, near_names
    from bench_ledger.ingest import options_not_applied, runs_of_artefact

    entry: dict = {
        "file": str(path),
        "outcome": _FAILED,
        "error": None,
        "message": None,
        "artefact_id": None,
        "format": None,
        "sha256": None,
        "runs": [],
        "samples": 0,
        "log_facts": 0,
        "reported_values": 0,
        "created_batch": None,
        "did_you_mean": [],
        "notes": [],
        "launches": [],
        "launch_note": None,
    }
    try:
        with RowProgress(path, enabled=not quiet) as shown:
            res = outcome(shown)
    except UnknownFormat as exc:
        if not found_in_folder:
            return {**entry, "error": str(exc)}
        return {
            **entry,
            "outcome": _SKIPPED,
            "message": f"{path}: skipped: format not recognised ({len(exc.reasons)} "
            f"formats tried; `ledger import {path}` shows why each refused it)",
        }
    except AlreadyImported as exc:
        entry["artefact_id"] = exc.artefact_id
        if exc.artefact_id is not None:
            where, differ = options_not_applied(ledger, exc.artefact_id, target)
            if differ:
                return {
                    **entry,
                    "error": f"{exc}: it is in {where}; {', '.join(differ)} not applied: an artefact "
                    "keeps the batch, deployment, node and time zone it was imported with, and no correction "
                    "changes them (captured rows never move, R9)",
                }
        if target.run and exc.artefact_id is not None:
            held = runs_of_artefact(ledger, exc.artefact_id)
            if target.run not in {label for _, label, _ in held}:
                where = ", ".join(f"run {rid} {label!r} of batch {b!r}" for rid, label, b in held) or "no run"
                return {
                    **entry,
                    "error": f"{exc}: it is in {where}; --run {target.run!r} was not applied (an import "
                    f"never moves what was captured). To attach it to another run, as a correction: "
                    f'`ledger attach {exc.artefact_id} --run RUN_ID --reason "..."` '
                    "(`ledger runs --batch B` lists the ids)",
                }
        return {**entry, "outcome": _ALREADY, "message": str(exc)}
    except (Refused, UsageError):  # the command is wrong, not the file: stop (exit 3 / exit 2)
        raise
    except LedgerError as exc:
        if found_in_folder and isinstance(exc, FormatRefused):
            return {**entry, "outcome": _SKIPPED, "message": f"{path}: skipped: {str(exc).removeprefix(f'{path}: ')}"}
        return {**entry, "error": str(exc)}
    if res.created_batch:
        from bench_ledger.store import known_names

        with ledger.connection() as conn:
            entry["did_you_mean"] = near_names(res.created_batch, known_names(conn, "batch"))
    return {
        **entry,
        "outcome": _IMPORTED,
        "artefact_id": res.artefact_id,
        "format": res.format,
        "sha256": res.sha256,
        "runs": [{"id": i, "label": label, "requests": n} for i, label, n in res.runs],
        "samples": res.samples,
        "log_facts": res.log_facts,
        "reported_values": res.published,
        "created_batch": res.created_batch,
        "notes": list(res.notes),
        "launches": list(res.launches),
        "launch_note": res.launch_note,
    }


def _files_to_import(paths: tuple[Path, ...]) -> list[tuple[Path, bool]]:
    """The files named, and every regular file under each folder named (recursively, sorted, symbolic
    links to folders not followed): (path, found in a folder)."""
    import os

    out: list[tuple[Path, bool]] = []
    for p in paths:
        if not p.is_dir():
            out.append((p, False))
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            out.extend((Path(root) / f, True) for f in sorted(files) if (Path(root) / f).is_file())
    return out


@main.command("import")
@db_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--batch", "batch", metavar="B", help="Batch the runs belong to (created open if new).")
@click.option(
    "--run",
    "run",
    metavar="LABEL",
    help="Attach to this run label instead of the one the content pairs it with (a paired file, a declared run) "
    "or labels it; `ledger attach` moves an already imported artefact.",
)
@click.option("--deployment", metavar="NAME", help="Deployment (system under test) the artefact describes.")
@click.option("--format", "fmt", metavar="F", help="Name the format (see `ledger formats`) instead of detecting it.")
@click.option(
    "--force-format", is_flag=True, help="Import as --format even when that format's own check rejects the file."
)
@click.option("--node", metavar="NODE", help="Node the samples came from (nvidia-smi dmon).")
@click.option(
    "--time-zone",
    "time_zone",
    metavar="TZ",
    help="IANA zone of the host-local timestamps of GPU samples (nvidia-smi CSV); else unconfirmed.",
)
@click.option(
    "--start",
    "start",
    metavar="ISO",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]),
    help="When sample 0 was taken, for samplers that print no times (dcgmi dmon); with --interval.",
)
@click.option(
    "--interval",
    "interval_s",
    metavar="SECONDS",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds between samples (dcgmi dmon -d, in seconds); with --start.",
)
@click.option("--copy/--no-copy", default=False, help="Keep a content-addressed copy next to the ledger.")
@click.option("--quiet", "-q", is_flag=True, help="No progress, one line per file.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document: each file's outcome, artefact, runs and counts, and the totals.",
)
def import_(
    db, paths, batch, run, deployment, fmt, force_format, node, time_zone, start, interval_s, copy, quiet, as_json
) -> None:
    """Import benchmark outputs, GPU samples or server logs; the format is detected from content.

    Each file is its own transaction: a bad file leaves nothing behind and the others still
    import. Importing the same bytes again changes nothing; with another --batch, --deployment,
    --node or --time-zone than it was imported with, it fails (exit 1) naming where it is.
    --json prints each file's outcome as JSON (exit codes unchanged). A folder is imported recursively:
    files no format recognises are skipped (with the reason), and a summary line ends the output.

    A run is attached to an existing run of the batch when the content says it belongs there:
    the other file of the same run (llmperf's <prefix>_summary.json and
    <prefix>_individual_responses.json, same request count), or the one declared run
    (`ledger declare`) whose workload settings agree. When several runs qualify, none is chosen:
    the file fails naming them, and --run picks one.

    \b
    Example:
      ledger import results/*.json --batch fx
      ledger import llmperf-results/ --batch lp
      ledger import dmon-node0.txt --batch fx --node node0
    """
    from bench_ledger.gcpause import gc_paused

    with gc_paused():  # start-up: the import pipeline's modules (Arrow, pydantic, the models), see open_ledger
        from bench_ledger import importers
        from bench_ledger.ingest import ImportTarget, import_files

    if force_format and not fmt:
        raise click.UsageError("--force-format needs --format F (the format to force)")
    if (start is None) != (interval_s is None):
        raise click.UsageError("--start and --interval go together: sample k was taken at start + k x interval")
    if time_zone is not None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise click.UsageError(
                f"--time-zone {time_zone!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)"
            ) from None
    with open_ledger(db) as ledger:
        store = ledger.artefact_folder() if copy else None
        target = ImportTarget(
            batch=batch,
            run=run,
            deployment=deployment,
            node=node,
            store_copy=store,
            time_zone=time_zone,
            start=start,
            interval_s=interval_s,
        )
        tally = dict.fromkeys((_IMPORTED, _ALREADY, _SKIPPED, _FAILED), 0)
        # small files go in groups, one transaction each; every file keeps its own outcome (ingest.import_files)
        last: list[importers.Importer] = []  # the format detected last: asked first for the next file

        def choose(p: Path) -> importers.Importer:
            imp = importers.choose(p, fmt, force=force_format, prefer=last[-1] if last else None)
            last[:] = [imp]
            return imp

        quiet = quiet or as_json
        results: list[dict] | None = [] if as_json else None
        chosen = ((p, lambda p=p: choose(p), in_folder) for p, in_folder in _progress(_files_to_import(paths), quiet))
        try:
            for path, in_folder, outcome in import_files(ledger, chosen, target):
                tally[_shown_outcome(ledger, path, target, quiet, outcome, in_folder, into=results)] += 1
        except BaseException as exc:
            if not interrupt_of(exc):
                raise
            # each file (or group of small files) is its own transaction: those before are committed
            raise Interrupted(
                f"interrupted (Ctrl-C): the {tally[_IMPORTED]} file(s) imported before it are kept (each committed); "
                "the file or group of files being written was rolled back and the files after it were not read; "
                "run the same command again to import them (files already imported are skipped)"
            ) from None
    if results is not None:
        click.echo(json.dumps({"files": results, "counts": tally}, indent=2))
    elif any(p.is_dir() for p in paths):
        click.echo(
            f"{tally[_IMPORTED]} imported, {tally[_ALREADY]} already imported, {tally[_SKIPPED]} skipped "
            f"(format not recognised{' or refused by --format' if fmt else ''}), {tally[_FAILED]} failed"
        )
    if tally[_FAILED]:
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


def _progress(paths, quiet: bool):
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
    from bench_ledger import importers

    rows = [{"name": i.name, "description": i.description} for i in importers.all_importers()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            click.echo(f"{r['name']:<{width}}  {r['description']}")
