"""What every table of the schema shares: the declarative base, the naming convention, the exact
decimal type, CHECKs over enumerated values, and the order of a table's rows (its primary key)."""

from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

__all__ = [
    "Base",
    "ExactDecimal",
    "enum_check",
    "enum_values",
    "key_columns",
    "superseded_index",
]

_NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class ExactDecimal(TypeDecorator[Decimal]):
    """A decimal kept exactly as text: never a binary float, never rounded to a column scale.

    Printed numbers ("2,791", "0.22786034579078357") are stored as their exact decimal string so
    that both backends return the very digits that were printed; SQL can still CAST them.
    """

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            raise TypeError(f"ExactDecimal takes Decimal, not {type(value).__name__}")
        if not value.is_finite():
            raise ValueError(f"not a finite decimal: {value}")
        return str(value)

    def process_result_value(self, value: str | None, dialect: sa.Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


def enum_check(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    quoted = ", ".join(f"'{v}'" for v in values)
    # the values ride along (info) so that input checks name them before the database refuses
    return sa.CheckConstraint(f"{column} IN ({quoted})", name=name, info={"column": column, "values": values})


def superseded_index(table: str) -> sa.Index:
    """PostgreSQL only (migration 0016): the rows that supersede another, by the row they supersede.
    :func:`bench_ledger.revisions.current` is an anti-join on ``supersedes_id = id``; on statistics that
    an import of fewer than 100k rows leaves stale (no ANALYZE), PostgreSQL planned it as a nested
    loop over a sequential scan, growing with the square of the table (benchmarks/profile_notes.md).
    With this index each probe is an index lookup. Partial: the few
    corrections are in it, the imported rows (NULL) are not, so an import does not maintain it.
    DuckDB plans the anti-join as a hash join and needs none."""
    return sa.Index(
        f"ix_{table}_supersedes_id", "supersedes_id", postgresql_where=sa.text("supersedes_id IS NOT NULL")
    ).ddl_if(dialect="postgresql")


def enum_values(table: sa.Table, column: str) -> tuple[str, ...] | None:
    """The values a CHECK (``column IN (...)``) of ``table`` allows, or None when it has none."""
    for c in table.constraints:
        if isinstance(c, sa.CheckConstraint) and c.info.get("column") == column:
            return tuple(c.info["values"])
    return None


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=_NAMING_CONVENTION)


def key_columns(table: str) -> list[str]:
    """The primary key of ``table``, in order: the order of its rows in a digest and a seal."""
    return [c.name for c in Base.metadata.tables[table].primary_key.columns]
