"""Derived claims recomputed from the ledger's values of their operands (issue 38).

The documented lattice (tests/queries/audit/test_lattice_and_kind_algebra.py) judges a derivation on its printed operands. Where an
operand is a ledger figure (a metric claim the ledger reproduced), the audit also recomputes the derivation
from the ledger's value: the printed arithmetic can hold while the raw data does not (a per-GPU figure
printed as the printed total / 8 while the raw total / 8 rounds to another last digit): `raw-mismatch`.
"""

from __future__ import annotations

from fractions import Fraction as F

from bench_ledger.queries.audit import audit
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.queries.lattice import LEVELS, combine
from bench_ledger.queries.values import MetricValue, Scope

VALUES = {
    ("output_tpm", "big"): (F(27911, 10), "tokens/min", "aggregate_token_rate"),  # 2,791.1: prints as 2,791
    ("output_tpm", "small"): (F(2000), "tokens/min", "aggregate_token_rate"),
}


def fake_evaluate(ledger, metric: str, scope: Scope) -> MetricValue:
    value, unit, kind = VALUES[(metric, scope.run)]
    return MetricValue(metric, scope, value, unit, kind, "derived", inputs={}, run_ids=[1])


def run(claims: list[dict]) -> dict:
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    return {r.claim_id: r for r in audit(cf, ledger=None, evaluate=fake_evaluate).results}


TOTAL = {
    "id": "total",
    "text": "2,791",
    "unit": "tokens/min",
    "kind": "aggregate_token_rate",
    "metric": {"name": "output_tpm", "scope": {"batch": "fx", "run": "big"}},
}


def per_gpu(text: str, cid: str = "per_gpu", of: str = "total") -> dict:
    return {
        "id": cid,
        "text": text,
        "unit": "tokens/min",
        "kind": "aggregate_token_rate",
        "derived": {"op": "divide", "operands": [of, {"value": "8", "exact": True}]},
    }


def test_printed_arithmetic_holds_but_the_raw_total_does_not() -> None:
    # printed: [2790.5, 2791.5] / 8 = [348.8125, 348.9375] meets 348.8; raw: 2791.1 / 8 = 348.8875, not 348.8
    r = run([TOTAL, per_gpu("348.8")])
    assert r["total"].verdict == "reproduced"
    got = r["per_gpu"]
    assert got.verdict == "raw-mismatch"
    assert got.why == (
        "the printed arithmetic holds ([348.8125, 348.9375]), but the ledger's value of total gives "
        "348.8875: outside the printed rounding by 0.0375"
    )
    ledger = got.evidence["ledger_operands"]
    assert ledger["operands"] == {"total": "2,791.1"} and ledger["holds"] is False
    assert ledger["recomputed"] == "348.8875"


def test_the_raw_total_holds_too_and_says_so() -> None:
    r = run([TOTAL, per_gpu("348.9")])
    got = r["per_gpu"]
    assert (got.verdict, got.provenance, got.why) == ("consistent", "derived from rounded", None)
    assert got.evidence["ledger_operands"]["holds"] is True
    assert got.notes[-1] == "recomputed from the ledger's value of total: 348.8875, inside the printed rounding too"


def test_no_ledger_operand_leaves_the_printed_verdict_alone() -> None:
    quoted = {"id": "q", "text": "2,791", "kind": "aggregate_token_rate", "unit": "tokens/min"}
    r = run([per_gpu("348.9", of="q"), quoted | {"quoted": {"source": "x"}}])
    assert r["per_gpu"].verdict == "consistent" and "ledger_operands" not in r["per_gpu"].evidence


def test_a_chain_carries_the_raw_value() -> None:
    # per_gpu's printed arithmetic holds, its raw data does not; a derivation over it is capped as a mismatch
    r = run([TOTAL, per_gpu("348.8"), per_gpu("43.6", cid="per_card_eighth", of="per_gpu")])
    assert r["per_gpu"].verdict == "raw-mismatch"
    assert r["per_card_eighth"].verdict == "mismatch" and r["per_card_eighth"].weakest == "per_gpu"


def test_the_documented_lattice_is_unchanged() -> None:
    assert LEVELS == ("refused", "n/a", "not-derivable", "mismatch", "estimated", "reported", "rounded", "measured")
    assert combine("consistent", []).verdict == "consistent"


def test_explain_shows_the_ledger_operands() -> None:
    from bench_ledger.queries.audit import Auditor, claim_steps

    claims = [TOTAL, per_gpu("348.8")]
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    lines = [s.text for s in claim_steps(Auditor(cf, None, evaluate=fake_evaluate), "per_gpu")]
    assert lines[0] == "claim per_gpu: '348.8' tokens/min [aggregate_token_rate] -> raw-mismatch"
    assert (
        "  from the ledger's values (total = 2,791.1): 348.8875, outside the printed rounding: off by 0.0375 (above)"
        in lines
    )
