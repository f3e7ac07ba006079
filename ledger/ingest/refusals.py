"""What an import refuses, naming the file and the place: a value outside its domain, an error escaping
a parser, a record a Python importer's columns cannot carry, a model that is not the deployment's (R6),
a capture that backfills a run (R9)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from bench_ledger import factors
from bench_ledger import models as m
from bench_ledger import records as rec
from bench_ledger.errors import ParseError, Refused
from pydantic import ValidationError
from sqlalchemy.orm import Session

__all__ = [
    "check_backfill",
    "named_records",
    "refuse_gap_outside_domain",
    "refuse_other_model",
    "refuse_outside_domain",
    "translated",
]


def refuse_other_model(s: Session, path: Path, deployment_id: int, model: rec.Stated) -> None:
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


@contextlib.contextmanager
def named_records(path: Path) -> Iterator[None]:
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


def check_backfill(label: str, capture: rec.Capture, earlier) -> None:
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
