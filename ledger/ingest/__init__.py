"""Write parsed artefacts into the ledger: one pipeline, one transaction per file or group of files.

The importer has already turned the file into :mod:`ledger.records`; this package only writes. Row
tables (requests, chunk gaps, hardware samples) go in as Arrow tables through the database's own
bulk path, never one ORM object per row. The modules, by what they hold:

* :mod:`~ledger.ingest.pipeline`: the one entry: hash, refuse the same bytes twice, parse, write; a
  single file is a group of one, small files of a batch are prepared ahead and written in groups;
* :mod:`~ledger.ingest.writer`: the transaction that writes one file or a group;
* :mod:`~ledger.ingest.runs`: runs, captures, capture fields and tool aggregates, a chunk at a time;
* :mod:`~ledger.ingest.request_rows`: the ``request``, ``request_gaps``, ``request_value`` rows and
  their pool; :mod:`~ledger.ingest.samples`: ``hardware_sample`` rows;
  :mod:`~ledger.ingest.published`: the values a file reports;
* :mod:`~ledger.ingest.refusals`: what an import refuses, naming the file and the place;
* :mod:`~ledger.ingest.artefacts`: the file's hash, the already-imported check, the stored copy;
* :mod:`~ledger.ingest.target`: where an import goes (batch, run, launch) and its result;
* :mod:`~ledger.ingest.bulk`: an Arrow table to the database's bulk path (DuckDB scan, PostgreSQL COPY).
"""

from bench_ledger.ingest.artefacts import check_not_imported, sha256_file
from bench_ledger.ingest.bulk import bulk_insert
from bench_ledger.ingest.pipeline import import_file, import_files
from bench_ledger.ingest.request_rows import artefacts_request_tables, request_tables
from bench_ledger.ingest.target import (
    ImportResult,
    ImportTarget,
    Parser,
    options_not_applied,
    package_version,
    runs_of_artefact,
)
from bench_ledger.ingest.writer import write_artefact, write_artefacts

__all__ = [
    "ImportResult",
    "ImportTarget",
    "Parser",
    "artefacts_request_tables",
    "bulk_insert",
    "check_not_imported",
    "import_file",
    "import_files",
    "options_not_applied",
    "package_version",
    "request_tables",
    "runs_of_artefact",
    "sha256_file",
    "write_artefact",
    "write_artefacts",
]
