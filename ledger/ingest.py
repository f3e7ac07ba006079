"""Write one parsed artefact into the ledger: one transaction, all or nothing.

The importer has already turned the file into :mod:`ledger.records`; this module only writes. Row
tables (requests, chunk gaps, hardware samples) go in as Arrow tables through the database's own
bulk path (:mod:`ledger.bulk`), never one ORM object per row.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.orm import Session

from ledger import models as m
from ledger import records as rec
from ledger.bulk import bulk_insert
from ledger.errors import AlreadyImported, InputError, Refused
from ledger.store import Ledger, now


def sha256_file(path: Path) -> tuple[str, int]:
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

    @property
    def rows(self) -> int:
        """Requests and samples written so far."""
        return sum(n for _, _, n in self.runs) + self.samples


def find_artefact(session: Session, sha: str) -> m.Artefact | None:
    return session.scalar(sa.select(m.Artefact).where(m.Artefact.sha256 == sha))


def check_not_imported(ledger: Ledger, path: Path) -> tuple[str, int]:
    """Hash the file; raise AlreadyImported if the same bytes are in the ledger."""
    sha, size = sha256_file(path)
    with ledger.session() as s:
        art = find_artefact(s, sha)
        if art is not None:
            raise AlreadyImported(
                f"{path}: already imported as artefact {art.id} ({art.file_name}, {art.format}, sha256 {sha[:12]}…); nothing changed"
            )
    return sha, size


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
    with ledger.session() as s:
        if find_artefact(s, sha) is not None:  # imported concurrently since the check
            raise AlreadyImported(f"{path}: already imported (sha256 {sha[:12]}…); nothing changed")
        batch = _batch(s, target.batch) if target.batch else None
        deployment_id = Ledger.get_deployment(s, target.deployment).id if target.deployment else None
        if deployment_id is None and batch is not None:
            deployment_id = batch.deployment_id
        art = m.Artefact(
            sha256=sha, size_bytes=size, file_name=path.name, format=parsed.format,
            format_version=parsed.format_version, importer=importer, importer_version=importer_version,
            imported_at=now(), batch_id=batch.id if batch else None, deployment_id=deployment_id,
            node=target.node, note=parsed.note,
        )  # fmt: skip
        s.add(art)
        s.flush()
        result = ImportResult(artefact_id=art.id, sha256=sha, format=parsed.format)
        conn = s.connection()
        rows = _Pending(conn, ledger.backend)

        for pr in parsed.iter_runs():
            if batch is None:
                raise InputError(f"{path}: holds benchmark runs; name the batch they belong to with --batch")
            label = target.run or pr.info.label
            if target.run and result.runs and result.runs[-1][1] == label:
                raise InputError(f"{path}: holds several runs; --run can name only one (omit it to label runs from the file)")
            run = _run(s, batch, label, pr.info, art.id, deployment_id)
            run_key = run.origin_id or run.id  # captured rows belong to the run's first revision
            refuse_backfill(s, run, pr.capture)
            cap = m.Capture(
                artefact_id=art.id, run_id=run_key, record_count=pr.capture.record_count, sampled=pr.capture.sampled,
                sample_note=pr.capture.sample_note, clock=pr.capture.clock, token_source=pr.capture.token_source,
                success_rule=pr.capture.success_rule,
            )  # fmt: skip
            s.add(cap)
            s.flush()
            s.add_all(m.CaptureField(capture_id=cap.id, field=f) for f in pr.capture.fields)
            n = 0
            if pr.requests is not None and len(pr.requests):
                s.flush()
                n = _write_requests(conn, ledger.backend, art.id, run_key, pr.capture.clock, pr.requests, rows.add)
            result.published += _write_published(s, pr.published, art.id, batch.id, run_key, deployment_id)
            result.runs.append((run.id, label, n))
            if progress is not None:
                progress(result.rows)
        rows.flush()

        wide = getattr(parsed, "wide_samples", None)
        for chunk in parsed.samples if wide is None else wide:
            s.flush()
            if isinstance(chunk, rec.WideSamples):
                result.samples += _write_wide_samples(conn, ledger.backend, art.id, target.node, chunk)
            else:
                result.samples += _write_samples(conn, ledger.backend, art.id, target.node, chunk)
            if progress is not None:
                progress(result.rows)

        if parsed.log_facts:
            s.add_all(
                m.LogFact(artefact_id=art.id, line=f.line, kind=f.kind, process=f.process, value=f.value,
                          text=f.text, unit=f.unit, logged_at=f.logged_at)
                for f in parsed.log_facts
            )  # fmt: skip
            result.log_facts = len(parsed.log_facts)
        if target.launch is not None:
            dep_name, attempt = target.launch
            dep = Ledger.get_deployment(s, dep_name)
            launch = s.scalar(sa.select(m.Launch).where(m.Launch.deployment_id == dep.id, m.Launch.attempt == attempt))
            if launch is not None and launch.log_artefact_id is None:
                launch.log_artefact_id = art.id
        result.published += _write_published(
            s, parsed.published, art.id, batch.id if batch else None, None, deployment_id
        )
        if target.store_copy is not None:
            dest = target.store_copy / sha[:2] / sha
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copyfile(path, dest)
            art.stored_path = str(dest)
    return result


def _batch(s: Session, name: str) -> m.Batch:
    batch = s.scalar(sa.select(m.Batch).where(m.Batch.name == name))
    if batch is None:
        batch = m.Batch(name=name, status="open", created_at=now())
        s.add(batch)
        s.flush()
    if batch.status == "closed":
        raise Refused(
            "R10", f"import into batch {name!r}", f"the batch was closed at {batch.closed_at:%Y-%m-%d %H:%M:%S} UTC and is sealed",
            "import into a new batch; a correction names what it supersedes",
        )  # fmt: skip
    return batch


def _run(s: Session, batch: m.Batch, label: str, info: rec.RunInfo, artefact_id: int, deployment_id: int | None) -> m.Run:
    run = s.scalar(
        sa.select(m.Run).where(m.Run.batch_id == batch.id, m.Run.label == label).order_by(m.Run.revision.desc())
    )
    described = dict(
        input_target_tokens=info.input_target_tokens, output_cap_tokens=info.output_cap_tokens,
        concurrency=info.concurrency, request_count=info.request_count, request_rate=info.request_rate,
        seed=info.seed, dataset=info.dataset, tool=info.tool, tool_version=info.tool_version,
        started_at=info.started_at, ended_at=info.ended_at, duration_s=info.duration_s, artefact_id=artefact_id,
        metadata_json=json.dumps(info.metadata, sort_keys=True, ensure_ascii=False) if info.metadata else None,
    )  # fmt: skip
    if run is not None:
        # A declared run (or one made by a companion file, e.g. llmperf's individual responses before
        # its summary) learns what it did not know yet; what it already says is never overwritten.
        for key, value in described.items():
            if value is not None and getattr(run, key) is None:
                setattr(run, key, value)
        return run
    run = m.Run(batch_id=batch.id, label=label, deployment_id=deployment_id, recorded_at=now(), **described)
    s.add(run)
    s.flush()
    return run


_REQUEST_SCHEMA = pa.schema(
    [
        ("artefact_id", pa.int32()), ("idx", pa.int32()), ("run_id", pa.int32()), ("line", pa.int32()),
        ("status", pa.string()), ("error", pa.string()), ("retries", pa.int32()),
        ("input_tokens", pa.int32()), ("output_tokens", pa.int32()), ("clock", pa.string()),
        ("send_ns", pa.int64()), ("first_token_ns", pa.int64()), ("end_ns", pa.int64()),
        ("ttft_s", pa.float64()), ("latency_s", pa.float64()), ("queue_s", pa.float64()),
        ("itl_mean_s", pa.float64()), ("chunk_count", pa.int32()), ("cached_tokens", pa.int32()),
    ]
)  # fmt: skip


class _Pending:
    """Request and chunk-gap rows of several runs, written in one bulk statement per table.

    A profile of a 1000-run vLLM file showed the per-statement cost of two bulk inserts per run
    (register, INSERT ... SELECT with key checks, unregister) dominating the write; runs are now
    pooled up to ~500k rows (requests before their gaps, for the foreign key)."""

    LIMIT = 500_000

    def __init__(self, conn: sa.Connection, backend: str) -> None:
        self.conn, self.backend = conn, backend
        self.tables: dict[str, list[pa.Table]] = {"request": [], "chunk_gap": []}
        self.rows = 0

    def add(self, table: str, data: pa.Table) -> None:
        self.tables[table].append(data)
        self.rows += data.num_rows
        if self.rows >= self.LIMIT:
            self.flush()

    def flush(self) -> None:
        for name, parts in self.tables.items():
            if parts:
                bulk_insert(self.conn, self.backend, name, pa.concat_tables(parts))
                parts.clear()
        self.rows = 0


def _write_requests(conn: sa.Connection, backend: str, artefact_id: int, run_id: int, clock: str | None,
                    cols: rec.RequestColumns, sink=None) -> int:  # fmt: skip
    """Write (or, with ``sink``, hand over for a pooled write) one run's requests and chunk gaps."""
    if sink is None:
        def sink(name: str, data: pa.Table) -> None:
            bulk_insert(conn, backend, name, data)
    n = len(cols)
    gaps = cols.chunk_gaps_s
    data = {
        "artefact_id": pa.array([artefact_id] * n, pa.int32()),
        "idx": cols.idx,
        "run_id": pa.array([run_id] * n, pa.int32()),
        "line": cols.line,
        "status": cols.status,
        "error": cols.error,
        "retries": cols.retries,
        "input_tokens": cols.input_tokens,
        "output_tokens": cols.output_tokens,
        "clock": [clock if t is not None else None for t in cols.send_ns] if clock else [None] * n,
        "send_ns": cols.send_ns,
        "first_token_ns": cols.first_token_ns,
        "end_ns": cols.end_ns,
        "ttft_s": cols.ttft_s,
        "latency_s": cols.latency_s,
        "queue_s": cols.queue_s,
        "itl_mean_s": cols.itl_mean_s,
        "chunk_count": [None if g is None else len(g) + 1 for g in gaps],
        "cached_tokens": cols.cached_tokens,
    }
    sink("request", pa.table(data, schema=_REQUEST_SCHEMA))
    if any(g for g in gaps):
        req_idx, seq, gap = [], [], []
        for i, g in zip(cols.idx, gaps, strict=True):
            if g:
                req_idx.extend([i] * len(g))
                seq.extend(range(len(g)))
                gap.extend(g)
        table = pa.table(
            {
                "artefact_id": pa.array([artefact_id] * len(gap), pa.int32()),
                "request_idx": pa.array(req_idx, pa.int32()),
                "seq": pa.array(seq, pa.int32()),
                "gap_s": pa.array(gap, pa.float64()),
            }
        )
        sink("chunk_gap", table)
    return n


def _write_samples(conn: sa.Connection, backend: str, artefact_id: int, node: str | None, cols: rec.SampleColumns) -> int:
    n = len(cols)
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
    bulk_insert(conn, backend, "hardware_sample", table)
    return n


def _write_wide_samples(conn: sa.Connection, backend: str, artefact_id: int, node: str | None,
                        chunk: rec.WideSamples) -> int:
    """Unpivot a wide chunk (one column per counter) to long hardware_sample rows, in Arrow: one
    zero-copy slice of the key columns per counter, concatenated, then the usual bulk path."""
    t, n = chunk.table, chunk.table.num_rows
    node = node if node is not None else chunk.node
    keys = {
        "artefact_id": pa.repeat(pa.scalar(artefact_id, pa.int32()), n),
        "line": t.column("line"),
        "node": pa.repeat(pa.scalar(node, pa.string()), n),
        "gpu": t.column("gpu"),
        "tick": t.column("tick"),
        "ts": t.column("ts"),
    }
    parts = [
        pa.table({**keys, "counter": pa.repeat(pa.scalar(name, pa.string()), n),
                  "value": t.column(name).cast(pa.float64()), "unit": pa.repeat(pa.scalar(unit, pa.string()), n)})
        for name, unit in zip(chunk.counters, chunk.units, strict=True)
    ]  # fmt: skip
    bulk_insert(conn, backend, "hardware_sample", pa.concat_tables(parts))
    return n * len(chunk.counters)


def _write_published(s: Session, values: list[rec.Published], artefact_id: int, batch_id: int | None,
                     run_id: int | None, deployment_id: int | None) -> int:  # fmt: skip
    stamp = now()
    s.add_all(
        m.PublishedValue(
            artefact_id=artefact_id, key=p.key, text=p.text, value=p.value, unit=p.unit,
            quantity_kind=p.quantity_kind, precision=p.precision, flag=p.flag, na_reason=p.na_reason,
            batch_id=batch_id, run_id=run_id, deployment_id=deployment_id, locator=p.locator, note=p.note,
            recorded_at=stamp,
        )
        for p in values
    )  # fmt: skip
    return len(values)


def refuse_backfill(s: Session, run: m.Run, capture: rec.Capture) -> None:
    """R9: a capture that re-describes a run's requests with more fields is a backfill; refuse it.

    Concretely: an earlier capture of the same run holds as many request records (> 0) and the new
    capture's fields are a strict superset of its fields, e.g. a re-export that now carries
    ``cached_tokens``. Importing it would give values to fields the earlier capture did not have.
    """
    if capture.record_count == 0:
        return
    new_fields = set(capture.fields)
    earlier = s.execute(
        sa.select(m.Capture.id, m.Capture.artefact_id, m.Capture.record_count).where(m.Capture.run_id == (run.origin_id or run.id))
    ).all()
    for cap_id, artefact_id, count in earlier:
        if count != capture.record_count:
            continue
        old_fields = set(s.scalars(sa.select(m.CaptureField.field).where(m.CaptureField.capture_id == cap_id)))
        if old_fields < new_fields:
            extra = ", ".join(sorted(new_fields - old_fields))
            verb = "was" if len(new_fields - old_fields) == 1 else "were"
            raise Refused(
                "R9", f"import {extra} for the {count} requests of run {run.label!r}",
                f"{extra} {verb} not captured by artefact {artefact_id} for run {run.label}; later captures are not backfilled",
                "import it as a new run or batch (--run NEW_LABEL or --batch NEW_BATCH)",
            )  # fmt: skip
