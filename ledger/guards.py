"""Session guards: the ORM refuses what the rulebook forbids, even on a path around the store API.

Why here and not only in the store functions: any code holding a :class:`~sqlalchemy.orm.Session`
from :meth:`ledger.store.Ledger.session` could ``setattr`` a captured value or ``session.delete``
a run of a closed batch; these listeners (installed on every such session) refuse it at flush:

* captured rows (``artefact``, ``capture``, ``capture_field``, ``request``, ``request_gaps`` and its
  view ``chunk_gap``, ``request_value``, ``hardware_sample``, ``log_fact``) and seals are never updated
  or deleted (R9, R10);
* runs, published values and artefacts of a **closed** batch are not inserted, updated or
  deleted; a closed batch is not changed at all, reopening included (R10);
* a launch is corrected by a new revision: the only update allowed is linking its server log
  (``log_artefact_id`` from NULL to an artefact, as ``ledger.ingest`` does); it is never deleted;
* a deployment that a closed batch names (the batch's, a run's or an artefact's) is sealed with it:
  not updated or deleted (R10);
* no backfill (R9): rows describing an artefact (``capture``, ``request``, ``request_gaps``, ``request_value``,
  ``hardware_sample``, ``log_fact``) or a capture (``capture_field``) are added only in the
  transaction that created that artefact or capture, never to one imported earlier.

The one legitimate change of a batch is closing it: status open -> closed together with
``closed_at`` and ``seal_digest`` (``ledger.seal.close.close_batch``). Other inserts are allowed.
Bulk ``UPDATE``/``DELETE`` statements through the session (ORM-enabled or textual) on guarded
tables are refused outright, since their rows cannot be checked one by one.

The database is the last line: PostgreSQL triggers (migration 0005) refuse the same on raw SQL,
and (migration 0018) any UPDATE or DELETE of a declared row outside a transaction of the ledger's
own: every session marks itself as the ledger's writer (:func:`mark_ledger_write`). DuckDB 1.x has
no triggers (:func:`duckdb_triggers_supported` probes), so there the seal is what detects a change
of a closed batch, and the declared rows' digests (:mod:`ledger.declared`, written at every write:
:func:`declared_written` collects what a transaction wrote) one of an open batch (``ledger verify``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import Refused
from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session

__all__ = [
    "DECLARED_TABLES",
    "bulk_created_artefacts",
    "declared_written",
    "duckdb_triggers_supported",
    "install",
    "mark_ledger_write",
    "take_declared_written",
    "trigger_problems",
]

SEAL_TABLES = ("seal", "seal_chunk", "seal_part", "artefact_digest")
APPEND_ONLY = frozenset(m.CAPTURED_TABLES) | frozenset(m.CAPTURED_VIEWS) | frozenset(SEAL_TABLES)
DECLARED_TABLES = ("source_report", "deployment", "launch", "batch", "run", "published_value")
BULK_GUARDED = APPEND_ONLY | set(DECLARED_TABLES)
WRITER_SETTING = "bench_ledger.writer"  # PostgreSQL: on in the ledger's own transactions (migration 0018)
_RAW_WRITE = re.compile(r"^\s*(?:update|delete\s+from|truncate(?:\s+table)?)\s+\"?(\w+)\"?", re.IGNORECASE)


# Captured rows that describe an artefact (or a capture) and so must be written with it, in its
# own import transaction, never after (R9: no backfill): key attribute -> what it names.
_BELONGS_TO = {
    m.Capture: ("artefact_id", "fresh_artefacts"),
    m.CaptureField: ("capture_id", "fresh_captures"),
    m.Request: ("artefact_id", "fresh_artefacts"),
    m.ChunkGap: ("artefact_id", "fresh_artefacts"),
    m.RequestGaps: ("artefact_id", "fresh_artefacts"),
    m.HardwareSample: ("artefact_id", "fresh_artefacts"),
    m.LogFact: ("artefact_id", "fresh_artefacts"),
    m.ArtefactDigest: ("artefact_id", "fresh_artefacts"),
    m.RequestValue: ("artefact_id", "fresh_artefacts"),
}


def install(session: Session) -> Session:
    """Attach the guards to one session (called by :meth:`Ledger.session`)."""
    event.listen(session, "before_flush", _before_flush)
    event.listen(session, "after_flush", _after_flush)
    event.listen(session, "do_orm_execute", _on_execute)
    event.listen(session, "after_begin", lambda session, transaction, conn: mark_ledger_write(conn))
    return session


def mark_ledger_write(conn: sa.Connection) -> None:
    """Mark the transaction of ``conn`` as the ledger's own (PostgreSQL): the triggers of migration 0018
    let it change declared rows in place (a run learning its settings, a launch its log, a close);
    raw SQL from any other client stays refused. Transaction-local: it ends with the transaction."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT set_config('{WRITER_SETTING}', 'on', true)")


def declared_written(conn: sa.Connection, table: str, ids: Iterable[int]) -> None:
    """Note declared rows this transaction wrote outside the ORM (the bulk path, raw INSERTs): their
    digests are written before it commits (:func:`take_declared_written`)."""
    if table in DECLARED_TABLES:
        conn.info.setdefault(_WRITTEN, {}).setdefault(table, set()).update(int(i) for i in ids)


def take_declared_written(session: Session | None, conn: sa.Connection | None) -> dict[str, set[int]]:
    """The declared rows the transaction wrote (ORM objects flushed, and rows noted on ``conn``), and
    forget them: called once, at its commit or rollback."""
    out: dict[str, set[int]] = {}
    for source in (
        (session.info.pop(_WRITTEN, None) if session is not None else None),
        (conn.info.pop(_WRITTEN, None) if conn is not None else None),
    ):
        for table, ids in (source or {}).items():
            out.setdefault(table, set()).update(ids)
    return out


_WRITTEN = "declared_written"


def _after_flush(session: Session, flush_context) -> None:
    """Remember the artefacts and captures this session (one transaction) created, and the declared
    rows it inserted or changed."""
    for obj in session.new:
        if isinstance(obj, m.Artefact):
            session.info.setdefault("fresh_artefacts", set()).add(obj.id)
        elif isinstance(obj, m.Capture):
            session.info.setdefault("fresh_captures", set()).add(obj.id)
    for obj in (*session.new, *session.dirty):
        if obj.__tablename__ in DECLARED_TABLES:
            session.info.setdefault(_WRITTEN, {}).setdefault(obj.__tablename__, set()).add(obj.id)


def bulk_created_artefacts(session: Session, ids: list[int]) -> None:
    """Artefacts this session inserted through the bulk path (``ingest.write_artefacts``): fresh, as
    if flushed as ORM objects, so the rows that describe them may follow in this transaction."""
    session.info.setdefault("fresh_artefacts", set()).update(ids)


def _refuse_backfill(obj: m.Base) -> Refused:
    attr, _ = _BELONGS_TO[type(obj)]
    table = obj.__tablename__
    owner = "capture" if attr == "capture_id" else "artefact"
    return Refused(
        "R9",
        f"add a {table} row to {owner} {getattr(obj, attr)}",
        f"that {owner} was imported earlier: what a capture contained is fixed by its own import (no backfill)",
        "import the new data as a new artefact (a new run or batch); a correction is a new row naming what it supersedes",
    )


def _sealed_deployment(session: Session, dep_id: int) -> m.Batch | None:
    """A closed batch that names this deployment (its own, a run's or an artefact's): it is sealed."""
    with session.no_autoflush:
        return session.scalar(
            sa.select(m.Batch)
            .where(
                m.Batch.status == "closed",
                sa.or_(
                    m.Batch.deployment_id == dep_id,
                    m.Batch.id.in_(sa.select(m.Run.batch_id).where(m.Run.deployment_id == dep_id)),
                    m.Batch.id.in_(sa.select(m.Artefact.batch_id).where(m.Artefact.deployment_id == dep_id)),
                ),
            )
            .limit(1)
        )


def _rule(table: str) -> str:
    return "R9" if table in m.CAPTURED_TABLES or table in m.CAPTURED_VIEWS else "R10"


def _refuse_append_only(table: str, what: str) -> Refused:
    return Refused(
        _rule(table),
        f"{what} a {table} row",
        "captured rows are append-only: a capture stays as it was imported"
        if _rule(table) == "R9"
        else "seals are append-only",
        "import a new artefact (a new run or batch); a correction is a new row naming what it supersedes",
    )


def _closed(session: Session, batch_id: int | None) -> m.Batch | None:
    if batch_id is None:
        return None
    with session.no_autoflush:
        batch = session.get(m.Batch, batch_id)
    return batch if batch is not None and _committed(batch, "status") == "closed" else None


def _committed(obj: object, attr: str):
    """The value as loaded from the database (before this flush's changes)."""
    hist = sa.inspect(obj).attrs[attr].history
    if hist.deleted:
        return hist.deleted[0]
    return getattr(obj, attr)


def _batch_of(session: Session, obj: object) -> int | None:
    if isinstance(obj, m.Run | m.Artefact):
        return _committed(obj, "batch_id")
    if isinstance(obj, m.PublishedValue):
        if _committed(obj, "batch_id") is not None:
            return _committed(obj, "batch_id")
        run_id = _committed(obj, "run_id")
        if run_id is not None:
            with session.no_autoflush:
                run = session.get(m.Run, run_id)
            return run.batch_id if run else None
    return None


def _refuse_closed(batch: m.Batch, table: str, what: str) -> Refused:
    return Refused(
        "R10",
        f"{what} a {table} row of batch {batch.name!r}",
        f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
        "import into a new batch; a correction of an open batch is a new row (`ledger.revisions.correct_run`)",
    )


def _before_flush(session: Session, flush_context, instances) -> None:
    for obj in list(session.deleted):
        table = obj.__tablename__
        if table in APPEND_ONLY:
            raise _refuse_append_only(table, "delete")
        if isinstance(obj, m.Launch):
            raise Refused(
                "R10", "delete a launch", "launches are declared history", "record a correction (a new revision)"
            )
        if isinstance(obj, m.Batch) and _committed(obj, "status") == "closed":
            raise _refuse_closed(obj, "batch", "delete")
        if isinstance(obj, m.Deployment) and (closed := _sealed_deployment(session, obj.id)) is not None:
            raise _refuse_closed(closed, "deployment", "delete")
        if (closed := _closed(session, _batch_of(session, obj))) is not None:
            raise _refuse_closed(closed, table, "delete")

    for obj in list(session.dirty):
        if not session.is_modified(obj, include_collections=False):
            continue
        table = obj.__tablename__
        changed = {a.key for a in sa.inspect(obj).attrs if a.history.has_changes()}
        if table in APPEND_ONLY:
            raise _refuse_append_only(table, f"update {', '.join(sorted(changed))} of")
        if isinstance(obj, m.Batch):
            _check_batch_change(obj, changed)
        elif isinstance(obj, m.Deployment):
            if (closed := _sealed_deployment(session, obj.id)) is not None:
                raise _refuse_closed(closed, "deployment", f"update {', '.join(sorted(changed))} of")
        elif isinstance(obj, m.Launch):
            hist = sa.inspect(obj).attrs["log_artefact_id"].history
            linking = (
                changed == {"log_artefact_id"}
                and not any(v is not None for v in hist.deleted)
                and obj.log_artefact_id is not None
            )
            if not linking:
                raise Refused(
                    "R10",
                    f"update {', '.join(sorted(changed))} of launch {obj.id}",
                    "a launch is corrected by a new revision, not edited",
                    "add a launch row with revision+1, supersedes_id and correction_reason",
                )
        else:
            for batch_id in {_batch_of(session, obj), getattr(obj, "batch_id", None)}:
                if (closed := _closed(session, batch_id)) is not None:
                    raise _refuse_closed(closed, table, "update")

    for obj in list(session.new):
        if type(obj) in _BELONGS_TO:
            attr, fresh = _BELONGS_TO[type(obj)]
            owner = getattr(obj, attr)
            if owner is not None and owner not in session.info.get(fresh, ()):
                raise _refuse_backfill(obj)
        if isinstance(obj, m.Run | m.Artefact | m.PublishedValue):
            batch_id = obj.batch_id
            if batch_id is None and isinstance(obj, m.PublishedValue) and obj.run_id is not None:
                with session.no_autoflush:
                    run = session.get(m.Run, obj.run_id)
                batch_id = run.batch_id if run else None
            if (closed := _closed(session, batch_id)) is not None:
                raise _refuse_closed(closed, obj.__tablename__, "add")


def _check_batch_change(batch: m.Batch, changed: set[str]) -> None:
    was = _committed(batch, "status")
    if was == "closed":
        what = "reopen" if batch.status == "open" else f"change {', '.join(sorted(changed))} of"
        raise Refused(
            "R10",
            f"{what} batch {batch.name!r}",
            "a closed batch stays exactly as it was sealed",
            "import into a new batch; corrections of open batches are new rows",
        )
    if "status" in changed and batch.status == "closed":
        seal_hist = sa.inspect(batch).attrs["seal_digest"].history
        if batch.seal_digest is None or batch.closed_at is None or any(v is not None for v in seal_hist.deleted):
            raise Refused(
                "R10",
                f"close batch {batch.name!r} without a seal",
                "closing seals the batch",
                "use `ledger close` (ledger.seal.close.close_batch)",
            )
    elif changed & {"seal_digest", "closed_at"}:
        raise Refused(
            "R10",
            f"set {', '.join(sorted(changed & {'seal_digest', 'closed_at'}))} of open batch {batch.name!r}",
            "only closing sets them",
            "use `ledger close`",
        )


def _on_execute(state: ORMExecuteState) -> None:
    stmt = state.statement
    table: str | None = None
    what = ""
    if state.is_update or state.is_delete:
        table = getattr(getattr(stmt, "table", None), "name", None)
        what = "bulk update of" if state.is_update else "bulk delete of"
    elif isinstance(stmt, sa.TextClause) and (match := _RAW_WRITE.match(stmt.text)):
        table, what = match.group(1).lower(), "raw SQL write to"
    if table in BULK_GUARDED:
        if table in APPEND_ONLY:
            raise _refuse_append_only(table, what)
        raise Refused(
            "R10",
            f"{what} table {table}",
            "rows of declared tables are checked one by one (closed batches)",
            "change objects through the session, or record a correction",
        )


# The triggers migrations 0005, 0008, 0010, 0011, 0012, 0013, 0014 and 0018 create on PostgreSQL: (table, trigger
# name). None on the view chunk_gap (migration 0014): its rows are request_gaps', which has them all.
EXPECTED_PG_TRIGGERS: tuple[tuple[str, str], ...] = (
    *(
        (t, n)
        for t in (*m.CAPTURED_TABLES, *SEAL_TABLES)
        for n in ("ledger_append_only", "ledger_append_only_truncate")
    ),
    *((t, "ledger_closed_batch") for t in ("run", "published_value", "artefact", "batch")),
    ("batch", "ledger_closed_batch_truncate"),
    ("launch", "ledger_launch"),
    ("deployment", "ledger_sealed_deployment"),
    *((t, n) for t in DECLARED_TABLES for n in ("ledger_writer_only", "ledger_writer_only_truncate")),
    *(
        (t, "ledger_no_backfill")
        for t in (
            "capture",
            "capture_field",
            "request",
            "request_gaps",
            "hardware_sample",
            "log_fact",
            "artefact_digest",
            "request_value",
        )
    ),
)


def trigger_problems(conn: sa.Connection, backend: str) -> list[str]:
    """What is wrong with the database's own guards: each expected PostgreSQL trigger must exist and
    be enabled (``tgenabled`` 'O' or 'A'; 'D' is disabled, 'R' fires only for replication).
    DuckDB 1.x has no triggers: nothing to check there (the seal is the guard)."""
    if backend != "postgresql":
        return []
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal"
        )
    ).all()
    found = {(r[0], r[1]): str(r[2]) for r in rows}
    out = []
    for table, name in EXPECTED_PG_TRIGGERS:
        state = found.get((table, name))
        if state is None:
            out.append(
                f"trigger {name} on {table} is missing: raw SQL can change {table} unrefused (`ledger init` does not "
                "re-create it; restore it from migrations 0005/0010/0018)"
            )
        elif state not in ("O", "A"):
            out.append(
                f"trigger {name} on {table} is disabled (tgenabled {state!r}): "
                f"ALTER TABLE {table} ENABLE TRIGGER {name}"
            )
    return out


@cache
def duckdb_triggers_supported() -> tuple[bool, str]:
    """Probe the installed DuckDB on a throwaway in-memory database (never the ledger).

    True only if the exact statement-level trigger form used by migration 0005 can be created and
    really aborts an UPDATE. Returns (supported, what happened) so the result can be reported.
    """
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute("CREATE TABLE probe (x INTEGER)")
        con.execute("INSERT INTO probe VALUES (1)")
        con.execute(duckdb_trigger_sql("probe", "UPDATE"))
    except duckdb.Error as exc:
        return False, f"DuckDB {duckdb.__version__}: CREATE TRIGGER failed: {str(exc).splitlines()[0]}"
    try:
        con.execute("UPDATE probe SET x = 2")
    except duckdb.Error:
        return True, f"DuckDB {duckdb.__version__}: statement triggers abort the UPDATE"
    finally:
        con.close()
    return False, f"DuckDB {duckdb.__version__}: trigger created but the UPDATE was not aborted"


def duckdb_trigger_sql(table: str, op: str) -> str:
    """The DuckDB 2.x trigger form of the issue: statement-level AFTER, OLD TABLE, error()."""
    msg = f"refused by {_rule(table)}: {op} of {table}: captured rows are append-only"
    return (
        f"CREATE TRIGGER ledger_append_only_{table}_{op.lower()} AFTER {op} ON {table} "
        f"REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        f"SELECT error('{msg}') FROM old_rows LIMIT 1"
    )
