"""benchmarks/lower_bound.py (issue 17): the least SQL that stores a vLLM file's request and gap rows
writes every request and one array per request with gaps, into a ledger of the real schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def gen_lines(gen) -> list[str]:  # noqa: ANN001 - benchmarks/gen.py
    """The lines of the file `--quick` generates (the generator's seed is fixed: the same file)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "v.jsonl"
        gen.vllm_and_ledger(path, 10, 200, 4, None)
        return path.read_text().splitlines()


def test_lower_bound_quick_writes_every_request() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "lower_bound.py"), "--quick", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    line = out.splitlines()[0]
    got = re.search(
        r"floor [\d.]+ s, least import [\d.]+ s \([\d.]+x; ([\d,]+) request rows, ([\d,]+) gap arrays\)", line
    )
    assert got, out
    requests, arrays = (int(g.replace(",", "")) for g in got.groups())
    assert requests == 10 * 200
    # one array per request whose itls list is not empty (the generated file, made again here)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen

    with_gaps = sum(len(g) > 0 for line in gen_lines(gen) for g in json.loads(line)["itls"])
    assert arrays == with_gaps
    assert re.fullmatch(
        r"least import / floor: min [\d.]+x, median [\d.]+x over 1 pairs; load [\d.]+ at the end", out.splitlines()[1]
    )


def test_lower_bound_ledger_format_writes_every_request_of_every_file(tmp_path: Path) -> None:
    """--ledger: the least store of the ledger's own JSON Lines files (one run per file) writes each
    file's requests (not its header line) and one array per request with gaps, and times what any import
    must do besides (the files' sha256, the rows' scheme-3 digest, the module imports)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "lower_bound.py"), "--ledger", "--quick", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    line = out.splitlines()[0]
    got = re.search(
        r"floor [\d.]+ s, least import [\d.]+ s \([\d.]+x; CPU [\d.]+ s; ([\d,]+) request rows, ([\d,]+) gap "
        r"arrays\); besides it: sha256 [\d.]+ s CPU, scheme-3 digest [\d.]+ s CPU, module imports [\d.]+ s",
        line,
    )
    assert got, out
    requests, arrays = (int(g.replace(",", "")) for g in got.groups())
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen

    ldir = tmp_path / "ledger_requests"
    ldir.mkdir()
    gen.vllm_and_ledger(tmp_path / "v.jsonl", 10, 200, 4, ldir)  # the same files: the generator's seed is fixed
    records = [json.loads(x) for p in sorted(ldir.iterdir()) for x in p.read_text().splitlines()[1:]]
    assert requests == len(records) == 10 * 200
    assert arrays == sum(bool(r.get("chunk_gaps")) for r in records)


def test_lower_bound_postgresql_copies_every_row_an_import_made() -> None:
    """--postgresql: the server's share of the least store is the binary COPY of every request row and
    gap array that `ledger import` of the file made, into a fresh ledger of the real schema."""
    import os

    from tests.conftest import PG_URL, REQUIRE_PG, pg_problem

    if pg_problem() is not None:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL is required (LEDGER_REQUIRE_PG=1): {pg_problem()}")
        pytest.skip(f"PostgreSQL not reachable: {pg_problem()}")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "lower_bound.py"), "--postgresql", "--quick", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "LEDGER_BENCH_PG_URL": PG_URL},
    ).stdout
    pairs = [ln for ln in out.splitlines() if ln.startswith("load ")]
    got = [
        re.fullmatch(
            r"load [\d.]+: floor [\d.]+ s, least store [\d.]+ s \([\d.]+x; ([\d,]+) request rows, ([\d,]+) "
            r"gap arrays\)",
            ln,
        )
        for ln in pairs
    ]
    assert len(got) == 1 and got[0], out
    requests, arrays = (int(g.replace(",", "")) for g in got[0].groups())
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen

    with_gaps = sum(len(g) > 0 for line in gen_lines(gen) for g in json.loads(line)["itls"])
    assert (requests, arrays) == (10 * 200, with_gaps)
    assert re.search(r"^least store / floor \(PostgreSQL\): min [\d.]+x, median [\d.]+x over 1 pairs", out, re.M), out
