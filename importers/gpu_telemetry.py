"""GPU telemetry logs other than ``nvidia-smi dmon``: ``nvidia-smi --query-gpu ... --format=csv`` and ``dcgmi dmon``.

Both become hardware samples in long form (one row per GPU, tick and counter), the unit of each
counter exactly as the file states it, or ``unconfirmed`` (R12).

nvidia-smi CSV (``--query-gpu=timestamp,name,power.draw,... --format=csv [-l N]``):

* the header names the fields and their units (``power.draw [W]``); cells repeat the unit
  (``64.07 W``). A unit comes from the header, checked against every cell; with ``nounits`` there is
  neither, and the unit is ``unconfirmed``. ``[N/A]`` and ``[Not Supported]`` are no value.
* Text fields (``name``, ``uuid``, ``pci.bus_id``, ``pstate``, ``driver_version``...) are not counters.
* ``index`` is the GPU; without it every row is GPU 0 (a multi-GPU log without ``index`` cannot be
  separated: refused when a timestamp repeats). A tick is one ``-l`` round.
* ``timestamp`` (``YYYY/MM/DD HH:MM:SS.mmm``) is the host's local wall-clock time with no zone.
  With a zone the user declares (``--time-zone``, IANA name) it is converted to UTC, so it can be
  placed in a run's window; otherwise it is kept as printed and *unconfirmed* — the artefact's note
  says which, and a run-scoped hardware metric is n/a over such samples.
* ``power.draw`` is averaged by the driver over its window on current drivers, ``power.draw.instant``
  is one instant, ``power.draw.average`` the average: different counters, never substituted (R14).

dcgmi dmon (``dcgmi dmon -e 203,204,155,... -d <ms> [-c N]``):

* ``#Entity`` + field short names, then an ``ID`` line with units placed under their columns
  (``W``, ``C``; blank for fields DCGM prints no unit for: those stay ``unconfirmed``); rows are
  ``GPU <n> <values>``; ``N/A`` is no value; the header may repeat.
* There are no timestamps at all: sample *k* was taken at start + k x delay only if the user declares
  both (``--start`` and ``--interval``); otherwise the samples have ticks and no times (n/a).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from bench_ledger.errors import ParseError
from bench_ledger.importers._toolfiles import head_text
from bench_ledger.importers.base import local_time_note, local_zone, refuse_cut_last_line, to_utc
from bench_ledger.records import ParsedArtefact, SampleColumns

__all__ = ["IMPORTER", "IMPORTERS"]

UNCONFIRMED = "unconfirmed"
NO_VALUE = frozenset(
    {"[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[GPU is lost]", "[Insufficient Permissions]"}
)
_FIELD = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_CELL = re.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?:\s+(?P<unit>\S.*))?$")
_TS = "%Y/%m/%d %H:%M:%S.%f"
_TEXT_FIELDS = frozenset(
    {
        "timestamp",
        "name",
        "uuid",
        "pci.bus_id",
        "pci.bus",
        "serial",
        "driver_version",
        "vbios_version",
        "pstate",
        "compute_mode",
        "display_mode",
        "display_active",
        "persistence_mode",
        "gpu_name",
        "gpu_bus_id",
        "gpu_uuid",
        "index",
    }
)
KNOWN_QUERY_FIELDS = (
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
    "clocks.sm",
    "clocks.mem",
    "memory.free",
    "power.limit",
)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _Columns:
    """Long-form sample rows, appended one counter at a time."""

    def __init__(self, node: str | None) -> None:
        self.node = node
        self.cols: dict[str, list] = {k: [] for k in SampleColumns.model_fields}

    def add(
        self, line: int, gpu: int, tick: int, ts: datetime | None, counter: str, value: float | None, unit: str
    ) -> None:
        for key, v in (
            ("line", line),
            ("node", self.node),
            ("gpu", gpu),
            ("tick", tick),
            ("ts", ts),
            ("counter", counter),
            ("value", value),
            ("unit", unit),
        ):
            self.cols[key].append(v)

    def build(self) -> list[SampleColumns]:
        return [SampleColumns(**self.cols)] if self.cols["line"] else []


class NvidiaSmiCsvImporter:
    name = "nvidia-smi-csv"
    description = "nvidia-smi --query-gpu=... --format=csv (one row per GPU per sample, units in header and cells)"

    def sniff(self, head: bytes) -> str | None:
        first = head_text(head).split("\n", 1)[0].strip()
        names = [f.strip() for f in first.split(",")]
        if len(names) < 2:
            return "not a comma-separated header"
        matched = [_FIELD.match(n) for n in names]
        fields = [m["name"] for m in matched if m is not None]
        if len(fields) != len(names):
            return "header cells are not nvidia-smi query fields"
        if not any(
            f in KNOWN_QUERY_FIELDS or f.startswith(("power.", "utilization.", "memory.", "clocks.", "temperature."))
            for f in fields
        ):
            return "no nvidia-smi --query-gpu field (power.draw, utilization.gpu, memory.used...) in the header"
        return None

    def parse(self, path: Path, options) -> ParsedArtefact:
        tz = getattr(options, "time_zone", None)
        zone_info = local_zone(path, tz)
        refuse_cut_last_line(path)  # nvidia-smi ends every CSV line: a last line without one may be cut
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise ParseError(path, "line 1", None, "not UTF-8 text") from None
        header = [h.strip() for h in lines[0].split(",")]
        names, units = [], []
        for h in header:
            m = _FIELD.match(h)
            if m is None:
                raise ParseError(path, "line 1", h, "not an nvidia-smi query field")
            names.append(m["name"])
            units.append(m["unit"])
        if len(set(names)) != len(names):
            raise ParseError(path, "line 1", None, "a field repeats in the header")
        has_index = "index" in names
        out = _Columns(getattr(options, "node", None))
        seen_units: dict[str, set[str]] = {n: set() for n in names}
        counts = {"[N/A]": 0, "[Not Supported]": 0}
        gpu_names: set[str] = set()
        tick, last_ts = -1, None
        tick_gpus: set[int] = set()
        rows = []
        for lineno, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            cells = [c.strip() for c in line.split(", ")]
            if len(cells) != len(names):
                cells = [c.strip() for c in line.split(",")]
            if len(cells) != len(names):
                raise ParseError(path, f"line {lineno}", None, f"{len(cells)} cells, the header names {len(names)}")
            rows.append((lineno, cells))
        for lineno, cells in rows:
            row = dict(zip(names, cells, strict=True))
            ts = None
            if "timestamp" in row:
                try:
                    ts = datetime.strptime(row["timestamp"], _TS)
                except ValueError:
                    raise ParseError(
                        path, f"line {lineno}", "timestamp", f"not YYYY/MM/DD HH:MM:SS.mmm: {row['timestamp']!r}"
                    ) from None
                if zone_info is not None:
                    ts = to_utc(ts, zone_info)
            if has_index:
                try:
                    gpu = int(row["index"])
                except ValueError:
                    raise ParseError(path, f"line {lineno}", "index", f"not a GPU index: {row['index']!r}") from None
            else:
                gpu = 0
            if "name" in row:
                gpu_names.add(row["name"])
            # A tick is one sampling round: it starts when a GPU repeats (or, without index, on every row).
            if gpu in tick_gpus or tick < 0 or not has_index:
                if not has_index and ts is not None and ts == last_ts:
                    raise ParseError(
                        path,
                        f"line {lineno}",
                        "timestamp",
                        "two rows at one timestamp and no index column: several GPUs cannot be told apart",
                    )
                tick, tick_gpus = tick + 1, set()
            tick_gpus.add(gpu)
            last_ts = ts
            for name, unit, cell in zip(names, units, cells, strict=True):
                if name in _TEXT_FIELDS:
                    continue
                if cell in NO_VALUE or cell.startswith("[") and cell.endswith("]"):
                    counts[cell] = counts.get(cell, 0) + 1
                    out.add(lineno, gpu, tick, ts, name, None, unit or UNCONFIRMED)
                    continue
                m = _CELL.match(cell)
                if m is None:
                    raise ParseError(path, f"line {lineno}", name, f"not a number: {cell!r}")
                cell_unit = m["unit"]
                if unit is not None and cell_unit is not None and cell_unit != unit:
                    raise ParseError(
                        path, f"line {lineno}", name, f"cell unit {cell_unit!r} differs from the header's [{unit}]"
                    )
                if cell_unit is not None:
                    seen_units[name].add(cell_unit)
                out.add(lineno, gpu, tick, ts, name, float(m["num"]), unit or cell_unit or UNCONFIRMED)
        missing = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        note = (
            f"timestamps: {local_time_note(tz)}"
            + (f"; GPU name {', '.join(sorted(gpu_names))}" if gpu_names else "")
            + (f"; no value: {missing}" if missing else "")
            + ("" if has_index else "; no index column: every row is GPU 0")
        )
        return ParsedArtefact(
            format=self.name, format_version="nounits" if not any(units) else "csv", samples=out.build(), note=note
        )


class DcgmiDmonImporter:
    name = "dcgmi-dmon"
    description = "DCGM dcgmi dmon text (#Entity field short names, unit row, no timestamps)"

    def sniff(self, head: bytes) -> str | None:
        text = head_text(head)
        if not text.startswith("#Entity"):
            return "does not start with '#Entity' (dcgmi dmon header)"
        return None

    def parse(self, path: Path, options) -> ParsedArtefact:
        start = getattr(options, "start", None)
        interval = getattr(options, "interval_s", None)
        refuse_cut_last_line(path)  # dcgmi ends every line: a last line without one may be cut
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise ParseError(path, "line 1", None, "not UTF-8 text") from None
        out = _Columns(getattr(options, "node", None))
        names: list[str] = []
        units: list[str] = []
        expect_units = False
        tick = -1
        tick_gpus: set[int] = set()
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if line.startswith("#Entity"):
                names, spans = _header(line)
                units, expect_units = [UNCONFIRMED] * len(names), True
                self._spans = spans
                continue
            if expect_units and line.startswith("ID"):
                units = [_unit_at(line, a, b) or UNCONFIRMED for a, b in self._spans]
                expect_units = False
                continue
            expect_units = False
            if not names:
                raise ParseError(path, f"line {lineno}", None, "a sample row before the #Entity header")
            toks = line.split()
            if len(toks) < 2 or not toks[1].isdigit():
                raise ParseError(path, f"line {lineno}", "Entity", f"expected '<entity> <id>', got {line[:30]!r}")
            entity, ident, values = toks[0], int(toks[1]), toks[2:]
            if entity != "GPU":
                raise ParseError(path, f"line {lineno}", "Entity", f"entity {entity!r}: only GPU rows are read")
            if len(values) != len(names):
                raise ParseError(path, f"line {lineno}", None, f"{len(values)} values, the header names {len(names)}")
            if ident in tick_gpus or tick < 0:
                tick, tick_gpus = tick + 1, set()
            tick_gpus.add(ident)
            ts = start + timedelta(seconds=interval * tick) if start is not None and interval is not None else None
            for name, unit, tok in zip(names, units, values, strict=True):
                if tok in NO_VALUE:
                    out.add(lineno, ident, tick, ts, name, None, unit)
                    continue
                value = _number(tok)
                if value is None:
                    raise ParseError(path, f"line {lineno}", name, f"not a number: {tok!r}")
                out.add(lineno, ident, tick, ts, name, value, unit)
        if not names:
            raise ParseError(path, "line 1", None, "no #Entity header")
        when = (
            f"sample k at {start:%Y-%m-%d %H:%M:%S} + k x {interval} s, as declared by the user"
            if start is not None and interval is not None
            else "no timestamps in the file and no declared start and interval: sample times are n/a (ticks only)"
        )
        return ParsedArtefact(
            format=self.name, format_version=None, samples=out.build(), note=f"{when}; fields: {', '.join(names)}"
        )


def _header(line: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Field names after ``#Entity`` and the character span each one owns (up to the next name)."""
    found = [(m.start(), m.group()) for m in re.finditer(r"\S+", line)][1:]
    spans = []
    for i, (pos, _) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else 10**6
        spans.append((pos, end))
    return [n for _, n in found], spans


def _unit_at(line: str, a: int, b: int) -> str | None:
    text = line[a:b].strip() if a < len(line) else ""
    return text or None


IMPORTER = NvidiaSmiCsvImporter()
IMPORTERS = (IMPORTER, DcgmiDmonImporter())
