"""What `ledger check` compares: records, reported values, tolerances (R15).

The shared core of :mod:`queries.check.checker` and the tools' modules: a check's rows, a run's
records (read when a check first asks for them), a reported value and its interval.

Agreement is by intervals (R11): a reported value stands for [v - t, v + t], t = max(half a unit in
its last printed place, one float ulp of v), t = 0 for a count printed as an integer, t = one ulp
for a float a tool's JSON wrote with ``repr`` (ToolCheck.machine_floats); a records recomputation also allows a relative 1e-9
for the tool's float arithmetic over many records, an identity 1e-12 for a few float operations.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.encoding import chunks as dg
from bench_ledger.kinds import INTEGER_KINDS
from bench_ledger.queries.check.stat_definitions import NotDerivable
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.queries.metrics.requests import captures
from bench_ledger.revisions import current
from bench_ledger.store import on_one_snapshot, pg_parallel_workers
from bench_ledger.units import printed_places

AGREE, DISAGREE, NOT_DERIVABLE = "agree", "disagree", "not re-derivable"
RECORDS, IDENTITY = "records", "identity"
REL_FLOOR = Fraction(1, 10**9)  # records: float arithmetic of the tool over many values
REL_IDENTITY = Fraction(1, 10**12)  # identity: a few float operations
NS = 10**9  # nanoseconds per second
_PV, _R, _Q, _A, _V = (t.__table__ for t in (m.PublishedValue, m.Run, m.Request, m.Artefact, m.RequestValue))

__all__ = [
    "AGREE",
    "DISAGREE",
    "IDENTITY",
    "NOT_DERIVABLE",
    "NS",
    "RECORDS",
    "REL_FLOOR",
    "REL_IDENTITY",
    "CheckRow",
    "Records",
    "Reported",
    "StatusCounts",
    "is_exact_count",
    "load_records",
    "reported_interval",
    "tolerance",
]


@dataclass
class CheckRow:
    run_id: int
    batch: str
    run: str
    tool: str | None
    key: str
    reported: str
    unit: str | None
    recomputed: float | None
    status: str  # agree | disagree | not re-derivable
    tolerance: str | None
    reason: str | None  # why not re-derivable, or how it was recomputed
    section: str = RECORDS  # records | identity
    definition: str | None = None  # the statistic definition or identity used

    def as_dict(self) -> dict:
        return asdict(self)


class StatusCounts:
    """The number of a run's records of each status: what the checks read of the statuses
    (``count(status)``, ``len``, ``status in``), from one grouped count."""

    def __init__(self, counts: dict[str, int]) -> None:
        self._counts = counts

    def count(self, status: str) -> int:
        return self._counts.get(status, 0)

    def __len__(self) -> int:
        return sum(self._counts.values())

    def __contains__(self, status: object) -> bool:
        return isinstance(status, str) and self._counts.get(status, 0) > 0

    def __repr__(self) -> str:
        return f"StatusCounts({self._counts})"


def _key(table: str, idx: str) -> str:
    """A request's key (artefact_id, idx) as one ascending BIGINT: artefact_id x 2**32 + idx (both int32;
    one value per row instead of two makes PostgreSQL's aggregated read cheaper)."""
    return f"CAST({table}.artefact_id AS BIGINT) * 4294967296 + {table}.{idx}"


class _RunRows:
    """Reads one run's request rows on the check's open connection, in key order (artefact_id, idx):
    one column of the ok records as an Arrow column (DuckDB's Arrow result; PostgreSQL's aggregated
    binary COPY, :func:`bench_ledger.encoding.chunks.read_pg_columns`), so no row becomes a Python object."""

    # The numeric columns the tools' checks read: read together, on the first request for one of them
    # (one scan of the run's rows instead of one per column).
    TOGETHER = (
        "input_tokens",
        "output_tokens",
        "send_ns",
        "end_ns",
        "ttft_s",
        "latency_s",
        "itl_mean_s",
        "chunk_count",
    )

    def __init__(self, conn: sa.Connection, run_id: int) -> None:
        self.conn, self.run_id, self.backend = conn, int(run_id), conn.dialect.name
        self._together: pa.Table | None = None
        self._gaps: ExactColumn | None = None

    def read_ahead(self) -> None:
        """PostgreSQL: the columns read together and the chunk gaps, the two reads at once on two
        connections of one snapshot (:func:`bench_ledger.store.on_one_snapshot`), where the server lets
        one read use two (a vLLM check reads both)."""
        if self.backend != "postgresql" or self._together is not None or self._gaps is not None:
            return
        if pg_parallel_workers(self.conn) < 2:
            return
        together, gaps = on_one_snapshot(
            self.conn, [lambda c: self._ok_columns(list(self.TOGETHER), c), self._read_gaps]
        )
        self._together, self._gaps = together, gaps

    def read(
        self, sql: str, names: list[str], tags: list[str], keys: list[str], conn: sa.Connection | None = None
    ) -> pa.Table:
        conn = conn or self.conn
        nullable = [n not in keys for n in names]
        if self.backend == "postgresql":
            data = dg.read_pg_columns(conn, sql, names, tags, nullable)
        else:
            data = dg.read_rows(conn, self.backend, f"{sql} ORDER BY {', '.join(keys)}", names, tags)
        return dg.sorted_by_key(data, keys)

    def ok_column(self, name: str) -> pa.ChunkedArray:
        """Request column ``name`` over the ok records, in key order."""
        if name in self.TOGETHER:
            if self._together is None:
                self._together = self._ok_columns(list(self.TOGETHER))
            return self._together.column(name)
        return self._ok_columns([name]).column(name)

    def _ok_columns(self, names: list[str], conn: sa.Connection | None = None) -> pa.Table:
        cols: list[sa.Column] = []
        for n in names:
            col = _Q.columns[n]  # a column of request (KeyError otherwise)
            assert isinstance(col, sa.Column)
            cols.append(col)
        return self.read(
            f"SELECT {_key('q', 'idx')} AS k, {', '.join(f'q.{c.name}' for c in cols)} FROM request q "
            f"WHERE q.run_id = {self.run_id} AND q.status = 'ok'",
            ["k", *names],
            ["i", *(dg.tag_of(c) for c in cols)],
            ["k"],
            conn,
        )

    def status_counts(self) -> StatusCounts:
        counts = self.conn.execute(
            sa.select(_Q.c.status, sa.func.count()).where(_Q.c.run_id == self.run_id).group_by(_Q.c.status)
        ).all()
        return StatusCounts({st: int(n) for st, n in counts})

    def gaps(self) -> ExactColumn:
        """The chunk gaps of the ok records, each record's in order (the flattened series): the
        ``request_gaps`` arrays of the ok records (:func:`ledger.gaps.read`) flattened in key order,
        the view chunk_gap's values; the view's rows in key order where the arrays are not in the
        plain form (written behind the ledger)."""
        if self._gaps is None:
            self._gaps = self._read_gaps(self.conn)
        return self._gaps

    def _read_gaps(self, conn: sa.Connection) -> ExactColumn:
        def of_ok(table: str, columns: str) -> str:
            return (
                f"SELECT {_key('g', 'request_idx')} AS k, {columns} FROM {table} g JOIN request q "
                f"ON q.artefact_id = g.artefact_id AND q.idx = g.request_idx "
                f"WHERE q.run_id = {self.run_id} AND q.status = 'ok'"
            )

        arrays = gp.read(conn, self.backend, of_ok("request_gaps", "g.gaps"), ["k"])
        if arrays is not None:
            arrays = dg.sorted_by_key(arrays, ["k"])
            return ExactColumn(pc.list_flatten(arrays.column("gaps").combine_chunks()).to_numpy(zero_copy_only=False))
        table = self.read(
            of_ok("chunk_gap", "g.seq, g.gap_s"), ["k", "seq", "gap_s"], ["i", "i", "f"], ["k", "seq"], conn
        )
        return ExactColumn(table.column("gap_s").to_numpy())

    def rows(self) -> tuple[list[dict], dict[str, list[float | None]]]:
        """Every record as a dict (with its per-request values under "values"), and each value key's
        values over the ok records (None where a record has none)."""
        conn, run_id = self.conn, self.run_id
        result = conn.execute(
            sa.select(
                _Q.c.artefact_id,
                _Q.c.idx,
                _Q.c.status,
                _Q.c.error,
                _Q.c.input_tokens,
                _Q.c.output_tokens,
                _Q.c.ttft_s,
                _Q.c.latency_s,
                _Q.c.itl_mean_s,
                _Q.c.chunk_count,
                _Q.c.send_ns,
                _Q.c.end_ns,
            )
            .where(_Q.c.run_id == run_id)
            .order_by(_Q.c.artefact_id, _Q.c.idx)
        )
        keys = list(result.keys())
        rows = [dict(zip(keys, r, strict=True)) for r in result.all()]  # one dict per record, as r._mapping gave
        per: dict[tuple[int, int], dict[str, float]] = {}
        for a, i, k, v in conn.execute(
            sa.select(_V.c.artefact_id, _V.c.request_idx, _V.c.key, _V.c.value)
            .select_from(_V.join(_Q, sa.and_(_Q.c.artefact_id == _V.c.artefact_id, _Q.c.idx == _V.c.request_idx)))
            .where(_Q.c.run_id == run_id)
        ):
            per.setdefault((a, i), {})[k] = v
        for r in rows:  # each record gains its per-request values in place (no copy of the rows)
            r["values"] = per.get((r["artefact_id"], r["idx"]), {})
        value_keys = sorted({k for vals in per.values() for k in vals})
        ok_rows = [r for r in rows if r["status"] == "ok"]
        return rows, {k: [d["values"].get(k) for d in ok_rows] for k in value_keys}


@dataclass
class Records:
    """The records of one run. Each part is read from the database when a check first asks for it
    (on the check's open connection) and kept: a column of the ok records as one
    :class:`ExactColumn` in key order (a statistic converts only the values it reads), the statuses,
    the chunk gaps; the records as dicts, with their per-request values, only for checks that walk
    them (guidellm's distributions, error codes, time spans)."""

    source: _RunRows = field(repr=False, compare=False)
    fields: set[str]  # fields captured by every record-holding capture of the run
    duration: Fraction | None
    metadata: dict[str, str] = field(default_factory=dict)  # the run's metadata (labels the importer kept)
    notes: dict[str, str] = field(default_factory=dict)  # reported key -> the importer's note (AIPerf's error details)
    cache: dict = field(default_factory=dict)  # a tool check's work shared by the run's keys (one distribution)
    _columns: dict[str, ExactColumn | str] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def statuses(self) -> StatusCounts:
        """How many records have each status."""
        return self.source.status_counts()

    @cached_property
    def gaps(self) -> ExactColumn:
        """The ok records' chunk gaps, flattened in key order (seconds)."""
        return self.source.gaps()

    @cached_property
    def _rows(self) -> tuple[list[dict], dict[str, list[float | None]]]:
        return self.source.rows()

    @cached_property
    def ok(self) -> list[dict]:
        return [r for r in self._rows[0] if r["status"] == "ok"]

    @cached_property
    def failed(self) -> list[dict]:
        return [r for r in self._rows[0] if r["status"] == "failed"]

    @cached_property
    def unknown(self) -> list[dict]:  # records whose success the file does not say
        return [r for r in self._rows[0] if r["status"] == "unknown"]

    @property
    def values(self) -> dict[str, list[float | None]]:
        """The tool's own per-request values (``request_value``) over the ok records, by key."""
        return self._rows[1]

    def column(self, name: str, field: str | None = None) -> ExactColumn:
        """Request column ``name`` over the ok records, exact (read once per run)."""
        if (field or name) not in self.fields:
            raise NotDerivable(f"needed field {field or name} not captured")
        done = self._columns.get(name)
        if done is None:
            arr = self.source.ok_column(name)
            done = self._columns[name] = (
                f"{name} missing for {arr.null_count} of {len(arr)} ok requests"
                if arr.null_count
                else ExactColumn(arr.to_numpy())
            )
        if isinstance(done, str):
            raise NotDerivable(done)
        return done

    def value(self, key: str) -> ExactColumn:
        """A per-request value the tool wrote (``request_value``), over the ok records."""
        vals = self.values.get(key)
        if vals is None:
            raise NotDerivable(f"the records carry no per-request {key}")
        if any(v is None for v in vals):
            raise NotDerivable(f"{key} missing for {sum(v is None for v in vals)} of {len(vals)} ok requests")
        return ExactColumn(np.array(vals, dtype=np.float64))

    def present(self, key: str) -> tuple[ExactColumn, int]:
        """A per-request value over the ok records that carry it, and how many ok records do not: for a
        tool that computes a record's metric only where it can (AIPerf skips the metric of a record
        that raises NoMetricValue / ValueError for it, and writes no value in its record)."""
        vals = self.values.get(key)
        if vals is None:
            raise NotDerivable(f"the records carry no per-request {key}")
        got = ExactColumn(np.array([v for v in vals if v is not None], dtype=np.float64))
        if not len(got):
            raise NotDerivable(f"none of the {len(vals)} ok records carries {key}")
        return got, len(vals) - len(got)

    def record_gaps(self) -> list[list[float]]:
        """The chunk gaps of each ok record, in record order (``gaps`` holds them flat, chunk_count - 1 each)."""
        if "chunk_gaps" not in self.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        out, at = [], 0
        for r in self.ok:
            n = max((r["chunk_count"] or 0) - 1, 0)
            out.append(self.gaps.array[at : at + n].tolist())
            at += n
        return out

    def need_status(self) -> None:
        if "status" not in self.fields or "unknown" in self.statuses:
            raise NotDerivable("request success not captured (status unknown for some records)")


@dataclass(frozen=True)
class Reported:
    """One reported value of a run, as an interval (R11)."""

    key: str
    text: str
    value: Fraction
    interval: Interval


def tolerance(text: str) -> Fraction | None:
    """Half a unit in the last printed place of ``text``; None when it is not a number."""
    places = printed_places(text)
    return None if places is None else Fraction(5) * Fraction(10) ** (-places - 1)


def is_exact_count(text: str, kind: str | None) -> bool:
    """A count printed as a plain integer (``"150"``, a JSON int) is exact, not rounded."""
    return kind in INTEGER_KINDS and text.strip().isdigit()


def reported_interval(text: str, value: Fraction, kind: str | None = None, machine: bool = False) -> Interval | None:
    """[v - t, v + t]: t = 0 for an exact count; for a ``machine`` float (a tool's JSON writes
    ``repr``: the shortest text of one binary float) one ulp; else max(half a printed unit, ulp)."""
    half = tolerance(text)
    if half is None:
        return None
    if is_exact_count(text, kind) or (machine and text.strip().lstrip("-").isdigit()):
        return Interval.point(value)  # an exact count, or an integer a tool's JSON wrote: exactly that integer
    ulp = Fraction(math.ulp(float(value)))
    t = ulp if machine and repr(float(value)) == text.strip() else max(half, ulp)
    return Interval(value - t, value + t)


# --------------------------------------------------------------------------- loading


def load_records(conn: sa.Connection, run_id: int) -> Records | str:
    """The run's records (read when a check asks for them), or why there are none to recompute from."""
    caps = captures(conn, [run_id])
    if not caps:
        return "no per-request records in this run's artefacts (aggregates only)"
    sampled = [c for c in caps if c.sampled]
    if sampled:
        return f"records are a sample ({sampled[0].sample_note or 'sample_size'}): the aggregates cannot be re-derived"
    fields = set.intersection(*(c.fields for c in caps))
    # the tool's duration, the base of its rates: of several reports (a console table's 293.34 and the
    # JSON's 293.343067905982 of one run) the one printed with the most places
    durations = conn.execute(
        sa.select(_PV.c.text, _PV.c.value)
        .where(
            _PV.c.run_id == run_id,
            _PV.c.key == "duration",
            _PV.c.flag == "reported",
            _PV.c.value.is_not(None),
            current(_PV),
        )
        .order_by(_PV.c.id)
    ).all()
    duration = max(durations, key=lambda d: printed_places(d.text) or 0).value if durations else None
    meta = conn.execute(sa.select(_R.c.metadata_json).where(_R.c.id == run_id)).scalar()
    return Records(
        _RunRows(conn, run_id),
        fields,
        None if duration is None else Fraction(Decimal(duration)),
        metadata=json.loads(meta) if meta else {},
    )
