"""The `ledger` command: a thin shell over the library.

Each command parses its options, opens the ledger, calls one function of ``ledger``,
``importers`` or ``queries`` and renders the result. This package is the only part of ``ledger``
that imports ``importers`` and ``queries`` (it is the shell, not the core).

Exit codes: 0 ok, 1 failure, 2 usage error, 3 refused by a rule of the rulebook.
"""

from __future__ import annotations

import gc

from bench_ledger.cli import (  # noqa: F401  (each registers its commands)
    audit,
    books,
    browse,
    captured,
    claims,
    compare,
    metrics,
    setup,
    share,
)
from bench_ledger.cli.app import main
from bench_ledger.cli.setup import RowProgress, import_one

__all__ = ["RowProgress", "import_one", "main", "run"]


def run() -> None:
    """The `ledger` console script: :func:`main` in a process of its own, which exits when it returns.

    Before the interpreter exits, every object still alive is frozen (``gc.freeze``): the collector's
    passes at exit walked them all (the loaded modules, SQLAlchemy's and Arrow's most of them) only for
    the process to end (docs/decisions/0033-start-up-cost.md has the cost). Objects are still freed by their reference counts as the modules are cleared; what is skipped is looking for
    cycles among them, whose memory the exit returns anyway. Callers of :func:`main` in their own
    process (tests through click's runner, scripts) are left as they are."""
    try:
        main()
    finally:
        gc.freeze()
