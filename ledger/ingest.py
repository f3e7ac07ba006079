"""Write one parsed artefact into the ledger: one transaction, all or nothing.

The importer has already turned the file into :mod:`ledger.records`; this module only writes. Row
tables (requests, chunk gaps, hardware samples) go in as Arrow tables through the database's own
bulk path (:mod:`ledger.bulk`), never one ORM object per row.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import factors, guards, pairing, seal
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.bulk import bulk_insert
from bench_ledger.encoding import chunks as dg
from bench_ledger.errors import (
    AlreadyImported,
    InputError,
    LedgerError,
    NotFound,
    ParseError,
    Refused,
    UsageError,
    WriteConflict,
)
from bench_ledger.store import Ledger, now
from pydantic import ValidationError
from sqlalchemy.orm import Session

# After a bulk load this large, PostgreSQL's planner statistics are stale until autovacuum runs
# (metric queries were seen picking bad plans on a freshly imported million-request ledger).
ANALYZE_AFTER_ROWS = 100_000
BULK_TABLES = ("request", "request_gaps", "request_value", "hardware_sample")


def sha256_file(path: Path) -> tuple[str, int]:
    rec.require_regular_file(path)
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


@dataclass
class ImportTarget:
    """Where the artefact goes: the batch, an optional run label and deployment, the node."""

    batch: str | None
    run: str | None = None
    deployment: str | None = None
    node: str | None = None
    time_zone: str | None = None  # zone of the host-local sample timestamps, as the user declares it
    start: datetime | None = None  # when sample 0 was taken (timestamp-less samplers), as declared
    interval_s: float | None = None  # seconds between samples, as declared
    launch: tuple[str, int] | None = None  # (deployment, attempt) for a server log
    store_copy: Path | None = None  # content-addressed folder for a copy of the bytes


@dataclass
class ImportResult:
    artefact_id: int
    sha256: str
    format: str
    runs: list[tuple[int, str, int]] = field(default_factory=list)  # (run id, label, requests)
    samples: int = 0
    log_facts: int = 0
    published: int = 0
    created_batch: str | None = None  # the batch this import created (it did not exist before)
    notes: list[str] = field(default_factory=list)  # how runs were paired (ledger.pairing), for the user
    launches: list[str] = field(default_factory=list)  # "deployment#attempt (label)" its runs ran against
    launch_note: str | None = None  # why the launches its files name got no launch row

    @property
    def rows(self) -> int:
        """Requests and samples written so far."""
        return sum(n for _, _, n in self.runs) + self.samples


class Parser(Protocol):
    """What the pipeline needs of an importer (``bench_ledger.importers.base.Importer`` fits)."""

    name: str

    def parse(self, path: Path, options: rec.ParseOptions) -> rec.ParsedArtefact: ...


@functools.cache
def package_version() -> str:
    """The importer version recorded with each artefact: the installed package's version (read once:
    the package metadata lookup cost ~1 ms per imported file)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as pkg_version

    try:
        return pkg_version("bench-ledger")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def import_file(
    ledger: Ledger,
    path: Path,
    importer: Parser,
    target: ImportTarget,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import one file with ``importer``: hash, refuse the same bytes twice, parse, write.

    The whole pipeline a caller needs (the CLI, the demo, a notebook): the importer is chosen by
    the caller (``bench_ledger.importers.choose``), because the core does not know the formats.
    Raises :class:`AlreadyImported` when the bytes are in the ledger (nothing changed), a
    :class:`ParseError` / :class:`InputError` naming the file and place, or :class:`Refused`;
    on any error nothing of the file is written. An attempt that lost a race with another process
    (PostgreSQL) runs again, seeing what that process committed (:func:`retry_conflicts`).
    """

    def attempt() -> ImportResult:
        sha, size = check_not_imported(ledger, path)
        try:
            parsed = importer.parse(
                path,
                rec.ParseOptions(
                    node=target.node, time_zone=target.time_zone, start=target.start, interval_s=target.interval_s
                ),
            )
        except (
            ValidationError,
            RecursionError,
            UnicodeEncodeError,
        ) as exc:  # the parser's first steps; the streamed rest: translated()
            raise rec.as_parse_error(path, exc) from None
        return write_artefact(ledger, path, sha, size, parsed, importer.name, package_version(), target, progress)

    return retry_conflicts(attempt)


# Group commit (issue 17): small files go to the database a group at a time, in one transaction.
GROUP_FILES = 256  # files per group (64: 16 commits of 40-90 ms for the benchmark's 1,000 files; profile note 17)
GROUP_ROWS = 1 << 18  # or fewer files, their requests within about this many (memory: 0.72 GB peak, 1.2 GB for 1M)
GROUP_FILE_BYTES = 4 << 20  # a larger file is imported alone (its runs stream; one commit is nothing next to it)
FIRST_GROUP_FILES = 32  # PostgreSQL: the first group's files, doubling group after group up to GROUP_FILES

K = TypeVar("K")
Outcome = Callable[[Callable[[int], None] | None], ImportResult]  # called with a progress callback


def import_files(
    ledger: Ledger, files: Iterable[tuple[Path, Callable[[], Parser], K]], target: ImportTarget
) -> Iterator[tuple[Path, K, Outcome]]:
    """Import files in order, each as :func:`import_file` would one after the other; yields per file
    (path, key, outcome), where calling ``outcome(progress)`` returns its :class:`ImportResult` or
    raises what :func:`import_file` would have raised (``files`` gives each file with the call that
    chooses its importer, which may raise too, and a key handed back as it is).

    Why: a file of 1,000 requests cost ~100 ms, mostly per-file statements and the commit. Up to
    :data:`GROUP_FILES` small files of one batch (no ``--run``) are hashed, checked against the
    ledger with one query, parsed (several files per call where the importer has ``parse_many``),
    and written by :func:`write_artefacts` in one transaction. Each file stays all or nothing: when
    anything in a group fails (a bad row, a refusal, a lost race), the group is rolled back and its
    files are imported one by one, so the file at fault fails with its own message and the others
    import. A file that is already imported, cannot be parsed, pairs with another file (a pairing
    key) or holds more than runs (samples, log facts) is imported alone, in its place. Files
    imported alone are imported when their outcome is called, so a caller that stops (a refusal
    ends the command) imports nothing after it. PostgreSQL's statistics are refreshed once, after
    the last group."""
    groups = target.batch is not None and target.run is None and target.launch is None
    pending: list[tuple[Path, Parser, K]] = []
    # PostgreSQL waits for the first group's parse: there groups start small and double, so its writes
    # start early (1,000 files: 3.07-3.49x the floor against 3.52-3.77x, four pairs; profile note 35);
    # on DuckDB each commit costs more than the wait (3.9-4.0 s against 3.4 s)
    group_files = min(FIRST_GROUP_FILES, GROUP_FILES) if ledger.backend == "postgresql" else GROUP_FILES
    written = [0]
    # the next group's files are hashed and parsed in a thread while the group before is written
    # (both drivers, DuckDB's reader, hashlib and Arrow's kernels release the GIL): at most one ahead
    from concurrent.futures import Future, ThreadPoolExecutor

    ahead = ThreadPoolExecutor(1, thread_name_prefix="ledger-prepare")
    queued: list[Future] = []
    claimed: set[str] = set()  # hashes of the files prepared so far (only the preparing thread uses it)

    def alone(path: Path, choose: Callable[[], Parser]) -> Outcome:
        def outcome(progress: Callable[[int], None] | None = None) -> ImportResult:
            return import_file(ledger, path, choose(), target, progress)

        return outcome

    def prepare(items: list[tuple[Path, Parser, K]]) -> list:
        return list(_prepared(ledger, items, target, claimed))

    def flush(drain: bool = True) -> Iterator[tuple[Path, K, Outcome]]:
        if pending:
            queued.append(ahead.submit(prepare, pending[:]))
            pending.clear()
        while queued and (drain or len(queued) > 1):
            yield from written_files(queued.pop(0).result())

    def written_files(prepared: list) -> Iterator[tuple[Path, K, Outcome]]:
        ready: list[tuple[Parsed, Parser, K]] = []
        for kind, item in prepared:
            if kind == "known":  # already imported (1,000 such files cost a hash, a session and a query each)
                yield from written_groups(ready)
                path, exc, key = item
                yield path, key, _raises(exc)
            elif kind == "alone":
                yield from written_groups(ready)
                path, imp, key = item
                yield path, key, alone(path, _given(imp))
            else:
                ready.append(item)
        yield from written_groups(ready)

    def written_groups(ready: list[tuple[Parsed, Parser, K]]) -> Iterator[tuple[Path, K, Outcome]]:
        """The files of ``ready`` (consecutive, each to be written with others) as the fewest groups of
        at most about :data:`GROUP_ROWS` requests, of about equal size. Cut where a group reached the
        limit, 256 files of 1,000 requests were a group of 250 and one of 6, each a transaction (seven
        commits instead of four for the benchmark's 1,000 files; profile note 28)."""
        items, rows = ready[:], [f.rows for f, _, _ in ready]  # Parsed.rows sums the runs: once per file
        ready.clear()
        total = sum(rows)
        parts = max(1, -(-total // GROUP_ROWS))  # ceil: the fewest groups within the limit
        group: list[tuple[Parsed, Parser, K]] = []
        upto, cut = 0, 1  # requests so far; the next cut is after cut/parts of them
        for item, n in zip(items, rows, strict=True):
            group.append(item)
            upto += n
            if cut < parts and upto * parts >= total * cut:
                yield from write(group)  # write() takes the files and empties the list
                cut += 1
        yield from write(group)

    def write(ready: list[tuple[Parsed, Parser, K]]) -> Iterator[tuple[Path, K, Outcome]]:
        if not ready:
            return
        group = ready[:]
        ready.clear()
        if len(group) == 1:  # nothing to share: the usual path
            f, imp, key = group[0]
            yield f.path, key, alone(f.path, _given(imp))
            return
        try:
            results = write_artefacts(ledger, [f for f, _, _ in group], package_version(), target, analyze=False)
        except LedgerError:  # roll back the group; one by one, each file passes or fails on its own
            for f, imp, key in group:
                yield f.path, key, alone(f.path, _given(imp))
            return
        written[0] += sum(r.rows for r in results)
        for (f, _, key), res in zip(group, results, strict=True):
            yield f.path, key, _given(res)

    try:
        for path, choose, key in files:
            if groups:
                try:
                    imp = choose()
                    small = path.stat().st_size <= GROUP_FILE_BYTES
                except (LedgerError, OSError):
                    small = False
                if small:
                    pending.append((path, imp, key))
                    if len(pending) >= group_files:
                        group_files = min(2 * group_files, GROUP_FILES)
                        yield from flush(drain=False)
                    continue
                yield from flush()
            yield path, key, alone(path, choose)
        yield from flush()
    finally:  # a caller that stops early: the group being prepared is dropped (it wrote nothing)
        ahead.shutdown(wait=True, cancel_futures=True)
    if written[0] >= ANALYZE_AFTER_ROWS:
        ledger.refresh_statistics(BULK_TABLES)


def _raises(exc: Exception) -> Callable[..., ImportResult]:
    """An outcome that raises ``exc`` (a file already in the ledger)."""

    def outcome(*_: object) -> ImportResult:
        raise exc

    return outcome


def _given(value: T) -> Callable[..., T]:
    """A call that returns ``value`` (an importer chosen already, a group's result)."""

    def given(*_: object) -> T:
        return value

    return given


def _prepared(
    ledger: Ledger, items: list[tuple[Path, Parser, K]], target: ImportTarget, claimed: set[str] | None = None
):
    """The files of a group in order, each ("group", (Parsed, parser, key)) when it can be written
    with the others, ("known", (path, AlreadyImported, key)) when its bytes were in the ledger, else
    ("alone", (path, parser, key)). Hashes, one query for the hashes already in the ledger (with what
    the message of one names), then the parse (``parse_many`` where the importer has it). ``claimed``: hashes of
    the files of earlier groups of the command, taken as imported (a group may still be being
    written, its rows not committed yet), and to which this group's are added."""
    hashed: list[tuple[Path, Parser, K, str | None, int]] = []
    for path, imp, key in items:
        try:
            sha, size = sha256_file(path)
        except (LedgerError, OSError):
            sha, size = None, 0
        hashed.append((path, imp, key, sha, size))
    A = m.Artefact
    with ledger.session() as s:
        stored = {
            r.sha256: r
            for r in s.execute(
                sa.select(A.sha256, A.id, A.file_name, A.format).where(A.sha256.in_([h[3] for h in hashed if h[3]]))
            )
        }
    known = set(stored)
    if claimed is not None:
        known |= claimed & {h[3] for h in hashed}
        claimed.update(h[3] for h in hashed if h[3])
    options = rec.ParseOptions(
        node=target.node, time_zone=target.time_zone, start=target.start, interval_s=target.interval_s
    )
    todo = [h for h in hashed if h[3] and h[3] not in known]
    many: dict[Path, rec.ParsedArtefact | None] = {}
    for imp in {id(h[1]): h[1] for h in todo}.values():
        if hasattr(imp, "parse_many"):
            paths = [h[0] for h in todo if h[1] is imp]
            many.update(zip(paths, imp.parse_many(paths, options), strict=True))
    seen: set[str] = set()
    labels: set[str] = set()
    for path, imp, key, sha, size in hashed:
        parsed: rec.ParsedArtefact | None = None
        if sha is not None and sha not in known and sha not in seen:
            try:
                parsed = many.get(path) or imp.parse(path, options)
                runs = list(parsed.runs)
            except Exception:  # noqa: BLE001 - imported alone, where the same error is raised and shown
                parsed = None
            else:
                own = {r.info.label for r in runs}
                if (
                    not isinstance(parsed.samples, list)
                    or parsed.samples
                    or parsed.log_facts
                    or own & labels
                    or any(r.info.pairing is not None for r in runs)
                ):
                    parsed = None
                else:
                    parsed.runs = runs
                    labels |= own
        if sha is not None:
            seen.add(sha)
        if (
            sha is not None and sha in stored
        ):  # in the ledger before this command: what import_file would raise, without its hash and query
            art = stored[sha]
            yield "known", (path, already_imported(path, sha, art.id, art.file_name, art.format), key)
        elif parsed is None or sha is None:
            yield "alone", (path, imp, key)
        else:
            yield "group", (Parsed(path, sha, size, parsed, imp.name), imp, key)


def find_artefact(session: Session, sha: str) -> m.Artefact | None:
    return session.scalar(sa.select(m.Artefact).where(m.Artefact.sha256 == sha))


def runs_of_artefact(ledger: Ledger, artefact_id: int) -> list[tuple[int, str, str]]:
    """(current run id, label, batch) of each run the artefact's captures belong to."""
    from bench_ledger.revisions import current

    R, C, B = m.Run.__table__, m.Capture.__table__, m.Batch.__table__
    with ledger.session() as s:
        return [
            tuple(r)
            for r in s.execute(
                sa.select(R.c.id, R.c.label, B.c.name)
                .select_from(C)
                .join(R, sa.and_(sa.func.coalesce(R.c.origin_id, R.c.id) == C.c.run_id, current(R)))
                .join(B, B.c.id == R.c.batch_id)
                .where(C.c.artefact_id == artefact_id)
                .order_by(R.c.id)
            )
        ]


def options_not_applied(ledger: Ledger, artefact_id: int, target: ImportTarget) -> tuple[str, list[str]]:
    """Where an already imported artefact is (its batch, deployment, node, time zone) and the options of
    ``target`` that differ from it: an import of the same bytes changes nothing, so they were not applied."""
    with ledger.session() as s:
        art = s.get(m.Artefact, artefact_id)
        assert art is not None  # the caller has just found it; artefacts are never deleted
        batch = s.scalar(sa.select(m.Batch.name).where(m.Batch.id == art.batch_id))
        dep = s.scalar(sa.select(m.Deployment.name).where(m.Deployment.id == art.deployment_id))
    note = art.note or ""
    zone = note.split(rec.DECLARED_ZONE, 1)[1].split(";", 1)[0] if rec.DECLARED_ZONE in note else None
    takes_zone = zone is not None or rec.UNCONFIRMED_ZONE in note  # a format whose sample times are host-local
    where = [
        f"batch {batch!r}" if batch else "no batch",
        f"deployment {dep!r}" if dep else "no deployment",
        f"node {art.node!r}" if art.node else "no node",
    ]
    where += [f"time zone {zone!r}" if zone else rec.UNCONFIRMED_ZONE] if takes_zone else []
    asked = [
        ("--batch", target.batch, batch, True),
        ("--deployment", target.deployment, dep, True),
        ("--node", target.node, art.node, True),
        ("--time-zone", target.time_zone, zone, takes_zone),
    ]
    differ = [f"{opt} {given!r}" for opt, given, held, applies in asked if applies and given not in (None, held)]
    return ", ".join(where), differ


def check_not_imported(ledger: Ledger, path: Path) -> tuple[str, int]:
    """Hash the file; raise AlreadyImported if the same bytes are in the ledger."""
    sha, size = sha256_file(path)
    with ledger.session() as s:
        art = find_artefact(s, sha)
        if art is not None:
            raise already_imported(path, sha, art.id, art.file_name, art.format)
    return sha, size


def already_imported(path: Path, sha: str, artefact_id: int, file_name: str, fmt: str) -> AlreadyImported:
    """What importing ``path`` raises when artefact ``artefact_id`` holds its bytes."""
    return AlreadyImported(
        f"{path}: already imported as artefact {artefact_id} ({file_name}, {fmt}, sha256 {sha[:12]}…); nothing changed",
        artefact_id,
    )


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
        batch, created = _batch(s, target.batch) if target.batch else (None, False)
        deployment_id = Ledger.get_deployment(s, target.deployment).id if target.deployment else None
        if deployment_id is None and batch is not None:
            deployment_id = batch.deployment_id
        conn = s.connection()
        if ledger.backend == "duckdb" and len(files) > 1:
            # a group's commit passed DuckDB's 16 MB WAL threshold and checkpointed, group after group
            # (512 files: commits 2.85 s -> 1.16 s); the WAL is still written and synced at each commit
            conn.exec_driver_sql("SET checkpoint_threshold = '1GB'")
        # a group's streamed rows are hashed once for all its artefacts (seal.PooledRows), one file's as they arrive
        pooled = seal.PooledRows() if len(files) > 1 else None
        rows = _Pending(conn, ledger.backend, pooled)
        cleanup.callback(rows.close)
        runs = _RunWriter(s, conn, ledger.backend, batch, deployment_id, rows, progress)
        held: dict[int, seal.HeldRows] = {}  # request, request_gaps, hardware_sample as handed to the database
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
        bulk_insert(conn, ledger.backend, "artefact", _arrow_of(m.Artefact.__table__, art_rows, conn.dialect))
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
            one = _Art(art_id, path, result, held.setdefault(art_id, seal.HeldRows()))
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
                    _refuse_other_model(s, path, deployment_id, model)
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
                    result.launches = [_launch(s, deployment_id, name) for name in sorted(named_launches)]

            samples = translated(path, parsed.samples)
            for chunk in samples:
                s.flush()
                if isinstance(chunk, rec.WideSamples):
                    result.samples += _write_wide_samples(
                        conn, ledger.backend, art_id, target.node, chunk, path, one.held
                    )
                else:
                    result.samples += _write_samples(conn, ledger.backend, art_id, target.node, chunk, path, one.held)
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
            result.published += _write_published(
                s, parsed.published, art_id, batch.id if batch else None, None, deployment_id
            )
        runs.flush()
        rows.flush()
        rows.wait()
        rows.close()
        s.flush()  # each artefact's digest over its rows as stored, in this same transaction (seal scheme 3)
        seal.store_artefact_digests(s.connection(), ledger.backend, held, pooled)
    if analyze and sum(r.rows for r in results) >= ANALYZE_AFTER_ROWS:
        # the tables this import wrote (ANALYZE samples 30k rows of a table however few it got; a
        # ledger holding millions of samples paid for them after every request import)
        ledger.refresh_statistics(tuple(t for t in BULK_TABLES if any(h.rows.get(t) for h in held.values())))
    return results


class GroupSplit(LedgerError):
    """Two files of a group write to one run: the group is imported file by file instead."""


@dataclass
class _Art:
    """The artefact a run being written belongs to: its id, file, result and held rows."""

    id: int
    path: Path
    result: ImportResult
    held: seal.HeldRows
    requests: int = 0  # written so far (the sum of result.runs' counts)


def _refuse_other_model(s: Session, path: Path, deployment_id: int, model: rec.Stated) -> None:
    """A file whose model is not its deployment's is refused, naming both (compared as
    ``factors.same_model``: a local path or hub id names the model by its last part)."""
    dep = s.get_one(m.Deployment, deployment_id)
    if dep.model is not None and not factors.same_model(dep.model, model.value):
        raise Refused(
            "R6",
            f"import {path.name} into deployment {dep.name!r}",
            f"the file states model {model.value!r} ({model.at}); deployment {dep.name!r} declares model {dep.model!r}",
            "import it with the deployment that served that model (--deployment), or correct the declaration",
        )


def _launch(s: Session, deployment_id: int, label: str) -> str:
    """The launch of a deployment that a tool's output names ``label`` (an inference-perf report
    folder, a vLLM sweep SERVE setting): the existing one, else a new row with the next attempt
    number, outcome ``unknown`` (the files do not say how the start went). A concurrent import that
    took the same attempt number conflicts on (deployment, attempt, revision) and runs again."""
    found = s.scalars(
        sa.select(m.Launch)
        .where(m.Launch.deployment_id == deployment_id, m.Launch.label == label)
        .order_by(m.Launch.revision.desc())
    ).first()
    dep = s.get_one(m.Deployment, deployment_id)
    if found is None:
        last = s.scalar(sa.select(sa.func.max(m.Launch.attempt)).where(m.Launch.deployment_id == deployment_id))
        found = m.Launch(
            deployment_id=deployment_id,
            attempt=(last or 0) + 1,
            outcome="unknown",
            seconds_to_ready=None,
            seconds_to_ready_flag="n/a",
            revision=0,
            recorded_at=now(),
            label=label,
        )
        s.add(found)
        s.flush()
    return f"{dep.name}#{found.attempt} ({label})"


def store_copy(path: Path, sha: str, folder: Path) -> str:
    """Copy ``path`` to ``folder/<sha[:2]>/<sha>`` and return where; the copy is verified.

    The bytes go to a temporary file in the same folder and are renamed into place, so a symlink
    planted at the destination (dangling or not) is replaced, never followed; a destination folder
    that resolves outside ``folder`` is refused. An existing regular file with the same sha256 is
    kept. If the commit fails afterwards the copy stays: it is content-addressed, and the next
    import of the same bytes uses it."""
    root = folder.resolve()
    dest = folder / sha[:2] / sha
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.parent.resolve().is_relative_to(root):
        raise InputError(f"{dest.parent} leads outside the artefact store {root} (a symlink?): nothing copied")
    if dest.is_file() and not dest.is_symlink() and sha256_file(dest)[0] == sha:
        return str(dest)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{sha[:12]}-")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        if sha256_file(Path(tmp))[0] != sha:
            raise InputError(f"{path}: the file changed while it was imported (sha256 differs): nothing imported")
        os.chmod(tmp, 0o444)  # a content-addressed copy is never edited
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(dest)


T = TypeVar("T")
CONFLICT_ATTEMPTS = 5


def retry_conflicts(attempt: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run one import attempt again when it lost a race with another process (PostgreSQL).

    Each attempt is one transaction that rolled back whole, so running it again sees what the other
    process committed: the same bytes are then "already imported", a run label created meanwhile is
    taken (the run gets a distinct one) or paired with, as if the imports had run one after the other.
    An attempt after a lost race resolves its runs under the batch's pairing lock
    (``pairing.serialised``), so imports racing for one label take turns instead of losing again."""
    for n in range(1, attempts + 1):
        token = pairing.serialised.set(n > 1)
        try:
            return attempt()
        except WriteConflict as exc:
            if n == attempts:
                raise WriteConflict(f"{exc}; gave up after {attempts} attempts") from None
        finally:
            pairing.serialised.reset(token)
    raise AssertionError("unreachable")  # pragma: no cover


def _batch(s: Session, name: str) -> tuple[m.Batch, bool]:
    """The open batch ``name``, created if new (True). Race-free: a concurrent creator's row wins
    (INSERT ... ON CONFLICT DO NOTHING waits for its transaction) and this one uses it."""
    # locked (PostgreSQL) until the import commits: a concurrent `ledger close` waits for it, or it
    # waits for the close and then sees the batch closed (ledger.seal.close)
    batch = Ledger.find_batch(s, name, lock="share")
    created = False
    if batch is None:
        inserted = s.execute(
            sa.text(
                "INSERT INTO batch (name, status, created_at) VALUES (:name, 'open', :at) "
                "ON CONFLICT (name) DO NOTHING RETURNING id"
            ),
            {"name": name, "at": now()},
        ).scalar()
        created = inserted is not None
        if inserted is not None:
            guards.declared_written(s.connection(), "batch", [inserted])
        batch = Ledger.find_batch(s, name, lock="share")
    if batch is None:  # the row exists: this INSERT or a concurrent one made it
        raise NotFound(f"batch {name!r} vanished while it was being created")
    if batch.status == "closed":
        raise Refused(
            "R10",
            f"import into batch {name!r}",
            f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
            "import into a new batch; a correction names what it supersedes",
        )
    return batch, created


def shown_name(path: Path) -> str:
    """The file name as text (:func:`records.file_name_text`)."""
    return rec.file_name_text(path.name)


def translated(path: Path, items: Iterable):
    """The items of an importer's stream, with the errors that can escape a parser turned into a
    ParseError naming the file (:func:`ledger.records.as_parse_error`; issue 13: never a traceback)."""
    it = iter(items)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except (ValidationError, RecursionError, UnicodeEncodeError) as exc:
            raise rec.as_parse_error(path, exc) from None
        yield item


def refuse_outside_domain(
    path: Path | Callable[[int], Path], table: pa.Table, domains: dict[str, rec.Domain], what: str = "record"
) -> None:
    """Refuse a bulk table (requests, chunk gaps, samples) holding a value outside its field's domain
    (:mod:`ledger.records`), naming the file (``path``, or the file of a row), the line and the field."""
    v = rec.arrow_violation(table, domains)
    if v is None:
        return
    if callable(path):
        path = path(v.row)
    names = table.column_names
    line = table.column("line")[v.row].as_py() if "line" in names else None
    idx = table.column("idx") if "idx" in names else table.column("request_idx") if "request_idx" in names else None
    idx = idx[v.row].as_py() if idx is not None else None
    where = (
        ", ".join(
            x for x in (f"line {line}" if line is not None else None, f"{what} {idx}" if idx is not None else None) if x
        )
        or None
    )
    raise ParseError(path, where, v.column, v.problem)


def refuse_gap_outside_domain(path: Path | Callable[[int], Path], table: pa.Table) -> None:
    """:func:`refuse_outside_domain` for ``request_gaps`` rows: every gap of the arrays in
    ``GAP_DOMAINS['gap_s']`` (one min/max pass over the values), else the file, its request and
    ``gap_s`` are named, as for a gap row."""
    lists = table.column("gaps").combine_chunks()
    values = pc.list_flatten(lists)
    v = rec.arrow_violation(pa.table({"gap_s": values}), {"gap_s": rec.GAP_DOMAINS["gap_s"]})
    if v is None:
        return
    row = pc.list_parent_indices(lists)[v.row].as_py()
    if callable(path):
        path = path(row)
    raise ParseError(path, f"request {table.column('request_idx')[row].as_py()}", v.column, v.problem)


def _described(info: rec.RunInfo, artefact_id: int) -> dict:
    return dict(
        input_target_tokens=info.input_target_tokens,
        output_cap_tokens=info.output_cap_tokens,
        concurrency=info.concurrency,
        request_count=info.request_count,
        request_rate=info.request_rate,
        seed=info.seed,
        dataset=info.dataset,
        tool=info.tool,
        tool_version=info.tool_version,
        started_at=info.started_at,
        ended_at=info.ended_at,
        duration_s=info.duration_s,
        artefact_id=artefact_id,
        metadata_json=json.dumps(meta, sort_keys=True, ensure_ascii=False)
        if (meta := pairing.metadata_of(info))
        else None,
    )


def _learned_metadata(kept: str | None, brought: str | None) -> str | None:
    """A run's metadata with the entries another file of it brings that it did not have (never replaced)."""
    if brought is None or kept is None:
        return kept if brought is None else brought
    old, new = json.loads(kept), json.loads(brought)
    if not isinstance(old, dict) or set(new) <= set(old):
        return kept
    return json.dumps({**new, **old}, sort_keys=True, ensure_ascii=False)


def next_ids(conn: sa.Connection, backend: str, table: str, n: int) -> list[int]:
    """``n`` fresh ids from the sequence behind ``table.id`` (DuckDB: ``<table>_id_seq``; PostgreSQL:
    the SERIAL's sequence), in one statement, so rows can be bulk-inserted with their ids."""
    if n == 0:
        return []
    if backend == "duckdb":
        sql = f"SELECT nextval('{table}_id_seq') FROM range({int(n)})"
    else:
        sql = f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, {int(n)})"
    return sorted(r[0] for r in conn.exec_driver_sql(sql))


def _arrow_of(table: sa.FromClause, rows: list[dict], dialect: sa.Dialect) -> pa.Table:
    """Rows (dicts with the same keys) as an Arrow table typed after ``table``'s columns; bind
    processors (ExactDecimal -> text) are applied as an ORM insert would."""
    names = list(rows[0])
    data = {}
    for name in names:
        col = table.c[name]
        values = [r[name] for r in rows]
        ctype = col.type
        if isinstance(ctype, m.ExactDecimal):
            values = [ctype.process_bind_param(v, dialect) for v in values]
            atype = pa.string()
        elif isinstance(ctype, sa.Boolean):
            atype = pa.bool_()
        elif isinstance(ctype, sa.Integer):
            atype = pa.int64() if isinstance(ctype, sa.BigInteger) else pa.int32()
        elif isinstance(ctype, sa.Float):
            atype = pa.float64()
        elif isinstance(ctype, sa.DateTime):
            atype = pa.timestamp("us")
        else:
            atype = pa.string()
        data[name] = pa.array(values, atype)
    return pa.table(data)


class _RunWriter:
    """Runs of one artefact, their captures, capture fields and tool aggregates, written a chunk of
    runs at a time with a handful of set-based statements instead of ORM objects one row each.

    A profile of the 1000-run vLLM import showed ~40% of the write in per-run ORM statements (run
    lookup, capture, ~11 capture_field rows, ~27 published values). Per chunk now: one SELECT of the
    runs by label, one of their earlier captures and fields (R9 backfill check), one nextval() per
    table for ids, and one bulk insert (Arrow: DuckDB INSERT ... SELECT, PostgreSQL COPY) per table.
    Guard semantics are kept: these are inserts (allowed), the batch was checked open (R10) when it
    was resolved, and an existing run still learns its missing fields through the ORM (an update
    the guards see at flush)."""

    RUNS = 256  # runs per chunk
    ROWS = 200_000  # or fewer runs, once this many requests are buffered (memory)

    def __init__(
        self,
        s: Session,
        conn: sa.Connection,
        backend: str,
        batch: m.Batch | None,
        deployment_id: int | None,
        rows: _Pending,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.s, self.conn, self.backend = s, conn, backend
        self.batch, self.deployment_id, self.rows, self.progress = batch, deployment_id, rows, progress
        self.chunk: list[tuple[str, rec.ParsedRun, _Art]] = []
        self.buffered = 0

    def add(self, label: str, pr: rec.ParsedRun, art: _Art) -> None:
        """Buffer run ``pr`` of artefact ``art``, to be written under ``label``."""
        self.chunk.append((label, pr, art))
        self.buffered += len(pr.requests) if pr.requests is not None else 0
        if len(self.chunk) >= self.RUNS or self.buffered >= self.ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered runs: resolve them, refuse backfills (R9), then captures and aggregates,
        then requests; each step one set-based statement per table."""
        if not self.chunk:
            return
        chunk, self.chunk, self.buffered = self.chunk, [], 0
        found, ids = self._resolve_runs(chunk)
        self._refuse_backfills(chunk, found, ids)
        if found:
            self.s.flush()  # the learned run fields, before rows that point at the runs
        self._write_captures(chunk, ids)
        self._write_request_rows(chunk, ids)

    def _resolve_runs(
        self, chunk: list[tuple[str, rec.ParsedRun, _Art]]
    ) -> tuple[dict[str, m.Run], dict[str, tuple[int, int]]]:
        """The batch's existing runs of the chunk's labels (newest revision), which learn what they did
        not know yet (never overwritten), and the new runs, inserted. Returns the existing runs and,
        per label, (run id, key): the key is the first revision's id, which captures point at."""
        s, conn, batch = self.s, self.conn, self.batch
        assert batch is not None  # runs are added only with a batch (import_file refuses the others)
        labels = sorted({label for label, _, _ in chunk})
        found: dict[str, m.Run] = {}
        for run in s.scalars(
            sa.select(m.Run).where(m.Run.batch_id == batch.id, m.Run.label.in_(labels)).order_by(m.Run.revision.desc())
        ):
            found.setdefault(run.label, run)
        new_rows: dict[str, dict] = {}
        for label, pr, art in chunk:
            described = _described(pr.info, art.id)
            target = found.get(label)
            if target is not None:
                for key, value in described.items():
                    if key == "metadata_json":
                        if (joined := _learned_metadata(target.metadata_json, value)) != target.metadata_json:
                            target.metadata_json = joined
                    elif value is not None and getattr(target, key) is None:
                        setattr(target, key, value)
            elif label in new_rows:
                row = new_rows[label]
                for key, value in described.items():
                    if key == "metadata_json":
                        row[key] = _learned_metadata(row[key], value)
                    elif value is not None and row[key] is None:
                        row[key] = value
            else:
                new_rows[label] = dict(
                    batch_id=batch.id,
                    label=label,
                    deployment_id=self.deployment_id,
                    **described,
                    warm_prefix_cache="unknown",
                    warm_process="unknown",
                    warm_compile="unknown",
                    warm_file_cache="unknown",
                    revision=0,
                    recorded_at=now(),
                )
        ids: dict[str, tuple[int, int]] = {lab: (r.id, r.origin_id or r.id) for lab, r in found.items()}
        if new_rows:
            for rid, row in zip(next_ids(conn, self.backend, "run", len(new_rows)), new_rows.values(), strict=True):
                row["id"] = rid
                ids[row["label"]] = (rid, rid)
            bulk_insert(conn, self.backend, "run", _arrow_of(m.Run.__table__, list(new_rows.values()), conn.dialect))
        return found, ids

    def _refuse_backfills(
        self, chunk: list[tuple[str, rec.ParsedRun, _Art]], found: dict[str, m.Run], ids: dict[str, tuple[int, int]]
    ) -> None:
        """R9 against the earlier captures of the runs that existed before this chunk."""
        s = self.s
        earlier: dict[int, list[tuple[int, int, set[str]]]] = {}
        old_keys = sorted({ids[lab][1] for lab in found})
        if old_keys:
            caps = s.execute(
                sa.select(m.Capture.id, m.Capture.artefact_id, m.Capture.record_count, m.Capture.run_id).where(
                    m.Capture.run_id.in_(old_keys)
                )
            ).all()
            fields: dict[int, set[str]] = {c.id: set() for c in caps}
            if caps:
                for cap_id, f in s.execute(
                    sa.select(m.CaptureField.capture_id, m.CaptureField.field).where(
                        m.CaptureField.capture_id.in_(list(fields))
                    )
                ):
                    fields[cap_id].add(f)
            for c in caps:
                earlier.setdefault(c.run_id, []).append((c.artefact_id, c.record_count, fields[c.id]))
        for label, pr, _ in chunk:
            _check_backfill(label, pr.capture, earlier.get(ids[label][1], ()))

    def _write_captures(self, chunk: list[tuple[str, rec.ParsedRun, _Art]], ids: dict[str, tuple[int, int]]) -> None:
        """One capture per run and artefact, its fields, and the tool's aggregates of the run."""
        conn, batch, dialect = self.conn, self.batch, self.conn.dialect
        assert batch is not None
        cap_ids = next_ids(conn, self.backend, "capture", len(chunk))
        stamp = now()
        caps_rows: list[dict[str, Any]] = []
        field_rows: list[dict[str, Any]] = []
        pub_rows: list[dict[str, Any]] = []
        for cap_id, (label, pr, art) in zip(cap_ids, chunk, strict=True):
            key = ids[label][1]
            pc = pr.capture
            caps_rows.append(
                dict(
                    id=cap_id,
                    artefact_id=art.id,
                    run_id=key,
                    record_count=pc.record_count,
                    sampled=pc.sampled,
                    sample_note=pc.sample_note,
                    clock=pc.clock,
                    token_source=pc.token_source,
                    success_rule=pc.success_rule,
                )
            )
            field_rows.extend(dict(capture_id=cap_id, field=f) for f in pc.fields)
            pub_rows.extend(_published_row(p, art.id, batch.id, key, self.deployment_id, stamp) for p in pr.published)
            art.result.published += len(pr.published)
        bulk_insert(conn, self.backend, "capture", _arrow_of(m.Capture.__table__, caps_rows, dialect))
        if field_rows:
            bulk_insert(conn, self.backend, "capture_field", _arrow_of(m.CaptureField.__table__, field_rows, dialect))
        if pub_rows:
            for pid, row in zip(next_ids(conn, self.backend, "published_value", len(pub_rows)), pub_rows, strict=True):
                row["id"] = pid
            bulk_insert(conn, self.backend, "published_value", _arrow_of(m.PublishedValue.__table__, pub_rows, dialect))

    def _write_request_rows(
        self, chunk: list[tuple[str, rec.ParsedRun, _Art]], ids: dict[str, tuple[int, int]]
    ) -> None:
        """Each run's request and request-gaps rows; a record outside its domain names file, line and field.

        The runs of the chunk (consecutive runs of one artefact, or a group's files of a run each)
        become one pair of tables (:func:`artefacts_request_tables`): built per run, the 1000-run vLLM
        file made 1000 of each (~1 s of Arrow calls, 0.6 s of them the gap arrays) and the pool then
        copied their 1000 slices into one chunk per column; built per file, the 1,000 files of the
        ledger's format cost 0.6-0.9 s of the import's main thread (profile note 27)."""
        carried: list[tuple[int, int, str | None, rec.ArrowRequests]] = []
        arts: dict[int, _Art] = {}
        counts: list[tuple[_Art, int, str, int]] = []
        for label, pr, art in chunk:
            run_id, key = ids[label]
            n = 0
            if pr.requests is not None and len(pr.requests):
                with _named_records(art.path):
                    req = pr.requests if isinstance(pr.requests, rec.ArrowRequests) else arrow_requests(pr.requests)
                carried.append((art.id, key, pr.capture.clock, req))
                arts[art.id] = art
                n = req.table.num_rows
            counts.append((art, run_id, label, n))
        if carried:
            requests, gaps = artefacts_request_tables(carried)
            self.rows.add("request", requests, arts)
            if gaps is not None:
                self.rows.add("request_gaps", gaps, arts)
        for _, pr, art in chunk:  # after the runs' requests, as request_value_table's callers did
            if pr.request_values and isinstance(pr.requests, rec.RequestColumns) and len(pr.requests):
                with _named_records(art.path):
                    values = request_value_table(art.id, pr.requests.idx, pr.request_values)
                if values.num_rows:
                    self.rows.add("request_value", values, {art.id: art})
        for art, run_id, label, n in counts:
            art.result.runs.append((run_id, label, n))
            art.requests += n
            if self.progress is not None:  # result.rows, without a sum over the runs so far after each run
                self.progress(art.requests + art.result.samples)


@contextlib.contextmanager
def _named_records(path: Path) -> Iterator[None]:
    """A record a Python importer's columns cannot carry (:class:`records.RecordError`) as a
    ParseError naming the file, the line or record and the field."""
    try:
        yield
    except rec.RecordError as exc:
        where = ", ".join(
            x
            for x in (
                f"line {exc.line}" if exc.line is not None else None,
                f"record {exc.idx}" if exc.idx is not None else None,
            )
            if x
        )
        raise ParseError(path, where or None, exc.field, exc.problem) from None


def _published_row(
    p: rec.Published, artefact_id: int, batch_id: int | None, run_id: int | None, deployment_id: int | None, stamp
) -> dict:
    return dict(
        artefact_id=artefact_id,
        key=p.key,
        text=p.text,
        value=p.value,
        unit=p.unit,
        quantity_kind=p.quantity_kind,
        precision=p.precision,
        flag=p.flag,
        na_reason=p.na_reason,
        batch_id=batch_id,
        run_id=run_id,
        deployment_id=deployment_id,
        locator=p.locator,
        note=p.note,
        revision=0,
        recorded_at=stamp,
    )


_REQUEST_SCHEMA = pa.schema(
    [
        ("artefact_id", pa.int32()),
        ("idx", pa.int32()),
        ("run_id", pa.int32()),
        ("line", pa.int32()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("retries", pa.int32()),
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("clock", pa.string()),
        ("send_ns", pa.int64()),
        ("first_token_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("ttft_s", pa.float64()),
        ("latency_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("itl_mean_s", pa.float64()),
        ("chunk_count", pa.int32()),
        ("cached_tokens", pa.int32()),
    ]
)


class _Pending:
    """Request, request-gaps and request-value rows of several runs, written in one bulk statement per table.

    A profile of a 1000-run vLLM file showed the per-statement cost of two bulk inserts per run
    (register, INSERT ... SELECT with key checks, unregister) dominating the write; runs are now
    pooled, each table up to its own limit (rows), and a table is written when it reaches it. DuckDB:
    requests up to :data:`REQUEST_LIMIT` (a 1M-request file in one statement: ten inserts of 100k rows
    cost ~2.5x one of 1M in one transaction, measured on the benchmark's rows; ~100 bytes a row held),
    the others up to :data:`LIMIT`. No key ties the tables together (migration 0008), so the order of
    their statements is free; the rows of each table keep their order.

    PostgreSQL: a COPY runs in a writer thread of the import while the import parses the next runs
    (the server parses and indexes the rows meanwhile; psycopg's connection lock keeps every other
    statement of the transaction after it), so requests are pooled up to :data:`PG_REQUEST_LIMIT`
    only, to start early. Before any other statement on the connection (a SQLAlchemy event) and
    before the artefact's digest, the import waits for the COPY and raises its error, if any."""

    LIMIT = 500_000
    REQUEST_LIMIT = 1 << 20
    PG_REQUEST_LIMIT = 1 << 17
    SMALL_PART = 1 << 15  # DuckDB: pooled parts of fewer rows on average are combined into one chunk

    def __init__(self, conn: sa.Connection, backend: str, pooled: seal.PooledRows | None = None) -> None:
        self.conn, self.backend, self.pooled = conn, backend, pooled
        self.tables: dict[str, list[tuple[pa.Table, dict[int, _Art]]]] = {
            "request": [],
            "request_gaps": [],
            "request_value": [],
        }
        self.rows = dict.fromkeys(self.tables, 0)
        self.request_limit = self.REQUEST_LIMIT if backend == "duckdb" else self.PG_REQUEST_LIMIT
        self._writer: Any = None  # PostgreSQL: one thread, so the COPYs keep their order
        self._writing: list[Any] = []

    def add(self, table: str, data: pa.Table, arts: dict[int, _Art]) -> None:
        """Buffer rows of the artefacts ``arts`` (by id: the rows' ``artefact_id``, in artefact order),
        for their digests: in each one's held rows, or pooled at the flush."""
        self.tables[table].append((data, arts))
        if self.pooled is None:
            if len(arts) == 1:
                next(iter(arts.values())).held.add(table, data)
            else:
                for a, (lo, n) in seal.spans_of(data.column("artefact_id")).items():
                    arts[a].held.add(table, data.slice(lo, n))
        self.rows[table] += data.num_rows
        if self.rows[table] >= (self.request_limit if table == "request" else self.LIMIT):
            self.flush(table)

    def flush(self, only: str | None = None) -> None:
        """Write the pooled rows of every table (of ``only``), after checking their domains."""
        domains = {"request": rec.REQUEST_DOMAINS, "request_value": rec.VALUE_DOMAINS}
        for name, parts in self.tables.items():
            if parts and only in (None, name):
                data = pa.concat_tables([t for t, _ in parts])
                if self.backend == "duckdb" and len(parts) > 1 and data.num_rows < len(parts) * self.SMALL_PART:
                    # one contiguous chunk per column: DuckDB's INSERT ... SELECT scans it ~1.5x faster
                    # than the per-run slices (measured on 200 runs of the benchmark file); parts of many
                    # runs each (artefacts_request_tables) are already large chunks, scanned as they are;
                    # PostgreSQL's COPY encodes each slice's chunks as they are
                    data = data.combine_chunks()
                ends = list(itertools.accumulate(t.num_rows for t, _ in parts))

                def path_of(row: int, parts=parts, ends=ends) -> Path:  # the file a pooled row came from
                    k = bisect.bisect_right(ends, row)
                    data, arts = parts[k]
                    if len(arts) == 1:
                        return next(iter(arts.values())).path
                    return arts[data.column("artefact_id")[row - (ends[k - 1] if k else 0)].as_py()].path

                if name == "request_gaps":
                    refuse_gap_outside_domain(path_of, data)
                else:
                    refuse_outside_domain(path_of, data, domains[name], "record" if name == "request" else "request")
                parts.clear()
                self.rows[name] = 0
                if self.pooled is not None:  # hashed in the import's hashing thread while the database writes
                    self.pooled.add(name, data)  # them (after the insert, the group's commit waited for it)
                self._insert(name, data)

    def _insert(self, name: str, data: pa.Table) -> None:
        if self.backend == "duckdb":
            bulk_insert(self.conn, self.backend, name, data)
            return
        if self._writer is None:
            from concurrent.futures import ThreadPoolExecutor

            self._writer = ThreadPoolExecutor(1, thread_name_prefix="ledger-copy")
            # an import that fails drops its pool: its writer thread ends with it
            weakref.finalize(self, self._writer.shutdown, wait=False, cancel_futures=True)
            sa.event.listen(self.conn, "before_cursor_execute", self._before_statement)
        self._raise_failed()
        self._writing.append(self._writer.submit(bulk_insert, self.conn, self.backend, name, data))

    def _raise_failed(self) -> None:
        for done in [f for f in self._writing if f.done()]:
            self._writing.remove(done)
            done.result()  # raises the COPY's error

    def _before_statement(self, *_: Any) -> None:
        self.wait()

    def wait(self) -> None:
        """Wait for the COPYs in flight; raise the first one's error (the transaction is then lost)."""
        writing, self._writing = self._writing, []
        for f in writing:
            f.result()

    def close(self) -> None:
        """Stop the writer thread (after :meth:`wait`, or when the import failed)."""
        if self._writer is not None:
            sa.event.remove(self.conn, "before_cursor_execute", self._before_statement)
            self._writer.shutdown(wait=True)
            self._writer = None


_VALUE_SCHEMA = pa.schema(
    [
        ("artefact_id", pa.int32()),
        ("request_idx", pa.int32()),
        ("key", pa.string()),
        ("value", pa.float64()),
        ("flag", pa.string()),
    ]
)


def request_value_table(artefact_id: int, idx: list[int], values: dict[str, rec.RequestValues]) -> pa.Table:
    """The ``request_value`` rows of one run: one per request and key where the record had a value,
    in the table's logical key order (request_idx, key)."""
    rows: list[tuple[int, str, float, str]] = []
    for key in sorted(values):
        rv = values[key]
        rows.extend((i, key, v, rv.flag) for i, v in zip(idx, rv.values, strict=True) if v is not None)
    rows.sort(key=lambda r: (r[0], r[1]))
    return pa.table(
        {
            "artefact_id": pa.array([artefact_id] * len(rows), pa.int32()),
            "request_idx": pa.array([r[0] for r in rows], pa.int32()),
            "key": pa.array([r[1] for r in rows], pa.string()),
            "value": pa.array([r[2] for r in rows], pa.float64()),
            "flag": pa.array([r[3] for r in rows], pa.string()),
        },
        schema=_VALUE_SCHEMA,
    )


def request_tables(
    artefact_id: int, run_id: int, clock: str | None, cols: rec.RequestColumns | rec.ArrowRequests
) -> tuple[pa.Table, pa.Table | None]:
    """The ``request`` and ``request_gaps`` rows of one run (:func:`artefacts_request_tables` of that run)."""
    req = cols if isinstance(cols, rec.ArrowRequests) else arrow_requests(cols)
    return artefacts_request_tables([(artefact_id, run_id, clock, req)])


def artefacts_request_tables(
    runs: list[tuple[int, int, str | None, rec.ArrowRequests]],
) -> tuple[pa.Table, pa.Table | None]:
    """The ``request`` and ``request_gaps`` rows of consecutive runs ``(artefact id, run id, clock,
    requests)``, of one artefact or of several in artefact order (a group's files, one run each,
    profile note 27), as Arrow tables in the tables' column order, one contiguous chunk per column,
    built with one Arrow call per column: the same rows as one call per artefact, concatenated.

    Columns from a Python importer are first turned into the one Arrow carrier (:func:`arrow_requests`),
    so both kinds of importer reach the database through the same conversion; every importer's gaps
    become ``request_gaps`` rows here (:func:`ledger.gaps.arrays`: one array per request that has gaps)."""
    tables = [req.table for _, _, _, req in runs]
    counts = np.array([t.num_rows for t in tables], dtype=np.int64)
    n = int(counts.sum())
    art_ids = np.array([a for a, _, _, _ in runs], dtype=np.int32)

    def joined(name: str, typ: pa.DataType) -> pa.Array:
        parts = [c for t in tables for c in _as(t.column(name), typ).chunks]
        return pa.chunked_array(parts, typ).combine_chunks() if len(parts) != 1 else parts[0]

    carried = {
        f.name: joined(f.name, f.type) for f in _REQUEST_SCHEMA if f.name not in ("artefact_id", "run_id", "clock")
    }
    clocks = {clock for _, _, clock, _ in runs}
    if clocks == {None}:
        clock_col = pa.nulls(n, pa.string())
    else:
        if len(clocks) == 1:
            named: pa.Array | pa.Scalar = pa.scalar(next(iter(clocks)), pa.string())
        else:  # runs on different clocks: each run's own
            names = sorted(c for c in clocks if c is not None)
            codes = np.repeat([names.index(c) if c is not None else -1 for _, _, c, _ in runs], counts)
            named = pa.DictionaryArray.from_arrays(
                pa.array(codes, pa.int32(), mask=codes < 0), pa.array(names, pa.string())
            ).cast(pa.string())
        clock_col = pc.if_else(pc.is_valid(carried["send_ns"]), named, pa.scalar(None, pa.string()))
    one_artefact = bool((art_ids == art_ids[0]).all())
    fixed = {
        "artefact_id": (
            pa.repeat(pa.scalar(int(art_ids[0]), pa.int32()), n)
            if one_artefact
            else pa.array(np.repeat(art_ids, counts))
        ),
        "run_id": pa.array(np.repeat(np.array([r for _, r, _, _ in runs], dtype=np.int32), counts)),
        "clock": clock_col,
    }
    requests = pa.Table.from_arrays(
        [fixed[f.name] if f.name in fixed else carried[f.name] for f in _REQUEST_SCHEMA], schema=_REQUEST_SCHEMA
    )
    with_gaps = [(a, req.gaps) for a, _, _, req in runs if req.gaps is not None and req.gaps.num_rows]
    if not with_gaps:
        return requests, None
    idx = pa.chunked_array(
        [c for _, g in with_gaps for c in _as(g.column("request_idx"), pa.int32()).chunks], pa.int32()
    )
    lists = pa.chunked_array(
        [c for _, g in with_gaps for c in _as(g.column("gaps"), pa.list_(pa.float64())).chunks], pa.list_(pa.float64())
    )
    arts: int | pa.Array = (
        int(art_ids[0])
        if one_artefact
        else pa.array(
            np.repeat(np.array([a for a, _ in with_gaps], dtype=np.int32), [g.num_rows for _, g in with_gaps])
        )
    )
    gaps = gp.arrays(arts, idx, lists)
    return requests, gaps if gaps.num_rows else None


def _as(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """``col`` as ``typ``; a column already of that type as it is (a cast per column and run was
    16,000 calls of the 1000-run vLLM import)."""
    return col if col.type == typ else col.cast(typ)


_CARRIED = [f for f in _REQUEST_SCHEMA if f.name not in ("artefact_id", "run_id", "clock")]


def arrow_requests(cols: rec.RequestColumns) -> rec.ArrowRequests:
    """:class:`~bench_ledger.records.RequestColumns` (lists) as the Arrow carrier: ``chunk_gaps_s``
    becomes ``chunk_count`` (gaps + 1, null without a gaps array) and a list column of the gaps."""
    gaps = cols.chunk_gaps_s
    data = {f.name: getattr(cols, f.name) for f in _CARRIED if f.name != "chunk_count"}
    data["chunk_count"] = [None if g is None else len(g) + 1 for g in gaps]
    try:
        table = pa.table({f.name: pa.array(data[f.name], f.type) for f in _CARRIED})
    except UnicodeEncodeError:  # a lone surrogate (JSON "\\ud800"): name the record
        i = next(i for i, e in enumerate(cols.error) if e is not None and rec.text_violation("error", e))
        raise rec.RecordError(
            "error", cols.idx[i], cols.line[i], str(rec.text_violation("error", cols.error[i] or ""))
        ) from None
    if not any(g for g in gaps):
        return rec.ArrowRequests(table=table)
    return rec.ArrowRequests(
        table=table, gaps=pa.table({"request_idx": table.column("idx"), "gaps": pa.array(gaps, pa.list_(pa.float64()))})
    )


def _write_samples(
    conn: sa.Connection,
    backend: str,
    artefact_id: int,
    node: str | None,
    cols: rec.SampleColumns,
    path: Path,
    held: seal.HeldRows | None = None,
) -> int:
    n = len(cols)
    try:
        table = pa.table(
            {
                "artefact_id": pa.array([artefact_id] * n, pa.int32()),
                "line": pa.array(cols.line, pa.int32()),
                "counter": pa.array(cols.counter, pa.string()),
                "node": pa.array(cols.node if node is None else [node] * n, pa.string()),
                "gpu": pa.array(cols.gpu, pa.int32()),
                "tick": pa.array(cols.tick, pa.int32()),
                "ts": pa.array(cols.ts, pa.timestamp("us")),
                "value": pa.array(cols.value, pa.float64()),
                "unit": pa.array(cols.unit, pa.string()),
            }
        )
    except (UnicodeEncodeError, pa.ArrowInvalid, OverflowError) as exc:
        raise ParseError(
            path, f"lines {cols.line[0]}-{cols.line[-1]}", None, f"a value the ledger cannot store: {exc}"
        ) from None
    refuse_outside_domain(path, table, rec.SAMPLE_INDEX_DOMAINS)
    for counter in pc.unique(table.column("counter")).to_pylist():
        one = table.filter(pc.equal(table.column("counter"), counter))
        refuse_outside_domain(
            path,
            pa.table({"line": one.column("line"), counter: one.column("value")}),
            {counter: rec.sample_domain(counter)},
        )
    bulk_insert(conn, backend, "hardware_sample", dg.sorted_by_key(table, m.key_columns("hardware_sample")), held)
    return n


def _write_wide_samples(
    conn: sa.Connection,
    backend: str,
    artefact_id: int,
    node: str | None,
    chunk: rec.WideSamples,
    path: Path,
    held: seal.HeldRows | None = None,
) -> int:
    """Unpivot a wide chunk (one column per counter) to long hardware_sample rows, in Arrow: one
    zero-copy slice of the key columns per counter, concatenated, then the usual bulk path."""
    t, n = chunk.table, chunk.table.num_rows
    refuse_outside_domain(path, t, {**rec.SAMPLE_INDEX_DOMAINS, **{c: rec.sample_domain(c) for c in chunk.counters}})
    node = node if node is not None else chunk.node
    keys = {
        "artefact_id": pa.repeat(pa.scalar(artefact_id, pa.int32()), n),
        "line": t.column("line"),
        "node": pa.repeat(pa.scalar(node, pa.string()), n),
        "gpu": t.column("gpu"),
        "tick": t.column("tick"),
        "ts": t.column("ts"),
    }
    counters = sorted(zip(chunk.counters, chunk.units, strict=True), key=lambda cu: cu[0].encode())
    parts = [
        pa.table(
            {
                **keys,
                "counter": pa.repeat(pa.scalar(name, pa.string()), n),
                "value": t.column(name).cast(pa.float64()),
                "unit": pa.repeat(pa.scalar(unit, pa.string()), n),
            }
        )
        for name, unit in counters
    ]
    # line by line, each line's counters in byte order: the rows in key order (artefact, line, counter), so
    # the import's digest hashes them as they go (ledger.seal.streams.STREAMED_TABLES) instead of holding every sample
    # to sort it at the end (a day of 16 cards' dmon, 16.6M rows: 6.4 GB)
    k = len(parts)
    order = (np.arange(n)[:, None] + np.arange(k)[None, :] * n).ravel()
    long = pa.concat_tables(parts).take(pa.array(order)) if k > 1 else pa.concat_tables(parts)
    if not dg.in_key_order(long, ["line"]):  # a chunk whose lines are not ascending: sorted as a whole
        long = dg.sorted_by_key(long, m.key_columns("hardware_sample"))
    bulk_insert(conn, backend, "hardware_sample", long, held)
    return n * len(chunk.counters)


def _write_published(
    s: Session,
    values: list[rec.Published],
    artefact_id: int,
    batch_id: int | None,
    run_id: int | None,
    deployment_id: int | None,
) -> int:
    stamp = now()
    s.add_all(
        m.PublishedValue(
            artefact_id=artefact_id,
            key=p.key,
            text=p.text,
            value=p.value,
            unit=p.unit,
            quantity_kind=p.quantity_kind,
            precision=p.precision,
            flag=p.flag,
            na_reason=p.na_reason,
            batch_id=batch_id,
            run_id=run_id,
            deployment_id=deployment_id,
            locator=p.locator,
            note=p.note,
            recorded_at=stamp,
        )
        for p in values
    )
    return len(values)


def _check_backfill(label: str, capture: rec.Capture, earlier) -> None:
    """R9: a capture that re-describes a run's requests with more fields is a backfill; refuse it.

    ``earlier`` holds the run's earlier captures as (artefact id, record count, fields). A backfill is an
    earlier capture with as many request records (> 0) whose fields are a strict subset of the new
    capture's, e.g. a re-export that now carries ``cached_tokens``: importing it would give values to
    fields the earlier capture did not have.
    """
    if capture.record_count == 0:
        return
    new_fields = set(capture.fields)
    for artefact_id, count, old_fields in earlier:
        if count != capture.record_count:
            continue
        if old_fields < new_fields:
            extra = ", ".join(sorted(new_fields - old_fields))
            verb = "was" if len(new_fields - old_fields) == 1 else "were"
            raise Refused(
                "R9",
                f"import {extra} for the {count} requests of run {label!r}",
                f"{extra} {verb} not captured by artefact {artefact_id} for run {label}; later captures are not backfilled",
                "import it as a new run or batch (--run NEW_LABEL or --batch NEW_BATCH)",
            )
