"""Export a batch as Parquet (and CSV) that other tools read; load such an export into another ledger.

Why: evidence has to leave the ledger in a form DuckDB, pandas, Spark or a script can read, and come
back without losing what makes it evidence: the seal. So an export holds, per table, exactly the
rows the seal covers (:func:`ledger.seal.scheme2.batch_rows`, the same selection and order), every column
with its stored value (exact decimals as their text, times in microseconds, nanosecond integers as
64-bit integers), plus the rows those refer to (deployments, source reports) and the batch's seal
rows; ``README.json`` names the schema revision, the seal and each file's sha256.

:func:`import_export` checks in this order, and writes nothing until all pass: the files' sha256
against README.json; the schema revision against this code's; then **the seal**: the rows are
loaded into a scratch DuckDB ledger and the seal's Merkle root, row count and digest are recomputed
there by :mod:`ledger.seal` (the code `ledger verify` runs) and compared with README.json; then
nothing of the batch may already exist in the target (ids are part of the sealed rows, so they are
kept). Only then are the rows inserted, in one transaction, the batch closed with its own seal,
and the seal recomputed in the target as a last check. The result: the same seal digest.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import sqlalchemy as sa
from bench_ledger import declared
from bench_ledger import gaps as gp
from bench_ledger import models as m
from bench_ledger.errors import InputError, IntegrityError, Refused
from bench_ledger.guards import mark_ledger_write, take_declared_written
from bench_ledger.ingest import bulk_insert
from bench_ledger.intoto import intoto_statement
from bench_ledger.seal import scheme2, scheme3
from bench_ledger.seal.close import batch_parts
from bench_ledger.store import Ledger, now

__all__ = ["export_batch", "import_export", "schema_of"]

FORMAT = "bench-ledger-export/1"
# source reports (what the batch's published values name) and the import digests ride along; not sealed
# request_value (migration 0013) is a scheme-3 artefact part only (scheme3.OPTIONAL_TABLES), never of schemes 1 and 2
ALL_TABLES = (*scheme2.TABLE_ORDER, "request_value", "source_report", "artefact_digest")
SEAL_TABLES = ("seal", "seal_chunk", "seal_part")  # seal_chunk: schemes 1 and 2; seal_part: scheme 3
# an order the foreign keys allow (a batch names its deployment, a run its artefact)
LOAD_ORDER = (
    "source_report",
    "deployment",
    "batch",
    "artefact",
    "artefact_digest",
    "run",
    "capture",
    "capture_field",
    "request",
    "chunk_gap",
    "request_value",
    "hardware_sample",
    "log_fact",
    "published_value",
)
assert set(LOAD_ORDER) == set(ALL_TABLES)


@dataclass
class ExportResult:
    batch: str
    folder: Path
    tables: dict[str, int]
    seal_digest: str | None
    merkle_root: str
    files: list[Path] = field(default_factory=list)


@dataclass
class ImportExportResult:
    batch: str
    rows: int
    seal_digest: str | None
    merkle_root: str
    reused: list[str] = field(default_factory=list)  # context rows already in the target (same identity)


def _arrow_type(col: sa.Column) -> pa.DataType:
    t = col.type
    if isinstance(t, m.ExactDecimal):
        return pa.string()  # the exact printed digits, never a float
    if isinstance(t, sa.Boolean):
        return pa.bool_()
    if isinstance(t, sa.Float):
        return pa.float64()
    if isinstance(t, sa.Integer):  # BigInteger included: nanosecond times fit in 64 bits
        return pa.int64()
    if isinstance(t, sa.DateTime):
        return pa.timestamp("us")
    if isinstance(t, sa.Date):
        return pa.date32()
    if isinstance(t, sa.LargeBinary):
        return pa.binary()
    return pa.string()


def schema_of(table: str) -> pa.Schema:
    t = m.Base.metadata.tables[table]
    return pa.schema([pa.field(c.name, _arrow_type(c), nullable=True) for c in t.columns])


def _rows(conn: sa.Connection, stmt: sa.Select, table: str) -> pa.Table:
    schema = schema_of(table)
    names = schema.names
    cols: dict[str, list] = {n: [] for n in names}
    for row in conn.execute(stmt):
        for n, v in zip(names, row, strict=True):
            cols[n].append(v)
    return pa.Table.from_pydict(cols, schema=schema)


def _select_all(table: str, where: sa.ColumnElement) -> sa.Select:
    names = [c.name for c in m.Base.metadata.tables[table].columns]
    return sa.select(*[sa.column(n) for n in names]).select_from(sa.table(table)).where(where)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- export


def export_batch(ledger: Ledger, batch: str, folder: Path, *, csv: bool = False) -> ExportResult:
    """Write the batch's tables as Parquet (and CSV) with README.json into ``folder`` (new or empty)."""
    if folder.exists() and any(folder.iterdir()):
        raise InputError(f"{folder}: not empty; give a new folder for the export")
    with ledger.session() as s:
        b = Ledger.get_batch(s, batch)
        batch_id, status = b.id, b.status
        seal = s.scalar(sa.select(m.Seal).where(m.Seal.batch_id == batch_id))
    scheme = seal.scheme if seal is not None else scheme3.SCHEME
    sealed = (
        (*scheme2.TABLE_ORDER, *scheme3.OPTIONAL_TABLES)
        if scheme == scheme3.SCHEME
        else scheme2.TABLES_OF_SCHEME.get(scheme, scheme2.TABLE_ORDER)
    )
    tables: dict[str, pa.Table] = {}
    with ledger.connection() as conn:
        for table in (
            *scheme2.TABLE_ORDER,
            *scheme3.OPTIONAL_TABLES,
        ):  # the rows of the batch, as the seal selects them
            stmt, _ = scheme2.batch_rows(table, batch_id, ledger.backend, all_columns=True)
            tables[table] = _rows(conn, stmt, table)
        src_ids = sorted({v for v in tables["published_value"].column("source_report_id").to_pylist() if v is not None})
        tables["source_report"] = _rows(
            conn, _select_all("source_report", sa.column("id").in_(src_ids)).order_by(sa.column("id")), "source_report"
        )
        seal_ids = [seal.id] if seal is not None else []
        tables["seal"] = _rows(conn, _select_all("seal", sa.column("id").in_(seal_ids)), "seal")
        tables["seal_chunk"] = _rows(
            conn,
            _select_all("seal_chunk", sa.column("seal_id").in_(seal_ids)).order_by(
                sa.column("table_name"), sa.column("chunk_no")
            ),
            "seal_chunk",
        )
        tables["seal_part"] = _rows(
            conn,
            _select_all("seal_part", sa.column("seal_id").in_(seal_ids)).order_by(
                sa.column("table_name"), sa.column("artefact_id"), sa.column("chunk_no")
            ),
            "seal_part",
        )
        art_ids = tables["artefact"].column("id").to_pylist()
        tables["artefact_digest"] = _rows(
            conn,
            _select_all("artefact_digest", sa.column("artefact_id").in_(art_ids)).order_by(
                sa.column("artefact_id"), sa.column("table_name")
            ),
            "artefact_digest",
        )
        digest = batch_digest(conn, ledger.backend, batch_id, scheme)
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    written: list[Path] = []
    for name, data in tables.items():
        path = folder / f"{name}.parquet"
        pq.write_table(data, path, compression="zstd")
        entry: dict[str, Any] = {
            "parquet": path.name,
            "rows": data.num_rows,
            "sha256": _sha256(path),
            "sealed": name in sealed,
            "columns": [{"name": f.name, "type": str(f.type)} for f in data.schema],
        }
        if name in sealed:  # what an independent script needs to recompute the seal (docs/seals.md)
            entry["seal_columns"] = list(scheme2.BATCH_IDENTITY) if name == "batch" else data.schema.names
            entry["seal_order"] = m.key_columns(name)
        written.append(path)
        if csv:
            cpath = folder / f"{name}.csv"
            shown = data
            for i, f in enumerate(data.schema):
                if pa.types.is_binary(f.type):  # CSV has no bytes: hex text
                    shown = shown.set_column(
                        i,
                        f.name,
                        pa.array([None if v is None else v.hex() for v in data.column(i).to_pylist()], pa.string()),
                    )
            pacsv.write_csv(shown, cpath)
            entry["csv"] = cpath.name
            entry["csv_sha256"] = _sha256(cpath)
            written.append(cpath)
        files[name] = entry
    readme = {
        "format": FORMAT,
        "batch": batch,
        "status": status,
        "schema_revision": ledger.revision(),
        "exported_at": now().isoformat(timespec="microseconds"),
        "seal_scheme": scheme,
        "seal": None
        if seal is None
        else {
            "scheme": seal.scheme,
            "digest": seal.digest,
            "merkle_root": seal.merkle_root,
            "row_count": seal.row_count,
            "previous_digest": seal.previous_digest,
            "closed_at": seal.closed_at.isoformat(timespec="microseconds"),
            "table_roots": json.loads(seal.table_roots),
            "table_counts": json.loads(seal.table_counts),
        },
        "seal_tables": list(sealed),
        "content": {
            "scheme": scheme,
            "merkle_root": digest.root,
            "row_count": digest.count,
            "table_roots": digest.roots,
        },
        "tables": files,
        "recompute": "docs/seals.md, section 'From an export'",
        "notes": (
            "Times are naive UTC, microseconds. Exact decimals (value, seconds_to_ready, ...) are text: "
            "the printed digits. Sealed tables hold the rows the seal covers, in seal order."
        ),
    }
    if seal is not None:
        statement = folder / "statement.intoto.json"
        statement.write_text(json.dumps(intoto_statement(ledger, batch), indent=2) + "\n", encoding="utf-8")
        readme["intoto_statement"] = statement.name
        written.append(statement)
    readme_path = folder / "README.json"
    readme_path.write_text(json.dumps(readme, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written.append(readme_path)
    return ExportResult(
        batch,
        folder,
        {k: v.num_rows for k, v in tables.items()},
        seal.digest if seal is not None else None,
        digest.root,
        written,
    )


# --------------------------------------------------------------------------- import


def read_export(folder: Path) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """README.json and the Parquet tables, each file checked against its sha256 first."""
    readme_path = folder / "README.json"
    try:
        readme = json.loads(readme_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{readme_path}: cannot read the export's README.json: {exc}") from None
    if not isinstance(readme, dict) or readme.get("format") != FORMAT:
        got = readme.get("format") if isinstance(readme, dict) else readme
        raise InputError(f"{readme_path}: format {got!r} is not {FORMAT!r}")
    listed = readme.get("tables") or {}
    if not isinstance(listed, dict):
        raise InputError(f"{readme_path}: tables: expected an object of table entries")
    tables: dict[str, pa.Table] = {}
    for name in (*ALL_TABLES, *SEAL_TABLES):
        entry = listed.get(name)
        if entry is None and name in scheme3.OPTIONAL_TABLES:  # an export made before the table existed has none
            tables[name] = schema_of(name).empty_table()
            continue
        if entry is None:
            raise InputError(f"{readme_path}: tables.{name}: missing")
        path = _listed_file(folder, readme_path, name, entry)
        if _sha256(path) != entry["sha256"]:
            raise IntegrityError(f"{path}: sha256 differs from README.json's {entry['sha256'][:16]}…: the file changed")
        try:
            data = pq.read_table(path)
            want = schema_of(name)
            if data.schema.names != want.names:
                raise InputError(f"{path}: columns {data.schema.names} are not this schema's {want.names}")
            tables[name] = data.cast(want)
        except (
            pa.ArrowException,
            OSError,
        ) as exc:  # a file whose sha256 README.json names but is no Parquet of the table
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise InputError(f"{path}: not a Parquet file of table {name!r} ({first})") from None
    return readme, tables


def _listed_file(folder: Path, readme_path: Path, name: str, entry: object) -> Path:
    """The file README.json lists for a table: a plain file name in the export folder, never a path out of
    it (``../x``, ``/etc/x``, a link to elsewhere), with its sha256."""
    where = f"{readme_path}: tables.{name}"
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("parquet"), str)
        or not isinstance(entry.get("sha256"), str)
    ):
        raise InputError(f"{where}: expected an object with 'parquet' (a file name) and 'sha256'")
    file = entry["parquet"]
    if file in ("", ".", "..") or Path(file).name != file or "\\" in file or Path(file).is_absolute():
        raise InputError(
            f"{where}.parquet: {file!r} is not a file name in the export folder; refused (an export "
            "names its own files only)"
        )
    path = folder / file
    if not path.is_file():
        raise InputError(f"{path}: missing (README.json lists it)")
    if path.is_symlink() or path.resolve().parent != folder.resolve():
        raise InputError(f"{where}.parquet: {path} is a link out of the export folder; refused")
    return path


def _load(conn: sa.Connection, backend: str, tables: dict[str, pa.Table], *, closed: bool) -> None:
    """Insert the export's rows (the batch open), then its seal and the close."""
    batch = tables["batch"]
    opened = batch.set_column(batch.schema.get_field_index("status"), "status", pa.array(["open"] * batch.num_rows))
    for col in ("closed_at", "seal_digest"):
        i = opened.schema.get_field_index(col)
        opened = opened.set_column(i, col, pa.nulls(opened.num_rows, opened.schema.field(col).type))
    for name in LOAD_ORDER:
        _insert(conn, backend, name, opened if name == "batch" else tables[name])
    if closed:
        bulk_insert(conn, backend, "seal", tables["seal"])
        for name in ("seal_chunk", "seal_part"):
            _insert(conn, backend, name, tables[name])
        row = batch.to_pylist()[0]
        conn.execute(
            sa.text("UPDATE batch SET status = 'closed', closed_at = :c, seal_digest = :d WHERE id = :i"),
            {"c": row["closed_at"], "d": row["seal_digest"], "i": row["id"]},
        )


def _insert(conn: sa.Connection, backend: str, name: str, data: pa.Table) -> None:
    """The database's bulk path; rows with bytes as plain inserts (PostgreSQL's CSV COPY has no bytes).
    ``chunk_gap`` rows (the export keeps that shape) go in as the arrays of ``request_gaps`` (a view
    since migration 0014; :func:`ledger.gaps.arrays_of`). Revisions of a corrected row go in one revision at a
    time, oldest first: DuckDB checks a correction's reference to the row it supersedes against the rows
    already there, not those of the same statement."""
    if name == "chunk_gap":
        try:
            name, data = "request_gaps", gp.arrays_of(data)
        except ValueError as exc:
            raise InputError(f"chunk_gap.parquet: {exc}") from None
    if "revision" in data.column_names and pc.count_distinct(data.column("revision")).as_py() > 1:
        for revision in sorted(pc.unique(data.column("revision")).to_pylist()):
            _insert(conn, backend, name, data.filter(pc.equal(data.column("revision"), revision)))
    elif not any(pa.types.is_binary(f.type) for f in data.schema):
        bulk_insert(conn, backend, name, data)
    elif data.num_rows:
        conn.execute(sa.table(name, *[sa.column(c) for c in data.column_names]).insert(), data.to_pylist())


def _check_seal(readme: dict[str, Any], d: Digest, batch_row: dict[str, Any], where: str) -> None:
    """The recomputed root/count (and digest, for a closed batch) against README.json."""
    want = readme["seal"] or {
        "merkle_root": readme["content"]["merkle_root"],
        "row_count": readme["content"]["row_count"],
        "table_roots": readme["content"]["table_roots"],
    }
    if d.root != want["merkle_root"] or d.count != want["row_count"]:
        roots = readme["content"]["table_roots"]  # computed at export, keyed as d.roots
        changed = [t for t, root in d.roots.items() if roots.get(t) != root]
        raise IntegrityError(
            f"{where}: the rows do not give the seal of README.json (Merkle root {d.root[:16]}… over "
            f"{d.count} rows, README.json {want['merkle_root'][:16]}… over {want['row_count']}); "
            f"tables that differ: {', '.join(changed) or 'none (the count differs)'}"
        )
    seal = readme["seal"]
    if seal is not None:
        from datetime import datetime

        digest = scheme2.seal_digest(
            seal["previous_digest"],
            readme["batch"],
            d.root,
            d.count,
            datetime.fromisoformat(seal["closed_at"]),
            readme["seal_scheme"],
        )
        if digest != seal["digest"] or batch_row.get("seal_digest") != seal["digest"]:
            raise IntegrityError(
                f"{where}: recomputed seal digest {digest[:16]}… differs from README.json's {seal['digest'][:16]}…"
            )


@dataclass
class Digest:
    root: str
    count: int
    roots: dict[str, str]  # per table (schemes 1, 2) or per part (scheme 3: "request@12")


def batch_digest(conn: sa.Connection, backend: str, batch_id: int, scheme: str) -> Digest:
    """The batch's Merkle root and row count by ``scheme``, with the functions `ledger verify` uses."""
    if scheme == scheme3.SCHEME:
        declared, arts = batch_parts(conn, backend, batch_id)
        parts = [*declared, *(p for ps in arts.values() for p in ps)]
        return Digest(
            scheme3.batch_root(declared, arts),
            sum(p.count for p in parts),
            {scheme3.part_key(p): p.root for p in parts},
        )
    tables = scheme2.TABLES_OF_SCHEME.get(scheme)
    if tables is None:
        known = ", ".join([*scheme2.TABLES_OF_SCHEME, scheme3.SCHEME])
        raise InputError(f"README.json: seal scheme {scheme!r} unknown to this version; known: {known}")
    d = scheme2.compute(conn, backend, batch_id, tables=tables)
    return Digest(d.root, d.count, {t: x.root for t, x in d.tables.items()})


def verify_export(folder: Path) -> tuple[dict[str, Any], dict[str, pa.Table], Digest]:
    """Check an export on its own: file digests, then the seal recomputed over its rows in a scratch
    DuckDB ledger by :mod:`ledger.seal`. Raises IntegrityError naming what differs."""
    readme, tables = read_export(folder)
    batch_rows = tables["batch"].to_pylist()
    if len(batch_rows) != 1 or batch_rows[0]["name"] != readme["batch"]:
        raise InputError(f"{folder / 'batch.parquet'}: must hold the one batch {readme['batch']!r}")
    closed = readme["seal"] is not None
    with tempfile.TemporaryDirectory(prefix="bench-ledger-verify-") as tmp:
        scratch = Ledger(f"duckdb:///{Path(tmp) / 'scratch.duckdb'}")
        try:
            m.create_schema(scratch.engine)
            with scratch.engine.begin() as conn:
                _load(conn, "duckdb", tables, closed=closed)
                d = batch_digest(conn, "duckdb", batch_rows[0]["id"], readme["seal_scheme"])
        finally:
            scratch.close()
    _check_seal(readme, d, batch_rows[0], str(folder))
    return readme, tables, d


def _conflicts(conn: sa.Connection, tables: dict[str, pa.Table]) -> tuple[list[str], list[str]]:
    """What of the export the target already has: conflicts (refused) and identical context rows (reused)."""
    problems: list[str] = []
    reused: list[str] = []
    keyed = {
        "batch": ("id", "name"),
        "run": ("id",),
        "capture": ("id",),
        "artefact": ("id", "sha256"),
        "published_value": ("id",),
    }
    for table, cols in keyed.items():
        for col in cols:
            values = [v for v in tables[table].column(col).to_pylist() if v is not None]
            if not values:
                continue
            hit: Any = (
                conn.execute(
                    sa.select(sa.column(col)).select_from(sa.table(table)).where(sa.column(col).in_(values)).limit(3)
                )
                .scalars()
                .all()
            )
            if hit:
                problems.append(f"{table}.{col} {', '.join(map(str, hit))} already in the target")
    for table, ident in (("deployment", ("name", "fingerprint")), ("source_report", ("slug", "text_sha256"))):
        for row in tables[table].to_pylist():
            have: Any = conn.execute(
                sa.select(*[sa.column(c) for c in ("id", *ident)])
                .select_from(sa.table(table))
                .where(sa.or_(sa.column("id") == row["id"], sa.column(ident[0]) == row[ident[0]]))
            ).all()
            if not have:
                continue
            if len(have) == 1 and tuple(have[0]) == (row["id"], *(row[c] for c in ident)):
                reused.append(f"{table} {row['id']} {row[ident[0]]}")
            else:
                problems.append(f"{table} {row['id']} {row[ident[0]]!r}: the target has {[tuple(h) for h in have]}")
    return problems, reused


def _advance_sequences(conn: sa.Connection, backend: str) -> None:
    """Explicit ids were inserted: move each id sequence past the largest id, so new rows do not collide."""
    for table in (
        "source_report",
        "deployment",
        "batch",
        "run",
        "capture",
        "artefact",
        "published_value",
        "seal",
        "launch",
    ):
        top = conn.execute(sa.text(f"SELECT MAX(id) FROM {table}")).scalar()
        if not top:
            continue
        if backend == "postgresql":
            conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {int(top)})"))
        else:
            seq = f"{table}_id_seq"
            current = conn.execute(sa.text(f"SELECT nextval('{seq}')")).scalar()
            if current < top:
                conn.execute(sa.text(f"SELECT max(nextval('{seq}')) FROM range({int(top - current)})"))


def import_export(ledger: Ledger, folder: Path) -> ImportExportResult:
    """Load an export into this ledger after verifying its seal; the batch keeps its ids and its seal."""
    readme, tables, d = verify_export(folder)
    if readme.get("schema_revision") != ledger.head_revision():
        raise InputError(
            f"{folder / 'README.json'}: exported at schema revision {readme.get('schema_revision')}, "
            f"this code's is {ledger.head_revision()}: load it with the matching bench-ledger version"
        )
    closed = readme["seal"] is not None
    batch_id = tables["batch"].column("id")[0].as_py()
    with ledger.engine.begin() as conn:
        mark_ledger_write(conn)
        problems, reused = _conflicts(conn, tables)
        if problems:
            raise Refused(
                "R10",
                f"import the export of batch {readme['batch']!r}",
                "the sealed rows keep their ids and the target already holds some of them: " + "; ".join(problems),
                "load it into a fresh ledger (`ledger init --db …`), or compare with `ledger verify`",
            )
        skip = {
            t: {int(r.split()[1]) for r in reused if r.startswith(t + " ")} for t in ("deployment", "source_report")
        }
        load = dict(tables)
        for t in skip:
            if skip[t]:
                keep = [i for i, v in enumerate(tables[t].column("id").to_pylist()) if v not in skip[t]]
                load[t] = tables[t].take(pa.array(keep, pa.int64()))
        _load(conn, ledger.backend, load, closed=closed)
        written = take_declared_written(None, conn)  # the loaded rows, noted by the bulk path
        if ledger.backend == "duckdb":
            declared.keep(conn, written)
        _advance_sequences(conn, ledger.backend)
        again = batch_digest(conn, ledger.backend, batch_id, readme["seal_scheme"])
        if again.root != d.root or again.count != d.count:
            differ = [k for k, v in again.roots.items() if d.roots.get(k) != v]
            raise IntegrityError(
                f"batch {readme['batch']!r}: loaded rows give Merkle root {again.root[:16]}…, the "
                f"export {d.root[:16]}… (parts that differ: {', '.join(differ) or 'none'}); "
                "nothing was written"
            )
    return ImportExportResult(readme["batch"], d.count, readme["seal"]["digest"] if closed else None, d.root, reused)
