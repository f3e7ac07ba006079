"""NVIDIA AIPerf ``profile_export_aiperf.csv``: the aggregate statistics of one run, as a table.

Shape (AIPerf's CSV exporter): two tables separated by a blank line. The first has the header
``Metric,avg,min,max,p1,...,p99,std`` and one row per distribution metric; the second
``Metric,Value`` and one row per scalar metric (benchmark duration, request count, totals,
throughputs). A metric cell is AIPerf's display header with the unit in parentheses
(``Time to First Token (ms)``); every number is printed with two decimals, so it is a rounded copy
of the statistic the JSON export holds exactly (R11: the tolerance is half a unit in the last place).

Keys: AIPerf's display headers are stable across versions, its metric tags are not (``ttft`` and
``osl`` became ``time_to_first_token`` and ``output_sequence_length``). A key is the header in snake
case, which is the tag of AIPerf's current metrics, except for the aggregate metrics whose tags are
abbreviations (:data:`TAGS`); a scalar row is AIPerf's one-value MetricResult, kept as ``<tag>.avg``
like the JSON export writes it. Everything is ``reported`` with its unit as printed.

The file has no request records; it pairs with the ``profile_export.jsonl`` and the JSON export of
the same artifact folder (:func:`bench_ledger.importers.aiperf.pairing`) by ``request_count`` +
``error_request_count``.
"""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import head_text, kind_for_unit, published
from bench_ledger.importers.aiperf import pairing
from bench_ledger.importers.base import ParseOptions, refuse_cut_last_line
from bench_ledger.records import Capture, ParsedArtefact, ParsedRun, Published, RunInfo
from bench_ledger.tools import Tool

__all__ = ["IMPORTER"]

STATS_HEADER = ("Metric", "avg", "min", "max")  # then percentiles p1..p99 and std, as the exporter writes them
VALUE_HEADER = ("Metric", "Value")
_LABEL = re.compile(r"^(?P<name>[^()]+?)\s*(?:\((?P<unit>[^()]*)\))?$")
_STAT = re.compile(r"^(avg|min|max|std|p\d+(?:\.\d+)?)$")
# columns of newer exporters (aiperf/common/constants.py STAT_KEYS: avg, min, max, sum, p1..p99, std; an empty
# cell where a statistic is None), and the card columns before "Metric" of their GPU telemetry table
NEWER_STATS = ("sum",)
GPU_COLUMNS = (
    ("Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID"),
    ("Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID", "Platform"),
)
GPU_TRAILING = ("Hostname", "Namespace", "Pod Name")  # the telemetry table's optional columns after its statistics
_COLUMN = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,63}$")  # a statistic's column name a later version may add
# AIPerf aggregate metrics whose tag is not their header in snake case (aiperf/metrics/types/*.py)
TAGS = {
    "total_input_sequence_length": "total_isl",
    "total_output_sequence_length": "total_osl",
    "maximum_response_timestamp": "max_response_timestamp",
    "minimum_request_timestamp": "min_request_timestamp",
}
SUCCESS_RULE = "no request records in this file; AIPerf counts a request as failed when it has an error"


def _tag(name: str) -> str:
    snake = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return TAGS.get(snake, snake)


def _rows(path: Path, text: str):
    """The CSV rows of ``text``; a row the csv module cannot read (a field over its 128 KiB limit, a NUL) is a
    ParseError naming its line."""
    reader = csv.reader(io.StringIO(text))
    try:
        yield from reader
    except csv.Error as exc:
        raise ParseError(path, f"line {reader.line_num}", None, f"not a CSV row: {exc}") from None


class AiperfCsvImporter:
    name = "aiperf-csv"
    description = "NVIDIA AIPerf profile_export_aiperf.csv (aggregate statistics, two decimals)"

    def sniff(self, head: bytes) -> str | None:
        lines = head_text(head).splitlines()
        first = tuple(c.strip() for c in lines[0].split(",")) if lines else ()
        if first[:4] != STATS_HEADER and first != VALUE_HEADER:
            return "first line is not AIPerf's 'Metric,avg,min,max,...' or 'Metric,Value' header"
        if first[:4] == STATS_HEADER and not {"p1", "p5", "std"} <= set(first):
            return "statistics header without p1, p5 and std: not AIPerf's CSV exporter (GenAI-Perf writes no p1/p5)"
        if not any(_LABEL.match(ln.split(",", 1)[0]) and "(" in ln.split(",", 1)[0] for ln in lines[1:3]):
            return "no 'Header (unit)' metric cells"
        return None

    def parse(self, path: Path, options: ParseOptions) -> ParsedArtefact:
        refuse_cut_last_line(Path(path))
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParseError(path, f"byte {exc.start}", None, "not UTF-8 text") from None
        found: list[Published] = []
        header: tuple[str, ...] | None = None
        at = 0  # the column of "Metric": the GPU telemetry table names its card in the columns before it
        values: dict[str, str] = {}
        unknown: dict[str, int] = {}  # statistic columns this importer does not know -> their first line
        for lineno, row in enumerate(_rows(path, text), start=1):
            cells = tuple(c.strip() for c in row)
            if not cells or cells == ("",):
                header = None  # a blank line ends a table
                continue
            if header is None:
                at = cells.index("Metric") if "Metric" in cells[:8] else -1
                names = cells[at + 1 :]
                if (
                    at < 0
                    or cells[:at] not in ((), *GPU_COLUMNS)
                    or not names
                    or (names != ("Value",) and names[:3] != STATS_HEADER[1:])
                ):
                    raise ParseError(
                        path,
                        f"line {lineno}",
                        "Metric",
                        f"expected a table header 'Metric,avg,...' or 'Metric,Value', got {','.join(cells)[:60]!r}",
                    )
                for name in names:
                    if name in ("Value", *NEWER_STATS) or _STAT.match(name) or (at and name in GPU_TRAILING):
                        continue
                    if not _COLUMN.match(name) or names.count(name) > 1:
                        raise ParseError(
                            path, f"line {lineno}", name or None, f"statistic column {name!r} is not a column name"
                        )
                    unknown.setdefault(name, lineno)
                header = cells
                continue
            if len(cells) != len(header):
                raise ParseError(
                    path, f"line {lineno}", cells[at] or None, f"{len(cells)} cells, the table header has {len(header)}"
                )
            label = _LABEL.match(cells[at])
            if label is None or not label["name"].strip():
                raise ParseError(path, f"line {lineno}", "Metric", f"expected 'Header (unit)', got {cells[at]!r}")
            tag, unit = _tag(label["name"]), label["unit"]
            ids = [
                f"{h} {c}"
                for h, c in zip(header, cells, strict=True)
                if h in GPU_COLUMNS[1] + GPU_TRAILING and h != "Endpoint"
            ]
            card = f"gpu_telemetry[{cells[0]} {' '.join(ids)}]." if at else ""
            for stat, cell in zip(header[at + 1 :], cells[at + 1 :], strict=True):
                if at and stat in GPU_TRAILING:
                    continue  # a card's host, namespace or pod: part of its key
                key = f"{card}{tag}.{'avg' if stat == 'Value' else stat}"
                where = f"line {lineno} {header[at]}={cells[at]!r} {stat}"
                kind = kind_for_unit(tag, unit) if stat not in unknown else None
                if cell == "":  # AIPerf prints an empty cell for a statistic it has no value of (None)
                    found.append(
                        Published(
                            key=key,
                            text="",
                            unit=unit,
                            quantity_kind=kind,
                            locator=where,
                            flag="n/a",
                            na_reason="the tool printed an empty cell (no value)",
                        )
                    )
                    continue
                try:
                    Decimal(cell)
                except InvalidOperation:
                    raise ParseError(path, f"line {lineno}", stat, f"expected a number, got {cell!r}") from None
                note = (
                    f"statistic column {stat!r}: not known to this importer, kept as printed"
                    if stat in unknown
                    else None
                )
                p = published(key, cell, locator=where, unit=unit, kind=kind, note=note)
                assert p is not None  # a number's text always gives a row
                found.append(p)
                if not at:
                    values[key] = cell
        if not found:
            raise ParseError(path, None, None, "no metric rows")
        requests = _whole(values.get("request_count.avg"))
        errors = _whole(values.get("error_request_count.avg"))
        run = ParsedRun(
            info=RunInfo(
                label=f"aiperf {path.name.removesuffix('.csv')}",
                tool=Tool.AIPERF,
                request_count=requests,
                locator="$",
                pairing=pairing(
                    path, "profile_export_aiperf.csv", None if requests is None else requests + (errors or 0)
                ),
            ),
            capture=Capture(fields=[], record_count=0, token_source="unknown", success_rule=SUCCESS_RULE),
            published=found,
        )
        note = "numbers printed with two decimals: rounded copies of the JSON export's statistics"
        notice = None
        if unknown:
            cols = ", ".join(f"{k!r} (line {v})" for k, v in unknown.items())
            notice = (
                f"statistic column(s) {cols} not known to this importer (a newer AIPerf?): kept as reported "
                "values <metric>.<column> with the unit of their row, not checked"
            )
            note += f"; {notice}"
        return ParsedArtefact(format=self.name, format_version=None, runs=[run], note=note, notice=notice)


def _whole(text: str | None) -> int | None:
    """A count printed as '89.00' is 89; anything else (absent, a fraction) is not a count."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


IMPORTER = AiperfCsvImporter()
