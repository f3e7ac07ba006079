"""The line-by-line reader of ``nvidia-smi dmon`` text (:class:`LineReader`): every edge case and error
message of the ``nvidia-smi-dmon`` importer (:mod:`bench_ledger.importers.dmon`, whose docstring says why
it is built this way). The Arrow block reader (:mod:`bench_ledger.importers._dmon_arrow`) hands it the
rest of a file from the first block it does not take.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import ne, or_
from pathlib import Path
from typing import Any, NoReturn
from zoneinfo import ZoneInfo

from bench_ledger.errors import ParseError
from bench_ledger.gcpause import gc_paused
from bench_ledger.importers.base import to_utc
from bench_ledger.records import SampleColumns

__all__ = ["CHUNK_ROWS", "NOT_COUNTERS", "UNCONFIRMED", "LineReader"]

UNCONFIRMED = "unconfirmed"
CHUNK_ROWS = 100_000
_READ_BYTES = 1 << 20
_HASH = 35  # b"#"[0]
NOT_COUNTERS = frozenset({"gpu", "Date", "Time"})
_INF = float("inf")


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


class _Numbers(dict[bytes, "float | None"]):
    """Printed token -> :func:`_to_number`, once per distinct token: dmon prints few distinct values
    per column, so a C-speed dict lookup replaces most ``float()`` calls and the floats are shared."""

    def __missing__(self, token: bytes) -> float | None:
        value = _to_number(token)
        if len(self) < 1_000_000:
            self[token] = value
        return value


class LineReader:
    """Streams one file. Blocks of lines are split at C speed; only rare lines go through :meth:`_slow`."""

    def __init__(self, path: Path, node: str | None, zone: ZoneInfo | None = None) -> None:
        self.path, self.node, self.zone = path, node, zone
        self.cols: _ColumnSet | None = None
        self.header_line = 0
        self.k = -1  # fields a data row must have; -1 until a names line is read
        self.pending: tuple[list[str], int] | None = None  # names line awaiting its units line
        self.rows: list[list[bytes]] = []
        self.lines: list[int] = []
        self.out: list[SampleColumns] = []
        self.tick = -1
        self.last_key: tuple[bytes | None, bytes | None] | None = None
        self.seen: set[bytes] = set()
        self.last_ts: datetime | None = None
        self.numbers = _Numbers()
        self.validated = False

    def chunks(self, start: int = 0, base: int = 0) -> Iterator[SampleColumns]:
        """From byte ``start`` (a line start; ``base`` physical lines before it) to the end."""
        carry = b""
        with open(self.path, "rb") as fh:
            fh.seek(start)
            while True:
                data = fh.read(_READ_BYTES)
                buf = carry + data
                with gc_paused():
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
        with gc_paused():
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
                        self.path,
                        f"line {lineno}",
                        None,
                        f"units line has {len(tokens)} entries, the names line at line {at} has {len(names)}",
                    )
                self._apply(names, at, tokens)
            # any other '#' line is a comment: dmon never prints one, wrappers sometimes do
            return
        if self.pending is not None:  # data straight after a names line: no units line
            self._apply(*self.pending, None)
        if self.cols is None:
            raise ParseError(
                self.path,
                f"line {lineno}",
                None,
                "data row before any column names line ('# gpu ...' or '#Date Time gpu ...')",
            )
        if len(parts) != self.k:
            raise ParseError(
                self.path,
                f"line {lineno}",
                None,
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
                counters=tuple((i, n, unit_t[i]) for i, n in enumerate(names) if n not in NOT_COUNTERS),
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
        fields: dict[str, Any] = dict(
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
        """``20240104`` + ``13:54:35`` -> naive datetime: the node's local time as printed, or in UTC when the
        user declared the node's zone (dmon prints the host's local time and no zone)."""
        try:
            assert d is not None and t is not None and len(d) == 8
            hh, mm, ss = t.split(b":")
            local = datetime(int(d[:4]), int(d[4:6]), int(d[6:]), int(hh), int(mm), int(ss))
            return local if self.zone is None else to_utc(local, self.zone)
        except (AssertionError, ValueError, OverflowError):  # "13:54:2147483648": seconds past a C int
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


# -- the fast path: Arrow C++ does the splitting -------------------------------------------------
#
# Profiling the reader above on a day of 16 GPUs (1.4M lines) showed ~80% of the time in Python-level
# work per line (bytes.split, zip, float lookups, building 17M-entry lists) and the insert in
# turning those lists into Arrow arrays: it tops out near 240k lines/s. The fast path below reads
# 16 MiB blocks as one string column with pyarrow.csv (one row per physical line), splits them with
# Arrow's whitespace splitter, casts each counter column at C speed and hands the store a WIDE Arrow
