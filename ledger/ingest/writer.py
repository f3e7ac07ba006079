"""Write parsed artefacts into the ledger: one transaction, all or nothing, for one file or a group of
them (each file's rows as :func:`write_artefacts` of it alone would write them)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from bench_ledger import factors, guards, pairing, seal
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.errors import AlreadyImported, InputError, LedgerError, ParseError, UsageError
from bench_ledger.ingest.artefacts import WrittenArtefact, shown_name, store_copy
from bench_ledger.ingest.bulk import arrow_of, bulk_insert, next_ids
from bench_ledger.ingest.published import write_published
from bench_ledger.ingest.refusals import refuse_other_model, translated
from bench_ledger.ingest.request_rows import PendingRows
from bench_ledger.ingest.runs import RunWriter
from bench_ledger.ingest.samples import write_samples, write_wide_samples
from bench_ledger.ingest.target import ImportResult, ImportTarget, launch_of, open_batch
from bench_ledger.store import Ledger, now

__all__ = ["ANALYZE_AFTER_ROWS", "BULK_TABLES", "Parsed", "write_artefact", "write_artefacts"]

# After a bulk load this large, PostgreSQL's planner statistics are stale until autovacuum runs
# (metric queries were seen picking bad plans on a freshly imported million-request ledger).
ANALYZE_AFTER_ROWS = 100_000
BULK_TABLES = ("request", "request_gaps", "request_value", "hardware_sample")


@dataclass
class Parsed:
    """One hashed and parsed file, ready to be written (:func:`write_artefacts`)."""

    path: Path
    sha: str
    size: int
    parsed: rec.ParsedArtefact
    importer: str

    @property
    def rows(self) -> int:
        """Requests of its runs, once they are a list (a group's budget)."""
        runs = self.parsed.runs
        return sum(len(r.requests) for r in runs if r.requests is not None) if isinstance(runs, list) else 0


def write_artefact(
    ledger: Ledger,
    path: Path,
    sha: str,
    size: int,
    parsed: rec.ParsedArtefact,
    importer: str,
    importer_version: str,
    target: ImportTarget,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Write everything parsed from one file in one transaction.

    ``progress`` is called with the number of rows written so far, after each run and each chunk
    of samples (the file is parsed while it is written, so this is the import's progress).
    """
    return write_artefacts(ledger, [Parsed(path, sha, size, parsed, importer)], importer_version, target, progress)[0]


def write_artefacts(
    ledger: Ledger,
    files: list[Parsed],
    importer_version: str,
    target: ImportTarget,
    progress: Callable[[int], None] | None = None,
    analyze: bool = True,
) -> list[ImportResult]:
    """Write the artefacts of ``files`` in one transaction (all or none), in order, each as
    :func:`write_artefact` would one after the other: one file's import, or a group of small files
    (:func:`import_files`), whose runs, captures, requests and digests then go to the database with a
    handful of statements for the whole group. Runs of two files of a group that land on one run
    raise :class:`GroupSplit` (the backfill check reads earlier captures from the database); the
    caller imports that group's files one by one. ``analyze``: refresh PostgreSQL's statistics after
    a large write (the caller may do it once for many)."""
    for what, name in (
        ("the batch name", target.batch),
        ("the run label", target.run),
        ("the deployment name", target.deployment),
        ("the node name", target.node),
    ):
        if name is not None and (why := rec.name_violation(what, name)):
            raise InputError(f"{files[0].path}: {why}")
    results: list[ImportResult] = []
    # the writer thread's COPY ends before the transaction does: closed first (ExitStack), also on an error
    with ledger.session() as s, contextlib.ExitStack() as cleanup:
        shas = [f.sha for f in files]
        for done in s.scalars(
            sa.select(m.Artefact).where(m.Artefact.sha256.in_(shas))
        ):  # imported concurrently since the check
            path = files[shas.index(done.sha256)].path
            raise AlreadyImported(
                f"{path}: already imported as artefact {done.id} (sha256 {done.sha256[:12]}…); nothing changed", done.id
            )
        for f in files:  # the artefact row's texts (a note may quote the file's header): refused on both backends
            for what, text in (("note", f.parsed.note), ("format_version", f.parsed.format_version)):
                problem = rec.text_violation(f"the artefact's {what}", text) if text else None
                if problem:
                    raise ParseError(f.path, None, what, problem)
        batch, created = open_batch(s, target.batch) if target.batch else (None, False)
        deployment_id = Ledger.get_deployment(s, target.deployment).id if target.deployment else None
        if deployment_id is None and batch is not None:
            deployment_id = batch.deployment_id
        conn = s.connection()
        if ledger.backend == "duckdb" and len(files) > 1:
            # a group's commit passed DuckDB's 16 MB WAL threshold and checkpointed, group after group
            # (benchmarks/profile_notes.md); the WAL is still written and synced at each commit
            conn.exec_driver_sql("SET checkpoint_threshold = '1GB'")
        # the bulk tables' rows, hashed for the artefact digests as they are handed to the database (seal.PooledRows)
        pooled = seal.PooledRows()
        rows = PendingRows(conn, ledger.backend, pooled)
        cleanup.callback(rows.close)
        runs = RunWriter(s, conn, ledger.backend, batch, deployment_id, rows, progress)
        matcher: pairing.Matcher | None = None
        landed: dict[str, Path] = {}  # run label written -> the file of the group that wrote it
        # the artefact rows, one statement for the group (an insert, allowed; the batch was checked open);
        # each copy is in place before its row names it (a row is never updated afterwards, R9)
        art_ids = next_ids(conn, ledger.backend, "artefact", len(files))
        art_rows: list[dict[str, Any]] = [
            dict(
                id=art_id,
                sha256=f.sha,
                size_bytes=f.size,
                file_name=shown_name(f.path),
                format=f.parsed.format,
                stored_path=store_copy(f.path, f.sha, target.store_copy) if target.store_copy is not None else None,
                format_version=f.parsed.format_version,
                importer=f.importer,
                importer_version=importer_version,
                imported_at=now(),
                batch_id=batch.id if batch else None,
                deployment_id=deployment_id,
                node=target.node,
                note=f.parsed.note,
            )
            for art_id, f in zip(art_ids, files, strict=True)
        ]
        bulk_insert(conn, ledger.backend, "artefact", arrow_of(m.Artefact.__table__, art_rows, conn.dialect))
        guards.bulk_created_artefacts(s, art_ids)
        for f, art_id in zip(files, art_ids, strict=True):
            path, parsed = f.path, f.parsed
            result = ImportResult(
                artefact_id=art_id,
                sha256=f.sha,
                format=parsed.format,
                created_batch=batch.name if created and batch is not None and not results else None,
                notes=[f"{path.name}: {parsed.notice}"] if parsed.notice else [],
            )
            results.append(result)
            one = WrittenArtefact(art_id, path, result)
            seen = 0
            used: dict[str, str] = {}  # run label written -> the file's own label of that run
            named_launches: set[str] = set()
            for pr in translated(path, parsed.iter_runs()):
                if batch is None:
                    raise UsageError(f"{path}: holds benchmark runs; name the batch they belong to with --batch")
                if target.run and seen:
                    raise InputError(
                        f"{path}: holds several runs; --run can name only one (omit it to label runs from the file)"
                    )
                seen += 1
                if (model := pr.info.factors.get("model")) is not None and deployment_id is not None:
                    refuse_other_model(s, path, deployment_id, model)
                stated, notes = factors.merged(pr.info.factors, factors.from_path(path), shown_name(path))
                pr.info.metadata.update(factors.to_metadata(stated))
                pr.info.metadata[pairing.FOLDER] = pairing.folder_of(path)
                result.notes.extend(notes)
                if target.run:
                    label = target.run
                else:  # the run this file's run belongs to: a paired or a declared run, else a new one (ledger.pairing)
                    matcher = matcher or pairing.Matcher(s, batch.id, batch.name, result.notes, ledger.backend)
                    matcher.notes = result.notes
                    label = matcher.resolve(path, pr, parsed.format)
                    if label in matcher.new:
                        runs.new.add(label)
                if label in used:
                    raise ParseError(
                        path,
                        pr.info.locator,
                        "run label",
                        f"{pr.info.label!r} belongs to run {label!r}, "
                        f"as {used[label]!r} of this file does; one file holds one capture per run",
                    )
                used[label] = pr.info.label
                if landed.setdefault(label, path) != path:
                    raise GroupSplit(f"{path}: run {label!r} also gets a capture from {landed[label]} of this group")
                if name := pr.info.metadata.get("launch"):
                    named_launches.add(name)
                runs.add(label, pr, one)
            if len(files) == 1:  # one file: its rows before anything else it holds, as they stream in
                runs.flush()
                rows.flush()
            if named_launches:
                if deployment_id is None:
                    result.launch_note = (
                        f"the file names launch {', '.join(sorted(named_launches))}: no launch row without "
                        "a deployment (--deployment, or the batch's); kept as run.metadata.launch"
                    )
                else:
                    result.launches = [launch_of(s, deployment_id, name) for name in sorted(named_launches)]

            samples = translated(path, parsed.samples)
            for chunk in samples:
                s.flush()
                if isinstance(chunk, rec.WideSamples):
                    result.samples += write_wide_samples(conn, ledger.backend, art_id, target.node, chunk, path, pooled)
                else:
                    result.samples += write_samples(conn, ledger.backend, art_id, target.node, chunk, path, pooled)
                if progress is not None:
                    progress(result.rows)

            if parsed.log_facts:
                s.add_all(
                    m.LogFact(
                        artefact_id=art_id,
                        line=lf.line,
                        kind=lf.kind,
                        process=lf.process,
                        value=lf.value,
                        text=lf.text,
                        unit=lf.unit,
                        logged_at=lf.logged_at,
                    )
                    for lf in parsed.log_facts
                )
                result.log_facts = len(parsed.log_facts)
            if target.launch is not None:
                dep_name, attempt = target.launch
                dep = Ledger.get_deployment(s, dep_name)
                launch = s.scalar(
                    sa.select(m.Launch).where(m.Launch.deployment_id == dep.id, m.Launch.attempt == attempt)
                )
                if launch is not None and launch.log_artefact_id is None:
                    launch.log_artefact_id = art_id
            result.published += write_published(
                s, parsed.published, art_id, batch.id if batch else None, None, deployment_id
            )
        runs.flush()
        rows.flush()
        rows.wait()
        rows.close()
        s.flush()  # each artefact's digest over its rows as stored, in this same transaction (seal scheme 3)
        store_digests(
            s.connection(), ledger.backend, seal.artefact_digest_rows(s.connection(), ledger.backend, art_ids, pooled)
        )
    if analyze and sum(r.rows for r in results) >= ANALYZE_AFTER_ROWS:
        # the tables this import wrote (ANALYZE samples 30k rows of a table however few it got; a
        # ledger holding millions of samples paid for them after every request import)
        ledger.refresh_statistics(tuple(t for t in BULK_TABLES if t in pooled.written))
    return results


def store_digests(conn: sa.Connection, backend: str, rows: list[dict]) -> None:
    """The ``artefact_digest`` rows of an import (:func:`ledger.seal.artefact_digest_rows`), in one statement."""
    if backend == "duckdb":  # one scan of an Arrow table rather than an executemany per artefact
        bulk_insert(
            conn,
            backend,
            "artefact_digest",
            pa.table(
                {
                    "artefact_id": pa.array([r["artefact_id"] for r in rows], pa.int32()),
                    "table_name": pa.array([r["table_name"] for r in rows], pa.string()),
                    "row_count": pa.array([r["row_count"] for r in rows], pa.int64()),
                    "root": pa.array([r["root"] for r in rows], pa.string()),
                    "chunks": pa.array([r["chunks"] for r in rows], pa.binary()),
                }
            ),
        )
        return
    conn.execute(sa.insert(m.ArtefactDigest), rows)


class GroupSplit(LedgerError):
    """Two files of a group write to one run: the group is imported file by file instead."""
