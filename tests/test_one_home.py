"""Behaviour fixed while giving each concept one home (issue 12): each test fails on the code before."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bench_ledger import importers
from bench_ledger.queries import check


def test_a_listed_importer_that_cannot_import_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing importer module raised nothing before: its format vanished and its tests skipped."""
    monkeypatch.setattr(importers, "_MODULES", (*importers._MODULES, "no_such_format"))
    with pytest.raises(ModuleNotFoundError, match="bench_ledger.importers.no_such_format"):
        importers.all_importers()


def _pv(file_name: str, text: str, value: str | None) -> SimpleNamespace:
    return SimpleNamespace(key="result_validity", text=text, value=value, quantity_kind=None, artefact_format="x",
                           file_name=file_name, locator="$", batch="b", label="r", tool="mlperf", unit=None)  # fmt: skip


def test_a_text_value_repeated_in_two_files_is_compared_as_text() -> None:
    """A key without a number, repeated across two files, is compared as printed text (it raised
    AttributeError before: the text comparison sat after a `continue`)."""
    rows = check._repeats(1, [_pv("a.json", "VALID", None), _pv("b.txt", "INVALID", None)], machine=True)
    assert [(r.status, r.reason) for r in rows] == [
        (check.DISAGREE, "result_validity in b.txt $ = result_validity in a.json $: printed 'INVALID' and 'VALID'")
    ]
    same = check._repeats(1, [_pv("a.json", "VALID", None), _pv("b.txt", "VALID", None)], machine=True)
    assert [r.status for r in same] == [check.AGREE]
    in_one_file = check._repeats(1, [_pv("a.log", "VALID", None), _pv("a.log", "INVALID", None)], machine=True)
    assert in_one_file == []  # a log repeating a text event is not one quantity printed twice


class _BrokenLedger:
    def session(self):
        raise RuntimeError("the database went away")


def test_a_ledger_fault_in_the_audit_is_not_read_as_no_such_run() -> None:
    """The run lookup of a comparison swallowed every exception and answered "no such run" (None)."""
    from bench_ledger.queries.audit import _run_id

    assert _run_id(None, "fx", "r1") is None  # no ledger at all (a fake evaluator): nothing to look up
    with pytest.raises(RuntimeError, match="the database went away"):
        _run_id(_BrokenLedger(), "fx", "r1")


def test_a_ledger_fault_in_explain_is_not_read_as_an_undeclared_report() -> None:
    from bench_ledger.queries.explain import source_step

    claims = SimpleNamespace(source_report=SimpleNamespace(slug="r", title="t", file=None))
    assert source_step(claims, None, None).detail["sha256"] is None  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the database went away"):
        source_step(claims, _BrokenLedger(), None)  # type: ignore[arg-type]
