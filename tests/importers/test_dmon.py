"""nvidia-smi dmon importer: columns by name, units as printed or unconfirmed, ticks, streaming, errors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from bench_ledger.counters import DMON
from bench_ledger.errors import ParseError
from bench_ledger.importers import by_name
from bench_ledger.importers.base import ParseOptions
from bench_ledger.importers.dmon import CHUNK_ROWS, IMPORTER, UNCONFIRMED
from bench_ledger.kinds import KINDS
from bench_ledger.records import SampleColumns, WideSamples

SAMPLE = "dmon/dmon_3gpu_rtx30xx.txt"


def rows(path: Path, node: str | None = None, time_zone: str | None = None) -> list[dict]:
    """All long rows of a file as dicts (fine for small files)."""
    out = []
    names = ("line", "node", "gpu", "tick", "ts", "counter", "value", "unit")
    for chunk in IMPORTER.parse(path, ParseOptions(node=node, time_zone=time_zone)).samples:
        if isinstance(chunk, WideSamples):  # one row per card and tick: unpivot as the store does
            d = chunk.table.to_pydict()
            for counter, unit in zip(chunk.counters, chunk.units, strict=True):
                out += [
                    dict(
                        zip(
                            names,
                            (
                                d["line"][i],
                                chunk.node,
                                d["gpu"][i],
                                d["tick"][i],
                                d["ts"][i],
                                counter,
                                d[counter][i],
                                unit,
                            ),
                        )
                    )
                    for i in range(chunk.table.num_rows)
                ]
            continue
        assert isinstance(chunk, SampleColumns)
        for r in zip(chunk.line, chunk.node, chunk.gpu, chunk.tick, chunk.ts, chunk.counter, chunk.value, chunk.unit):
            out.append(dict(zip(names, r)))
    return out


def pick(all_rows: list[dict], counter: str) -> list[dict]:
    return sorted((r for r in all_rows if r["counter"] == counter), key=lambda r: (r["line"], r["gpu"]))


def drain(path: Path) -> None:
    for _ in IMPORTER.parse(path, ParseOptions()).samples:
        pass


def test_registry_knows_the_importer() -> None:
    assert by_name("nvidia-smi-dmon") is IMPORTER


def test_sniff_accepts_dmon_and_rejects_json_and_logs(samples: Path, fixtures: Path) -> None:
    assert IMPORTER.sniff((samples / SAMPLE).read_bytes()) is None
    assert IMPORTER.sniff((fixtures / "dmon/dt_midnight.txt").read_bytes()) is None
    assert IMPORTER.sniff(b"\n\n# gpu pwr\n# Idx W\n 0 100\n") is None
    assert "JSON" in IMPORTER.sniff(b'{"duration": 1.0}')
    log = (samples / "vllm-server-log/vllm-7B-1gpuA10080GB-0.5GRAM.log").read_bytes()
    assert IMPORTER.sniff(log) == "first non-blank line is not a dmon column-names line ('# gpu ...')"
    assert IMPORTER.sniff(b"# just a comment\n") == "first '#' line has no 'gpu' column: not a dmon column-names line"
    assert IMPORTER.sniff(b"") == "empty file"


def test_real_sample_values_units_and_locators(samples: Path) -> None:
    art = IMPORTER.parse(samples / SAMPLE, ParseOptions(node="rig-1"))
    assert art.format == "nvidia-smi-dmon" and art.published == [] and art.log_facts == []
    got = rows(samples / SAMPLE, node="rig-1")
    assert len(got) == 3 * 11  # 3 GPUs x 11 counters (gpu is the key, not a counter)
    assert {r["counter"] for r in got} == {
        "pwr",
        "gtemp",
        "mtemp",
        "sm",
        "mem",
        "enc",
        "dec",
        "jpg",
        "ofa",
        "mclk",
        "pclk",
    }
    pwr = pick(got, "pwr")
    assert [(r["gpu"], r["value"], r["unit"], r["line"]) for r in pwr] == [
        (0, 119.0, "W", 3),
        (1, 159.0, "W", 4),
        (2, 219.0, "W", 5),
    ]
    assert [r["value"] for r in pick(got, "mtemp")] == [None, None, None]
    assert {r["unit"] for r in pick(got, "mtemp")} == {"C"}
    assert [r["value"] for r in pick(got, "sm")] == [100.0, 100.0, 100.0]
    assert {r["unit"] for r in pick(got, "sm")} == {"%"}
    assert {r["unit"] for r in pick(got, "mclk")} == {"MHz"}
    assert {(r["tick"], r["ts"], r["node"]) for r in got} == {(0, None, "rig-1")}


def test_node_is_none_when_not_given(samples: Path) -> None:
    assert {r["node"] for r in rows(samples / SAMPLE)} == {None}


def test_date_time_columns_blank_lines_dashes_and_repeated_headers(fixtures: Path) -> None:
    got = rows(fixtures / "dmon/dt_midnight.txt")
    fb = pick(got, "fb")
    assert [(r["line"], r["gpu"], r["tick"], r["value"]) for r in fb] == [
        (3, 0, 0, 239.0),
        (4, 1, 0, 92153.0),
        (6, 0, 1, 240.0),
        (7, 1, 1, 93702.0),
        (10, 0, 2, 241.0),
        (11, 1, 2, 93702.0),
    ]
    assert [r["ts"] for r in fb] == [
        datetime(2024, 1, 4, 23, 59, 59),
        datetime(2024, 1, 4, 23, 59, 59),
        datetime(2024, 1, 5, 0, 0, 0),
        datetime(2024, 1, 5, 0, 0, 0),
        datetime(2024, 1, 5, 0, 0, 1),
        datetime(2024, 1, 5, 0, 0, 1),
    ]
    assert {r["unit"] for r in fb} == {"MB"}
    assert {r["unit"] for r in pick(got, "rxpci")} == {"MB/s"}
    assert [r["value"] for r in pick(got, "rxpci")] == [5.0, None, 5.0, None, 6.0, None]
    assert not {"gpu", "Date", "Time"} & {r["counter"] for r in got}


def test_date_and_time_are_host_local_of_an_unconfirmed_zone_unless_declared(tmp_path: Path) -> None:
    """dmon prints the host's local time and no zone; it was labelled UTC (issue 39). Without --time-zone
    the times stay as printed and the artefact's note says the zone is unconfirmed (the read side then
    never places them in a run's UTC window); with it they are converted to UTC, on the Arrow path (a
    regular file) and on the line reader (a file without a units line) alike."""
    from bench_ledger.records import UNCONFIRMED_ZONE

    from tests.edges import inputs as I

    regular = tmp_path / "dmon.txt"
    regular.write_text(I.DMON_DT)
    note = IMPORTER.parse(regular, ParseOptions()).note
    assert note is not None and note.endswith(
        f"Date and Time: host local wall-clock time as printed; {UNCONFIRMED_ZONE} "
        "(local time of the host, no zone in the file)"
    )
    note = IMPORTER.parse(regular, ParseOptions(time_zone="Asia/Shanghai")).note
    assert note is not None and note.endswith(
        "Date and Time: host local wall-clock time converted to UTC; time zone declared by the user: Asia/Shanghai"
    )
    irregular = tmp_path / "dmon_no_units.txt"  # no units line: read by the line reader
    irregular.write_text("".join(ln for ln in I.DMON_DT.splitlines(keepends=True) if not ln.startswith("#YYYY")))
    assert {type(c).__name__ for p in (regular, irregular) for c in IMPORTER.parse(p, ParseOptions()).samples} == {
        "WideSamples",
        "SampleColumns",
    }
    for path in (regular, irregular):
        local = [r["ts"] for r in pick(rows(path), "sm")]
        utc = [r["ts"] for r in pick(rows(path, time_zone="Asia/Shanghai"), "sm")]
        assert local[0] == datetime(2026, 3, 1, 13, 54, 35) and utc == [t - timedelta(hours=8) for t in local]
    with pytest.raises(ParseError) as err:
        IMPORTER.parse(regular, ParseOptions(time_zone="Mars/Olympus"))
    assert str(err.value) == f"{regular}, option --time-zone: not an IANA time zone: 'Mars/Olympus'"


def test_no_units_line_means_unconfirmed_units(fixtures: Path) -> None:
    got = rows(fixtures / "dmon/no_units.txt")
    assert {r["unit"] for r in got} == {UNCONFIRMED}
    pwr = pick(got, "pwr")
    # no time column: a tick ends when a GPU index repeats
    assert [(r["gpu"], r["tick"], r["value"]) for r in pwr] == [
        (0, 0, 300.0),
        (1, 0, 310.0),
        (0, 1, 320.0),
        (1, 1, 330.0),
    ]


def test_a_changed_header_starts_a_new_column_set(fixtures: Path) -> None:
    got = rows(fixtures / "dmon/header_change.txt")
    assert {r["counter"] for r in got if r["line"] >= 7} == {"pwr", "gtemp", "sm", "mem"}
    assert [(r["line"], r["value"], r["unit"], r["tick"]) for r in pick(got, "sm")] == [
        (3, 100.0, "%", 0),
        (4, 100.0, "%", 0),
        (7, 99.0, "%", 1),
        (8, 98.0, "%", 1),
        (12, 97.0, "%", 2),
        (13, 96.0, "%", 2),
    ]
    assert [r["line"] for r in pick(got, "mtemp")] == [3, 4]


def test_time_only_gives_ticks_but_no_timestamp(fixtures: Path) -> None:
    got = pick(rows(fixtures / "dmon/time_only.txt"), "pwr")
    assert [(r["gpu"], r["tick"], r["ts"]) for r in got] == [(0, 0, None), (1, 0, None), (0, 1, None), (1, 1, None)]


def test_wrong_field_count_names_line_and_header(fixtures: Path) -> None:
    path = fixtures / "dmon/malformed_row.txt"
    with pytest.raises(ParseError) as err:
        drain(path)
    assert str(err.value) == f"{path}, line 4: expected 14 columns from the header at line 1, found 12"


def test_non_numeric_value_names_line_and_column(fixtures: Path) -> None:
    path = fixtures / "dmon/bad_value.txt"
    with pytest.raises(ParseError) as err:
        drain(path)
    assert str(err.value) == f"{path}, line 4: field 'sm': not a number: 'N/A'"


@pytest.mark.parametrize("token", ["nan", "inf", "12a"])
def test_nan_and_garbage_are_not_numbers(tmp_path: Path, token: str) -> None:
    path = tmp_path / "d.txt"
    path.write_text(f"# gpu pwr sm\n# Idx W %\n 0 100 5\n 1 100 {token}\n")
    with pytest.raises(ParseError) as err:
        drain(path)
    assert str(err.value) == f"{path}, line 4: field 'sm': not a number: '{token}'"


def test_time_past_a_c_int_names_line_and_field(tmp_path: Path) -> None:
    """The fuzz corpus found it: seconds '2147483648' raised OverflowError from datetime (a traceback)."""
    path = tmp_path / "d.txt"
    path.write_text("#Date Time gpu pwr\n#YYYYMMDD HH:MM:SS Idx W\n20260301 13:54:2147483648 0 100\n")
    with pytest.raises(ParseError) as err:
        drain(path)
    assert (
        str(err.value)
        == f"{path}, line 3: field 'Date/Time': not a YYYYMMDD HH:MM:SS time: '20260301 13:54:2147483648'"
    )


def test_data_before_names_line(fixtures: Path) -> None:
    path = fixtures / "dmon/data_first.txt"
    with pytest.raises(ParseError) as err:
        drain(path)
    assert str(err.value) == (
        f"{path}, line 1: data row before any column names line ('# gpu ...' or '#Date Time gpu ...')"
    )


def _write_big(path: Path, ticks: int, gpus: int = 16) -> int:
    lines = []
    for t in range(ticks):
        if t % 7 == 0:
            lines.append("#Date       Time        gpu    pwr     sm    mem     fb")
            lines.append("#YYYYMMDD   HH:MM:SS    Idx      W      %      %     MB")
        hh, mm, ss = t // 3600, t // 60 % 60, t % 60
        for g in range(gpus):
            lines.append(
                f" 20240104   {hh:02d}:{mm:02d}:{ss:02d}    {g:3d}  {100 + g:5d}  {t % 101:5d}      -  {t:5d} "
            )
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_streams_in_chunks_and_keeps_ticks_across_chunk_and_block_edges(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    _write_big(path, ticks=3000)  # 48,000 data lines, 192,000 long rows
    from bench_ledger.importers._dmon_lines import LineReader  # private: the fallback reader on its own

    samples = LineReader(path, None).chunks()  # the line reader (the importer's fallback from an irregular block)
    assert isinstance(samples, Iterator)
    sizes, total = [], 0
    for chunk in samples:
        sizes.append(len(chunk))
        for gpu, tick, ts, counter, value in zip(chunk.gpu, chunk.tick, chunk.ts, chunk.counter, chunk.value):
            assert ts is not None and tick == ts.hour * 3600 + ts.minute * 60 + ts.second
            if counter == "pwr":
                assert value == 100 + gpu
            elif counter == "mem":
                assert value is None
            elif counter == "fb":
                assert value == tick
        total += len(chunk)
    assert total == 3000 * 16 * 4
    assert len(sizes) > 1 and max(sizes) <= CHUNK_ROWS


def test_counter_meanings_say_what_is_measured() -> None:
    needed = {
        "sm",
        "mem",
        "pwr",
        "gtemp",
        "mtemp",
        "fb",
        "bar1",
        "ccpm",
        "enc",
        "dec",
        "jpg",
        "ofa",
        "rxpci",
        "txpci",
        "mclk",
        "pclk",
    }
    assert needed <= DMON.keys()
    assert "NOT SM occupancy" in DMON["sm"].meaning and "MFU" in DMON["sm"].meaning
    assert "NOT memory bandwidth utilisation" in DMON["mem"].meaning
    assert {c.kind for c in DMON.values()} <= KINDS.keys()
    assert (DMON["sm"].kind, DMON["mem"].kind) == ("activity_time_percent", "memory_busy_percent")


# --------------------------------------------------------------------------- the key of hardware_sample
# Since migration 0007 the database keeps no PRIMARY KEY (artefact_id, line, counter) and no FOREIGN KEY
# on hardware_sample: the importer guarantees the key, the seal shows any later change.


def _dmon_file(path: Path, ticks: int = 300, gpus: int = 4, names: str = "pwr     sm    mem") -> Path:
    head = [f"#Date       Time        gpu    {names}", "#YYYYMMDD   HH:MM:SS    Idx      W      %      %"]
    lines = []
    for t in range(ticks):
        if t % 20 == 0:
            lines += head
        for g in range(gpus):
            lines.append(
                f" 20240105   10:{t // 60 % 60:02d}:{t % 60:02d}    {g:3d}  {100 + g:5d}  {t % 101:5d}  {t % 7:5d}"
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_repeated_column_names_are_refused_on_both_paths(tmp_path: Path) -> None:
    """Two columns of one name would give two rows of one key: both readers refuse the file."""
    from bench_ledger.importers._dmon_arrow import wide_chunks  # private: the Arrow reader on its own

    path = _dmon_file(tmp_path / "d.txt", ticks=30, names="pwr     sm    pwr")
    with pytest.raises(ParseError, match="column names repeat"):
        drain(path)
    with pytest.raises(ParseError, match="column names repeat"):
        for _ in wide_chunks(path, None):
            pass


def test_hardware_sample_key_is_kept_by_the_importer_and_sealed(ledger, tmp_path: Path) -> None:
    import sqlalchemy as sa
    from bench_ledger.cli import main
    from click.testing import CliRunner

    def cli(*args: object, code: int = 0) -> str:
        res = CliRunner().invoke(main, [str(a) for a in args])
        assert res.exit_code == code, res.output
        return res.output

    a = _dmon_file(tmp_path / "a.txt")
    b = tmp_path / "b.txt"  # a header change mid-file (the line reader takes over) and other values
    b.write_text(
        a.read_text().replace(" 20240105   10:00:1", " 20240105   10:00:2", 1)
        + "# gpu    pwr     sm\n# Idx      W      %\n    0    90     5\n    1    91     6\n"
    )
    cli("import", a, b, "--batch", "hw", "--node", "n0", "--db", ledger.url)
    with ledger.engine.connect() as conn:
        total, dup, orphans = conn.execute(
            sa.text(
                "SELECT (SELECT count(*) FROM hardware_sample), "
                "(SELECT count(*) FROM (SELECT artefact_id, line, counter FROM hardware_sample "
                " GROUP BY artefact_id, line, counter HAVING count(*) > 1) d), "
                "(SELECT count(*) FROM hardware_sample h WHERE NOT EXISTS (SELECT 1 FROM artefact a WHERE a.id = h.artefact_id))"
            )
        ).one()
        art = conn.execute(sa.text("SELECT min(id) FROM artefact")).scalar_one()
        line = conn.execute(sa.text(f"SELECT min(line) FROM hardware_sample WHERE artefact_id = {art}")).scalar_one()
    assert (total, dup, orphans) == (2 * 300 * 4 * 3 + 2 * 2, 0, 0)

    seals = tmp_path / "seals.jsonl"
    cli("close", "hw", "--seal-file", seals, "--db", ledger.url)
    assert "batch hw: ok" in cli("verify", "--seal-file", seals, "--db", ledger.url)
    sql = f"UPDATE hardware_sample SET value = value + 1 WHERE artefact_id = {art} AND line = {line} AND counter = 'sm'"
    if ledger.backend == "postgresql":  # migration 0007 re-created the append-only triggers of 0005
        with pytest.raises(sa.exc.DBAPIError, match="refused by R9: UPDATE of hardware_sample"):
            with ledger.engine.begin() as conn:
                conn.exec_driver_sql(sql)
        return
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(sql)
    out = cli("verify", "--seal-file", seals, "--db", ledger.url, code=1)
    assert f"table hardware_sample: 1 changed: (artefact_id={art}, line={line}, counter=sm)" in out
