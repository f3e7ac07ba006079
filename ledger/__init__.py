"""bench-ledger: a benchmark ledger and provenance database for LLM inference serving.

The Python API is :mod:`bench_ledger.api` (docs/python.md), re-exported here::

    import bench_ledger as bl
    ledger = bl.connect("duckdb:///ledger.duckdb")
    bl.metrics(ledger, ["fx"])          # a pyarrow.Table

The names load on first use (PEP 562), so ``import bench_ledger.models`` stays as light as it was
and the core never imports the read side.
"""

from __future__ import annotations

from typing import Any

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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from bench_ledger import api

        return getattr(api, name)
    raise AttributeError(f"module 'bench_ledger' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
