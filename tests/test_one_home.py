"""Behaviour fixed while giving each concept one home (issue 12): each test fails on the code before."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest
from bench_ledger import importers
from bench_ledger.queries.check import checker as check


def test_a_listed_importer_that_cannot_import_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing importer module raised nothing before: its format vanished and its tests skipped."""
    monkeypatch.setattr(importers, "_MODULES", (*importers._MODULES, "no_such_format"))
    with pytest.raises(ModuleNotFoundError, match="bench_ledger.importers.no_such_format"):
        importers.all_importers()


def _pv(file_name: str, text: str, value: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        key="result_validity",
        text=text,
        value=value,
        quantity_kind=None,
        artefact_format="x",
        file_name=file_name,
        locator="$",
        batch="b",
        label="r",
        tool="mlperf",
        unit=None,
    )


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
    from bench_ledger.queries.audit._operands import _run_ids  # private: the run-label lookup, against a failing ledger

    assert _run_ids(None, "fx") == {}  # no ledger at all (a fake evaluator): nothing to look up
    with pytest.raises(RuntimeError, match="the database went away"):
        _run_ids(_BrokenLedger(), "fx")


def test_a_ledger_fault_in_explain_is_not_read_as_an_undeclared_report() -> None:
    from bench_ledger.queries.audit import source_step

    claims = SimpleNamespace(source_report=SimpleNamespace(slug="r", title="t", file=None))
    assert source_step(claims, None, None).detail["sha256"] is None  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the database went away"):
        source_step(claims, _BrokenLedger(), None)  # type: ignore[arg-type]


def test_one_reading_of_a_printed_aggregate() -> None:
    """vLLM's and the other tools' readers disagreed: 1e-05 had precision 5 in one and None in the
    other; NaN was kept as 'NaN' or 'nan' with two reasons; null had two reasons (issue 12)."""
    from pathlib import Path

    from bench_ledger.importers import _toolfiles, vllm_bench  # private: both readers of a printed aggregate
    from bench_ledger.queries.check.core import tolerance
    from bench_ledger.units import printed_places

    def both(value: object) -> tuple[tuple, tuple]:
        a = _toolfiles.published("k", value, locator="$.k", unit=None, kind="ratio")
        b = vllm_bench.published("k", value, "", Path("f.json"), None, "ratio")
        assert a is not None
        return ((a.text, a.precision, a.flag, a.na_reason), (b.text, b.precision, b.flag, b.na_reason))

    assert both(1e-05) == (("1e-05", 5, "reported", None),) * 2
    assert both(0.25) == (("0.25", 2, "reported", None),) * 2
    assert both(150) == (("150", 0, "reported", None),) * 2
    assert both(float("nan")) == (("NaN", None, "n/a", "the tool wrote NaN"),) * 2
    assert both(float("-inf")) == (("-Infinity", None, "n/a", "the tool wrote -Infinity"),) * 2
    assert both(None) == (("null", None, "n/a", "the tool wrote null"),) * 2
    # check's tolerance is half a unit in that same place
    assert [printed_places(t) for t in ("2,791", "1.5e3", "n/a")] == [0, -2, None]
    assert tolerance("1e-05") == Fraction(5, 10**6) and tolerance("2,791") == Fraction(1, 2)


def test_one_latency_statistic_pattern_for_vllm_sglang_and_check(tmp_path) -> None:
    """vLLM's importer, SGLang's importer and check each had a pattern of their own: a max_*_ms key in
    a vLLM file was "not known to the importer", and check never recomputed SGLang's max_*_ms."""
    import json

    from bench_ledger.importers.base import ParseOptions
    from bench_ledger.importers.vllm_bench import IMPORTER
    from bench_ledger.tools import SERVING_LATENCY_STAT

    f = tmp_path / "r.json"
    f.write_text(json.dumps({"num_prompts": 1, "completed": 1, "max_ttft_ms": 12.5, "p99_e2el_ms": 30.0}))
    (run,) = IMPORTER.parse(f, ParseOptions()).runs
    assert {p.key: (p.unit, p.quantity_kind) for p in run.published if p.key.endswith("_ms")} == {
        "max_ttft_ms": ("ms", "latency"),
        "p99_e2el_ms": ("ms", "latency"),
    }
    m = SERVING_LATENCY_STAT.fullmatch("max_e2e_latency_ms")
    assert m is not None and (m["stat"], m["series"]) == ("max", "e2e_latency")


def test_one_family_of_integer_kinds_for_the_audit_and_check() -> None:
    """check kept its own, shorter list of count kinds: a concurrency or a record count printed as "8"
    was read as 8 +- 0.5 there, while the audit read it as exactly 8 (R11)."""
    from bench_ledger.kinds import INTEGER_KINDS
    from bench_ledger.queries.check.core import is_exact_count, reported_interval

    assert {"concurrency", "record_count", "kv_pool_tokens"} <= INTEGER_KINDS
    assert is_exact_count("8", "concurrency") and is_exact_count("3", "record_count")
    iv = reported_interval("8", Fraction(8), "concurrency")
    assert iv is not None and (iv.lo, iv.hi) == (8, 8)
    assert not is_exact_count("8.0", "concurrency") and not is_exact_count("8", "latency")


def test_request_metrics_are_typed_plans_both_evaluations_execute() -> None:
    """Request metrics were closures with a monkey-patched ``.batch`` tuple that the grouped path read;
    now each is a typed plan, and the grouped path covers all of them but the statistics that read every
    value or an order statistic between ranks (means, std, min, p99.9)."""
    from bench_ledger.queries.metrics.definitions import Dist, Plan, Rate
    from bench_ledger.queries.metrics.grouped import supported
    from bench_ledger.queries.metrics.registry import METRICS

    requests = {n: mt for n, mt in METRICS.items() if mt.family == "requests"}
    assert requests and all(isinstance(mt.plan, Plan) for mt in requests.values())
    assert {n for n, mt in requests.items() if not supported(mt)} == {
        n for n, mt in requests.items() if isinstance(mt.plan, Dist) and mt.plan.stat in ("mean", "std", "min", "p99.9")
    }
    tpm = METRICS["total_tpm"].plan
    assert isinstance(tpm, Rate) and [t.name for t in tpm.tokens] == ["input_tokens", "output_tokens"]
    assert tpm.wall is METRICS["wall_clock_s"] and tpm.per == 60
    assert not any(isinstance(mt.plan, Plan) for mt in METRICS.values() if mt.family != "requests")


def test_vllm_success_rule_is_one_function_for_both_parse_paths() -> None:
    """The status and placeholder rule was written once over lists and once over Arrow arrays; the
    Python path now runs the Arrow rule (the fast path's row-for-row comparison is in test_vllm_bench)."""
    from bench_ledger.importers.vllm_bench import success_rule_lists

    arrays = {"errors": ["", None, "boom", ""], "ttfts": [0.0, 0.0, 0.3, 0.2], "latencies": [1, 0.0, 0.0, 2.5]}
    ruled = success_rule_lists(arrays, 4, ("ttfts", "latencies"))
    assert ruled is not None
    status, error, kept = ruled
    assert status == ["ok", "unknown", "failed", "ok"] and error == [None, None, "boom", None]
    assert kept == {"ttfts": [0.0, None, None, 0.2], "latencies": [1.0, None, None, 2.5]}
    no_errors = success_rule_lists({"ttfts": [0.0, 0.4]}, 2, ("ttfts", "latencies"))
    assert no_errors == (["unknown"] * 2, [None, None], {"ttfts": [None, 0.4], "latencies": [None, None]})
    assert success_rule_lists({"ttfts": ["0.05"]}, 1, ("ttfts",)) is None  # the column validation names it
