"""Parsing one file the way `ledger import` detects it, for the importer tests: no database."""

from __future__ import annotations

from pathlib import Path

from bench_ledger import importers
from bench_ledger.importers.base import ParseOptions


def parse(path: Path, **options):
    return importers.detect(path).parse(path, ParseOptions(**options))


def one_run(path: Path, **options):
    (run,) = list(parse(path, **options).iter_runs())
    return run


def pub(run, key: str, nth: int = 0):
    return [p for p in run.published if p.key == key][nth]
