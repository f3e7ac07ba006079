"""``ledger verify``: recompute every closed batch's seal (any scheme) and compare it with the seal
row, the chain and the seal file; every artefact of an open batch against its import digest.

Where a part or table differs, the rows that differ are named by primary key (scheme 3: from the
``seal_part`` fingerprints, :mod:`ledger.seal.part_rows`; schemes 1-2: from the stored leaves).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import rfc8785
import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.declared import DeclaredCheck
from bench_ledger.declared import check as check_declared
from bench_ledger.encoding import chunks
from bench_ledger.encoding import rows as encoding
from bench_ledger.models import key_columns
from bench_ledger.revisions import current
from bench_ledger.seal import part_rows, scheme2, scheme3, streams
from bench_ledger.seal.close import batch_parts
from bench_ledger.seal.import_digests import import_digest_problems, stored_digests
from bench_ledger.seal.sealfile import read_seal_file
from bench_ledger.store import Ledger
from sqlalchemy.orm import Session

__all__ = ["BatchCheck", "TableDiff", "VerifyResult", "verify"]


@dataclass
class TableDiff:
    table: str
    changed: list[list] = field(default_factory=list)  # primary keys whose row differs
    missing: list[list] = field(default_factory=list)  # sealed rows no longer there
    added: list[list] = field(default_factory=list)  # rows that were not sealed

    def describe(self, limit: int = 20) -> str:
        cols = key_columns(self.table)
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
        prev_of = {x.id: (chain[i - 1].digest if i else scheme2.ZERO_DIGEST) for i, x in enumerate(chain)}
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
        merged = _merged_runs(conn, None if batch is None else Ledger.get_batch(s, batch).id)
        rows = None
        if ledger.backend == "duckdb":  # no triggers: every declared row against the digest the ledger kept
            rows = check_declared(conn, None if batch is None else _declared_ids(conn, Ledger.get_batch(s, batch).id))
    return VerifyResult(checks, guard_problems, merged, rows)


def _merged_runs(conn: sa.Connection, batch_id: int | None = None) -> list[str]:
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
    return {p.table: p.data.column("id").to_pylist() for p in scheme3.declared_parts(conn, "duckdb", batch_id)}


def _open_check(conn: sa.Connection, backend: str, s: Session, name: str, artefact_ids: str) -> BatchCheck:
    """The artefacts of ``artefact_ids`` (a SQL subquery) against the digests their imports stored."""
    arts = streams.artefact_digest_parts(conn, backend, artefact_ids)
    unchecked: list[str] = []
    check = BatchCheck(
        name,
        None,
        sum(p.count for ps in arts.values() for p in ps),
        import_digest_problems(s, conn, backend, arts, unchecked),
        is_open=True,
        unchecked=unchecked,
    )
    check.artefacts = len({a for a, _ in stored_digests(s, list(arts))})
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
    if scheme == scheme3.SCHEME:
        declared, arts = batch_parts(conn, backend, b.id)
        parts = [*declared, *(p for ps in arts.values() for p in ps)]
        root, count = scheme3.batch_root(declared, arts), sum(p.count for p in parts)
    elif (tables := scheme2.TABLES_OF_SCHEME.get(scheme)) is not None:
        d = scheme2.compute(conn, backend, b.id, tables=tables)
        root, count = d.root, d.count
    else:
        check.problems.append(f"seal scheme {scheme!r} is unknown to this version")
        return check
    check.row_count = count
    if seal is None:  # only the seal file is left
        assert line is not None  # returned above when there is neither
        closed_at = datetime.fromisoformat(line["closed_at"])
        digest = scheme2.seal_digest(line.get("previous_digest", ""), b.name, root, count, closed_at, scheme)
        check.digest = digest
        if digest != line.get("digest"):
            check.problems.append(
                f"seal file has {str(line.get('digest'))[:16]}…, the ledger recomputes {digest[:16]}…"
            )
        return check
    closed_at = b.closed_at if b.closed_at is not None else seal.closed_at
    digest = scheme2.seal_digest(seal.previous_digest, b.name, root, count, closed_at, scheme)
    check.digest = digest
    if digest != seal.digest:
        check.problems.append(f"recomputed seal {digest[:16]}… differs from the stored seal {seal.digest[:16]}…")
    own = scheme2.seal_digest(seal.previous_digest, b.name, seal.merkle_root, seal.row_count, seal.closed_at, scheme)
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
    if scheme == scheme3.SCHEME:
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
    s: Session,
    conn: sa.Connection,
    backend: str,
    seal: m.Seal,
    parts: list[scheme3.Part | scheme3.HeldPart],
    check: BatchCheck,
) -> None:
    """Scheme 3: the stored parts must rebuild the seal row, and each part must match its stored root
    (a part that does not is read back whole, :func:`ledger.seal.scheme3.full_part`, to name its rows)."""
    stored_roots: dict[str, list] = json.loads(seal.table_roots)
    rows: dict[str, list[part_rows.PartRow]] = {}
    for r in s.scalars(
        sa.select(m.SealPart)
        .where(m.SealPart.seal_id == seal.id)
        .order_by(m.SealPart.table_name, m.SealPart.artefact_id, m.SealPart.chunk_no)
    ):
        key = r.table_name if r.artefact_id == 0 else f"{r.table_name}@{r.artefact_id}"
        if r.chunk_no >= 0:
            rows.setdefault(key, []).append(
                part_rows.PartRow(r.chunk_no, r.row_count, bytes.fromhex(r.digest), r.keys, r.fingerprints)
            )
        else:
            rows.setdefault(key, [])
    for key, (cnt, root) in sorted(stored_roots.items()):
        got = rows.get(key)
        if (
            got is None
            or [r.chunk_no for r in got] != list(range(len(got)))
            or sum(r.row_count for r in got) != cnt
            or chunks.root_of([r.digest for r in got]) != root
        ):
            check.problems.append(
                f"seal_part rows of {key.replace('@', ' of artefact ')} do not rebuild the seal's "
                "root for it: deleted or rewritten"
            )
    declared = [[k, *stored_roots[k]] for k in scheme3.DECLARED_TABLES if k in stored_roots]
    arts: dict[int, list] = {}
    for key, (cnt, root) in stored_roots.items():
        if "@" in key:
            table, a = key.split("@")
            arts.setdefault(int(a), []).append((scheme3.ARTEFACT_TABLES.index(table), [table, cnt, root]))
    items = declared + [
        ["artefact", a, hashlib.sha256(rfc8785.dumps([x for _, x in sorted(v)])).hexdigest()]
        for a, v in sorted(arts.items())
    ]
    if hashlib.sha256(rfc8785.dumps(items)).hexdigest() != seal.merkle_root:
        check.problems.append("the seal row's per-part roots do not rebuild its merkle_root (seal row rewritten)")
    recomputed = {scheme3.part_key(p): p for p in parts}
    for key in sorted(set(stored_roots) - set(recomputed)):
        check.problems.append(
            f"{key.replace('@', ' of artefact ')}: sealed, but its artefact is no longer in the batch"
        )
    for key, p in recomputed.items():
        if stored_roots.get(key) == [p.count, p.root]:
            continue
        d = part_rows.diff_part(scheme3.full_part(conn, backend, p), rows.get(key, []))
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
    streams: dict[str, encoding.MerkleStream] = {}
    expected_no: dict[str, int] = {}
    for c in s.scalars(
        sa.select(m.SealChunk)
        .where(m.SealChunk.seal_id == seal.id)
        .order_by(m.SealChunk.table_name, m.SealChunk.chunk_no)
    ):
        st = streams.setdefault(c.table_name, encoding.MerkleStream())
        if c.chunk_no != expected_no.get(c.table_name, 0):
            out.append(f"seal_chunk of table {c.table_name}: chunk {expected_no.get(c.table_name, 0)} is missing")
        expected_no[c.table_name] = c.chunk_no + 1
        if len(c.leaves) != 32 * c.row_count or len(json.loads(c.keys_json)) != c.row_count:
            out.append(f"seal_chunk {c.chunk_no} of table {c.table_name}: row_count does not match its keys and leaves")
        for i in range(0, len(c.leaves), 32):
            st.add(c.leaves[i : i + 32])
    for table, root in roots.items():
        st = streams.get(table, encoding.MerkleStream())
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
    for key, leaf, _ in scheme2.table_leaves(conn, backend, batch_id, table):
        k = tuple(key)
        old = sealed.pop(k, None)
        if old is None:
            diff.added.append(key)
        elif old != leaf:
            diff.changed.append(key)
    diff.missing = [list(k) for k in sealed]
    return diff
