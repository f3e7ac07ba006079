"""The dmon fast path (``_dmon_arrow.wide_chunks``, measured by benchmarks/run.py) gives exactly the rows of the
line-by-line reader."""

from __future__ import annotations

from pathlib import Path

import bench_ledger.importers._dmon_arrow as dmon_arrow  # private: the two readers compared on their own
import bench_ledger.importers._dmon_lines as dmon_lines  # private: as above
import bench_ledger.importers.dmon as dmon
import pytest
from bench_ledger.errors import ParseError
from bench_ledger.importers.base import ParseOptions
from bench_ledger.records import WideSamples

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dmon"


def _long(chunks) -> list[tuple]:
    out: list[tuple] = []
    for c in chunks:
        if isinstance(c, WideSamples):
            d = c.table.to_pydict()
            for name, unit in zip(c.counters, c.units, strict=True):
                out += [
                    (d["line"][i], c.node, d["gpu"][i], d["tick"][i], d["ts"][i], name, d[name][i], unit)
                    for i in range(c.table.num_rows)
                ]
        else:
            out += list(zip(c.line, c.node, c.gpu, c.tick, c.ts, c.counter, c.value, c.unit, strict=True))
    return sorted(out, key=lambda r: (r[0], r[5]))


def _both(path: Path) -> tuple[object, object]:
    res = []
    for chunks in (
        lambda: dmon_lines.LineReader(path, "n").chunks(),  # the readers, without the importer's
        lambda: dmon_arrow.wide_chunks(path, "n"),
    ):  # refusal of a cut last line
        try:
            res.append(_long(chunks()))
        except ParseError as exc:
            res.append(str(exc))
    return res[0], res[1]


def _big(path: Path, ticks: int = 2500, gpus: int = 16) -> list[str]:
    lines = []
    for t in range(ticks):
        if t % 20 == 0:
            lines += [
                "#Date       Time        gpu    pwr     sm    mem     fb",
                "#YYYYMMDD   HH:MM:SS    Idx      W      %      %     MB",
            ]
        day, rest = 4 + (t + 86_000) // 86_400, (t + 86_000) % 86_400
        hh, mm, ss = rest // 3600, rest // 60 % 60, rest % 60
        for g in range(gpus):
            lines.append(
                f" 202401{day:02d}   {hh:02d}:{mm:02d}:{ss:02d}    {g:3d}  {100 + g:5d}  {t % 101:5d}      -  {t:5d}"
            )
    return lines


@pytest.mark.parametrize("edit", ["none", "header_change", "gpu_repeat", "bad_value", "blank", "no_units", "no_eol"])
def test_dmon_wide_path_matches_the_line_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    monkeypatch.setattr(dmon_arrow, "_WIDE_BLOCK", 64 << 10)  # many blocks: the irregular one is not the first
    lines = _big(tmp_path / "x")
    at = 30_000
    if edit == "header_change":
        lines[at:at] = ["# gpu    pwr     sm", "# Idx      W      %"] + [f" {g} 1 2" for g in range(3)]
    elif edit == "gpu_repeat":
        lines.insert(at + 1, lines[at])
    elif edit == "bad_value":
        lines[at] = lines[at][:-5] + "  N/A"
    elif edit == "blank":
        lines.insert(at, "")
    elif edit == "no_units":
        lines.insert(at, lines[0])
    path = tmp_path / "d.txt"
    path.write_text("\n".join(lines) + ("" if edit == "no_eol" else "\n"))
    slow, fast = _both(path)
    assert fast == slow
    if edit == "no_eol":  # the importer refuses a last line without its line end (issue 13)
        with pytest.raises(ParseError, match="the last line has no line end"):
            dmon.IMPORTER.parse(path, ParseOptions(node="n"))


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.txt")))
def test_dmon_wide_path_matches_on_fixtures(name: str) -> None:
    slow, fast = _both(FIXTURES / name)
    assert fast == slow
