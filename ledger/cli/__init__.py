"""The `ledger` command: a thin shell over the library.

Each command parses its options, opens the ledger, calls one function of ``ledger``,
``importers`` or ``queries`` and renders the result. This package is the only part of ``ledger``
that imports ``importers`` and ``queries`` (it is the shell, not the core).

Exit codes: 0 ok, 1 failure, 2 usage error, 3 refused by a rule of the rulebook.
"""

from __future__ import annotations

from bench_ledger.cli import audit, books, browse, captured, claims, setup, share  # noqa: F401  (each registers its commands)
from bench_ledger.cli.app import main
from bench_ledger.cli.setup import RowProgress, import_one

__all__ = ["RowProgress", "import_one", "main"]
