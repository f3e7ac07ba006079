"""The Python API: every workflow of the `ledger` command, and Arrow tables for notebooks.

One documented facade (docs/python.md has a worked example)::

    import bench_ledger as bl

    ledger = bl.connect("duckdb:///ledger.duckdb")   # read-only: the CLI is not locked out
    runs = bl.runs(ledger, batch="fx")                 # pyarrow.Table
    df = bl.to_pandas(bl.metrics(ledger, ["fx"]))      # pandas, when installed (extra "pandas")

Like the CLI, this module is a shell over the library: each function opens nothing it does not
need and calls one function of ``bench_ledger``, ``bench_ledger.importers`` or
``bench_ledger.queries``. Tables are Arrow (``pyarrow.Table``): values keep their provenance in
``*_flag`` and ``*_na_reason`` columns; n/a is null with its reason, never 0 (R9); rows of several
batches are side by side, each labelled with its batch, never pooled (R2).

Read-only access: :func:`connect` with ``read_only=True`` (the default) opens a DuckDB file in
DuckDB's read-only mode and only for the duration of each call (the call's queries share its
connections: ``Ledger.held``), so a `ledger import` or `ledger close` in a terminal can take the
file between two notebook cells. Writing workflows
(:func:`import_file`, :func:`declare_file`, :func:`close`, :func:`import_export`) need
``connect(url, read_only=False)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa
    from bench_ledger.store import Ledger

_F = TypeVar("_F", bound=Callable[..., Any])


def _one_call(fn: _F) -> _F:
    """A call on a read-only ledger holds the file for the call only, with one set of connections."""

    @functools.wraps(fn)
    def call(ledger: Ledger, *args: Any, **kwargs: Any) -> Any:
        with ledger.held():
            return fn(ledger, *args, **kwargs)

    return call  # type: ignore[return-value]


__all__ = [
    "audit",
    "audit_results",
    "close",
    "compare_stats",
    "connect",
    "declare_file",
    "demo",
    "explain",
    "export",
    "hardware_samples",
    "import_export",
    "import_file",
    "metrics",
    "plan",
    "report",
    "requests",
    "run_metrics",
    "runs",
    "to_pandas",
    "trend",
    "verify",
]


def connect(url: str | None = None, *, read_only: bool = True) -> Ledger:
    """Open a ledger (``duckdb:///FILE`` or ``postgresql+psycopg://…``; default as the CLI's --db).

    ``read_only`` (DuckDB): the file is opened read-only and only while a call runs."""
    from bench_ledger.store import Ledger

    ledger = Ledger(url, read_only=read_only)
    ledger.require_schema()
    return ledger


# --------------------------------------------------------------------------- workflows (as the CLI)


@_one_call
def import_file(
    ledger: Ledger,
    path: str | Path,
    *,
    batch: str | None = None,
    run: str | None = None,
    node: str | None = None,
    format: str | None = None,
    deployment: str | None = None,
):
    """`ledger import PATH`: detect the format (or use ``format``), parse, write; an ``ImportResult``."""
    from bench_ledger import importers
    from bench_ledger.ingest import ImportTarget
    from bench_ledger.ingest import import_file as _import_file

    path = Path(path)
    return _import_file(
        ledger,
        path,
        importers.choose(path, format),
        ImportTarget(batch=batch, run=run, node=node, deployment=deployment),
    )


@_one_call
def declare_file(ledger: Ledger, manifest: str | Path):
    """`ledger declare FILE.yaml`: deployments, launches, batches, runs (docs/manifest.md)."""
    from bench_ledger.declare import declare as _declare
    from bench_ledger.declare import load_manifest

    manifest = Path(manifest)
    return _declare(ledger, load_manifest(manifest), manifest.parent)


@_one_call
def close(ledger: Ledger, batch: str, seal_file: str | Path | None = None):
    """`ledger close BATCH`: seal and close it (docs/seals.md); a ``SealResult``."""
    from bench_ledger.seal import close_batch

    return close_batch(ledger, batch, Path(seal_file) if seal_file is not None else None)


@_one_call
def verify(ledger: Ledger, batch: str | None = None, seal_file: str | Path | None = None):
    """`ledger verify`: recompute every closed batch's seal; a ``VerifyResult`` (``.ok``, ``.checks``)."""
    from bench_ledger.seal import verify as _verify

    return _verify(ledger, batch, Path(seal_file) if seal_file is not None else None)


@_one_call
def run_metrics(
    ledger: Ledger,
    batches: list[str] | None = None,
    run_id: int | None = None,
    *,
    intervals: bool = False,
    confidence: float = 0.95,
):
    """`ledger metrics` as objects: one ``RunMetrics`` per run, each value a ``MetricValue``; ``intervals``: each
    row's ``sampling`` holds every value's ``SamplingInterval`` too (`ledger metrics --json`, docs/statistics.md)."""
    from bench_ledger.queries.metrics.registry import run_metrics as _run_metrics

    rows = _run_metrics(ledger, batches, run_id)
    if intervals:
        from bench_ledger.queries.stats.read import add_intervals

        add_intervals(ledger, rows, confidence)
    return rows


@_one_call
def compare_stats(ledger: Ledger, a: str, b: str, metrics: list[str] | None = None, confidence: float = 0.95):
    """`ledger compare A B --stats`: a ``StatsComparison`` (per metric: sampling verdict, test over runs)."""
    from bench_ledger.queries.stats.runs import STATS_METRICS
    from bench_ledger.queries.stats.runs import compare_stats as _compare_stats

    return _compare_stats(ledger, a, b, tuple(metrics or STATS_METRICS), confidence)


@_one_call
def trend(
    ledger: Ledger, metric: str, key: str | None = None, batches: list[str] | None = None, confidence: float = 0.95
):
    """`ledger trend METRIC`: one ``Trend`` per comparability key (points, intervals, change points)."""
    from bench_ledger.queries.stats.runs import trend as _trend

    return _trend(ledger, metric, key, tuple(batches or ()), confidence)


@_one_call
def plan(ledger: Ledger, run_id: int, detect: float, metrics: list[str], confidence: float = 0.95):
    """`ledger plan --detect`: one ``Plan`` per metric (``detect`` is relative: 0.05 for 5%)."""
    from bench_ledger.queries.stats.runs import plan as _plan

    return _plan(ledger, run_id, detect, tuple(metrics), confidence)


@_one_call
def audit(ledger: Ledger, claims_file: str | Path):
    """`ledger audit CLAIMS.yaml`: an ``AuditReport`` (verdict per claim, rule per refusal)."""
    from bench_ledger.queries.audit import audit as _audit
    from bench_ledger.queries.claims import load_claims

    return _audit(load_claims(claims_file), ledger)


@_one_call
def explain(ledger: Ledger, claims_file: str | Path, claim_id: str, *, format: str = "steps"):
    """`ledger explain`: the evidence chain; ``format="prov"`` gives a ``prov.model.ProvDocument``."""
    from bench_ledger.queries.audit import explain as _explain
    from bench_ledger.queries.claims import load_claims

    claims = load_claims(claims_file)
    if format == "prov":
        from bench_ledger.queries.audit import prov_document

        return prov_document(claims, ledger, claim_id, claims_path=Path(claims_file))
    return _explain(claims, ledger, claim_id, claims_path=Path(claims_file))


@_one_call
def report(
    ledger: Ledger,
    out: str | Path,
    batches: list[str] | None = None,
    claims_file: str | Path | None = None,
    *,
    format: str = "html",
) -> Path:
    """`ledger report`: write the self-contained HTML report (or Markdown) to ``out``."""
    from bench_ledger.queries.report.build import build_report
    from bench_ledger.queries.report.render import render_html, render_markdown

    data = build_report(ledger, batches, Path(claims_file) if claims_file else None)
    out = Path(out)
    out.write_text(render_html(data) if format == "html" else render_markdown(data), encoding="utf-8")
    return out


@_one_call
def export(ledger: Ledger, batch: str, folder: str | Path, *, csv: bool = False):
    """`ledger export BATCH --to DIR`: Parquet (and CSV) with README.json; an ``ExportResult``."""
    from bench_ledger.transfer import export_batch

    return export_batch(ledger, batch, Path(folder), csv=csv)


@_one_call
def import_export(ledger: Ledger, folder: str | Path):
    """`ledger import-export DIR`: verify the export's seal, then load it; an ``ImportExportResult``."""
    from bench_ledger.transfer import import_export as _import_export

    return _import_export(ledger, Path(folder))


def demo(out: str | Path = "bench-ledger-demo", db: str | None = None) -> str:
    """`ledger demo` without the printing: generate the SYNTHETIC case study into ``out``, declare
    it and import it into a fresh ledger (``out``/ledger.duckdb unless ``db``); its URL."""
    from bench_ledger.store import Ledger

    out = Path(out)
    if db is None:
        out.mkdir(parents=True, exist_ok=True)
        db = f"duckdb:///{out / 'ledger.duckdb'}"
    with Ledger(db) as ledger:
        build_demo(ledger, out / "data")
    return db


@_one_call
def build_demo(
    ledger: Ledger, data: Path, import_one: Callable[[Ledger, Path, str | None, Any], bool] | None = None
) -> bool:
    """The case study's build, the one home of it (`ledger demo` and :func:`demo`): generate the
    SYNTHETIC raw files into ``data``, migrate the empty ``ledger``, declare the system under test,
    import each launch's server log and then every generated file. ``import_one(ledger, path,
    format, target)`` imports one file (the CLI's prints what happened and returns False on a
    failure; by default a failure raises). True when every file imported."""
    from bench_ledger.casestudy.generate import generate
    from bench_ledger.ingest import ImportTarget

    generated = generate(data)
    ledger.init()
    ledger.require_empty()
    done = declare_file(ledger, generated.manifest)
    jobs: list[tuple[Path, str | None, ImportTarget]] = [
        (log, "vllm-server-log", ImportTarget(batch=None, deployment=dep, launch=(dep, attempt)))
        for dep, attempt, log in done.launch_logs
    ]
    jobs += [(job.path, None, ImportTarget(batch=job.batch, run=job.run, node=job.node)) for job in generated.imports]
    each = import_one or _import_or_raise
    return all([each(ledger, path, fmt, target) for path, fmt, target in jobs])  # a list: every file is tried


@_one_call
def _import_or_raise(ledger: Ledger, path: Path, fmt: str | None, target: Any) -> bool:
    from bench_ledger import importers
    from bench_ledger.ingest import import_file as _import_file

    _import_file(ledger, path, importers.choose(path, fmt), target)
    return True


# --------------------------------------------------------------------------- tables for notebooks


@_one_call
def runs(ledger: Ledger, batch: str | None = None) -> pa.Table:
    """Runs (current revisions): workload settings, request and artefact counts, batch."""
    import pyarrow as pa
    from bench_ledger.queries.catalog import list_runs

    return pa.Table.from_pylist([r.as_dict() for r in list_runs(ledger, batch)])


@_one_call
def metrics(ledger: Ledger, batches: list[str] | None = None, run_id: int | None = None) -> pa.Table:
    """`ledger metrics` as Arrow: per run, each metric's value, ``_flag`` and ``_na_reason``."""
    from bench_ledger.queries.metrics.registry import run_metrics as _run_metrics
    from bench_ledger.queries.metrics.registry import to_arrow

    return to_arrow(_run_metrics(ledger, batches, run_id))


@_one_call
def requests(ledger: Ledger, batch: str | None = None, run_id: int | None = None) -> pa.Table:
    """Per-request records as captured (times in ns on their clock, seconds as floats), with batch and
    run label; a field a capture did not contain is null (R9: see ``ledger show run``)."""
    from bench_ledger.queries.catalog import request_table

    return request_table(ledger, batch, run_id)


@_one_call
def hardware_samples(ledger: Ledger, batch: str | None = None, counter: str | None = None) -> pa.Table:
    """dmon samples in long form (one counter per row, unit as printed or ``unconfirmed``, R12)."""
    from bench_ledger.queries.catalog import sample_table

    return sample_table(ledger, batch, counter)


@_one_call
def audit_results(ledger: Ledger, claims_file: str | Path) -> pa.Table:
    """The audit as Arrow: one row per claim (verdict, rule, printed and recomputed intervals, why)."""
    import json

    import pyarrow as pa

    rows = []
    for r in audit(ledger, claims_file).results:
        d = asdict(r)
        d["notes"] = "; ".join(r.notes)
        d["evidence"] = json.dumps(r.evidence, ensure_ascii=False, default=str)
        d["as_expected"] = r.as_expected
        rows.append(d)
    return pa.Table.from_pylist(rows)


def to_pandas(table: pa.Table) -> Any:
    """The table as a pandas DataFrame; pandas is the optional extra ``bench-ledger[pandas]``."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError(
            "pandas is not installed: pip install 'bench-ledger[pandas]' (Arrow tables need no pandas)"
        ) from None
    return table.to_pandas()
