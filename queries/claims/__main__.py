"""``python -m bench_ledger.queries.claims --schema > docs/claims.schema.json`` and ``--docs docs/claims.md``."""

from __future__ import annotations

import sys
from pathlib import Path

from bench_ledger.queries.claims._docs import schema_text, update_docs

__all__: list[str] = []

if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--schema"]:
        sys.stdout.write(schema_text())
    elif len(sys.argv) == 3 and sys.argv[1] == "--docs":
        doc = Path(sys.argv[2])
        doc.write_text(update_docs(doc.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stderr.write(
            "usage: python -m bench_ledger.queries.claims --schema > docs/claims.schema.json\n"
            "       python -m bench_ledger.queries.claims --docs docs/claims.md\n"
        )
        sys.exit(2)
