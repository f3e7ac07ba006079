"""Closing the books (R10): seal a batch, verify seals, correct runs and values, read history.

Why a module of its own: closing, verifying and correcting are the only writes that touch rows
after they were recorded, and each of them must go through the same rule: a closed batch stays
exactly as it was sealed (:mod:`ledger.seal` says how the seal is built); a correction is a new
row that names what it supersedes and why; queries read the latest revision not superseded
(:func:`current_runs`, :func:`current_published_values`), optionally as the ledger stood at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import rfc8785
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import seal as sl
from bench_ledger import seal3 as s3
from bench_ledger.declared import DeclaredCheck
from bench_ledger.declared import check as check_declared
from bench_ledger.errors import InputError, NotFound, Refused
from bench_ledger.records import RUN_DOMAINS, request_rate_text
from bench_ledger.store import Ledger, now
from sqlalchemy.orm import Session


@dataclass
class SealResult:
    batch: str
    digest: str
    merkle_root: str
    row_count: int
    previous_digest: str
    closed_at: datetime
    tables: dict[str, int]
    seal_file: Path | None = None
    # artefacts sealed as found: no import digest to compare their rows with first (and why)
    unchecked: list[str] = field(default_factory=list)

    def as_line(self) -> dict[str, Any]:
        """The JSON object appended to a seal file (one line per closed batch)."""
        return {
            "scheme": sl.SCHEME,
            "batch": self.batch,
            "digest": self.digest,
            "merkle_root": self.merkle_root,
            "row_count": self.row_count,
            "previous_digest": self.previous_digest,
            "closed_at": self.closed_at.isoformat(timespec="microseconds"),
            "tables": self.tables,
        }


CHAIN_LOCK = 0x6C6564676572  # PostgreSQL advisory lock key of the seal chain head ("ledger")


def lock_for_close(s: Session, backend: str, name: str) -> m.Batch:
    """The batch row, locked against imports and corrections, and the seal chain head locked against
    other closes, until this transaction ends (PostgreSQL: advisory + row lock; DuckDB: one writer
    per file, so a second process cannot even open the ledger while this one writes)."""
    if backend == "postgresql":
        s.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": CHAIN_LOCK})
    return Ledger.get_batch(s, name, lock="update")


def _check_seal_file(path: Path) -> None:
    """Fail before anything is sealed: the folder must exist and the file must be writable."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{path}: no such folder {folder} (create it first; the seal file is not placed by guess)")
    if path.exists():
        if not path.is_file() or not os.access(path, os.W_OK):
            raise InputError(f"{path}: not a writable file")
    elif not os.access(folder, os.W_OK):
        raise InputError(f"{path}: folder {folder} is not writable")


def _write_seal_file(path: Path, line: str) -> bytes | None:
    """Old content + ``line`` to a temporary file beside ``path``, fsync, rename over ``path``.

    Returns the previous content (None if there was no file) so a failed commit can put it back."""
    old = path.read_bytes() if path.exists() else None
    data = old or b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    data += line.encode() + b"\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write the seal: {exc.strerror}") from None
    if path.read_bytes() != data:
        _restore_seal_file(path, old)
        raise InputError(f"{path}: the seal file does not read back as written")
    return old


def _restore_seal_file(path: Path, old: bytes | None) -> None:
    try:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(old)
    except OSError:
        pass


def close_batch(ledger: Ledger, name: str, seal_file: Path | None = None) -> SealResult:
    """Seal and close a batch in one transaction.

    The batch and the seal chain are locked first (:func:`lock_for_close`), so no import commits
    into the batch while its seal is computed and no other close forks the chain. With
    ``seal_file``, the seal line is written (temporary file, fsync, rename) *before* the commit:
    if it cannot be written nothing is closed, and if the commit fails the file is put back.
    """
    if seal_file is not None:
        _check_seal_file(seal_file)
    written: bytes | None | bool = False
    try:
        with ledger.session() as s:
            batch = lock_for_close(s, ledger.backend, name)
            if batch.status == "closed":
                raise Refused(
                    "R10",
                    f"close batch {name!r} again",
                    f"it was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC",
                    "nothing to do; `ledger verify` checks its seal",
                )
            last = s.scalar(sa.select(m.Seal).order_by(m.Seal.id.desc()).limit(1))
            previous = last.digest if last else sl.ZERO_DIGEST
            closed_at = now()
            conn = s.connection()
            declared, arts = _batch_parts(
                conn, ledger.backend, batch.id, chunks=True
            )  # chunks' seal_part fields, not rows
            unchecked: list[str] = []
            changed = _import_digest_problems(s, conn, ledger.backend, arts, unchecked)
            if ledger.backend == "duckdb":  # no triggers: the declared rows against the digests the ledger kept
                rows = check_declared(conn, {p.table: p.data.column("id").to_pylist() for p in declared})
                changed += rows.problems
                unchecked += [f"declared rows: {u}" for u in rows.unchecked]
            if changed:
                raise Refused(
                    "R10",
                    f"close batch {name!r}",
                    "rows changed behind the ledger since their import: " + "; ".join(changed[:5]),
                    "find them with `ledger verify`; import the data again into a new batch",
                )
            root = s3.batch_root(declared, arts)
            parts = [*declared, *(p for ps in arts.values() for p in ps)]
            count = sum(p.count for p in parts)
            digest = sl.seal_digest(previous, name, root, count, closed_at, s3.SCHEME)
            seal = m.Seal(
                batch_id=batch.id,
                digest=digest,
                merkle_root=root,
                row_count=count,
                previous_digest=previous,
                closed_at=closed_at,
                table_counts=s3.counts_json(declared, arts),
                table_roots=_part_roots_json(parts),
                scheme=s3.SCHEME,
            )
            s.add(seal)
            s.flush()
            conn.execute(
                sa.insert(m.SealPart), [r for p in parts for r in s3.seal_part_rows(seal.id, p)]
            )  # one statement
            batch.status, batch.closed_at, batch.seal_digest = "closed", closed_at, digest
            result = SealResult(
                name, digest, root, count, previous, closed_at, json.loads(seal.table_counts), unchecked=unchecked
            )
            s.flush()
            if seal_file is not None:
                written = _write_seal_file(seal_file, json.dumps(result.as_line(), sort_keys=True))
                result.seal_file = seal_file
    except BaseException:
        if seal_file is not None and written is not False:
            _restore_seal_file(seal_file, written)  # type: ignore[arg-type]
        raise
    return result


def _batch_parts(conn: sa.Connection, backend: str, batch_id: int, chunks: bool = False):
    """The batch's declared parts and its artefacts' parts, the large tables streamed
    (:func:`seal3.artefact_digest_parts`; with ``chunks`` each chunk's seal_part fields kept, for close)."""
    declared = s3.declared_parts(conn, backend, batch_id)
    arts = s3.artefact_digest_parts(conn, backend, f"SELECT id FROM artefact WHERE batch_id = {int(batch_id)}", chunks)
    return declared, arts


def _part_key(p: s3.Part | s3.HeldPart) -> str:
    return p.table if p.artefact_id is None else f"{p.table}@{p.artefact_id}"


def _part_roots_json(parts: list[s3.Part | s3.HeldPart]) -> str:
    return json.dumps({_part_key(p): [p.count, p.root] for p in parts}, sort_keys=True)


def _import_digests(s: Session, artefact_ids: list[int]) -> dict[tuple[int, str], m.ArtefactDigest]:
    if not artefact_ids:
        return {}
    rows = s.scalars(sa.select(m.ArtefactDigest).where(m.ArtefactDigest.artefact_id.in_(artefact_ids)))
    return {(r.artefact_id, r.table_name): r for r in rows}


def _import_digest_problems(
    s: Session,
    conn: sa.Connection,
    backend: str,
    arts: Mapping[int, Sequence[s3.Part | s3.HeldPart]],
    unchecked: list[str] | None = None,
) -> list[str]:
    """Each artefact part against the digest its import stored: what differs (table, rows: a part that
    differs is read back whole to name them, :func:`seal3.full_part`).

    An artefact with no stored digest at all cannot be compared: it goes to ``unchecked`` (with
    why) when given, else it is a problem too -- never skipped in silence (fail closed)."""
    stored = _import_digests(s, list(arts))
    out: list[str] = []
    for a, parts in arts.items():
        if not any((a, p.table) in stored for p in parts):
            (out if unchecked is None else unchecked).append(_no_digest(s, a))
            continue
        for p in parts:
            st = stored.get((a, p.table))
            if st is None:
                out.append(f"artefact {a}: no import digest for table {p.table}")
            elif (st.row_count, st.root) != (p.count, p.root):
                out.append(f"artefact {a}, table {p.table}: " + _chunk_ranges(s3.full_part(conn, backend, p), st))
    return out


def _no_digest(s: Session, artefact_id: int) -> str:
    art = s.get(m.Artefact, artefact_id)
    what = (
        f"artefact {artefact_id}"
        if art is None
        else f"artefact {artefact_id} ({art.file_name}, imported {art.imported_at:%Y-%m-%d %H:%M:%S} UTC)"
    )
    return (
        f"{what}: no import digest is stored for it (artefacts imported before migration 0011 have none; "
        "otherwise its artefact_digest rows were deleted), so its rows cannot be compared with what was imported"
    )


def _chunk_ranges(p: s3.Part, st: m.ArtefactDigest) -> str:
    """Which rows differ from the import digest, as ranges of rows in key order (chunks of 4096)."""
    from bench_ledger.digest import CHUNK

    old = [st.chunks[i : i + 32] for i in range(0, len(st.chunks), 32)]
    bad = [
        i
        for i in range(max(len(old), len(p.digests)))
        if i >= len(old) or i >= len(p.digests) or old[i] != p.digests[i]
    ]
    keys = s3.key_columns(p.table)
    shown = []
    for i in bad[:3]:
        lo, hi = i * CHUNK, min((i + 1) * CHUNK, p.count) - 1
        if lo > hi:
            shown.append(f"rows from {lo} on (gone)")
            continue
        first = [p.data.column(k)[lo].as_py() for k in keys]
        last = [p.data.column(k)[hi].as_py() for k in keys]
        fmt = lambda v: "(" + ", ".join(f"{c}={x}" for c, x in zip(keys, v, strict=True)) + ")"  # noqa: E731
        shown.append(f"rows {fmt(first)} … {fmt(last)}")
    counts = "" if st.row_count == p.count else f"{st.row_count:,} rows at import, {p.count:,} now; "
    return f"{counts}{len(bad)} chunk(s) of {CHUNK} rows differ from the import digest: " + ", ".join(shown)


# --------------------------------------------------------------------------- verify


@dataclass
class TableDiff:
    table: str
    changed: list[list] = field(default_factory=list)  # primary keys whose row differs
    missing: list[list] = field(default_factory=list)  # sealed rows no longer there
    added: list[list] = field(default_factory=list)  # rows that were not sealed

    def describe(self, limit: int = 20) -> str:
        cols = sl.key_columns(self.table)
        parts = []
        for what, keys in (("changed", self.changed), ("missing", self.missing), ("added", self.added)):
            if keys:
                shown = ", ".join(
                    "(" + ", ".join(f"{c}={v}" for c, v in zip(cols, k, strict=True)) + ")" for k in keys[:limit]
                )
                more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
                parts.append(f"{len(keys)} {what}: {shown}{more}")
        return f"table {self.table}: " + "; ".join(parts or ["rows differ"])


@dataclass
class BatchCheck:
    batch: str
    digest: str | None
    row_count: int
    problems: list[str] = field(default_factory=list)
    diffs: list[TableDiff] = field(default_factory=list)
    is_open: bool = False  # an open batch: its artefacts checked against their import digests
    artefacts: int = 0  # (open batches) artefacts that have an import digest
    unchecked: list[str] = field(default_factory=list)  # (open) artefacts that cannot be checked, and why
    unbatched: bool = False  # the artefacts that belong to no batch (``batch`` is empty)

    @property
    def ok(self) -> bool:
        """Every row checked and none differs: an artefact that could not be checked is not ok."""
        return not self.problems and not self.diffs and not self.unchecked


@dataclass
class VerifyResult:
    checks: list[BatchCheck]
    guard_problems: list[str] = field(default_factory=list)  # missing or disabled PostgreSQL triggers
    merged_runs: list[str] = field(default_factory=list)  # runs holding two results of one format (merged_runs)
    declared: DeclaredCheck | None = None  # DuckDB: declared rows against their digests (None: triggers guard them)

    @property
    def ok(self) -> bool:
        return (
            all(c.ok for c in self.checks)
            and not self.guard_problems
            and not self.merged_runs
            and (self.declared is None or self.declared.ok)
        )


def read_seal_file(path: Path) -> dict[str, dict]:
    """The last line per batch of a seal file (JSON Lines written by :func:`close_batch`)."""
    if not path.is_file():
        raise InputError(
            f"{path}: not a regular file; a seal file is the JSON Lines file `ledger close --seal-file` wrote"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from None
    out: dict[str, dict] = {}
    for n, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InputError(f"{path}, line {n}: not a seal line (not UTF-8 text)") from None
            except (ValueError, RecursionError):
                raise InputError(f"{path}, line {n}: not a seal line (not one JSON object)") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("batch"), str):
                raise InputError(f'{path}, line {n}: not a seal line (no "batch" name)') from None
            out[rec["batch"]] = rec
    return out


def verify(ledger: Ledger, batch: str | None = None, seal_file: Path | None = None) -> VerifyResult:
    """Recompute every closed batch's seal (or one) and compare with the seal row, chain and file.

    Also checks the ledger's own seal rows: a seal row whose batch is no longer closed (reopened
    behind the ledger), a seal row that disagrees with itself (its digest rebuilt from its own
    fields, its per-table roots rebuilt from its stored leaves), and, on PostgreSQL, that the
    append-only triggers exist and are enabled (:func:`ledger.guards.trigger_problems`).
    """
    from bench_ledger.guards import trigger_problems

    filed = read_seal_file(seal_file) if seal_file is not None else None
    checks: list[BatchCheck] = []
    with ledger.session() as s:
        if ledger.backend == "postgresql":  # one snapshot for every read of the check (the parts are read in slices)
            s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        open_only: m.Batch | None = None
        if batch is not None:
            one = Ledger.get_batch(s, batch)
            has_seal = s.scalar(sa.select(m.Seal.id).where(m.Seal.batch_id == one.id)) is not None
            if one.status != "closed" and not has_seal and (filed is None or batch not in filed):
                open_only = one
        seals = {x.batch_id: x for x in s.scalars(sa.select(m.Seal))}
        chain = sorted(seals.values(), key=lambda x: x.id)
        prev_of = {x.id: (chain[i - 1].digest if i else sl.ZERO_DIGEST) for i, x in enumerate(chain)}
        if open_only is not None:
            picked = []
        elif batch is not None:
            picked = [Ledger.get_batch(s, batch)]
        else:
            picked = [
                b
                for b in s.scalars(sa.select(m.Batch).order_by(m.Batch.id))
                if b.status == "closed" or b.id in seals or (filed is not None and b.name in filed)
            ]
        conn = s.connection()
        for b in picked:
            checks.append(_check(conn, ledger.backend, s, b, seals.get(b.id), prev_of, filed))
        done = {b.id for b in picked}
        opened = (
            [open_only]
            if open_only is not None
            else []
            if batch is not None
            else [
                b
                for b in s.scalars(sa.select(m.Batch).where(m.Batch.status == "open").order_by(m.Batch.id))
                if b.id not in done
            ]
        )
        for b in opened:  # no seal yet: every artefact against the digest its import stored
            checks.append(
                _open_check(conn, ledger.backend, s, b.name, f"SELECT id FROM artefact WHERE batch_id = {int(b.id)}")
            )
        if (
            batch is None
            and s.scalar(sa.select(m.Artefact.id).where(m.Artefact.batch_id.is_(None)).limit(1)) is not None
        ):
            # artefacts of no batch (samples, logs): no seal will ever cover them, their import digest does
            check = _open_check(conn, ledger.backend, s, "", "SELECT id FROM artefact WHERE batch_id IS NULL")
            check.unbatched = True
            checks.append(check)
        if batch is None:
            known = {c.batch for c in checks}
            if filed is not None:
                for name in sorted(set(filed) - known):
                    checks.append(BatchCheck(name, None, 0, ["in the seal file but not a batch of the ledger"]))
        guard_problems = trigger_problems(conn, ledger.backend)
        merged = merged_runs(conn, None if batch is None else Ledger.get_batch(s, batch).id)
        rows = None
        if ledger.backend == "duckdb":  # no triggers: every declared row against the digest the ledger kept
            rows = check_declared(conn, None if batch is None else _declared_ids(conn, Ledger.get_batch(s, batch).id))
    return VerifyResult(checks, guard_problems, merged, rows)


def merged_runs(conn: sa.Connection, batch_id: int | None = None) -> list[str]:
    """Runs (current revision) holding two or more artefacts of one format: two results of one kind,
    which are two runs whatever their labels say. Earlier versions found a file's run by its label
    and merged such results; each is named with its files, to be re-imported into a new batch."""
    C, A, R, B = m.Capture.__table__, m.Artefact.__table__, m.Run.__table__, m.Batch.__table__
    stmt = (
        sa.select(R.c.id, R.c.label, B.c.name, A.c.format, A.c.id.label("artefact"), A.c.file_name)
        .select_from(
            C.join(A, A.c.id == C.c.artefact_id)
            .join(R, sa.and_(sa.func.coalesce(R.c.origin_id, R.c.id) == C.c.run_id, current(R)))
            .join(B, B.c.id == R.c.batch_id)
        )
        .order_by(R.c.id, A.c.id)
    )
    if batch_id is not None:
        stmt = stmt.where(R.c.batch_id == batch_id)
    held: dict[tuple, list[str]] = {}
    for row in conn.execute(stmt):
        held.setdefault((row.id, row.label, row.name, row.format), []).append(
            f"artefact {row.artefact} {row.file_name}"
        )
    return [
        f"run {rid} {label!r} of batch {bname!r} holds {len(files)} results of format {fmt}: {', '.join(files)}; "
        "two results are two runs (re-import the files into a new batch; this version keeps them apart)"
        for (rid, label, bname, fmt), files in held.items()
        if len(files) > 1
    ]


def _declared_ids(conn: sa.Connection, batch_id: int) -> dict[str, list[int]]:
    """The ids of the batch's declared rows, as its seal takes them (batch, deployments, runs, values)."""
    return {p.table: p.data.column("id").to_pylist() for p in s3.declared_parts(conn, "duckdb", batch_id)}


def _open_check(conn: sa.Connection, backend: str, s: Session, name: str, artefact_ids: str) -> BatchCheck:
    """The artefacts of ``artefact_ids`` (a SQL subquery) against the digests their imports stored."""
    arts = s3.artefact_digest_parts(conn, backend, artefact_ids)
    unchecked: list[str] = []
    check = BatchCheck(
        name,
        None,
        sum(p.count for ps in arts.values() for p in ps),
        _import_digest_problems(s, conn, backend, arts, unchecked),
        is_open=True,
        unchecked=unchecked,
    )
    check.artefacts = len({a for a, _ in _import_digests(s, list(arts))})
    return check


def _check(
    conn: sa.Connection,
    backend: str,
    s: Session,
    b: m.Batch,
    seal: m.Seal | None,
    prev_of: dict[int, str],
    filed: dict[str, dict] | None,
) -> BatchCheck:
    check = BatchCheck(b.name, None, 0)
    line = filed.get(b.name) if filed is not None else None
    if b.status != "closed":
        check.problems.append(
            f"is open in the ledger (status {b.status!r}), but "
            + ("has a seal row" if seal is not None else "the seal file has a seal for it")
            + ": reopened behind the ledger"
        )
    if seal is None:
        if b.status == "closed":
            check.problems.append("closed but has no seal row")
        if line is None:
            return check
    scheme = seal.scheme if seal is not None else line.get("scheme") if line is not None else None
    if not isinstance(scheme, str):
        check.problems.append(f"seal scheme {scheme!r} is unknown to this version")
        return check
    if scheme == s3.SCHEME:
        declared, arts = _batch_parts(conn, backend, b.id)
        parts = [*declared, *(p for ps in arts.values() for p in ps)]
        root, count = s3.batch_root(declared, arts), sum(p.count for p in parts)
    elif (tables := sl.TABLES_OF_SCHEME.get(scheme)) is not None:
        d = sl.compute(conn, backend, b.id, tables=tables)
        root, count = d.root, d.count
    else:
        check.problems.append(f"seal scheme {scheme!r} is unknown to this version")
        return check
    check.row_count = count
    if seal is None:  # only the seal file is left
        assert line is not None  # returned above when there is neither
        closed_at = datetime.fromisoformat(line["closed_at"])
        digest = sl.seal_digest(line.get("previous_digest", ""), b.name, root, count, closed_at, scheme)
        check.digest = digest
        if digest != line.get("digest"):
            check.problems.append(
                f"seal file has {str(line.get('digest'))[:16]}…, the ledger recomputes {digest[:16]}…"
            )
        return check
    closed_at = b.closed_at if b.closed_at is not None else seal.closed_at
    digest = sl.seal_digest(seal.previous_digest, b.name, root, count, closed_at, scheme)
    check.digest = digest
    if digest != seal.digest:
        check.problems.append(f"recomputed seal {digest[:16]}… differs from the stored seal {seal.digest[:16]}…")
    own = sl.seal_digest(seal.previous_digest, b.name, seal.merkle_root, seal.row_count, seal.closed_at, scheme)
    if own != seal.digest:
        check.problems.append(
            "the seal row disagrees with itself: its digest is not the digest of its "
            "previous_digest, merkle_root, row_count and closed_at (rewritten)"
        )
    if root != seal.merkle_root:
        check.problems.append(f"recomputed Merkle root {root[:16]}… differs from the stored {seal.merkle_root[:16]}…")
    if b.status == "closed" and b.seal_digest != seal.digest:
        check.problems.append("the batch's seal_digest differs from its seal row")
    if b.status == "closed" and seal.closed_at != b.closed_at:
        check.problems.append("the batch's closed_at differs from its seal row")
    if seal.previous_digest != prev_of[seal.id]:
        check.problems.append("seal chain broken: previous_digest is not the digest of the seal before it")
    if filed is not None:
        if line is None:
            check.problems.append("not in the seal file")
        else:
            if line.get("digest") != digest:
                check.problems.append(
                    f"seal file has {str(line.get('digest'))[:16]}…, the ledger recomputes {digest[:16]}…"
                )
            if line.get("digest") != seal.digest or line.get("merkle_root") != seal.merkle_root:
                check.problems.append("the seal file's line differs from the ledger's seal row (digest or merkle_root)")
    if scheme == s3.SCHEME:
        _check_parts(s, conn, backend, seal, parts, check)
        return check
    check.problems.extend(_stored_leaf_problems(s, seal))
    stored_roots = json.loads(seal.table_roots)
    for table, td in d.tables.items():
        if stored_roots.get(table) != td.root:
            diff = _diff_table(conn, backend, s, seal, b.id, table)
            if diff.changed or diff.missing or diff.added:
                check.diffs.append(diff)
            else:
                check.problems.append(
                    f"table {table}: no row differs from the stored leaves, but the stored "
                    "table root does not match them (seal row rewritten)"
                )
    return check


def _check_parts(
    s: Session, conn: sa.Connection, backend: str, seal: m.Seal, parts: list[s3.Part | s3.HeldPart], check: BatchCheck
) -> None:
    """Scheme 3: the stored parts must rebuild the seal row, and each part must match its stored root
    (a part that does not is read back whole, :func:`seal3.full_part`, to name its rows)."""
    from bench_ledger.digest import root_of

    stored_roots: dict[str, list] = json.loads(seal.table_roots)
    rows: dict[str, list[s3.PartRow]] = {}
    for r in s.scalars(
        sa.select(m.SealPart)
        .where(m.SealPart.seal_id == seal.id)
        .order_by(m.SealPart.table_name, m.SealPart.artefact_id, m.SealPart.chunk_no)
    ):
        key = r.table_name if r.artefact_id == 0 else f"{r.table_name}@{r.artefact_id}"
        if r.chunk_no >= 0:
            rows.setdefault(key, []).append(
                s3.PartRow(r.chunk_no, r.row_count, bytes.fromhex(r.digest), r.keys, r.fingerprints)
            )
        else:
            rows.setdefault(key, [])
    for key, (cnt, root) in sorted(stored_roots.items()):
        got = rows.get(key)
        if (
            got is None
            or [r.chunk_no for r in got] != list(range(len(got)))
            or sum(r.row_count for r in got) != cnt
            or root_of([r.digest for r in got]) != root
        ):
            check.problems.append(
                f"seal_part rows of {key.replace('@', ' of artefact ')} do not rebuild the seal's "
                "root for it: deleted or rewritten"
            )
    declared = [[k, *stored_roots[k]] for k in s3.DECLARED_TABLES if k in stored_roots]
    arts: dict[int, list] = {}
    for key, (cnt, root) in stored_roots.items():
        if "@" in key:
            table, a = key.split("@")
            arts.setdefault(int(a), []).append((s3.ARTEFACT_TABLES.index(table), [table, cnt, root]))
    items = declared + [
        ["artefact", a, hashlib.sha256(rfc8785.dumps([x for _, x in sorted(v)])).hexdigest()]
        for a, v in sorted(arts.items())
    ]
    if hashlib.sha256(rfc8785.dumps(items)).hexdigest() != seal.merkle_root:
        check.problems.append("the seal row's per-part roots do not rebuild its merkle_root (seal row rewritten)")
    current = {_part_key(p): p for p in parts}
    for key in sorted(set(stored_roots) - set(current)):
        check.problems.append(
            f"{key.replace('@', ' of artefact ')}: sealed, but its artefact is no longer in the batch"
        )
    for key, p in current.items():
        if stored_roots.get(key) == [p.count, p.root]:
            continue
        d = s3.diff_part(s3.full_part(conn, backend, p), rows.get(key, []))
        if d.changed or d.missing or d.added:
            check.diffs.append(
                TableDiff(
                    p.table, [list(k) for k in d.changed], [list(k) for k in d.missing], [list(k) for k in d.added]
                )
            )
        else:
            check.problems.append(f"{key.replace('@', ' of artefact ')}: differs from the seal, no row located")


def _stored_leaf_problems(s: Session, seal: m.Seal) -> list[str]:
    """The stored leaves (seal_chunk) must rebuild the seal row's per-table roots and counts."""
    out: list[str] = []
    roots, counts = json.loads(seal.table_roots), json.loads(seal.table_counts)
    streams: dict[str, sl.MerkleStream] = {}
    expected_no: dict[str, int] = {}
    for c in s.scalars(
        sa.select(m.SealChunk)
        .where(m.SealChunk.seal_id == seal.id)
        .order_by(m.SealChunk.table_name, m.SealChunk.chunk_no)
    ):
        st = streams.setdefault(c.table_name, sl.MerkleStream())
        if c.chunk_no != expected_no.get(c.table_name, 0):
            out.append(f"seal_chunk of table {c.table_name}: chunk {expected_no.get(c.table_name, 0)} is missing")
        expected_no[c.table_name] = c.chunk_no + 1
        if len(c.leaves) != 32 * c.row_count or len(json.loads(c.keys_json)) != c.row_count:
            out.append(f"seal_chunk {c.chunk_no} of table {c.table_name}: row_count does not match its keys and leaves")
        for i in range(0, len(c.leaves), 32):
            st.add(c.leaves[i : i + 32])
    for table, root in roots.items():
        st = streams.get(table, sl.MerkleStream())
        if st.count != counts.get(table) or st.root().hex() != root:
            out.append(
                f"seal_chunk rows of table {table} do not rebuild the seal's root for it "
                f"({st.count:,} stored leaves for {counts.get(table, 0):,} sealed rows): deleted or rewritten"
            )
    return out


def _diff_table(conn: sa.Connection, backend: str, s: Session, seal: m.Seal, batch_id: int, table: str) -> TableDiff:
    """Compare each row's leaf hash with the sealed ones (seal_chunk) by primary key."""
    sealed: dict[tuple, bytes] = {}
    rows = s.scalars(
        sa.select(m.SealChunk)
        .where(m.SealChunk.seal_id == seal.id, m.SealChunk.table_name == table)
        .order_by(m.SealChunk.chunk_no)
    )
    for c in rows:
        for i, key in enumerate(json.loads(c.keys_json)):
            sealed[tuple(key)] = c.leaves[32 * i : 32 * i + 32]
    diff = TableDiff(table)
    for key, leaf, _ in sl.table_leaves(conn, backend, batch_id, table):
        k = tuple(key)
        old = sealed.pop(k, None)
        if old is None:
            diff.added.append(key)
        elif old != leaf:
            diff.changed.append(key)
    diff.missing = [list(k) for k in sealed]
    return diff


# --------------------------------------------------------------------------- corrections


# The correctable models share their revision columns (id, revision, supersedes_id, ...), which the
# helpers below address by name: type[Any] says so (a union of the three would not type-check).
Correctable = type[Any]
_CORRECTABLE: dict[str, Correctable] = {
    "run": m.Run,
    "published_value": m.PublishedValue,
    "launch": m.Launch,
}
_FIXED = {"id", "revision", "supersedes_id", "correction_reason", "recorded_at", "origin_id"}


def _correct(ledger: Ledger, model: Correctable, row_id: int, reason: str, changes: dict[str, Any]) -> int:
    with ledger.session() as s:
        return _correct_in(s, model, row_id, reason, changes)


def _correct_in(s: Session, model: Correctable, row_id: int, reason: str, changes: dict[str, Any]) -> int:
    """:func:`_correct` inside the caller's transaction."""
    if not reason or not reason.strip():
        raise InputError("a correction needs a reason")
    old = s.get(model, row_id)
    table = model.__tablename__
    if old is None:
        raise NotFound(f"no {table} with id {row_id}")
    newer = s.scalar(sa.select(model.id).where(model.supersedes_id == row_id))
    if newer is not None:
        raise InputError(f"{table} {row_id} is already superseded by {newer}; correct the latest revision")
    cols = {c.key for c in sa.inspect(model).column_attrs}
    bad = sorted(set(changes) - (cols - _FIXED))
    if bad:
        raise InputError(f"cannot correct {', '.join(bad)} of a {table}")
    if model is m.Run:  # a corrected setting is held to the domain a file's or a manifest's is
        changes = dict(changes)
        for name in sorted(set(changes) & set(RUN_DOMAINS)):
            if why := RUN_DOMAINS[name].violation(changes[name]):
                raise InputError(f"run.{name}: {why}")
        if changes.get("request_rate") is not None:
            try:
                changes["request_rate"] = request_rate_text(str(changes["request_rate"]))
            except ValueError as exc:
                raise InputError(f"run.request_rate: {exc}") from None
    batch_id = getattr(old, "batch_id", None)
    if batch_id is None and getattr(old, "run_id", None) is not None:
        run = s.get(m.Run, old.run_id)
        batch_id = run.batch_id if run is not None else None
    batch = s.get(m.Batch, batch_id) if batch_id is not None else None
    if batch is not None:  # locked like an import: a concurrent close waits, or is waited for
        batch = Ledger.get_batch(s, batch.name, lock="share")
    if batch is not None and batch.status == "closed":
        raise Refused(
            "R10",
            f"correct {table} {row_id} of batch {batch.name!r}",
            f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
            "record the corrected value in a new batch that names this one",
        )
    values = {c: getattr(old, c) for c in cols - _FIXED}
    values.update(changes)
    if model is m.Run:  # captured rows stay on the first revision (see Run.origin_id)
        values["origin_id"] = old.origin_id or old.id
    new = model(
        **values, revision=old.revision + 1, supersedes_id=old.id, correction_reason=reason.strip(), recorded_at=now()
    )
    s.add(new)
    s.flush()
    return new.id


# what a run learns from the run an attached artefact came from, where it states nothing itself
_LEARNED = (
    "input_target_tokens",
    "output_cap_tokens",
    "concurrency",
    "request_count",
    "request_rate",
    "seed",
    "dataset",
    "tool",
    "tool_version",
    "started_at",
    "ended_at",
    "duration_s",
)


@dataclass
class Attached:
    artefact_id: int
    run_id: int  # the target run's new revision
    superseded_run_id: int
    from_run_id: int  # the run the artefact's values were on (its current revision)
    moved: int  # reported values, each a new revision on the target run
    learned: dict[str, Any] = field(default_factory=dict)
    not_learned: str | None = None  # why no setting was taken from the artefact's run


def attach(ledger: Ledger, artefact_id: int, run_id: int, reason: str) -> Attached:
    """Attach an imported artefact's reported values to another run of its batch: a correction (R10).

    Each current published value of the artefact becomes a new revision on ``run_id`` (the old one
    superseded, ``ledger history published_value ID``), and the run gets a new revision recording the
    attachment (``ledger history run ID``) that learns the settings it did not state from the run the
    artefact was on, when that run holds no other artefact (values come from the attached file only). Captured rows never move (R9): an artefact holding per-request records is
    refused, naming the aggregate artefacts of the target run that can be attached the other way.
    One transaction; a closed batch refuses it (R10)."""
    if not reason or not reason.strip():
        raise InputError("an attachment is a correction: it needs a reason (--reason)")
    C, PV = m.Capture.__table__, m.PublishedValue.__table__
    with ledger.session() as s:
        art = s.get(m.Artefact, artefact_id)
        if art is None:
            raise NotFound(f"no artefact with id {artefact_id}")
        target = s.get(m.Run, run_id)
        if target is None:
            raise NotFound(f"no run with id {run_id}")
        require_current(s.connection(), "run", run_id)
        caps = s.execute(sa.select(C.c.run_id, C.c.record_count).where(C.c.artefact_id == artefact_id)).all()
        # where its values are now (an earlier attachment moved them), else where it was captured
        keys = sorted(
            set(
                s.scalars(
                    sa.select(PV.c.run_id).where(PV.c.artefact_id == artefact_id, current(PV), PV.c.run_id.is_not(None))
                )
            )
            or {c.run_id for c in caps}
        )
        if not keys:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}, {art.format}) holds no benchmark run: nothing to attach"
            )
        if len(keys) > 1:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) holds {len(keys)} runs; one run's artefact can be "
                "attached, a file of several runs cannot"
            )
        src_key, dst_key = keys[0], target.origin_id or target.id
        source = s.scalars(
            sa.select(m.Run).where(sa.func.coalesce(m.Run.origin_id, m.Run.id) == src_key, current(m.Run))
        ).one()
        if src_key == dst_key:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) is already attached to run {run_id} {target.label!r}"
            )
        if source.batch_id != target.batch_id:
            names = dict(
                s.execute(
                    sa.select(m.Batch.id, m.Batch.name).where(m.Batch.id.in_([source.batch_id, target.batch_id]))
                ).all()
            )
            raise Refused(
                "R2",
                f"attach artefact {artefact_id} to run {run_id}",
                f"the artefact's run {source.id} is in batch {names[source.batch_id]!r}, run {run_id} in batch "
                f"{names[target.batch_id]!r}; runs of different batches are never one run",
                "import the file into the run's batch (`ledger import FILE --batch B --run LABEL`)",
            )
        records = sum(c.record_count for c in caps)
        if records:
            others = sorted(
                a
                for (a,) in s.execute(
                    sa.select(C.c.artefact_id)
                    .where(C.c.run_id == dst_key, C.c.record_count == 0)
                    .where(sa.exists().where(PV.c.artefact_id == C.c.artefact_id, PV.c.run_id == dst_key, current(PV)))
                )
            )
            held = s.execute(
                sa.select(sa.func.count()).select_from(C).where(C.c.run_id == dst_key, C.c.record_count > 0)
            ).scalar()
            commands = "; ".join(f"`ledger attach {a} --run {source.id} --reason ...`" for a in others)
            instead = (
                f"run {run_id} holds per-request records too: they are two runs"
                if held
                else f"attach the aggregate artefact(s) of run {run_id} to run {source.id} instead: {commands}"
                if others
                else f"import the other file of the run with --run {source.label!r}"
            )
            raise Refused(
                "R9",
                f"attach artefact {artefact_id} ({art.file_name}) to run {run_id}",
                f"it holds {records:,} per-request records captured for run {source.id} {source.label!r}; "
                "captured rows never move",
                instead,
            )
        batch = Ledger.get_batch(s, s.get_one(m.Batch, target.batch_id).name, lock="share")
        if batch.status == "closed":
            raise Refused(
                "R10",
                f"attach artefact {artefact_id} to run {run_id} of batch {batch.name!r}",
                f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
                "record the pairing in a new batch that names this one",
            )
        why = (
            f"attached artefact {artefact_id} ({art.file_name}) from run {source.id} {source.label!r}: {reason.strip()}"
        )
        values = s.scalars(
            sa.select(PV.c.id)
            .where(PV.c.artefact_id == artefact_id, PV.c.run_id == src_key, current(PV))
            .order_by(PV.c.id)
        ).all()
        if not values:
            raise InputError(
                f"artefact {artefact_id} ({art.file_name}) has no reported values on run {source.id}: nothing to attach"
            )
        for pv_id in values:
            _correct_in(s, m.PublishedValue, pv_id, why, {"run_id": dst_key})
        # the settings the artefact states: its run's, where that run holds this artefact alone (else
        # another file's values could be among them, and none is taken)
        alone = {a for (a,) in s.execute(sa.select(C.c.artefact_id).where(C.c.run_id == src_key))} == {artefact_id}
        learned = {
            k: getattr(source, k)
            for k in _LEARNED
            if alone and getattr(target, k) is None and getattr(source, k) is not None
        }
        new_run = _correct_in(s, m.Run, run_id, why, learned)
        not_learned = (
            None
            if alone
            else (
                f"run {source.id} holds other artefacts too: its settings are not this file's alone, so none was taken"
            )
        )
        return Attached(artefact_id, new_run, run_id, source.id, len(values), learned, not_learned)


def parse_changes(table: str, assignments: list[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` texts -> typed values by the column's type (``null`` clears a nullable field)."""
    model = _model(table)
    cols = {c.key: c for c in sa.inspect(model).column_attrs}
    out: dict[str, Any] = {}
    for a in assignments:
        name, eq, text = a.partition("=")
        name = name.strip()
        if not eq or not name:
            raise InputError(f"--set {a!r}: write FIELD=VALUE")
        if name not in cols or name in _FIXED:
            allowed = ", ".join(sorted(set(cols) - _FIXED))
            raise InputError(f"--set {a!r}: {table} has no correctable field {name!r} (correctable: {allowed})")
        col = cols[name].columns[0]
        if text == "null":
            if not col.nullable:
                raise InputError(f"--set {a!r}: {table}.{name} cannot be empty")
            out[name] = None
            continue
        try:
            out[name] = _typed(col.type, text)
        except (ValueError, ArithmeticError):
            raise InputError(
                f"--set {a!r}: {text!r} is not a valid {_type_name(col.type)} for {table}.{name}"
            ) from None
        allowed_values = m.enum_values(model.__table__, name)
        if allowed_values is not None and out[name] not in allowed_values:
            raise InputError(f"--set {a!r}: {table}.{name} is one of {', '.join(allowed_values)}, not {text!r}")
    if not out:
        raise InputError("a correction changes at least one field (--set FIELD=VALUE)")
    return out


def _type_name(t: sa.types.TypeEngine) -> str:
    if isinstance(t, m.ExactDecimal):
        return "exact decimal"
    names: tuple[tuple[type[sa.types.TypeEngine], str], ...] = (
        (sa.Integer, "integer"),
        (sa.Float, "number"),
        (sa.Boolean, "true/false"),
        (sa.DateTime, "ISO timestamp"),
    )
    return next((name for k, name in names if isinstance(t, k)), "text")


def _typed(t: sa.types.TypeEngine, text: str) -> Any:
    from decimal import Decimal

    if isinstance(t, m.ExactDecimal):
        d = Decimal(text)
        if not d.is_finite():
            raise ValueError(text)
        return d
    if isinstance(t, sa.Boolean):
        if text not in ("true", "false"):
            raise ValueError(text)
        return text == "true"
    if isinstance(t, sa.Integer):
        return int(text)
    if isinstance(t, sa.Float):
        import math

        v = float(text)
        if not math.isfinite(v):
            raise ValueError(text)
        return v
    if isinstance(t, sa.DateTime):
        return datetime.fromisoformat(text)
    return text


def correct(ledger: Ledger, table: str, row_id: int, reason: str, changes: dict[str, Any]) -> int:
    """A new revision of a run, published value or launch, superseding ``row_id``; its id."""
    return _correct(ledger, _model(table), row_id, reason, changes)


def correct_run(ledger: Ledger, run_id: int, reason: str, **changes: Any) -> int:
    """A new revision of a run (changed fields, same label), superseding ``run_id``; its id."""
    return _correct(ledger, m.Run, run_id, reason, changes)


def correct_published_value(ledger: Ledger, value_id: int, reason: str, **changes: Any) -> int:
    """A new revision of a published value, superseding ``value_id``; its id."""
    return _correct(ledger, m.PublishedValue, value_id, reason, changes)


def _table(table: sa.FromClause | Correctable) -> sa.FromClause:
    return table.__table__ if isinstance(table, type) else table


def current(table: sa.FromClause | Correctable, as_of: datetime | None = None) -> sa.ColumnElement[bool]:
    """THE current-revision predicate: true for rows of a correctable table (run, published_value,
    launch) that no later revision supersedes -- as the ledger stood at ``as_of`` when given (the
    row was recorded by then, and no revision recorded by then supersedes it).

    Every listing, metric, comparison, check and audit scope filters with it; the SQL views
    (migration 0009) spell the same rule in SQL. ``table`` is a model, a Table or an alias of one.
    """
    t = _table(table)
    newer = t.element.alias() if isinstance(t, sa.Alias) else t.alias()
    superseded = sa.select(newer.c.id).where(newer.c.supersedes_id == t.c.id)
    if as_of is None:
        return ~superseded.exists()
    return sa.and_(t.c.recorded_at <= as_of, ~superseded.where(newer.c.recorded_at <= as_of).exists())


def require_current(conn: sa.Connection, table: str, row_id: int) -> None:
    """Refuse a named revision that a correction superseded: the caller should use the current one."""
    model = _model(table)
    t = model.__table__
    newest, n = row_id, None
    while (n := conn.execute(sa.select(t.c.id).where(t.c.supersedes_id == newest)).scalar()) is not None:
        newest = n
    if newest != row_id:
        raise NotFound(
            f"{table} {row_id} is superseded by a correction: the current revision is {table} {newest} "
            f"(`ledger history {table} {row_id}` shows the chain)"
        )


def not_superseded(table: sa.FromClause | Correctable) -> sa.ColumnElement[bool]:
    """:func:`current` without a time (kept for callers written before it)."""
    return current(table)


def current_runs(as_of: datetime | None = None) -> sa.Select:
    """``select(Run)`` of the current revision of every run."""
    return sa.select(m.Run).where(current(m.Run, as_of))


def current_published_values(as_of: datetime | None = None) -> sa.Select:
    return sa.select(m.PublishedValue).where(current(m.PublishedValue, as_of))


def current_ids(ledger: Ledger, table: str, as_of: datetime | None = None) -> set[int]:
    model = _model(table)
    with ledger.session() as s:
        return set(s.scalars(sa.select(model.id).where(current(model, as_of))))


def _model(table: str) -> Correctable:
    try:
        return _CORRECTABLE[table]
    except KeyError:
        raise InputError(f"{table!r} has no history; correctable tables: {', '.join(_CORRECTABLE)}") from None


def history(ledger: Ledger, table: str, row_id: int) -> list[dict[str, Any]]:
    """The whole chain a row belongs to, oldest first (each revision as a dict of its columns)."""
    model = _model(table)
    cols = [c.key for c in sa.inspect(model).column_attrs]
    with ledger.session() as s:
        row = s.get(model, row_id)
        if row is None:
            raise NotFound(f"no {table} with id {row_id}")
        while row.supersedes_id is not None:
            row = s.get_one(model, row.supersedes_id)  # a foreign key: the row exists
        chain = [row]
        while (nxt := s.scalar(sa.select(model).where(model.supersedes_id == chain[-1].id))) is not None:
            chain.append(nxt)
        return [{c: getattr(r, c) for c in cols} for r in chain]
