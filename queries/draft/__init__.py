"""`ledger claims draft`: a claims file drafted from a report, for a person to review (docs/claims-draft.md).

* ``_segments``: the report read as segments (title, headings, sentences, table cells, footnotes);
  ``_numbers``: every printed number found in them, or skipped with why; ``_lexicon``: the words and units
  of both languages that the finder and the guesses read;
* ``_guess``: a number's unit and kind; ``_facets``: the scopes its context names; ``_candidates``: the
  metrics that reproduce it (checked by the audit itself); ``_derived``: the printed numbers it derives from;
* ``_claims_file``: the draft itself (one claim per number, ``draft: true``, its YAML);
* ``_diff``: a draft against its reviewed file (``ledger claims diff``) and against a reference
  (``ledger claims coverage``).
"""

from bench_ledger.queries.draft._claims_file import draft_claims
from bench_ledger.queries.draft._diff import Coverage, coverage, diff
from bench_ledger.queries.draft._facets import Facets, RunScope, names_run, system_names
from bench_ledger.queries.draft._numbers import find_numbers, numbers_in, scan

__all__ = [
    "Coverage",
    "Facets",
    "RunScope",
    "coverage",
    "diff",
    "draft_claims",
    "find_numbers",
    "names_run",
    "numbers_in",
    "scan",
    "system_names",
]
