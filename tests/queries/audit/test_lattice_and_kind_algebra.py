"""The audit fails closed (issue 10): the verdict lattice, the closed kind algebra, cache figures only
from a captured cache field, metric claims of the wrong kind. Claims are written as a new user
would from docs/claims.md and the report; a fake metric evaluator stands in for the ledger (the
ledger-backed halves are in tests/queries/audit/test_against_a_ledger.py)."""

from __future__ import annotations

import re
from fractions import Fraction as F
from pathlib import Path

import pytest
from bench_ledger.queries.audit import audit
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.queries.values import MetricValue, Scope
from pydantic import ValidationError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "claims.md"

# (metric, batch, run) -> (value, unit, kind); None: n/a
VALUES: dict[tuple, tuple | None] = {
    ("input_tokens", "fx", "50k-200-c4n8"): (F(399640), "tokens", "token_count"),
    ("output_tokens", "fx", "50k-200-c4n8"): (F(607), "tokens", "token_count"),
    ("wall_clock_s", "fx", "50k-200-c4n8"): (F(400247 * 60, 1840234), "s", "duration"),
    ("total_tpm", "fx", "50k-200-c4n8"): (F(1840234), "tokens/min", "aggregate_token_rate"),
    ("output_tpm", "fx", "50k-200-c4n8"): (F(27911, 10), "tokens/min", "aggregate_token_rate"),
    ("total_tpm", "fx", "decode-2k"): (F(21170), "tokens/min", "aggregate_token_rate"),
    ("wall_clock_s", "fx", "cold-50k-cold"): None,
    ("ttft_p50", "fx", "cold-50k-cold"): (F(11019, 1000), "s", "latency"),
    ("ttft_p50", "fx", "cold-50k-warm"): (F(336, 1000), "s", "latency"),
    ("input_tokens", "fx", "cold-50k-cold"): (F(75654), "tokens", "token_count"),
    ("cache_hit_tokens", "fx", "cold-50k-warm"): (F(75000), "tokens", "cache_hit_tokens"),
    ("record_groups", "fx", None): (F(16), "runs", "record_count"),
    ("requests_ok", "fx", None): (F(322), "requests", "request_count"),
    ("power_sum_of_card_means_w", "fx", None): (F(3814), "W", "power_card_mean_sum"),
    ("gpu_activity_time_pct_mean", "fx", None): (F(907, 10), "%", "activity_time_percent"),
    ("memory_busy_pct_mean", "fx", None): (F(54, 10), "%", "memory_busy_percent"),
    ("fb_memory_used_max", "fx", None): (F(92153), "unconfirmed", "device_memory"),
}


def fake_evaluate(ledger, metric: str, scope: Scope) -> MetricValue:
    key = (metric, scope.batch, scope.run)
    if key not in VALUES:
        raise KeyError(f"unknown metric {metric!r}")
    got = VALUES[key]
    if got is None:
        return MetricValue(metric, scope, None, "s", "duration", "n/a", na_reason="the capture has no send/end times")
    value, unit, kind = got
    return MetricValue(metric, scope, value, unit, kind, "derived", inputs={}, run_ids=[1])


def run(claims: list[dict]) -> dict:
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    return {r.claim_id: r for r in audit(cf, ledger=None, evaluate=fake_evaluate).results}


def m(
    cid: str, text: str, name: str, kind: str, unit: str | None = None, run: str | None = "50k-200-c4n8", **kw
) -> dict:
    scope = {"batch": "fx", **({"run": run} if run else {})}
    return {"id": cid, "text": text, "unit": unit, "kind": kind, "metric": {"name": name, "scope": scope}, **kw}


def d(cid: str, text: str, kind: str, op: str, operands: list, unit: str | None = None, **kw) -> dict:
    flags = {k: kw.pop(k) for k in list(kw) if k in ("attributes_to", "series", "from_unit")}
    return {
        "id": cid,
        "text": text,
        "unit": unit,
        "kind": kind,
        "derived": {"op": op, "operands": operands, **flags},
        **kw,
    }


# --------------------------------------------------------------------------- the lattice, every pair


LEVELS = ("refused", "n/a", "not-derivable", "mismatch", "estimated", "reported", "rounded", "measured")
# own arithmetic -> the verdict for a weakest operand at each level of LEVELS (written out by hand)
EXPECTED = {
    "refused": ("refused",) * 8,
    "not-derivable": (
        "refused",
        "refused",
        "not-derivable",
        "not-derivable",
        "not-derivable",
        "not-derivable",
        "not-derivable",
        "not-derivable",
    ),
    "mismatch": ("refused", "refused", "not-derivable", "mismatch", "mismatch", "mismatch", "mismatch", "mismatch"),
    "consistent": (
        "refused",
        "refused",
        "not-derivable",
        "mismatch",
        "estimated",
        "consistent",
        "consistent",
        "consistent",
    ),
}
PROVENANCE = ("n/a", "n/a", "n/a", "n/a", "estimated", "derived from reported", "derived from rounded", "derived")


def test_levels_order_worst_first() -> None:
    from bench_ledger.queries import lattice

    assert lattice.LEVELS == LEVELS


@pytest.mark.parametrize("own", list(EXPECTED))
@pytest.mark.parametrize("i", range(len(LEVELS)))
def test_lattice_own_verdict_against_each_operand_level(own: str, i: int) -> None:
    from bench_ledger.queries.lattice import Evidence, combine

    out = combine(own, [Evidence("measured", "good"), Evidence(LEVELS[i], "weak", rule="R12", why="unit unconfirmed")])
    assert out.verdict == EXPECTED[own][i]
    assert out.provenance == PROVENANCE[i]
    capped = out.verdict != own
    assert (out.weakest is not None and out.weakest.source == "weak") == capped
    if capped:
        assert out.why.startswith("operand weak is " + LEVELS[i]) or out.verdict == "estimated"


@pytest.mark.parametrize("i", range(len(LEVELS)))
@pytest.mark.parametrize("j", range(len(LEVELS)))
def test_lattice_two_operands_the_weaker_decides(i: int, j: int) -> None:
    from bench_ledger.queries.lattice import Evidence, combine

    out = combine("consistent", [Evidence(LEVELS[i], "a"), Evidence(LEVELS[j], "b")])
    assert out.verdict == EXPECTED["consistent"][min(i, j)]
    if out.weakest is not None:
        assert out.weakest.source == ("a" if i <= j else "b")


def test_lattice_and_kind_table_in_docs_are_generated_from_the_code() -> None:
    from bench_ledger.queries import lattice
    from bench_ledger.queries.claims import GENERATED, generated_block, kind_algebra

    text = DOCS.read_text(encoding="utf-8")
    for name in GENERATED:
        assert generated_block(name) in text, "regenerate: python -m bench_ledger.queries.claims --docs docs/claims.md"
    assert lattice.markdown() in text and kind_algebra.markdown() in text


# --------------------------------------------------------------------------- 1. operand verdicts carry


IN = m("in", "399,640", "input_tokens", "token_count", "tokens")
OUT = m("out", "607", "output_tokens", "token_count", "tokens")


def test_ratio_of_two_mismatched_claims_is_a_mismatch() -> None:
    r = run(
        [
            m("a", "1,900,000", "total_tpm", "aggregate_token_rate", "tokens/min"),
            m("b", "20,000", "total_tpm", "aggregate_token_rate", "tokens/min", run="decode-2k"),
            d("q", "95.0", "ratio", "ratio", ["a", "b"], "x"),
        ]
    )
    assert r["a"].verdict == r["b"].verdict == "mismatch"
    assert r["q"].verdict == "mismatch" and r["q"].weakest == "a"
    assert r["q"].why.startswith("operand a is mismatch: recomputed 1,840,234 vs printed 1,900,000")


def test_product_with_a_not_derivable_operand_is_not_derivable() -> None:
    r = run(
        [
            m("wall", "13.05", "wall_clock_s", "duration", "s", run="cold-50k-cold"),
            d("t", "26.1", "duration", "product", ["wall", {"value": "2", "exact": True}], "s"),
        ]
    )
    assert r["wall"].verdict == "not-derivable"
    assert r["t"].verdict == "not-derivable" and r["t"].weakest == "wall"
    assert r["t"].missing == "operand wall is not-derivable: the capture has no send/end times"


def test_convert_of_a_refused_claim_is_refused_with_its_rule() -> None:
    r = run(
        [
            m("fb", "92,153", "fb_memory_used_max", "device_memory", "MiB", run=None),
            d("gib", "90.0", "device_memory", "convert", ["fb"], "GiB"),
        ]
    )
    assert r["fb"].verdict == "refused" and r["fb"].rule == "R12"
    assert r["gib"].verdict == "refused" and r["gib"].rule == "R12" and r["gib"].weakest == "fb"
    assert r["gib"].why.startswith("operand fb is refused (R12)")


def test_a_good_derivation_says_derived_from_rounded() -> None:
    r = run([IN, OUT, d("sum", "400,247", "token_count", "sum", ["in", "out"], "tokens")])
    assert (r["sum"].verdict, r["sum"].provenance, r["sum"].weakest) == ("consistent", "derived", None)


# --------------------------------------------------------------------------- 2. cache-hit tokens


def test_cache_hit_tokens_from_ttft_are_refused_r9_even_when_said_measured() -> None:
    r = run(
        [
            m("input", "75,654", "input_tokens", "token_count", "tokens", run="cold-50k-cold"),
            m("cold", "11.019", "ttft_p50", "latency", "s", run="cold-50k-cold"),
            m("warm", "0.336", "ttft_p50", "latency", "s", run="cold-50k-warm"),
            d(
                "hits",
                "73,347",
                "cache_hit_tokens",
                "product",
                [
                    "input",
                    {
                        "op": "difference",
                        "operands": [{"value": "1", "exact": True}, {"op": "ratio", "operands": ["warm", "cold"]}],
                    },
                ],
                "tokens",
                says="measured",
            ),
        ]
    )
    assert r["hits"].verdict == "refused" and r["hits"].rule == "R9"
    assert "TTFT includes scheduling and fixed overheads" in r["hits"].why


def test_cache_cost_needs_captured_hit_tokens() -> None:
    price = {"value": "0.2", "unit": "CNY/Mtok", "kind": "price_per_token"}
    r = run(
        [
            m("input", "75,654", "input_tokens", "token_count", "tokens", run="cold-50k-cold"),
            m("hits", "75,000", "cache_hit_tokens", "cache_hit_tokens", "tokens", run="cold-50k-warm"),
            d("cost-bad", "15,130.8", "cache_cost", "product", ["input", price]),
            d("cost-ok", "15,000", "cache_cost", "product", ["hits", price]),
        ]
    )
    assert r["cost-bad"].verdict == "refused" and r["cost-bad"].rule == "R9"
    assert "no operand is a captured cache field" in r["cost-bad"].why
    assert r["hits"].verdict == "reproduced"
    assert r["cost-ok"].verdict == "consistent"


# --------------------------------------------------------------------------- 3. the report's own definitions


def test_total_tpm_is_60_tokens_over_the_common_wall_clock() -> None:
    """R3 as the report defines it: 60 x (input + output) / wall clock."""
    wall = {"metric": "wall_clock_s", "scope": {"batch": "fx", "run": "50k-200-c4n8"}, "kind": "duration"}
    r = run(
        [
            IN,
            OUT,
            d(
                "tpm",
                "1,840,234",
                "aggregate_token_rate",
                "product",
                [
                    {"value": "60", "unit": "s/min", "exact": True},
                    {"op": "divide", "operands": [{"op": "sum", "operands": ["in", "out"]}, wall]},
                ],
                "tokens/min",
            ),
            d(
                "tpm-ratio",
                "30,670.6",
                "aggregate_token_rate",
                "ratio",
                [{"op": "sum", "operands": ["in", "out"]}, wall],
                "tokens/s",
            ),
        ]
    )
    assert r["tpm"].verdict == "consistent", r["tpm"].why
    assert r["tpm-ratio"].verdict == "consistent", r["tpm-ratio"].why


def test_an_undefined_combination_is_a_named_kind_error_not_r1() -> None:
    r = run(
        [
            m("cold", "11.019", "ttft_p50", "latency", "s", run="cold-50k-cold"),
            m("pw", "3,814", "power_sum_of_card_means_w", "power_card_mean_sum", "W", run=None),
            d("x", "0.0029", "ratio", "divide", ["cold", "pw"]),
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule == "kinds"
    assert r["x"].why.startswith("no row of the kind table gives divide(latency, power_card_mean_sum)")


@pytest.mark.parametrize(
    ("kind", "name", "printed"),
    [
        ("mfu", "gpu_activity_time_pct_mean", "90.7"),
        ("sm_active_percent", "gpu_activity_time_pct_mean", "90.7"),
        ("tensor_active_percent", "gpu_activity_time_pct_mean", "90.7"),
        ("memory_bandwidth_utilization", "memory_busy_pct_mean", "5.4"),
    ],
)
def test_counters_claimed_as_what_they_are_not_are_refused_r13(kind: str, name: str, printed: str) -> None:
    counter = "activity_time_percent" if "activity" in name else "memory_busy_percent"
    r = run([m("dmon", printed, name, counter, "%", run=None), d("claim", printed, kind, "convert", ["dmon"], "%")])
    assert r["dmon"].verdict == "reproduced"
    assert r["claim"].verdict == "refused" and r["claim"].rule == "R13"


def test_exact_constants_need_no_kind_but_other_literals_do() -> None:
    r = run([IN, d("per-gpu", "49,955", "token_count", "divide", ["in", {"value": "8", "exact": True}], "tokens")])
    assert r["per-gpu"].verdict == "consistent"
    with pytest.raises(ValidationError) as exc:
        run([IN, d("x", "1", "token_count", "divide", ["in", {"value": "8"}])])
    assert "`kind` is missing: a literal number needs its quantity kind" in str(exc.value)


def test_every_rule_id_the_algebra_cites_is_a_rulebook_rule_or_kinds() -> None:
    from bench_ledger.queries.claims import kind_algebra

    ids = {kind_algebra.rule_for({a, b}) for a in kind_algebra.KINDS for b in kind_algebra.KINDS}
    assert ids <= {"R1", "R2", "R3", "R4", "R5", "R8", "R9", "R13", "R14", "kinds"}
    assert all(re.fullmatch(r"R\d+|kinds", i) for i in ids)


# --------------------------------------------------------------------------- 4. metric claims of the wrong kind


def test_record_count_claimed_as_request_count_is_refused_naming_both_kinds() -> None:
    r = run([m("groups", "16", "record_groups", "request_count", "requests", run=None)])
    assert r["groups"].verdict == "refused" and r["groups"].rule == "R2"
    assert r["groups"].why == "the metric record_groups is of kind record_count; the claim says request_count"


def test_sum_of_card_means_claimed_as_peak_of_sum_is_refused_r14() -> None:
    r = run([m("peak", "3,814", "power_sum_of_card_means_w", "power_peak_of_sum", "W", run=None)])
    assert r["peak"].verdict == "refused" and r["peak"].rule == "R14"
    assert "power_card_mean_sum" in r["peak"].why and "power_peak_of_sum" in r["peak"].why


def test_metric_operand_of_the_wrong_kind_is_refused() -> None:
    r = run(
        [
            d(
                "x",
                "2",
                "ratio",
                "ratio",
                [
                    {"metric": "record_groups", "scope": {"batch": "fx"}, "kind": "request_count"},
                    {"metric": "requests_ok", "scope": {"batch": "fx"}, "kind": "request_count"},
                ],
            )
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule == "R2"
    assert "record_groups is of kind record_count; the operand says request_count" in r["x"].why


# --------------------------------------------------------------------------- 5. comparisons fail closed


def q(cid: str, text: str, context: dict | None = None) -> dict:
    return {
        "id": cid,
        "text": text,
        "unit": "tokens/s",
        "kind": "aggregate_token_rate",
        "quoted": {"source": "archive"},
        **({"context": context} if context else {}),
    }


def test_attribution_without_any_context_is_refused_listing_the_unknown_factors() -> None:
    r = run(
        [
            q("a", "6,660"),
            q("b", "3,761"),
            d("hw", "1.77x", "ratio", "ratio", ["a", "b"], "x", attributes_to="hardware"),
        ]
    )
    assert r["hw"].verdict == "refused" and r["hw"].rule == "R6"
    assert r["hw"].why.startswith(
        "the other factors are not known to be equal (unknown: model, hardware, gpu_count, engine"
    )


def test_attribution_with_a_partial_context_is_refused() -> None:
    r = run(
        [
            q("a", "6,660", {"hardware": "RTX 6000D", "gpu_count": "8"}),
            q("b", "3,761", {"hardware": "H20", "gpu_count": "8"}),
            d("hw", "1.77x", "ratio", "ratio", ["a", "b"], "x", attributes_to="hardware"),
        ]
    )
    assert r["hw"].verdict == "refused" and r["hw"].rule == "R6"
    assert "unknown: model, engine, engine_version, weights_version, layout" in r["hw"].why


def test_equal_resources_and_pairing_need_known_factors() -> None:
    r = run(
        [
            q("a", "100"),
            q("b", "102"),
            d("eq", "2%", "percent_change", "percent_change", ["a", "b"], "%")
            | {"derived": {"op": "percent_change", "operands": ["a", "b"], "claims_equal_resources": True}},
            d("pair", "2%", "percent_change", "percent_change", ["a", "b"], "%")
            | {"derived": {"op": "percent_change", "operands": ["a", "b"], "claims_paired": True}},
        ]
    )
    assert r["eq"].verdict == "refused" and r["eq"].why.startswith("the GPU count is not known on both sides")
    assert r["pair"].verdict == "refused" and r["pair"].rule == "R6"


def test_misspelt_context_key_and_attribution_factor_are_errors() -> None:
    with pytest.raises(ValidationError) as exc:
        run([q("a", "1", {"hardwre": "H20"})])
    assert "unknown factor(s) 'hardwre' in the context; factors: model, hardware, gpu_count" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        run([q("a", "1"), q("b", "1"), d("x", "1x", "ratio", "ratio", ["a", "b"], "x", attributes_to="hardwar")])
    assert "unknown factor 'hardwar'; factors: model, hardware" in str(exc.value)


def test_a_series_of_quoted_points_without_stage_is_refused() -> None:
    r = run(
        [
            q("p1", "2,577.0"),
            q("p2", "2,329.1"),
            q("p3", "2,753.8"),
            d("s", "2,329.1 .. 2,753.8", "aggregate_token_rate", "range", ["p1", "p2", "p3"], "tokens/s", series=True),
            q("s1", "2,577.0", {"batch": "one stage"}),
            q("s2", "2,329.1", {"batch": "one stage"}),
            d("ok", "2,329.1 .. 2,577.0", "aggregate_token_rate", "range", ["s1", "s2"], "tokens/s", series=True),
        ]
    )
    assert r["s"].verdict == "refused" and r["s"].rule == "R2"
    assert r["s"].why == "nothing shows the points come from one stage: no batch known for p1, p2, p3"
    assert r["ok"].verdict == "consistent"


# --------------------------------------------------------------------------- a ratio carries what it is a ratio of

TTFT_RATIO = d("speedup", "0.0305", "ratio", "ratio", ["warm", "cold"])
TTFTS = [
    m("input", "75,654", "input_tokens", "token_count", "tokens", run="cold-50k-cold"),
    m("cold", "11.019", "ttft_p50", "latency", "s", run="cold-50k-cold"),
    m("warm", "0.336", "ttft_p50", "latency", "s", run="cold-50k-warm"),
    TTFT_RATIO,
]


@pytest.mark.parametrize("kind", ["token_count", "cache_hit_tokens", "other"])
def test_a_latency_ratio_times_tokens_is_no_token_count_whatever_the_claim_says(kind: str) -> None:
    # the ratio is a claim of its own (kind: ratio): it still carries that it is a ratio of latencies
    one_minus = {"op": "difference", "operands": [{"value": "1", "exact": True}, "speedup"]}
    hits = d("hits", "73,347", kind, "product", ["input", one_minus], "tokens")
    r = run([*TTFTS, hits])
    assert r["speedup"].verdict == "consistent"
    assert (r["hits"].verdict, r["hits"].rule) == ("refused", "R9")
    assert "a ratio of latency" in r["hits"].why


def test_a_ratio_of_tokens_scales_tokens() -> None:
    share = d("share", "0.00152", "ratio", "ratio", ["out", "in"])
    r = run([IN, OUT, share, d("again", "607", "token_count", "product", ["in", "share"], "tokens")])
    assert r["again"].verdict == "consistent", r["again"].why
