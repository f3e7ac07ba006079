"""The audit: every claim of a claims file checked against a ledger, one verdict each (docs/claims.md).

* ``_auditor``: :class:`Auditor` (the five bases, the printed rounding, GRIM, sampling, the verdict lattice)
  and :func:`audit`; ``_operands``: its operands as terms (claim, literal, metric, nested formula), their
  arithmetic and recorded factors; ``_result``: the verdict of a claim and the report of a file;
* ``_defaults``: what the audit is handed (evaluator, sampling intervals, factors, tool figures) and the
  defaults it takes from the ledger;
* ``_rules``: the type rules, one function each (the kind algebra is ``queries.claims.kind_algebra``, the
  verdict lattice ``queries.lattice``); ``_raw``: a derivation recomputed from the ledger's operand values
  (``raw-mismatch``); ``_definitions``: a tool's second definition of one quantity;
* ``_explain``: the evidence chain of a claim, back to the bytes; ``_provenance``: that chain as W3C PROV.
"""

from bench_ledger.queries.audit._auditor import Auditor, audit
from bench_ledger.queries.audit._defaults import default_evaluator
from bench_ledger.queries.audit._explain import claim_steps, explain, records_steps, source_step
from bench_ledger.queries.audit._provenance import prov_document
from bench_ledger.queries.audit._result import AuditReport, AuditResult, jsonable

__all__ = [
    "AuditReport",
    "AuditResult",
    "Auditor",
    "audit",
    "claim_steps",
    "default_evaluator",
    "explain",
    "jsonable",
    "prov_document",
    "records_steps",
    "source_step",
]
