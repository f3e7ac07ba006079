"""Runs, their captures, capture fields and tool aggregates, written a chunk of runs at a time."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger import pairing
from bench_ledger import records as rec
from bench_ledger.errors import WriteConflict
from bench_ledger.ingest.artefacts import WrittenArtefact
from bench_ledger.ingest.bulk import arrow_of, bulk_insert, next_ids
from bench_ledger.ingest.published import published_row
from bench_ledger.ingest.refusals import check_backfill, named_records
from bench_ledger.ingest.request_rows import PendingRows, arrow_requests, artefacts_request_tables, request_value_table
from bench_ledger.store import now
from sqlalchemy.orm import Session

__all__ = ["RunWriter"]


def _described(info: rec.RunInfo, artefact_id: int) -> dict:
    return dict(
        input_target_tokens=info.input_target_tokens,
        output_cap_tokens=info.output_cap_tokens,
        concurrency=info.concurrency,
        request_count=info.request_count,
        request_rate=info.request_rate,
        seed=info.seed,
        dataset=info.dataset,
        tool=info.tool,
        tool_version=info.tool_version,
        started_at=info.started_at,
        ended_at=info.ended_at,
        duration_s=info.duration_s,
        artefact_id=artefact_id,
        metadata_json=json.dumps(meta, sort_keys=True, ensure_ascii=False)
        if (meta := pairing.metadata_of(info))
        else None,
    )


def _learned_metadata(kept: str | None, brought: str | None) -> str | None:
    """A run's metadata with the entries another file of it brings that it did not have (never replaced)."""
    if brought is None or kept is None:
        return kept if brought is None else brought
    old, new = json.loads(kept), json.loads(brought)
    if not isinstance(old, dict) or set(new) <= set(old):
        return kept
    return json.dumps({**new, **old}, sort_keys=True, ensure_ascii=False)


class RunWriter:
    """Runs of one artefact, their captures, capture fields and tool aggregates, written a chunk of
    runs at a time with a handful of set-based statements instead of ORM objects one row each.

    A profile of the 1000-run vLLM import showed much of the write in per-run ORM statements (run
    lookup, capture, ~11 capture_field rows, ~27 published values). Per chunk now: one SELECT of the
    runs by label, one of their earlier captures and fields (R9 backfill check), one nextval() per
    table for ids, and one bulk insert (Arrow: DuckDB INSERT ... SELECT, PostgreSQL COPY) per table.
    Guard semantics are kept: these are inserts (allowed), the batch was checked open (R10) when it
    was resolved, and an existing run still learns its missing fields through the ORM (an update
    the guards see at flush)."""

    RUNS = 256  # runs per chunk
    ROWS = 200_000  # or fewer runs, once this many requests are buffered (memory)

    def __init__(
        self,
        s: Session,
        conn: sa.Connection,
        backend: str,
        batch: m.Batch | None,
        deployment_id: int | None,
        rows: PendingRows,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.s, self.conn, self.backend = s, conn, backend
        self.batch, self.deployment_id, self.rows, self.progress = batch, deployment_id, rows, progress
        self.chunk: list[tuple[str, rec.ParsedRun, WrittenArtefact]] = []
        self.buffered = 0
        self.new: set[str] = set()  # labels of runs new to the batch (pairing.Matcher.new)
        self.inserted: set[str] = set()  # labels of the runs this writer inserted

    def add(self, label: str, pr: rec.ParsedRun, art: WrittenArtefact) -> None:
        """Buffer run ``pr`` of artefact ``art``, to be written under ``label``."""
        self.chunk.append((label, pr, art))
        self.buffered += len(pr.requests) if pr.requests is not None else 0
        if len(self.chunk) >= self.RUNS or self.buffered >= self.ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered runs: resolve them, refuse backfills (R9), then captures and aggregates,
        then requests; each step one set-based statement per table."""
        if not self.chunk:
            return
        chunk, self.chunk, self.buffered = self.chunk, [], 0
        found, ids = self._resolve_runs(chunk)
        self._refuse_backfills(chunk, found, ids)
        if found:
            self.s.flush()  # the learned run fields, before rows that point at the runs
        self._write_captures(chunk, ids)
        self._write_request_rows(chunk, ids)

    def _resolve_runs(
        self, chunk: list[tuple[str, rec.ParsedRun, WrittenArtefact]]
    ) -> tuple[dict[str, m.Run], dict[str, tuple[int, int]]]:
        """The batch's existing runs of the chunk's labels (newest revision), which learn what they did
        not know yet (never overwritten), and the new runs, inserted. Returns the existing runs and,
        per label, (run id, key): the key is the first revision's id, which captures point at."""
        s, conn, batch = self.s, self.conn, self.batch
        assert batch is not None  # runs are added only with a batch (import_file refuses the others)
        labels = sorted({label for label, _, _ in chunk})
        found: dict[str, m.Run] = {}
        for run in s.scalars(
            sa.select(m.Run).where(m.Run.batch_id == batch.id, m.Run.label.in_(labels)).order_by(m.Run.revision.desc())
        ):
            found.setdefault(run.label, run)
        if taken := sorted((self.new & found.keys()) - self.inserted):
            raise WriteConflict(f"run label {taken[0]!r} of batch {batch.name!r} was taken by another import meanwhile")
        new_rows: dict[str, dict] = {}
        for label, pr, art in chunk:
            described = _described(pr.info, art.id)
            target = found.get(label)
            if target is not None:
                for key, value in described.items():
                    if key == "metadata_json":
                        if (joined := _learned_metadata(target.metadata_json, value)) != target.metadata_json:
                            target.metadata_json = joined
                    elif value is not None and getattr(target, key) is None:
                        setattr(target, key, value)
            elif label in new_rows:
                row = new_rows[label]
                for key, value in described.items():
                    if key == "metadata_json":
                        row[key] = _learned_metadata(row[key], value)
                    elif value is not None and row[key] is None:
                        row[key] = value
            else:
                new_rows[label] = dict(
                    batch_id=batch.id,
                    label=label,
                    deployment_id=self.deployment_id,
                    **described,
                    warm_prefix_cache="unknown",
                    warm_process="unknown",
                    warm_compile="unknown",
                    warm_file_cache="unknown",
                    revision=0,
                    recorded_at=now(),
                )
        ids: dict[str, tuple[int, int]] = {lab: (r.id, r.origin_id or r.id) for lab, r in found.items()}
        if new_rows:
            for rid, row in zip(next_ids(conn, self.backend, "run", len(new_rows)), new_rows.values(), strict=True):
                row["id"] = rid
                ids[row["label"]] = (rid, rid)
            bulk_insert(conn, self.backend, "run", arrow_of(m.Run.__table__, list(new_rows.values()), conn.dialect))
        self.inserted |= new_rows.keys()
        return found, ids

    def _refuse_backfills(
        self,
        chunk: list[tuple[str, rec.ParsedRun, WrittenArtefact]],
        found: dict[str, m.Run],
        ids: dict[str, tuple[int, int]],
    ) -> None:
        """R9 against the earlier captures of the runs that existed before this chunk."""
        s = self.s
        earlier: dict[int, list[tuple[int, int, set[str]]]] = {}
        old_keys = sorted({ids[lab][1] for lab in found})
        if old_keys:
            caps = s.execute(
                sa.select(m.Capture.id, m.Capture.artefact_id, m.Capture.record_count, m.Capture.run_id).where(
                    m.Capture.run_id.in_(old_keys)
                )
            ).all()
            fields: dict[int, set[str]] = {c.id: set() for c in caps}
            if caps:
                for cap_id, f in s.execute(
                    sa.select(m.CaptureField.capture_id, m.CaptureField.field).where(
                        m.CaptureField.capture_id.in_(list(fields))
                    )
                ):
                    fields[cap_id].add(f)
            for c in caps:
                earlier.setdefault(c.run_id, []).append((c.artefact_id, c.record_count, fields[c.id]))
        for label, pr, _ in chunk:
            check_backfill(label, pr.capture, earlier.get(ids[label][1], ()))

    def _write_captures(
        self, chunk: list[tuple[str, rec.ParsedRun, WrittenArtefact]], ids: dict[str, tuple[int, int]]
    ) -> None:
        """One capture per run and artefact, its fields, and the tool's aggregates of the run."""
        conn, batch, dialect = self.conn, self.batch, self.conn.dialect
        assert batch is not None
        cap_ids = next_ids(conn, self.backend, "capture", len(chunk))
        stamp = now()
        caps_rows: list[dict[str, Any]] = []
        field_rows: list[dict[str, Any]] = []
        pub_rows: list[dict[str, Any]] = []
        for cap_id, (label, pr, art) in zip(cap_ids, chunk, strict=True):
            key = ids[label][1]
            pc = pr.capture
            caps_rows.append(
                dict(
                    id=cap_id,
                    artefact_id=art.id,
                    run_id=key,
                    record_count=pc.record_count,
                    sampled=pc.sampled,
                    sample_note=pc.sample_note,
                    clock=pc.clock,
                    token_source=pc.token_source,
                    success_rule=pc.success_rule,
                )
            )
            field_rows.extend(dict(capture_id=cap_id, field=f) for f in pc.fields)
            pub_rows.extend(published_row(p, art.id, batch.id, key, self.deployment_id, stamp) for p in pr.published)
            art.result.published += len(pr.published)
        bulk_insert(conn, self.backend, "capture", arrow_of(m.Capture.__table__, caps_rows, dialect))
        if field_rows:
            bulk_insert(conn, self.backend, "capture_field", arrow_of(m.CaptureField.__table__, field_rows, dialect))
        if pub_rows:
            for pid, row in zip(next_ids(conn, self.backend, "published_value", len(pub_rows)), pub_rows, strict=True):
                row["id"] = pid
            bulk_insert(conn, self.backend, "published_value", arrow_of(m.PublishedValue.__table__, pub_rows, dialect))

    def _write_request_rows(
        self, chunk: list[tuple[str, rec.ParsedRun, WrittenArtefact]], ids: dict[str, tuple[int, int]]
    ) -> None:
        """Each run's request and request-gaps rows; a record outside its domain names file, line and field.

        The runs of the chunk (consecutive runs of one artefact, or a group's files of a run each)
        become one pair of tables (:func:`artefacts_request_tables`): built per run, the 1000-run vLLM
        file made 1000 of each and the pool then copied their 1000 slices into one chunk per column;
        built per file, the 1,000 files of the ledger's format took the import's main thread longer
        (profile note 27)."""
        carried: list[tuple[int, int, str | None, rec.ArrowRequests]] = []
        arts: dict[int, WrittenArtefact] = {}
        counts: list[tuple[WrittenArtefact, int, str, int]] = []
        for label, pr, art in chunk:
            run_id, key = ids[label]
            n = 0
            if pr.requests is not None and len(pr.requests):
                with named_records(art.path):
                    req = pr.requests if isinstance(pr.requests, rec.ArrowRequests) else arrow_requests(pr.requests)
                carried.append((art.id, key, pr.capture.clock, req))
                arts[art.id] = art
                n = req.table.num_rows
            counts.append((art, run_id, label, n))
        if carried:
            requests, gaps = artefacts_request_tables(carried)
            self.rows.add("request", requests, arts)
            if gaps is not None:
                self.rows.add("request_gaps", gaps, arts)
        for _, pr, art in chunk:  # after the runs' requests, as request_value_table's callers did
            if pr.request_values and isinstance(pr.requests, rec.RequestColumns) and len(pr.requests):
                with named_records(art.path):
                    values = request_value_table(art.id, pr.requests.idx, pr.request_values)
                if values.num_rows:
                    self.rows.add("request_value", values, {art.id: art})
        for art, run_id, label, n in counts:
            art.result.runs.append((run_id, label, n))
            art.requests += n
            if self.progress is not None:  # result.rows, without a sum over the runs so far after each run
                self.progress(art.requests + art.result.samples)
