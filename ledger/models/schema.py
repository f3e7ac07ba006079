"""The schema as a whole: which tables are captured, the views (SQL per backend), Alembic's filter, and
the schema built without migrations."""

import sqlalchemy as sa

# every table is defined before the index set below
from bench_ledger.models import captured, declared, seals  # noqa: F401
from bench_ledger.models.base import Base
from sqlalchemy.ext.compiler import compiles

__all__ = ["CAPTURED_TABLES", "CAPTURED_VIEWS", "GAP_VALUES", "VIEWS", "create_schema", "include_object"]


CAPTURED_TABLES = (
    "artefact",
    "capture",
    "capture_field",
    "request",
    "request_gaps",
    "hardware_sample",
    "log_fact",
    "request_value",
)
# Captured rows read through a VIEW (mapped above as tables, created by VIEWS' SQL): append-only too
CAPTURED_VIEWS = ("chunk_gap",)

# The SQL of each view per backend; migration 0014 holds a frozen copy of the same statements.
VIEWS: dict[str, dict[str, str]] = {
    "chunk_gap": {
        # generate_subscripts and unnest of one list in one SELECT: zipped, element k with subscript k + 1
        "duckdb": (
            "CREATE VIEW chunk_gap AS SELECT artefact_id, request_idx, "
            "CAST(generate_subscripts(gaps, 1) - 1 AS INTEGER) AS seq, unnest(gaps) AS gap_s FROM request_gaps"
        ),
        "postgresql": (
            "CREATE VIEW chunk_gap AS SELECT g.artefact_id, g.request_idx, CAST(u.k - 1 AS INTEGER) AS seq, "
            "u.gap_s FROM request_gaps g CROSS JOIN LATERAL unnest(g.gaps) WITH ORDINALITY AS u(gap_s, k)"
        ),
    },
}


class _GapValues(sa.sql.expression.TableClause):
    """See :data:`GAP_VALUES`."""

    inherit_cache = True


@compiles(_GapValues)
def _gap_values(element: _GapValues, compiler, **kw) -> str:
    return compiler.visit_table(element, **kw)  # PostgreSQL: the view chunk_gap itself


@compiles(_GapValues, "duckdb")
def _gap_values_duckdb(element: _GapValues, compiler, asfrom: bool = False, **kw) -> str:
    if asfrom:  # the view's rows without their seq: one unnest
        return f"(SELECT artefact_id, request_idx, unnest(gaps) AS gap_s FROM request_gaps) AS {element.name}"
    return compiler.visit_table(element, asfrom=asfrom, **kw)


# The chunk gaps' values for readers that need no ``seq`` (the ITL and decode-rate metrics): the view
# chunk_gap without its seq column. On DuckDB it compiles to one ``unnest`` of request_gaps' arrays,
# since the view's second unnest (its seq) made a scan many times slower than one unnest
# (benchmarks/profile_notes.md); on PostgreSQL to the view, whose lateral unnest costs what the table did.
GAP_VALUES = _GapValues(
    "chunk_gap",
    sa.column("artefact_id", sa.Integer),
    sa.column("request_idx", sa.Integer),
    sa.column("gap_s", sa.Float),
)


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    """Alembic's filter for ``compare_metadata`` / autogenerate: the views of :data:`VIEWS` are
    mapped as tables but are views in the database (Alembic reflects tables only); an index created on
    one backend only (``ddl_if(dialect=...)``: ``ix_request_run_id``, migration 0015; the
    ``ix_*_supersedes_id`` of migration 0016) is left out too,
    since Alembic compares it on every backend (tests/ledger/test_store.py checks where it exists)."""
    if type_ == "index" and name in _ONE_BACKEND_INDEXES:
        return False
    return not (type_ == "table" and name in VIEWS)


# the indexes declared with ddl_if(dialect=...): left out of compare_metadata (see include_object)
_ONE_BACKEND_INDEXES = frozenset(
    ix.name for t in Base.metadata.tables.values() for ix in t.indexes if ix._ddl_if is not None and ix._ddl_if.dialect
)


def create_schema(engine: sa.Engine) -> None:
    """The schema without migrations (a scratch ledger, ``ledger.transfer``): the tables, then the views."""
    Base.metadata.create_all(engine, tables=[t for t in Base.metadata.sorted_tables if t.name not in VIEWS])
    with engine.begin() as conn:
        for sql in VIEWS.values():
            conn.exec_driver_sql(sql[engine.dialect.name])
