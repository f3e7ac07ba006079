"""The Arrow block reader of ``nvidia-smi dmon`` text, the fast path of the ``nvidia-smi-dmon`` importer:
:func:`wide_chunks` is its one entry (``importers.dmon`` calls it).

Profiling the line reader on a day of 16 GPUs (1.4M lines) showed ~80% of the time in Python-level work
per line (bytes.split, zip, float lookups, building 17M-entry lists) and the insert in turning those
lists into Arrow arrays. This path reads 16 MiB blocks as one string column with pyarrow.csv (one row
per physical line), splits them with Arrow's whitespace splitter, casts each counter column at C speed
and hands the store a WIDE Arrow table (records.WideSamples) that the store unpivots. Python only looks
at the '#' lines (a few per thousand). Any block that is not plain ``-o DT`` data under the header in
force (header change, no units line, bad field count, a non-number, a GPU repeating within a tick, ...)
is handed, from its first byte, to the line reader (importers._dmon_lines.LineReader) with the state
reached so far, so every error message and every edge case stays exactly that reader's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bench_ledger.importers._dmon_lines import NOT_COUNTERS, LineReader
from bench_ledger.importers.base import to_utc

__all__ = ["wide_chunks"]

_WIDE_BLOCK = 16 << 20
_ONE_COLUMN = None


class _Irregular(Exception):
    """This block needs the line-by-line reader."""


def _csv_options():  # built lazily: importing pyarrow.csv is a start-up cost only dmon pays
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
                    if nm in NOT_COUNTERS:
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
            counters = [nm for nm in names if nm not in NOT_COUNTERS]
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

    def handoff(self) -> LineReader:
        """A line-by-line reader in the state this one reached."""
        r = LineReader(self.path, self.node, self.zone)
        r.validated = True
        if self.names is not None:
            r._apply(list(self.names), self.header_line, list(self.units or ()))
        r.pending = self.pending
        r.tick, r.last_key, r.seen, r.last_ts = self.tick, self.last_key, set(self.seen), self.last_ts
        return r


def wide_chunks(path: Path, node: str | None, zone: ZoneInfo | None = None) -> Iterator:
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
