"""Issue 13 at the command line: Ctrl-C, devices, seal files, long labels, the fast paths' domains."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from bench_ledger.cli import main
from bench_ledger.errors import InputError
from bench_ledger.importers import _vllm_bench_duckdb as vbd  # private: the DuckDB path's own entry and checks
from bench_ledger.importers import vllm_bench as vb
from bench_ledger.queries import catalog
from bench_ledger.seal import read_seal_file
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.edges import inputs as I
from tests.edges.test_refused import import_file


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"duckdb:///{tmp_path / 'l.duckdb'}"
    assert CliRunner().invoke(main, ["init", "--db", url]).exit_code == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "list_batches", interrupted)
    result = CliRunner().invoke(main, ["batches", "--db", url])
    assert (result.exit_code, result.output) == (
        130,
        "interrupted (Ctrl-C): nothing of the unfinished command was written\n",
    )


def test_duckdb_query_interrupted_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB reports Ctrl-C during a query as its InterruptException, wrapped by SQLAlchemy."""
    import duckdb

    url = f"duckdb:///{tmp_path / 'l.duckdb'}"
    assert CliRunner().invoke(main, ["init", "--db", url]).exit_code == 0

    def interrupted(*args, **kwargs):
        raise sa.exc.OperationalError("SELECT 1", {}, duckdb.InterruptException("INTERRUPT Error: Interrupted!"))

    monkeypatch.setattr(catalog, "list_batches", interrupted)
    result = CliRunner().invoke(main, ["batches", "--db", url])
    assert (result.exit_code, result.output) == (
        130,
        "interrupted (Ctrl-C): nothing of the unfinished command was written\n",
    )


def test_a_device_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'l.duckdb'}"
    assert CliRunner().invoke(main, ["init", "--db", url]).exit_code == 0
    result = CliRunner().invoke(
        main, ["import", "--db", url, "--batch", "b", "--format", "nvidia-smi-dmon", "/dev/zero"]
    )
    assert (result.exit_code, result.output) == (
        1,
        "error: /dev/zero: not a regular file (a device, pipe or socket); save it to a file and import that\n",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{}\n", "line 1: not a seal line (not UTF-8 text)"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1: not a seal line (not one JSON object)"),
        (b'{"batch": "a"}\n[1, 2]\n', 'line 2: not a seal line (no "batch" name)'),
        (b'{"batch": ["a"]}\n', 'line 1: not a seal line (no "batch" name)'),
        (b'{"batch": "a"}\n{"batch": 1e400, \n', "line 2: not a seal line (not one JSON object)"),
    ],
)
def test_bad_seal_files_are_clear_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "seals"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_seal_file(path)
    assert str(err.value) == f"{path}, {message}"


def test_a_long_label_is_cut_in_the_middle_in_tables_and_whole_in_json(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'l.duckdb'}"
    assert CliRunner().invoke(main, ["init", "--db", url]).exit_code == 0
    label = "L" * 1000  # under the 1,024-byte limit of a stored name
    for i in range(5):
        (tmp_path / f"r{i}.json").write_bytes(I.vllm_file(label=f"{label}{i}")[1])
    files = [str(tmp_path / f"r{i}.json") for i in range(5)]
    assert CliRunner().invoke(main, ["import", "--db", url, "--batch", "b", "-q", *files]).exit_code == 0
    shown = CliRunner().invoke(main, ["runs", "--db", url]).output
    assert len(shown) < 5 * 300
    # cut in the middle: each label's distinguishing last character stays visible (issue 39)
    assert [f"{'L' * 39}…{'L' * 39}{i}" in shown for i in range(5)] == [True] * 5 and "L" * 80 not in shown
    whole = json.loads(CliRunner().invoke(main, ["runs", "--db", url, "--json"]).output)
    assert sorted(r["label"] for r in whole) == sorted(f"{label}{i}" for i in range(5))


def _big(tmp_path: Path, **bad) -> Path:
    """A vLLM JSON Lines file above the fast path's size, with one value changed in its second line."""
    rng = random.Random(11)
    n = 6000
    obj = I.vllm(
        num_prompts=n,
        input_lens=[rng.randint(1, 99) for _ in range(n)],
        output_lens=[rng.randint(1, 99) for _ in range(n)],
        ttfts=[rng.random() for _ in range(n)],
        latencies=[1 + rng.random() for _ in range(n)],
        errors=[""] * n,
        itls=[[rng.random() / 10, rng.random() / 10] for _ in range(n)],
        start_times=[1000 + i / 7 for i in range(n)],
    )
    second = {**obj, "label": "r2"}
    for key, (i, value) in bad.items():
        second[key] = [*obj[key][:i], value, *obj[key][i + 1 :]]
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(obj) + "\n" + json.dumps(second) + "\n")
    assert path.stat().st_size >= vb.FAST_MIN_BYTES and vbd.fast_runs(path) is not None
    return path


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"ttfts": (17, -0.25)},
            "line 2, record 6017: field 'ttft_s': -0.25 is below 0 (a time to first token in seconds: a finite number, >= 0)",
        ),
        (
            {"itls": (5, [0.01, -0.5])},
            "request 6005: field 'gap_s': -0.5 is below 0 (a gap between streamed chunks in seconds: a finite number, >= 0)",
        ),
        (
            {"output_lens": (3, -7)},
            "line 2, record 6003: field 'output_tokens': -7 is below 0 (a token count: an integer, "
            ">= 0, <= 2,147,483,647)",
        ),
    ],
)
def test_the_duckdb_parsed_path_checks_every_domain(ledger: Ledger, tmp_path: Path, bad: dict, message: str) -> None:
    path = _big(tmp_path, **bad)
    before = ledger.status().counts
    ok, err = import_file(ledger, path)
    assert (ok, err) == (False, f"error: {path}, {message}\n")
    assert ledger.status().counts == before


def test_a_file_name_that_is_not_utf8_is_stored_escaped(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "r\udcff.json"  # the byte 0xff in a Linux file name
    path.write_bytes(I.vllm_file()[1])
    assert import_file(ledger, path)[0]
    with ledger.session() as s:
        assert s.execute(sa.text("SELECT file_name FROM artefact")).scalar_one() == "r\\xff.json"


def test_a_long_string_costs_no_memory_per_character_in_the_prescan() -> None:
    """The fast path's check of a string array kept a backtracking state per character: a 20 MiB
    error message cost 18 s and 2.5 GB before it was refused (now: possessive quantifiers)."""
    import tracemalloc

    line = (json.dumps(I.vllm(errors=["", "E" * (4 << 20), ""])) + "\n").encode()
    tracemalloc.start()
    try:
        cut = vbd._cut_arrays(line)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cut is not None and "errors" in cut[1]
    assert peak < 3 * len(line)  # the line's pieces, not ~130 bytes per character (556 MiB here before)


def test_a_refused_import_stops_its_copy_before_the_rollback(ledger: Ledger, tmp_path: Path, monkeypatch) -> None:
    """PostgreSQL writes a pool of requests by COPY in a writer thread while the import parses on: when the
    import then fails, the COPY ends before the transaction is rolled back and the connection handed back,
    so none of its rows reach the next user of the connection (it was flaky: 12,000 request rows seen)."""
    import threading

    from bench_ledger.ingest import request_rows  # the pool's COPY, slowed here

    real = request_rows.bulk_insert
    started: list[str] = []
    ended: list[str] = []

    def slow(conn, backend, table, *args, **kwargs):
        if threading.current_thread().name.startswith("ledger-copy"):
            started.append(table)
            time.sleep(0.5)  # the COPY still running when the file's error is raised
        try:
            return real(conn, backend, table, *args, **kwargs)
        finally:
            if threading.current_thread().name.startswith("ledger-copy"):
                ended.append(table)

    monkeypatch.setattr(request_rows, "bulk_insert", slow)
    monkeypatch.setattr(
        request_rows.PendingRows, "PG_REQUEST_LIMIT", 1000
    )  # the first run's rows go while the second is read
    path = _big(tmp_path, itls=(5, [0.01, -0.5]))
    before = ledger.status().counts
    ok, _ = import_file(ledger, path)
    assert not ok
    assert ended == started  # no COPY outlives the import (on DuckDB there is none)
    assert ledger.status().counts == before
