"""GPU telemetry importers: nvidia-smi CSV (units from the header, [N/A], [Not Supported]) and dcgmi dmon."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from bench_ledger.errors import ParseError

from tests.importers.parsing import parse


def test_nvidia_smi_csv_units_from_header_and_time_zone_unconfirmed(samples: Path) -> None:
    parsed = parse(samples / "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv")
    (cols,) = list(parsed.samples)
    assert len(cols) == 4 * 2619 and set(cols.gpu) == {0}
    units = dict(zip(cols.counter, cols.unit, strict=True))
    assert units == {"utilization.gpu": "%", "utilization.memory": "%", "memory.used": "MiB", "power.draw": "W"}
    power = [v for c, v in zip(cols.counter, cols.value, strict=True) if c == "power.draw"]
    assert max(power) == 332.92 and power[0] == 33.09
    assert cols.ts[0] == datetime(2026, 1, 3, 15, 36, 53, 507000) and cols.tick[-1] == 2618
    assert "time zone unconfirmed" in parsed.note and "NVIDIA GeForce RTX 4090" in parsed.note
    declared = parse(samples / "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv", time_zone="Asia/Shanghai")
    assert "time zone declared by the user: Asia/Shanghai" in declared.note


def test_nvidia_smi_csv_na_not_supported_instant_power_and_index(fixtures: Path) -> None:
    parsed = parse(fixtures / "gpu_telemetry/two_gpus.csv")
    (cols,) = list(parsed.samples)
    rows = list(zip(cols.tick, cols.gpu, cols.counter, cols.value, cols.unit, strict=True))
    assert (0, 1, "power.draw.instant", None, "W") in rows  # [N/A]
    assert (1, 0, "clocks.sm", None, "MHz") in rows  # [Not Supported]
    assert (1, 1, "power.draw", 71.5, "W") in rows
    assert "1 [N/A], 1 [Not Supported]" in parsed.note


def test_nvidia_smi_csv_cell_unit_contradicting_header(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text("timestamp, power.draw [W]\n2026/01/03 15:36:53.507, 64.07 mW\n")
    with pytest.raises(ParseError, match=r"line 2: field 'power.draw': cell unit 'mW' differs from the header's \[W\]"):
        parse(f)


def test_dcgmi_dmon_unit_row_and_no_times_unless_declared(samples: Path) -> None:
    path = samples / "dcgmi-dmon/agi-hpc_dcgm_dmon_rtx2080ti.txt"
    parsed = parse(path)
    (cols,) = list(parsed.samples)
    units = dict(zip(cols.counter, cols.unit, strict=True))
    assert units == {
        "GPUTL": "unconfirmed",
        "MCUTL": "unconfirmed",
        "POWER": "W",
        "TMPTR": "C",
        "ESVTL": "unconfirmed",
        "EDVTL": "unconfirmed",
        "FBUSD": "unconfirmed",
    }
    assert set(cols.ts) == {None} and max(cols.tick) == 4
    assert [v for c, v in zip(cols.counter, cols.value, strict=True) if c == "POWER"] == [
        20.891,
        20.891,
        20.891,
        20.986,
        20.986,
    ]
    assert "sample times are n/a" in parsed.note
    timed = parse(path, start=datetime(2026, 1, 1, 10, 0, 0), interval_s=1.0)
    (cols,) = list(timed.samples)
    assert cols.ts[-1] == datetime(2026, 1, 1, 10, 0, 4)
    assert "as declared by the user" in timed.note


def test_dcgmi_dmon_wrong_value_count(tmp_path: Path) -> None:
    f = tmp_path / "d.txt"
    f.write_text("#Entity   POWER   TMPTR\nID        W       C\nGPU 0     20.1\n")
    with pytest.raises(ParseError, match="line 3: 1 values, the header names 2"):
        parse(f)
