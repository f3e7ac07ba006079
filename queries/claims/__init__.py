"""The claims file: a source report and every number it publishes, each with how to check it (docs/claims.md).

* ``_models``: the file's pydantic models (claim bases: metric, derived, quoted, estimated, na) and the verdicts;
* ``_references``: references between claims (duplicates, unknown ids, cycles), ``_locations``: the YAML line
  and field of a problem, ``_load``: read and validate a file, every error at once;
* ``_check``: the names a file uses (metrics, runs, batches, cards, factors) checked against a ledger (loaded
  when first asked for: a file read without a ledger loads neither SQLAlchemy nor the catalog);
* ``kind_algebra``: which operand kinds a formula combines into which result kind (the audit's type rules use it);
* ``_docs``: the JSON Schema and the tables docs/claims.md embeds (``python -m bench_ledger.queries.claims``).
"""

from typing import TYPE_CHECKING, Any

from bench_ledger.queries.claims import kind_algebra
from bench_ledger.queries.claims._docs import GENERATED, generated_block, schema_text
from bench_ledger.queries.claims._load import load_claims
from bench_ledger.queries.claims._models import (
    VERDICTS,
    Claim,
    ClaimsFile,
    Formula,
    LiteralNumber,
    MetricOperand,
    claim_refs,
)

if TYPE_CHECKING:
    from bench_ledger.queries.claims._check import check_names

__all__ = [
    "GENERATED",
    "VERDICTS",
    "Claim",
    "ClaimsFile",
    "Formula",
    "LiteralNumber",
    "MetricOperand",
    "check_names",
    "claim_refs",
    "generated_block",
    "kind_algebra",
    "load_claims",
    "schema_text",
]


def __getattr__(name: str) -> Any:
    if name == "check_names":
        from bench_ledger.queries.claims._check import check_names

        return check_names
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
