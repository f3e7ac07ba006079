"""``nvidia-smi dmon`` text -> hardware samples in long form (formats.md section 7).

Why it is built this way:

* Columns come from the names line (``# gpu pwr ...`` / ``#Date Time gpu ...``) and units from the
  units line that follows it, never from positions: ``-s`` and driver versions change the column set,
  and a header may repeat or change mid-file (a changed header starts a new column set).
* A units line that is present gives each column's unit exactly as printed; without one every unit is
  ``"unconfirmed"`` (R12) and nothing downstream may convert it.
* The counters keep their meaning (R13): :data:`COUNTER_MEANING` says what each one measures, e.g.
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

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from operator import ne, or_
from pathlib import Path
from typing import NoReturn

from importers.base import ParseOptions
from ledger.errors import ParseError
from ledger.records import ParsedArtefact, SampleColumns

UNCONFIRMED = "unconfirmed"
CHUNK_ROWS = 100_000
_READ_BYTES = 1 << 20
_HASH = 35  # b"#"[0]
_NOT_COUNTERS = frozenset({"gpu", "Date", "Time"})
_INF = float("inf")

COUNTER_MEANING: dict[str, str] = {
    "pwr": "board power draw of the card at the sample (W); one card, one instant (R14)",
    "gtemp": "GPU die temperature (C)",
    "mtemp": "HBM/memory temperature (C); '-' on cards without a memory sensor",
    "sm": "share of the sample period in which at least one kernel was running on the GPU: activity "
    "time, NOT SM occupancy, SM active, tensor-core utilisation or MFU (R13)",
    "mem": "share of the sample period in which device memory was being read or written (memory "
    "controller busy time), NOT memory bandwidth utilisation (R13)",
    "enc": "share of time the video encoder was busy (%)",
    "dec": "share of time the video decoder was busy (%)",
    "jpg": "share of time the JPEG decoder was busy (%)",
    "ofa": "share of time the optical flow accelerator was busy (%)",
    "fb": "frame buffer (device) memory in use, in the unit the units line prints (MB); a device "
    "memory figure, not a model allocation nor a weights file size (R1)",
    "bar1": "BAR1 (host-mapped) memory in use, unit as printed (MB)",
    "ccpm": "confidential-compute protected memory in use, unit as printed (MB)",
    "rxpci": "PCIe receive throughput (MB/s)",
    "txpci": "PCIe transmit throughput (MB/s)",
    "mclk": "memory clock (MHz)",
    "pclk": "graphics/processor clock (MHz)",
    "pviol": "share of time clocks were held down by the power limit (%)",
    "tviol": "thermal violation: clocks held down by temperature (flag or %, as printed)",
    "sbecc": "single-bit ECC errors in the interval (count)",
    "dbecc": "double-bit ECC errors in the interval (count)",
    "pci": "PCIe replay errors in the interval (count)",
}

# The quantity kind (ledger.kinds.KINDS) of each counter: values of two kinds never mix (R1, R13).
COUNTER_KIND: dict[str, str] = {
    "pwr": "power",
    "gtemp": "temperature",
    "mtemp": "temperature",
    "sm": "activity_time_percent",
    "mem": "memory_busy_percent",
    "enc": "utilization_percent",
    "dec": "utilization_percent",
    "jpg": "utilization_percent",
    "ofa": "utilization_percent",
    "fb": "device_memory",
    "bar1": "device_memory",
    "ccpm": "device_memory",
    "rxpci": "bandwidth",
    "txpci": "bandwidth",
    "mclk": "clock_frequency",
    "pclk": "clock_frequency",
    "pviol": "ratio",
    "tviol": "other",
    "sbecc": "count",
    "dbecc": "count",
    "pci": "count",
}


def _header_tokens(raw: bytes) -> list[str]:
    """Tokens of a '#' line without the '#': '# gpu pwr' and '#Date Time gpu' -> names."""
    return raw.decode("utf-8", errors="replace").lstrip().lstrip("#").split()


def _hash_lines(buf: bytes) -> list[int]:
    """Indices of the lines of ``buf`` that hold a '#' (headers are rare: a few finds per block)."""
    found: list[int] = []
    pos, line, counted = buf.find(b"#"), 0, 0
    while pos >= 0:
        line += buf.count(b"\n", counted, pos)
        counted = pos
        if not found or found[-1] != line:
            found.append(line)
        pos = buf.find(b"#", pos + 1)
    return found


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while a block is split: millions of short-lived lists would otherwise
    trigger thousands of collections (about a quarter of the parse time). Never held across a yield."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class _ColumnSet:
    """One names line (and its units line, if any) in force."""

    names: tuple[str, ...]
    units: tuple[str, ...]
    gpu: int
    date: int | None
    time: int | None
    counters: tuple[tuple[int, str, str], ...]  # (column index, name, unit)


def _to_number(token: bytes) -> float | None:
    """'-' (unavailable) -> None; a number -> float; anything else -> ValueError."""
    if token == b"-":
        return None
    value = float(token)
    if value != value or value in (_INF, -_INF):  # float() takes 'nan'/'inf'; dmon never prints them
        raise ValueError(token)
    return value


class _Numbers(dict):  # type: ignore[type-arg]
    """Printed token -> :func:`_to_number`, once per distinct token: dmon prints few distinct values
    per column, so a C-speed dict lookup replaces most ``float()`` calls and the floats are shared."""

    def __missing__(self, token: bytes) -> float | None:
        value = _to_number(token)
        if len(self) < 1_000_000:
            self[token] = value
        return value


class _Reader:
    """Streams one file. Blocks of lines are split at C speed; only rare lines go through :meth:`_slow`."""

    def __init__(self, path: Path, node: str | None) -> None:
        self.path, self.node = path, node
        self.cols: _ColumnSet | None = None
        self.header_line = 0
        self.k = -1  # fields a data row must have; -1 until a names line is read
        self.pending: tuple[list[str], int] | None = None  # names line awaiting its units line
        self.rows: list[list[bytes]] = []
        self.lines: list[int] = []
        self.out: list[SampleColumns] = []
        self.tick, self.last_key, self.seen = -1, None, set()  # type: ignore[var-annotated]
        self.last_ts: datetime | None = None
        self.numbers = _Numbers()
        self.validated = False

    def chunks(self) -> Iterator[SampleColumns]:
        base = 0  # physical lines before the current block
        carry = b""
        with open(self.path, "rb") as fh:
            while True:
                data = fh.read(_READ_BYTES)
                buf = carry + data
                with _gc_paused():
                    if data:
                        block = buf.split(b"\n")
                        carry = block.pop()
                        buf = buf[: len(buf) - len(carry)]
                    else:
                        block = [carry] if carry else []
                    self._block(block, list(map(bytes.split, block)), _hash_lines(buf), base)
                    base += len(block)
                    limit = self._lines_per_chunk()
                    while len(self.rows) >= limit:
                        self._flush(limit)
                yield from self.out
                self.out.clear()
                if not data:
                    break
        with _gc_paused():
            if self.pending is not None:  # a names line at the very end of the file
                self._apply(*self.pending, None)
            while self.rows:
                self._flush(self._lines_per_chunk())
        yield from self.out
        self.out.clear()

    def _block(self, block: list[bytes], parts: list[list[bytes]], hashes: list[int], base: int) -> None:
        """Take runs of ordinary data rows whole; hand every other line to :meth:`_slow`.

        Special lines are those with another field count than the header in force (blank lines,
        '# gpu' headers, malformed rows) and those holding a '#' (``hashes``); they are located
        at C speed, so the per-line cost of ordinary rows is one ``split`` and nothing in Python.
        """
        lens = list(map(len, parts))
        lo: int | None = 0
        while lo is not None:
            lo = self._run(block, parts, lens, hashes, base, lo)

    def _run(
        self, block: list[bytes], parts: list[list[bytes]], lens: list[int], hashes: list[int], base: int, lo: int
    ) -> int | None:
        """Lines ``lo``.. under the column set in force; where a new set comes in, its first line."""
        k, n = self.k, len(block)
        special = {x for x in hashes if x >= lo}
        for count in set(lens[lo:]) - {k}:
            i = lo
            try:
                while True:
                    i = lens.index(count, i) + 1
                    special.add(i - 1)
            except ValueError:
                pass
        i = lo
        for s in sorted(special) + [n]:
            if s < i:
                continue
            while self.pending is not None and i < s:  # the line after a names line decides its units
                self._slow(block[i], parts[i], base + i + 1)
                i += 1
            if self.k != k:
                return i
            if s > i:
                self.rows += parts[i:s]
                self.lines += range(base + i + 1, base + s + 1)
            if s < n:
                self._slow(block[s], parts[s], base + s + 1)
                if self.k != k:
                    return s + 1
            i = s + 1
        return None

    # -- rare lines ----------------------------------------------------------------------------

    def _slow(self, raw: bytes, parts: list[bytes], lineno: int) -> None:
        if not parts:
            return  # blank line
        if parts[0][0] == _HASH:
            tokens = _header_tokens(raw)
            if "gpu" in tokens:
                if self.pending is not None:  # two names lines in a row: the first had no units
                    self._apply(*self.pending, None)
                self.pending = (tokens, lineno)
            elif self.pending is not None:
                names, at = self.pending
                if len(tokens) != len(names):
                    raise ParseError(
                        self.path, f"line {lineno}", None,
                        f"units line has {len(tokens)} entries, the names line at line {at} has {len(names)}",
                    )
                self._apply(names, at, tokens)
            # any other '#' line is a comment: dmon never prints one, wrappers sometimes do
            return
        if self.pending is not None:  # data straight after a names line: no units line
            self._apply(*self.pending, None)
        if self.cols is None:
            raise ParseError(
                self.path, f"line {lineno}", None,
                "data row before any column names line ('# gpu ...' or '#Date Time gpu ...')",
            )
        if len(parts) != self.k:
            raise ParseError(
                self.path, f"line {lineno}", None,
                f"expected {self.k} columns from the header at line {self.header_line}, found {len(parts)}",
            )
        self.rows.append(parts)
        self.lines.append(lineno)

    def _apply(self, names: list[str], at: int, units: list[str] | None) -> None:
        """Put a header in force; a different column set closes the rows read under the old one."""
        self.pending = None
        unit_t = tuple(units) if units is not None else (UNCONFIRMED,) * len(names)
        if self.cols is None or self.cols.names != tuple(names) or self.cols.units != unit_t:
            while self.rows:
                self._flush(self._lines_per_chunk())
            if len(set(names)) != len(names):
                raise ParseError(self.path, f"line {at}", None, f"column names repeat: {' '.join(names)}")
            self.cols = _ColumnSet(
                names=tuple(names),
                units=unit_t,
                gpu=names.index("gpu"),
                date=names.index("Date") if "Date" in names else None,
                time=names.index("Time") if "Time" in names else None,
                counters=tuple((i, n, unit_t[i]) for i, n in enumerate(names) if n not in _NOT_COUNTERS),
            )
        self.header_line, self.k = at, len(names)

    def _lines_per_chunk(self) -> int:
        counters = len(self.cols.counters) if self.cols is not None else 1
        return max(1, CHUNK_ROWS // max(1, counters))

    # -- building a chunk ----------------------------------------------------------------------

    def _flush(self, limit: int) -> None:
        rows, lines = self.rows[:limit], self.lines[:limit]
        del self.rows[:limit], self.lines[:limit]
        if rows:
            self.out.append(self._build(rows, lines))

    def _build(self, rows: list[list[bytes]], lines: list[int]) -> SampleColumns:
        cs = self.cols
        assert cs is not None
        cols = list(zip(*rows))
        try:
            gpus = list(map(int, cols[cs.gpu]))
        except ValueError:
            self._raise_bad(cols[cs.gpu], lines, "gpu", allow_dash=False)
        ticks, stamps = self._ticks(cols, lines)
        n, width = len(rows), len(cs.counters)
        counter: list[str] = []
        unit: list[str] = []
        value: list[float | None] = []
        lookup = self.numbers.__getitem__
        for idx, name, u in cs.counters:
            counter += [name] * n
            unit += [u] * n
            try:
                value += map(lookup, cols[idx])
            except ValueError:
                self._raise_bad(cols[idx], lines, name, allow_dash=True)
        fields = dict(
            line=lines * width,
            node=[self.node] * (n * width),
            gpu=gpus * width,
            tick=ticks * width,
            ts=stamps * width,
            counter=counter,
            value=value,
            unit=unit,
        )
        if not self.validated:  # the first chunk goes through pydantic: a check of this module's types
            self.validated = True
            return SampleColumns(**fields)
        return SampleColumns.model_construct(**fields)

    def _ticks(self, cols: list[tuple[bytes, ...]], lines: list[int]) -> tuple[list[int], list[datetime | None]]:
        """A new tick when the printed date/time changes or a GPU repeats within the current tick.

        Runs of lines with one printed time are found at C speed and checked for repeated GPUs with
        a set; only runs that repeat a GPU (or files without a time column) are walked line by line.
        """
        cs = self.cols
        assert cs is not None
        gcol, n = cols[cs.gpu], len(lines)
        dates = cols[cs.date] if cs.date is not None else None
        times = cols[cs.time] if cs.time is not None else None
        if dates is None and times is None:
            starts = [0]
        else:
            first = times if times is not None else dates
            assert first is not None
            change = list(map(ne, first[1:], first[:-1]))
            if dates is not None and times is not None and dates.count(dates[0]) != n:  # midnight
                change = list(map(or_, change, map(ne, dates[1:], dates[:-1])))
            starts = [0]
            i = 0
            while True:
                try:
                    i = change.index(True, i) + 1
                except ValueError:
                    break
                starts.append(i)
        ticks: list[int] = []
        stamps: list[datetime | None] = []
        tick, last_key, seen, ts = self.tick, self.last_key, self.seen, self.last_ts
        for a, b in zip(starts, starts[1:] + [n]):
            key = (dates[a] if dates else None, times[a] if times else None)
            if key != last_key:
                last_key, tick, seen = key, tick + 1, set()
                ts = self._timestamp(key[0], key[1], lines[a]) if dates and times else None
            run = gcol[a:b]
            fresh = set(run)
            if len(fresh) == b - a and not (fresh & seen):
                seen |= fresh
                ticks += [tick] * (b - a)
            else:
                for g in run:
                    if g in seen:
                        tick, seen = tick + 1, set()
                    seen.add(g)
                    ticks.append(tick)
            stamps += [ts] * (b - a)
        self.tick, self.last_key, self.seen, self.last_ts = tick, last_key, seen, ts
        return ticks, stamps

    def _timestamp(self, d: bytes | None, t: bytes | None, lineno: int) -> datetime:
        """``20240104`` + ``13:54:35`` -> naive datetime, the node's local time as printed."""
        try:
            assert d is not None and t is not None and len(d) == 8
            hh, mm, ss = t.split(b":")
            return datetime(int(d[:4]), int(d[4:6]), int(d[6:]), int(hh), int(mm), int(ss))
        except (AssertionError, ValueError):
            text = f"{(d or b'').decode(errors='replace')} {(t or b'').decode(errors='replace')}"
            problem = f"not a YYYYMMDD HH:MM:SS time: {text!r}"
            raise ParseError(self.path, f"line {lineno}", "Date/Time", problem) from None

    def _raise_bad(self, col: Sequence[bytes], lines: list[int], name: str, allow_dash: bool) -> NoReturn:
        """Find the first value of a column that is not a number ('-' allowed for counters)."""
        for v, lineno in zip(col, lines):
            try:
                _to_number(v) if allow_dash else int(v)
            except ValueError:
                text = v.decode("utf-8", errors="replace")
                raise ParseError(self.path, f"line {lineno}", name, f"not a number: {text!r}") from None
        raise ParseError(self.path, f"line {lines[0]}", name, "not a number")  # not reached


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
        reader = _Reader(Path(path), options.node)
        return ParsedArtefact(
            format=self.name,
            format_version=None,
            samples=reader.chunks(),
            note=(
                "units as printed by the units line, 'unconfirmed' where a header had none (R12); "
                "ts only where both Date and Time columns were printed (-o DT), else None"
            ),
        )


IMPORTER = DmonImporter()
