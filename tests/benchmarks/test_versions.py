"""benchmarks/versions.py: per row, the best of the rounds of each version and the ratio new / base."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_row_is_the_best_of_its_rounds_and_a_row_one_version_lacks_is_left_out() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import versions

    row, other = ("import vLLM", "duckdb"), ("only in base", "duckdb")
    rounds = [
        {"base": {row: {"s": 2.0}, other: {"s": 1.0}}, "new": {row: {"s": 2.4}}},
        {"base": {row: {"s": 2.5}, other: {"s": 1.0}}, "new": {row: {"s": 2.1}}},
    ]
    assert versions.compare(rounds) == [("import vLLM", "duckdb", 2.0, 2.1, 2.1 / 2.0)]
