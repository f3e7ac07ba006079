"""The import pipeline, one for every import: hash, refuse the same bytes twice, parse, write. A single
file is a group of one; small files of one batch are prepared (hashed, checked with one query, parsed)
ahead and written a group per transaction. Each file is hashed once and parsed once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import pairing
from bench_ledger import records as rec
from bench_ledger.errors import AlreadyImported, LedgerError, WriteConflict
from bench_ledger.ingest.artefacts import already_imported, refuse_stored, sha256_file
from bench_ledger.ingest.target import ImportResult, ImportTarget, Parser, package_version
from bench_ledger.ingest.writer import ANALYZE_AFTER_ROWS, BULK_TABLES, Parsed, write_artefacts
from bench_ledger.store import Ledger
from pydantic import ValidationError

__all__ = ["import_file", "import_files", "write_artefacts"]


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
    It is :func:`import_files` of one file: a group of one.
    """
    ((_, _, outcome),) = import_files(ledger, [(path, lambda: importer, None)], target)
    return outcome(progress)


GROUP_FILES = 256  # files per group (64 made 16 commits for the benchmark's 1,000 files; profile note 17)
GROUP_ROWS = 1 << 18  # or fewer files, their requests within about this many (memory; profile note 17)
GROUP_FILE_BYTES = 4 << 20  # a larger file is imported alone (its runs stream; one commit is nothing next to it)
FIRST_GROUP_FILES = 32  # PostgreSQL: the first group's files, doubling group after group up to GROUP_FILES

K = TypeVar("K")
Outcome = Callable[[Callable[[int], None] | None], ImportResult]  # called with a progress callback


@dataclass
class _File:
    """A file of the command as far as it was prepared: hashed (``sha``), parsed (``parsed``, with the
    error its parse raised, if any), and whether it can be written with other files (``together``)."""

    path: Path
    importer: Parser
    key: Any
    sha: str | None = None
    size: int = 0
    parsed: rec.ParsedArtefact | None = None
    error: Exception | None = None
    together: bool = False


def import_files(
    ledger: Ledger, files: Iterable[tuple[Path, Callable[[], Parser], K]], target: ImportTarget
) -> Iterator[tuple[Path, K, Outcome]]:
    """Import files in order, each as :func:`import_file` would one after the other; yields per file
    (path, key, outcome), where calling ``outcome(progress)`` returns its :class:`ImportResult` or
    raises what :func:`import_file` would have raised (``files`` gives each file with the call that
    chooses its importer, which may raise too, and a key handed back as it is).

    Why: a file of 1,000 requests cost mostly per-file statements and the commit (profile note 17). Up to
    :data:`GROUP_FILES` small files of one batch (no ``--run``) are hashed, checked against the
    ledger with one query, parsed (several files per call where the importer has ``parse_many``),
    and written by :func:`write_artefacts` in one transaction. Each file stays all or nothing: when
    anything in a group fails (a bad row, a refusal, a lost race), the group is rolled back and its
    files are written one by one from what was hashed and parsed, so the file at fault fails with its
    own message and the others import. A file that is already imported, cannot be parsed, pairs with
    another file (a pairing key) or holds more than runs (samples, log facts) is written alone, in its
    place; a group of one file is that file written alone. Files written alone are written when their
    outcome is called, so a caller that stops (a refusal ends the command) imports nothing after it.
    PostgreSQL's statistics are refreshed once, after the last group."""
    groups = target.batch is not None and target.run is None and target.launch is None
    pending: list[_File] = []
    # PostgreSQL waits for the first group's parse: there groups start small and double, so its writes
    # start early (profile note 35); on DuckDB each commit costs more than the wait
    group_files = min(FIRST_GROUP_FILES, GROUP_FILES) if ledger.backend == "postgresql" else GROUP_FILES
    written = [0]
    # the next group's files are hashed and parsed in a thread while the group before is written
    # (both drivers, DuckDB's reader, hashlib and Arrow's kernels release the GIL): at most one ahead
    from concurrent.futures import Future, ThreadPoolExecutor

    ahead = ThreadPoolExecutor(1, thread_name_prefix="ledger-prepare")
    queued: list[Future] = []
    claimed: set[str] = set()  # hashes of the files prepared so far (only the preparing thread uses it)

    def prepare(items: list[_File]) -> list[tuple[_File, AlreadyImported | None]]:
        return list(_prepared(ledger, items, target, claimed))

    def flush(drain: bool = True) -> Iterator[tuple[Path, K, Outcome]]:
        if pending:
            queued.append(ahead.submit(prepare, pending[:]))
            pending.clear()
        while queued and (drain or len(queued) > 1):
            yield from written_files(queued.pop(0).result())

    def written_files(prepared: list[tuple[_File, AlreadyImported | None]]) -> Iterator[tuple[Path, K, Outcome]]:
        ready: list[_File] = []
        for f, known in prepared:
            if known is not None:  # already imported (1,000 such files cost a hash, a session and a query each)
                yield from written_groups(ready)
                yield f.path, f.key, _raises(known)
            elif not f.together:
                yield from written_groups(ready)
                yield f.path, f.key, _alone(ledger, target, f)
            else:
                ready.append(f)
        yield from written_groups(ready)

    def written_groups(ready: list[_File]) -> Iterator[tuple[Path, K, Outcome]]:
        """The files of ``ready`` (consecutive, each to be written with others) as the fewest groups of
        at most about :data:`GROUP_ROWS` requests, of about equal size. Cut where a group reached the
        limit, 256 files of 1,000 requests were a group of 250 and one of 6, each a transaction (seven
        commits instead of four for the benchmark's 1,000 files; profile note 28)."""
        items = ready[:]
        rows = [_parsed(f).rows for f in items]  # Parsed.rows sums the runs: once per file
        ready.clear()
        total = sum(rows)
        parts = max(1, -(-total // GROUP_ROWS))  # ceil: the fewest groups within the limit
        group: list[_File] = []
        upto, cut = 0, 1  # requests so far; the next cut is after cut/parts of them
        for item, n in zip(items, rows, strict=True):
            group.append(item)
            upto += n
            if cut < parts and upto * parts >= total * cut:
                yield from write(group)  # write() takes the files and empties the list
                cut += 1
        yield from write(group)

    def write(ready: list[_File]) -> Iterator[tuple[Path, K, Outcome]]:
        if not ready:
            return
        group = ready[:]
        ready.clear()
        if len(group) == 1:  # a group of one: the file written alone, when its outcome is called
            yield group[0].path, group[0].key, _alone(ledger, target, group[0])
            return
        try:
            results = write_artefacts(ledger, [_parsed(f) for f in group], package_version(), target, analyze=False)
        except LedgerError:  # roll back the group; one by one, each file passes or fails on its own
            for f in group:
                yield f.path, f.key, _alone(ledger, target, f)
            return
        written[0] += sum(r.rows for r in results)
        for f, res in zip(group, results, strict=True):
            yield f.path, f.key, _given(res)

    try:
        for path, choose, key in files:
            if groups:
                try:
                    imp = choose()
                    small = path.stat().st_size <= GROUP_FILE_BYTES
                except (LedgerError, OSError):
                    small = False
                if small:
                    pending.append(_File(path, imp, key))
                    if len(pending) >= group_files:
                        group_files = min(2 * group_files, GROUP_FILES)
                        yield from flush(drain=False)
                    continue
                yield from flush()
            yield path, key, _alone(ledger, target, path=path, choose=choose)
        yield from flush()
    finally:  # a caller that stops early: the group being prepared is dropped (it wrote nothing)
        ahead.shutdown(wait=True, cancel_futures=True)
    if written[0] >= ANALYZE_AFTER_ROWS:
        ledger.refresh_statistics(BULK_TABLES)


def _alone(
    ledger: Ledger,
    target: ImportTarget,
    prepared: _File | None = None,
    *,
    path: Path | None = None,
    choose: Callable[[], Parser] | None = None,
) -> Outcome:
    """The outcome of a file written in a transaction of its own: ``prepared`` as far as it was (its
    hash and parse are used, never made again), or ``path`` with the call that chooses its importer.
    Each attempt (:func:`retry_conflicts`) checks that the bytes are not in the ledger, then writes;
    a parse whose runs or samples streamed is made again for an attempt after a lost race."""

    def outcome(progress: Callable[[int], None] | None = None) -> ImportResult:
        if prepared is not None:
            f = prepared
        else:
            assert path is not None and choose is not None
            f = _File(path, choose(), None)
        first = [True]

        def attempt() -> ImportResult:
            if f.sha is None:
                f.sha, f.size = sha256_file(f.path)
            refuse_stored(ledger, f.path, f.sha)
            if f.error is not None:
                raise f.error
            if f.parsed is None or not (first[0] or _reusable(f.parsed)):
                f.parsed = parse(f.path, f.importer, target)
            first[0] = False
            result = write_artefacts(ledger, [_parsed(f)], package_version(), target, progress)[0]
            f.parsed = None  # written: its rows need not be held while the command goes on
            return result

        return retry_conflicts(attempt)

    return outcome


def _reusable(parsed: rec.ParsedArtefact) -> bool:
    """Whether a parse can be written again (its runs and samples are lists, not consumed streams)."""
    return isinstance(parsed.runs, list) and isinstance(parsed.samples, list)


def _parsed(f: _File) -> Parsed:
    assert f.sha is not None and f.parsed is not None
    return Parsed(f.path, f.sha, f.size, f.parsed, f.importer.name)


def options_of(target: ImportTarget) -> rec.ParseOptions:
    return rec.ParseOptions(
        node=target.node, time_zone=target.time_zone, start=target.start, interval_s=target.interval_s
    )


def parse(path: Path, importer: Parser, target: ImportTarget) -> rec.ParsedArtefact:
    """``importer``'s parse of ``path``; the errors of its first steps named (the streamed rest: the
    writer's :func:`~ledger.ingest.refusals.translated`)."""
    try:
        return importer.parse(path, options_of(target))
    except (ValidationError, RecursionError, UnicodeEncodeError) as exc:
        raise rec.as_parse_error(path, exc) from None


def _raises(exc: Exception) -> Callable[..., ImportResult]:
    """An outcome that raises ``exc`` (a file already in the ledger)."""

    def outcome(*_: object) -> ImportResult:
        raise exc

    return outcome


def _given(value: T) -> Callable[..., T]:
    """A call that returns ``value`` (a group's result)."""

    def given(*_: object) -> T:
        return value

    return given


def _replayed(runs: list[rec.ParsedRun], exc: Exception) -> Iterator[rec.ParsedRun]:
    """The runs a streamed parse gave before it raised ``exc``, then ``exc``: written as the stream
    would have been (its runs, then its error, where the writer names it)."""
    yield from runs
    raise exc


def _prepared(
    ledger: Ledger, items: list[_File], target: ImportTarget, claimed: set[str] | None = None
) -> Iterator[tuple[_File, AlreadyImported | None]]:
    """The files of a group in order, each with what importing it raises when its bytes were in the
    ledger (else None), hashed and parsed, ``together`` set where it can be written with the others.
    Hashes, one query for the hashes already in the ledger (with what the message of one names), then
    the parse (``parse_many`` where the importer has it). A file whose hash failed is hashed again
    when written alone (to raise its error); a file whose bytes an earlier file of the command has is
    parsed only if it is written (that file failed). ``claimed``: hashes of the files of earlier
    groups of the command, taken as imported (a group may still be being written, its rows not
    committed yet), and to which this group's are added."""
    for f in items:
        try:
            f.sha, f.size = sha256_file(f.path)
        except (LedgerError, OSError):
            f.sha, f.size = None, 0
    A = m.Artefact
    with ledger.session() as s:
        stored = {
            r.sha256: r
            for r in s.execute(
                sa.select(A.sha256, A.id, A.file_name, A.format).where(A.sha256.in_([f.sha for f in items if f.sha]))
            )
        }
    known = set(stored)
    if claimed is not None:
        known |= claimed & {f.sha for f in items}
        claimed.update(f.sha for f in items if f.sha)
    options = options_of(target)
    todo = [f for f in items if f.sha and f.sha not in known]
    many: dict[Path, rec.ParsedArtefact | None] = {}
    for imp in {id(f.importer): f.importer for f in todo}.values():
        if hasattr(imp, "parse_many"):
            paths = [f.path for f in todo if f.importer is imp]
            many.update(zip(paths, imp.parse_many(paths, options), strict=True))
    seen: set[str] = set()
    labels: set[str] = set()
    for f in items:
        if f.sha is not None and f.sha not in known and f.sha not in seen:
            _parse_ahead(f, many.get(f.path), target, labels)
        if f.sha is not None:
            seen.add(f.sha)
        if f.sha is not None and f.sha in stored:  # in the ledger before this command: what import_file would raise
            art = stored[f.sha]
            yield f, already_imported(f.path, f.sha, art.id, art.file_name, art.format)
        else:
            yield f, None


def _parse_ahead(f: _File, parsed: rec.ParsedArtefact | None, target: ImportTarget, labels: set[str]) -> None:
    """Parse ``f`` (``parsed``: ``parse_many``'s parse of it), its runs read into a list; it can be written
    with other files when it holds runs only, none paired by a key, with labels no earlier file of the
    group has (``labels``, to which its own are added). What the parse raised is kept: raised when the
    file is written alone, at the place a streamed parse would have raised it."""
    try:
        parsed = parsed or parse(f.path, f.importer, target)
    except Exception as exc:  # noqa: BLE001 - raised when the file is written alone, as import_file raises it
        f.error = exc
        return
    runs: list[rec.ParsedRun] = []
    try:
        runs.extend(parsed.runs)
    except Exception as exc:  # noqa: BLE001 - raised by the writer where the stream raised it
        parsed.runs = _replayed(runs, exc)
        f.parsed = parsed
        return
    parsed.runs = runs
    f.parsed = parsed
    own = {r.info.label for r in runs}
    f.together = not (
        not isinstance(parsed.samples, list)
        or parsed.samples
        or parsed.log_facts
        or own & labels
        or any(r.info.pairing is not None for r in runs)
    )
    if f.together:
        labels |= own


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
