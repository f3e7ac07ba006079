"""``nvidia-smi dmon`` text -> hardware samples in long form (formats.md section 7).

Why it is built this way:

* Columns come from the names line (``# gpu pwr ...`` / ``#Date Time gpu ...``) and units from the
  units line that follows it, never from positions: ``-s`` and driver versions change the column set,
  and a header may repeat or change mid-file (a changed header starts a new column set).
* A units line that is present gives each column's unit exactly as printed; without one every unit is
  ``"unconfirmed"`` (R12) and nothing downstream may convert it.
* The counters keep their meaning (R13): :data:`bench_ledger.counters.DMON` says what each one measures, e.g.
  ``sm`` is activity time, not SM occupancy or MFU.
* A day of 16 GPUs is 1.4M lines and ~17M long rows, so the file is read in 1 MiB blocks, split
  at C speed (``map(bytes.split, ...)``), and only rare lines (headers, blanks, bad rows) are looked
  at one by one; rows are transposed with ``zip`` and converted per counter column through a cache
  of parsed tokens; chunks of ~100,000 long rows are yielded as they fill, never the whole file.
  Chunks are built with ``model_construct``: validating every chunk with pydantic about doubles the
  parse time for lists whose types this module creates itself (the first chunk of every file is
  still validated in full, as a contract check).
* ``ts`` is set only when both Date and Time are printed (``-o DT``): a time without a date (``-o T``)
  still separates ticks but is not turned into an invented datetime.

Errors surface while ``ParsedArtefact.samples`` is iterated (the file is streamed).
"""

from __future__ import annotations

from pathlib import Path

from bench_ledger.importers._dmon_arrow import wide_chunks
from bench_ledger.importers._dmon_lines import CHUNK_ROWS, UNCONFIRMED
from bench_ledger.importers.base import ParseOptions, local_time_note, local_zone, refuse_cut_last_line
from bench_ledger.records import ParsedArtefact

__all__ = ["CHUNK_ROWS", "IMPORTER", "UNCONFIRMED", "DmonImporter"]


class DmonImporter:
    name = "nvidia-smi-dmon"
    description = "nvidia-smi dmon text: per-GPU counters per tick, units from the units line (R12, R13)"

    def sniff(self, head: bytes) -> str | None:
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if not first:
            return "empty file"
        if first[0] in "{[":
            return "starts with '{' or '[': JSON, not nvidia-smi dmon text"
        if not first.startswith("#"):
            return "first non-blank line is not a dmon column-names line ('# gpu ...')"
        if "gpu" not in first.lstrip("#").split():
            return "first '#' line has no 'gpu' column: not a dmon column-names line"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        refuse_cut_last_line(Path(path))  # dmon ends every line: a last line without one may be cut
        zone = local_zone(Path(path), options.time_zone)
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            samples=wide_chunks(Path(path), options.node, zone),  # wide blocks; the line reader from an irregular one
            note=(
                "units as printed by the units line, 'unconfirmed' where a header had none (R12); "
                "ts only where both Date and Time columns were printed (-o DT), else None; "
                f"Date and Time: {local_time_note(options.time_zone)}"
            ),
        )


IMPORTER = DmonImporter()
