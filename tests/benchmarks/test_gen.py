"""benchmarks/gen.py: the claims file it generates for the audit benchmark is valid and counts its claims."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_claims_file_is_valid_and_counts_its_claims(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gen
    from bench_ledger.queries.claims import load_claims

    vllm = tmp_path / "v.jsonl"
    gen.vllm_and_ledger(vllm, 3, 20, 2, None)
    for n in (7, 100, 1000):
        out = tmp_path / f"c{n}.yaml"
        counts = gen.claims(vllm, out, n)
        claims = load_claims(out).claims  # the documented format; every referenced claim exists
        assert len(claims) == n == counts["metric"] + counts["derived"]
        assert counts["metric"] == sum(c.basis == "metric" for c in claims)
    assert (counts["metric"], counts["derived"], counts["evaluate_calls"]) == (600, 400, 700)
