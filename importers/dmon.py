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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import ne, or_
from pathlib import Path
from typing import Any, NoReturn
from zoneinfo import ZoneInfo

from bench_ledger.errors import ParseError
from bench_ledger.gcpause import gc_paused
from bench_ledger.importers.base import ParseOptions, local_time_note, local_zone, refuse_cut_last_line, to_utc
from bench_ledger.records import ParsedArtefact, SampleColumns

UNCONFIRMED = "unconfirmed"
CHUNK_ROWS = 100_000
_READ_BYTES = 1 << 20
_HASH = 35  # b"#"[0]
_NOT_COUNTERS = frozenset({"gpu", "Date", "Time"})
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


class _Reader:
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
# table (records.WideSamples) that the store unpivots. Python only looks at the '#' lines (a few
# per thousand). Any block that is not plain ``-o DT`` data under the header in force (header change,
# no units line, bad field count, a non-number, a GPU repeating within a tick, ...) is handed,
# from its first byte, to the reader above with the state reached so far, so every error message
# and every edge case stays exactly that reader's.

_WIDE_BLOCK = 16 << 20
_ONE_COLUMN = None


class _Irregular(Exception):
    """This block needs the line-by-line reader."""


def _csv_options():  # built lazily: importing pyarrow.csv costs ~0.1 s
    import pyarrow as pa
    import pyarrow.csv as pacsv

    return (
        pacsv.ReadOptions(autogenerate_column_names=True, use_threads=True, block_size=1 << 22),
        pacsv.ParseOptions(
            delimiter="\x1f",
            quote_char=False,
            escape_char=False,
            double_quote=False,
            newlines_in_values=False,
            ignore_empty_lines=False,
        ),
        pacsv.ConvertOptions(
            column_types={"f0": pa.string()}, strings_can_be_null=False, quoted_strings_can_be_null=False
        ),
    )


class _WideReader:
    def __init__(self, path: Path, node: str | None, zone: ZoneInfo | None = None) -> None:
        self.path, self.node, self.zone = path, node, zone
        self.names: tuple[str, ...] | None = None
        self.units: tuple[str, ...] | None = None
        self.header_line = 0
        self.pending: tuple[list[str], int] | None = None
        self.tick = -1
        self.last_key: tuple[bytes, bytes] | None = None
        self.seen: set[bytes] = set()
        self.last_ts: datetime | None = None

    def _headers(self, rows: list[tuple[int, str]], blank_after: dict[int, bool], base: int) -> dict[str, Any]:
        """Walk the block's '#' lines; only an unchanged names+units pair (or the first one) is regular."""
        st: dict[str, Any] = {
            "names": self.names,
            "units": self.units,
            "header_line": self.header_line,
            "pending": self.pending,
        }
        for i, text in rows:
            tokens = text.lstrip().lstrip("#").split()
            if "gpu" in tokens:
                if st["pending"] is not None or not blank_after.get(i, True):
                    raise _Irregular  # two names lines, or data straight after one: units unconfirmed
                st["pending"] = (tokens, base + i + 1)
            elif st["pending"] is not None:
                names, at = st["pending"]
                if len(tokens) != len(names):
                    raise _Irregular
                if st["names"] is not None and (tuple(names) != st["names"] or tuple(tokens) != st["units"]):
                    raise _Irregular  # a changed column set: the reader above closes and reopens chunks
                if len(set(names)) != len(names) or not {"Date", "Time", "gpu"} <= set(names):
                    raise _Irregular
                st["names"], st["units"], st["header_line"], st["pending"] = tuple(names), tuple(tokens), at, None
        return st

    def block(self, buf: bytes, base: int):
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
        from bench_ledger.records import WideSamples

        if b"\r" in buf:
            raise _Irregular
        ro, po, co = _csv_options()
        try:
            text = pacsv.read_csv(pa.py_buffer(buf), ro, po, co).column(0).combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise _Irregular from None
        n = len(text)
        if n != buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1):
            raise _Irregular
        trimmed = pc.utf8_trim_whitespace(text)
        blank = pc.equal(trimmed, "")
        hashed = pc.match_substring(text, "#")
        special = pc.or_(blank, hashed)
        hidx = pc.indices_nonzero(hashed).to_pylist()
        if hidx:
            special_list = special.to_pylist() if len(hidx) > 0 else None
            # for each '#' line: is the next non-blank line a '#' line (True) or data (False)?
            blank_l = blank.to_pylist()
            hset = set(hidx)
            after: dict[int, bool] = {}
            for i in hidx:
                j = i + 1
                while j < n and blank_l[j]:
                    j += 1
                after[i] = True if j >= n else (j in hset)
            del special_list
            st = self._headers(list(zip(hidx, text.take(pa.array(hidx)).to_pylist())), after, base)
        else:
            st = {"names": self.names, "units": self.units, "header_line": self.header_line, "pending": self.pending}
        keep = pc.invert(special)
        data = trimmed.filter(keep)
        m = len(data)
        if m and (st["names"] is None or st["pending"] is not None):
            raise _Irregular
        out = None
        if m:
            names, units = st["names"], st["units"]
            k = len(names)
            parts = pc.utf8_split_whitespace(data)
            if pc.min_max(pc.list_value_length(parts)).as_py() != {"min": k, "max": k}:
                raise _Irregular
            col = {nm: pc.list_element(parts, j) for j, nm in enumerate(names)}
            try:
                gpu = pc.cast(col["gpu"], pa.int32())
                date, tm = col["Date"], col["Time"]
                if pc.any(pc.not_equal(pc.utf8_length(date), 8)).as_py():
                    raise _Irregular
                ts = pc.strptime(pc.binary_join_element_wise(date, tm, " "), format="%Y%m%d %H:%M:%S", unit="us")
                if self.zone is not None:  # each distinct second converted once, as the line reader converts it
                    seconds = pc.unique(ts)
                    utc = pa.array([to_utc(t, self.zone) for t in seconds.to_pylist()], pa.timestamp("us"))
                    ts = pc.take(utc, pc.index_in(ts, value_set=seconds))
                values = {}
                for nm in names:
                    if nm in _NOT_COUNTERS:
                        continue
                    v = col[nm]
                    v = pc.cast(pc.if_else(pc.equal(v, "-"), pa.scalar(None, pa.string()), v), pa.float64())
                    if pc.any(pc.invert(pc.is_finite(v))).as_py():
                        raise _Irregular
                    values[nm] = v
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise _Irregular from None
            # ticks: a new tick where the printed date/time changes; a GPU must not repeat in a tick
            key = pc.binary_join_element_wise(date, tm, " ")
            first_key = key[0].as_py()
            last_key = None if self.last_key is None else f"{self.last_key[0].decode()} {self.last_key[1].decode()}"
            change = pc.not_equal(key[1:], key[:-1]) if m > 1 else pa.array([], pa.bool_())
            head = pa.array([first_key != last_key])
            step = pc.cast(pa.concat_arrays([head, change]), pa.int32())
            tick = pc.add(pc.cumulative_sum(step), pa.scalar(self.tick, pa.int32()))
            groups = pa.table({"t": tick, "g": gpu}).group_by(["t", "g"]).aggregate([])
            if groups.num_rows != m:
                raise _Irregular
            gpu_tokens = col["gpu"]
            if first_key == last_key:
                first_run = pc.equal(tick, pa.scalar(self.tick, pa.int32()))
                if set(gpu_tokens.filter(first_run).to_pylist()) & {g.decode() for g in self.seen}:
                    raise _Irregular
            new_tick = tick[m - 1].as_py()
            last_run = pc.equal(tick, pa.scalar(new_tick, pa.int32()))
            seen = {g.encode() for g in gpu_tokens.filter(last_run).to_pylist()}
            if first_key == last_key and new_tick == self.tick:
                seen |= self.seen
            lines = pa.array(range(base + 1, base + n + 1), pa.int32()).filter(keep)
            table = pa.table({"line": lines, "gpu": gpu, "tick": tick, "ts": ts, **values})
            counters = [nm for nm in names if nm not in _NOT_COUNTERS]
            unit_of = dict(zip(names, units))
            out = WideSamples(table=table, counters=counters, units=[unit_of[c] for c in counters], node=self.node)
            lk = key[m - 1].as_py().split(" ")
            self.tick, self.last_key, self.seen = new_tick, (lk[0].encode(), lk[1].encode()), seen
            self.last_ts = ts[m - 1].as_py()
        self.names, self.units, self.header_line, self.pending = (
            st["names"],
            st["units"],
            st["header_line"],
            st["pending"],
        )
        return out

    def handoff(self) -> _Reader:
        """A line-by-line reader in the state this one reached."""
        r = _Reader(self.path, self.node, self.zone)
        r.validated = True
        if self.names is not None:
            r._apply(list(self.names), self.header_line, list(self.units or ()))
        r.pending = self.pending
        r.tick, r.last_key, r.seen, r.last_ts = self.tick, self.last_key, set(self.seen), self.last_ts
        return r


def _wide_chunks(path: Path, node: str | None, zone: ZoneInfo | None = None) -> Iterator:
    """WideSamples per 16 MiB block; from the first irregular block on, the line-by-line reader."""
    w = _WideReader(path, node, zone)
    start = base = 0
    carry = b""
    with open(path, "rb") as fh:
        while True:
            data = fh.read(_WIDE_BLOCK)
            buf = carry + data
            if data:
                cut = buf.rfind(b"\n") + 1
                if cut == 0:
                    carry = buf
                    continue
                buf, carry = buf[:cut], buf[cut:]
            else:
                carry = b""
            if not buf:
                break
            try:
                chunk = w.block(buf, base)
            except _Irregular:
                yield from w.handoff().chunks(start, base)
                return
            if chunk is not None:
                yield chunk
            start += len(buf)
            base += buf.count(b"\n")
            if not data:
                break
    if w.pending is not None:  # a names line at the very end: let the line reader decide
        yield from w.handoff().chunks(start, base)


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
            samples=_wide_chunks(Path(path), options.node, zone),  # wide blocks; the line reader from an irregular one
            note=(
                "units as printed by the units line, 'unconfirmed' where a header had none (R12); "
                "ts only where both Date and Time columns were printed (-o DT), else None; "
                f"Date and Time: {local_time_note(options.time_zone)}"
            ),
        )


IMPORTER = DmonImporter()
