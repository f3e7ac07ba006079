"""Revisions (R10): which row is current, corrections as new revisions, and a row's history.

A correction is a new row that names what it supersedes and why (``supersedes_id``,
``correction_reason``); nothing is updated in place. Queries read the latest revision not superseded
(:func:`current`), optionally as the ledger stood at a time. A closed batch refuses corrections: its
rows stay as they were sealed (:mod:`ledger.seal`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.errors import InputError, NotFound, Refused
from bench_ledger.records import RUN_DOMAINS, request_rate_text
from bench_ledger.store import Ledger, now
from sqlalchemy.orm import Session

__all__ = [
    "FIXED",
    "correct",
    "correct_in",
    "correct_published_value",
    "correct_run",
    "current",
    "current_ids",
    "current_runs",
    "history",
    "not_superseded",
    "parse_changes",
    "require_current",
]


# The correctable models share their revision columns (id, revision, supersedes_id, ...), which the
# helpers below address by name: type[Any] says so (a union of the three would not type-check).
_Correctable = type[Any]
_CORRECTABLE: dict[str, _Correctable] = {
    "run": m.Run,
    "published_value": m.PublishedValue,
    "launch": m.Launch,
}
FIXED = {"id", "revision", "supersedes_id", "correction_reason", "recorded_at", "origin_id"}


def _correct(ledger: Ledger, model: _Correctable, row_id: int, reason: str, changes: dict[str, Any]) -> int:
    with ledger.session() as s:
        return correct_in(s, model, row_id, reason, changes)


def correct_in(s: Session, model: _Correctable, row_id: int, reason: str, changes: dict[str, Any]) -> int:
    """A new revision of ``row_id`` superseding it, in the caller's transaction (``s``); its id."""
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
    bad = sorted(set(changes) - (cols - FIXED))
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
    values = {c: getattr(old, c) for c in cols - FIXED}
    values.update(changes)
    if model is m.Run:  # captured rows stay on the first revision (see Run.origin_id)
        values["origin_id"] = old.origin_id or old.id
    new = model(
        **values, revision=old.revision + 1, supersedes_id=old.id, correction_reason=reason.strip(), recorded_at=now()
    )
    s.add(new)
    s.flush()
    return new.id


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
        if name not in cols or name in FIXED:
            allowed = ", ".join(sorted(set(cols) - FIXED))
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


def _table(table: sa.FromClause | _Correctable) -> sa.FromClause:
    return table.__table__ if isinstance(table, type) else table


def current(table: sa.FromClause | _Correctable, as_of: datetime | None = None) -> sa.ColumnElement[bool]:
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


def not_superseded(table: sa.FromClause | _Correctable) -> sa.ColumnElement[bool]:
    """:func:`current` without a time (kept for callers written before it)."""
    return current(table)


def current_runs(as_of: datetime | None = None) -> sa.Select:
    """``select(Run)`` of the current revision of every run."""
    return sa.select(m.Run).where(current(m.Run, as_of))


def current_ids(ledger: Ledger, table: str, as_of: datetime | None = None) -> set[int]:
    model = _model(table)
    with ledger.session() as s:
        return set(s.scalars(sa.select(model.id).where(current(model, as_of))))


def _model(table: str) -> _Correctable:
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
