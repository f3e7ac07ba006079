"""The audit's type rules, one test each, and the verdicts, with a fake metric evaluator (no database)."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from bench_ledger.queries.audit import audit
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.queries.values import MetricValue, Scope

# --------------------------------------------------------------------------- fakes

# metric values by (name, batch, run, deployment, launch)
VALUES: dict[tuple, tuple] = {
    ("total_tpm", "fx", "50k-200-c4n8"): (F(1840234), "tokens/min", "aggregate_token_rate"),
    ("total_tpm", "fx", "decode-2k"): (F(21170), "tokens/min", "aggregate_token_rate"),
    ("output_tpm", "fx", "50k-200-c4n8"): (F(27911, 10), "tokens/min", "aggregate_token_rate"),
    ("requests_ok", "fx", None): (F(322), "requests", "request_count"),
    ("requests_ok", "m17", None): (F(208), "requests", "request_count"),
    ("record_groups", "fx", None): (F(16), "runs", "record_count"),
    ("per_stream_decode_rate_median", "fx", "decode-2k"): (F(13339, 100), "tokens/s", "per_stream_token_rate"),
    ("ttft_p50", "fx", "cold-50k-cold"): (F(11019, 1000), "s", "latency"),
    ("ttft_p50", "fx", "cold-50k-warm"): (F(336, 1000), "s", "latency"),
    ("total_tpm", "fx", "cold-50k-cold"): None,  # n/a: the probe has no times
    ("kv_capacity_ratio", "h20-1017", 9): (F(16593113, 262144), "windows", "capacity_ratio"),
    ("seconds_to_ready", "h20-old", 4): (F(390), "s", "startup_time"),
    ("seconds_to_ready", "h20-old", 8): (F(270), "s", "startup_time"),
    ("model_allocation_gib", "h20-1017", 9): (F(2113, 100), "GiB", "model_allocation"),
    ("dmon_sm_mean", "fx", None): (F(907, 10), "%", "activity_time_percent"),
    ("power_card_mean_sum", "fx", None): (F(3814), "W", "power_card_mean_sum"),
    ("dmon_fb_max", "fx", None): (F(92153), "unconfirmed", "device_memory"),
    ("estimated_thing", "fx", None): (F(100), "tokens/min", "aggregate_token_rate"),
}


def fake_evaluate(ledger, metric: str, scope: Scope) -> MetricValue:
    key = (metric, scope.batch or scope.deployment, scope.run if scope.run is not None else scope.launch)
    if key not in VALUES:
        raise KeyError(f"unknown metric {metric!r}")
    got = VALUES[key]
    if got is None:
        return MetricValue(
            metric,
            scope,
            None,
            "tokens/min",
            "aggregate_token_rate",
            "n/a",
            na_reason="the capture has no send/end times",
        )
    value, unit, kind = got
    flag = "estimated" if metric.startswith("estimated") else "derived"
    return MetricValue(metric, scope, value, unit, kind, flag, inputs={"requests": 8}, run_ids=[1])


def make(claims: list[dict]) -> ClaimsFile:
    return ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})


def run(claims: list[dict]) -> dict:
    report = audit(make(claims), ledger=None, evaluate=fake_evaluate)
    return {r.claim_id: r for r in report.results}


def metric(cid, text, name, kind, unit=None, batch="fx", run=None, deployment=None, launch=None, **kw) -> dict:
    scope = {
        k: v
        for k, v in {"batch": batch, "run": run, "deployment": deployment, "launch": launch}.items()
        if v is not None
    }
    if deployment is not None:
        scope.pop("batch", None)
    return {"id": cid, "text": text, "unit": unit, "kind": kind, "metric": {"name": name, "scope": scope}, **kw}


def lit(value, kind, unit=None, **kw) -> dict:
    return {"value": value, "kind": kind, **({"unit": unit} if unit else {}), **kw}


def derived(cid, text, kind, op, operands, unit=None, **flags) -> dict:
    return {"id": cid, "text": text, "unit": unit, "kind": kind, "derived": {"op": op, "operands": operands, **flags}}


def quoted(cid, text, kind, unit=None, context=None) -> dict:
    return {
        "id": cid,
        "text": text,
        "unit": unit,
        "kind": kind,
        "quoted": {"source": "archive"},
        "context": context or {},
    }


PEAK = metric("peak", "1,840,234", "total_tpm", "aggregate_token_rate", "tokens/min", run="50k-200-c4n8")
LOW = metric("low", "21,170", "total_tpm", "aggregate_token_rate", "tokens/min", run="decode-2k")


# --------------------------------------------------------------------------- verdicts


def test_reproduced_and_mismatch():
    r = run(
        [
            PEAK,
            metric("out", "2,791", "output_tpm", "aggregate_token_rate", "tokens/min", run="50k-200-c4n8"),
            metric("bad", "2,795", "output_tpm", "aggregate_token_rate", "tokens/min", run="50k-200-c4n8"),
        ]
    )
    assert r["peak"].verdict == "reproduced"
    assert r["out"].verdict == "reproduced"  # 2791.1 is inside [2790.5, 2791.5]
    assert r["bad"].verdict == "mismatch"
    assert "2,791.1" in r["bad"].recomputed and "-3.9" in r["bad"].why


def test_not_derivable_when_metric_is_na():
    r = run([metric("probe", "397,849", "total_tpm", "aggregate_token_rate", "tokens/min", run="cold-50k-cold")])
    assert r["probe"].verdict == "not-derivable"
    assert "send/end times" in r["probe"].missing


def test_not_derivable_when_metric_unknown():
    r = run([metric("x", "1", "no_such_metric", "count")])
    assert r["x"].verdict == "not-derivable"


def test_consistent_and_mismatch_derived():
    r = run(
        [
            PEAK,
            LOW,
            derived("range", "约 86.9 倍", "ratio", "ratio", ["peak", "low"], "x"),
            derived("wrong", "88.0x", "ratio", "ratio", ["peak", "low"], "x"),
        ]
    )
    assert r["range"].verdict == "consistent"
    assert r["range"].provenance == "derived from rounded"
    assert r["wrong"].verdict == "mismatch" and "off by" in r["wrong"].why


def test_quoted_estimated_na_kept():
    r = run(
        [
            quoted("q", "6,660", "aggregate_token_rate", "tokens/s"),
            {"id": "e", "text": "126", "kind": "capacity_ratio", "estimated": {"basis": "rough stock"}},
            {"id": "n", "text": "N/A", "kind": "aggregate_token_rate", "na": {"reason": "only rounded summaries"}},
        ]
    )
    assert [r[k].verdict for k in "qen"] == ["quoted", "estimated", "n/a-kept"]


def test_range_claim_is_two_numbers():
    r = run(
        [
            PEAK,
            LOW,
            derived("rng", "21,170 .. 1,840,234", "aggregate_token_rate", "range", ["low", "peak"]),
            derived("bad", "21,000 .. 1,840,234", "aggregate_token_rate", "range", ["low", "peak"]),
        ]
    )
    assert r["rng"].verdict == "consistent"
    assert r["bad"].verdict == "mismatch"


def test_grim_on_a_count():
    # a mean of 8 requests' output tokens is k/8
    r = run(
        [
            quoted("m", "75.83", "other", "tokens") | {"count_of": 8},
            quoted("ok", "75.875", "other", "tokens") | {"count_of": 8},
        ]
    )
    assert r["m"].verdict == "mismatch" and "GRIM" in r["m"].why
    assert r["ok"].verdict == "quoted"


def test_a_count_is_an_integer():
    r = run(
        [
            quoted("n", "2", "count"),
            quoted("m", "8", "count"),
            quoted("bad", "2.5", "request_count"),
            derived("p", "16", "count", "product", ["n", "m"]),
            derived("q", "17", "count", "product", ["n", "m"]),
        ]
    )
    assert r["p"].verdict == "consistent" and r["p"].recomputed == "16"  # printed counts are exact
    assert r["q"].verdict == "mismatch"
    assert r["bad"].verdict == "mismatch" and "integer" in r["bad"].why


def test_derived_from_estimate_is_estimated():
    r = run(
        [
            {
                "id": "e",
                "text": "100",
                "kind": "aggregate_token_rate",
                "unit": "tokens/min",
                "estimated": {"basis": "target ratio"},
            },
            derived("d", "200", "aggregate_token_rate", "product", ["e", lit("2", "count", exact=True)], "tokens/min"),
        ]
    )
    assert r["d"].verdict == "estimated" and r["d"].provenance == "estimated"


def test_converted_exactly():
    r = run(
        [
            quoted("gb", "510.31 GB", "weights_file_size", "GB"),
            derived("gib", "475.26", "weights_file_size", "convert", ["gb"], "GiB"),
        ]
    )
    assert r["gib"].verdict == "consistent"


# --------------------------------------------------------------------------- type rules, one each


def test_rule_ratio_within_one_kind():
    r = run(
        [
            PEAK,
            metric("req", "322", "requests_ok", "request_count", "requests"),
            derived("x", "5,715", "ratio", "ratio", ["peak", "req"]),
        ]
    )
    assert r["x"].verdict == "refused"
    assert "one quantity kind" in r["x"].why


def test_rule_percent_change_within_one_kind():
    r = run(
        [
            PEAK,
            metric("req", "322", "requests_ok", "request_count", "requests"),
            derived("x", "+5%", "percent_change", "percent_change", ["req", "peak"], "%"),
        ]
    )
    assert r["x"].verdict == "refused"


def test_rule_conversion_within_one_kind():
    r = run(
        [
            quoted("gb", "510.31 GB", "weights_file_size", "GB"),
            derived("x", "475.26", "device_memory", "convert", ["gb"], "GiB"),
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule == "R1"
    r = run([PEAK, derived("y", "30,670", "per_stream_token_rate", "convert", ["peak"], "tokens/s")])
    assert r["y"].verdict == "refused" and r["y"].rule == "R4"


def test_rule_r1_memory_kinds_never_mix():
    r = run(
        [
            quoted("w", "510.31 GB", "weights_file_size", "GB"),
            metric(
                "alloc", "21.13", "model_allocation_gib", "model_allocation", "GiB", deployment="h20-1017", launch=9
            ),
            derived(
                "freed",
                "约 40 GB",
                "device_memory",
                "difference",
                [{"op": "divide", "operands": ["w", lit("8", "count", exact=True)]}, "alloc"],
                "GB",
            ),
        ]
    )
    assert r["alloc"].verdict == "reproduced"
    assert r["freed"].verdict == "refused" and r["freed"].rule == "R1"
    assert "model_allocation" in r["freed"].why and "weights_file_size" in r["freed"].why


def test_rule_r2_counts_only_within_one_batch():
    r = run(
        [
            metric("fx", "322", "requests_ok", "request_count", "requests"),
            metric("m17", "208", "requests_ok", "request_count", "requests", batch="m17"),
            derived("total", "530", "request_count", "sum", ["fx", "m17"], "requests"),
            derived("same", "644", "request_count", "sum", ["fx", "fx"], "requests"),
        ]
    )
    assert r["total"].verdict == "refused" and r["total"].rule == "R2"
    assert r["same"].verdict == "consistent"


def test_rule_r2_records_are_not_requests():
    r = run(
        [
            metric("groups", "16", "record_groups", "record_count", "runs"),
            metric("fx", "322", "requests_ok", "request_count", "requests"),
            derived("x", "338", "request_count", "sum", ["groups", "fx"]),
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule == "R2"


def test_rule_r2_series_across_batches():
    r = run(
        [
            quoted("a", "2,577.0", "aggregate_token_rate", "tok/s", {"batch": "old ms16->ms32 stage"}),
            quoted("b", "2,329.1", "aggregate_token_rate", "tok/s", {"batch": "old dspark stage"}),
            quoted("c", "2,753.8", "aggregate_token_rate", "tok/s", {"batch": "m17"}),
            derived("s", "2,329.1 .. 2,753.8", "aggregate_token_rate", "range", ["a", "b", "c"], "tok/s", series=True),
            derived("ok", "2,329.1 .. 2,753.8", "aggregate_token_rate", "range", ["a", "b", "c"], "tok/s"),
        ]
    )
    assert r["s"].verdict == "refused" and r["s"].rule == "R2"
    assert r["ok"].verdict == "consistent"


def test_rule_r4_per_stream_times_concurrency_is_not_aggregate():
    r = run(
        [
            metric(
                "stream",
                "133.39",
                "per_stream_decode_rate_median",
                "per_stream_token_rate",
                "tokens/s",
                run="decode-2k",
            ),
            derived(
                "users",
                "8,537",
                "aggregate_token_rate",
                "product",
                ["stream", lit("64", "concurrency", exact=True)],
                "tokens/s",
            ),
        ]
    )
    assert r["stream"].verdict == "reproduced"
    assert r["users"].verdict == "refused" and r["users"].rule == "R4"


def test_rule_r5_capacity_is_not_concurrency():
    r = run(
        [
            metric("cap", "63.3", "kv_capacity_ratio", "capacity_ratio", deployment="h20-1017", launch=9),
            derived("served", "126", "concurrency", "product", ["cap", lit("2", "count", exact=True)]),
            derived("stock", "126.6", "capacity_ratio", "product", ["cap", lit("2", "count", exact=True)]),
        ]
    )
    assert r["cap"].verdict == "reproduced"
    assert r["served"].verdict == "refused" and r["served"].rule == "R5"
    assert r["stock"].verdict == "consistent"


def test_rule_capacity_ratio_is_pool_over_window():
    r = run(
        [
            {
                "id": "cap",
                "text": "63.3",
                "kind": "capacity_ratio",
                "derived": {
                    "op": "divide",
                    "operands": [
                        lit("16,593,113", "kv_pool_tokens", "tokens", exact=True),
                        lit("262,144", "token_setting", "tokens", exact=True),
                    ],
                },
            }
        ]
    )
    assert r["cap"].verdict == "consistent"


SIXK = {"hardware": "RTX 6000D", "engine": "sglang", "gpu_count": "8", "seed": "s1", "workload": "50K/200 C4"}
H20 = {"hardware": "H20", "engine": "vllm", "gpu_count": "8", "seed": "s1", "workload": "50K/200 C4"}


def test_rule_r6_stack_ratio_is_not_a_hardware_ratio():
    claims = [
        quoted("a", "6,660", "aggregate_token_rate", "tokens/s", SIXK),
        quoted("b", "3,761", "aggregate_token_rate", "tokens/s", H20),
        derived("stack", "1.77x", "ratio", "ratio", ["a", "b"], "x"),
        derived("hw", "1.77x", "ratio", "ratio", ["a", "b"], "x", attributes_to="hardware"),
    ]
    r = run(claims)
    assert r["stack"].verdict == "consistent"
    assert any("stack ratio" in n for n in r["stack"].notes)
    assert r["hw"].verdict == "refused" and r["hw"].rule == "R6" and "stack ratio" in r["hw"].why


FULL = {
    "model": "DeepSeek-V4.1-Flash",
    "hardware": "H20",
    "gpu_count": "16",
    "engine": "vllm",
    "engine_version": "v0.31.0",
    "layout": "tp8 dp2 ep16",
    "engine_options": "ms32",
    "workload": "32/512 C64",
    "seed": "1",
    "warm_prefix_cache": "warm",
    "warm_process": "warm",
    "warm_compile": "warm",
    "warm_file_cache": "warm",
    "batch": "weights A/B",
}


def test_rule_r6_attribution_allowed_when_only_difference_and_all_else_known_equal():
    old = {**FULL, "weights_version": "old"}
    new = {**FULL, "weights_version": "1017"}
    r = run(
        [
            quoted("a", "150,936", "aggregate_token_rate", "tokens/min", old),
            quoted("b", "178,817", "aggregate_token_rate", "tokens/min", new),
            derived(
                "w", "+18.5%", "percent_change", "percent_change", ["a", "b"], "%", attributes_to="weights_version"
            ),
        ]
    )
    assert r["w"].verdict == "consistent"


def test_rule_r6_attribution_blocked_by_unknown_factors():
    r = run(
        [
            quoted("a", "150,936", "aggregate_token_rate", "tokens/min", {"weights_version": "old", "engine": "vllm"}),
            quoted("b", "178,817", "aggregate_token_rate", "tokens/min", {"weights_version": "1017", "engine": "vllm"}),
            derived(
                "w", "+18.5%", "percent_change", "percent_change", ["a", "b"], "%", attributes_to="weights_version"
            ),
        ]
    )
    assert r["w"].verdict == "refused" and r["w"].rule == "R6"
    assert r["w"].why == (
        "the other factors are not known to be equal (unknown: model, hardware, gpu_count, engine_version, "
        "layout, engine_options, workload, seed, warm_prefix_cache, warm_process, warm_compile, "
        "warm_file_cache, batch); differences: weights_version (old vs 1017); not known on both "
        "sides: model, hardware, gpu_count, engine_version, layout, engine_options, workload, seed, "
        "warm_prefix_cache, warm_process, warm_compile, warm_file_cache, batch"
    )


def test_rule_r6_unequal_gpu_counts_are_not_equal_resources():
    single = {"hardware": "RTX 6000D", "gpu_count": "8", "layout": "single node", "seed": "s1"}
    pd = {"hardware": "RTX 6000D", "gpu_count": "16", "layout": "PD", "seed": "s1"}
    r = run(
        [
            quoted("s", "1,000", "aggregate_token_rate", "tokens/s", single),
            quoted("p", "1,176", "aggregate_token_rate", "tokens/s", pd),
            derived("eq", "+17.6%", "percent_change", "percent_change", ["s", "p"], "%", claims_equal_resources=True),
            derived("plain", "+17.6%", "percent_change", "percent_change", ["s", "p"], "%"),
        ]
    )
    assert r["eq"].verdict == "refused" and r["eq"].rule == "R6" and "GPU counts" in r["eq"].why
    assert r["plain"].verdict == "consistent"


def test_rule_r6_different_seeds_are_not_paired():
    a = {"hardware": "RTX 6000D", "seed": "s1"}
    b = {"hardware": "RTX 6000D", "seed": "s2"}
    r = run(
        [
            quoted("a", "100", "aggregate_token_rate", "tokens/s", a),
            quoted("b", "102", "aggregate_token_rate", "tokens/s", b),
            derived("x", "2%", "percent_change", "percent_change", ["a", "b"], "%", claims_paired=True),
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule == "R6" and "seed" in r["x"].why


def test_rule_r6_uses_the_ledgers_factors_for_ledger_scopes():
    calls = []
    recorded = {
        1: {**FULL, "weights_version": "1017", "warm_prefix_cache": "cold"},
        2: {**FULL, "weights_version": "1017", "warm_prefix_cache": "warm"},
    }

    def fake_factors(ledger, spec):
        calls.append(spec)
        return recorded[int(spec.split(":")[1])]

    import bench_ledger.queries.audit._operands as audit_mod  # private: the run-label lookup stands in for a ledger

    orig = audit_mod._run_ids
    audit_mod._run_ids = lambda ledger, batch: {"cold-50k-cold": 1, "cold-50k-warm": 2}
    try:
        claims = [
            metric("cold", "11.019", "ttft_p50", "latency", "s", run="cold-50k-cold"),
            metric("warm", "0.336", "ttft_p50", "latency", "s", run="cold-50k-warm"),
            derived("x", "32.8x", "ratio", "ratio", ["cold", "warm"], "x", attributes_to="warm_prefix_cache"),
            derived("y", "32.8x", "ratio", "ratio", ["cold", "warm"], "x", attributes_to="hardware"),
            metric(
                "cold2", "11.019", "ttft_p50", "latency", "s", run="cold-50k-cold", context={"weights_version": "old"}
            ),
            derived("z", "32.8x", "ratio", "ratio", ["cold2", "warm"], "x"),
        ]
        report = audit(make(claims), ledger=object(), evaluate=fake_evaluate, factors=fake_factors)
    finally:
        audit_mod._run_ids = orig
    r = {x.claim_id: x for x in report.results}
    assert r["x"].verdict == "consistent"
    assert "run:1" in calls and "run:2" in calls
    assert r["y"].verdict == "refused" and r["y"].rule == "R6"
    assert r["z"].verdict == "refused" and r["z"].rule == "R6"
    assert "context weights_version='old', the ledger records '1017' for run:fx/cold-50k-cold" in r["z"].why


def test_rule_r7_range_across_loads_is_not_a_speedup():
    r = run(
        [
            PEAK | {"context": {"workload": "50K/200 C4N8"}},
            LOW | {"context": {"workload": "decode-2k C1N1"}},
            derived("speedup", "86.9x", "ratio", "ratio", ["peak", "low"], "x", claims_speedup=True),
            derived("range", "86.9x", "ratio", "ratio", ["peak", "low"], "x"),
        ]
    )
    assert r["speedup"].verdict == "refused" and r["speedup"].rule == "R7"
    assert r["range"].verdict == "consistent"


def test_rule_r8_launch_stages_are_not_cold_warm():
    r = run(
        [
            metric("l4", "390", "seconds_to_ready", "startup_time", "s", deployment="h20-old", launch=4),
            metric("l8", "270", "seconds_to_ready", "startup_time", "s", deployment="h20-old", launch=8),
            derived("reload", "10x", "ratio", "ratio", ["l4", "l8"], "x", claims_cold_warm=True),
            derived("plain", "1.44x", "ratio", "ratio", ["l4", "l8"], "x"),
        ]
    )
    assert r["l4"].verdict == "reproduced"
    assert r["reload"].verdict == "refused" and r["reload"].rule == "R8"
    assert r["plain"].verdict == "consistent"


def test_rule_r8_cold_warm_names_the_only_difference():
    a = {"warm_prefix_cache": "cold", "warm_process": "cold"}
    b = {"warm_prefix_cache": "warm", "warm_process": "warm"}
    r = run(
        [
            quoted("a", "11.019", "latency", "s", a),
            quoted("b", "0.336", "latency", "s", b),
            derived(
                "x",
                "32.8x",
                "ratio",
                "ratio",
                ["a", "b"],
                "x",
                claims_cold_warm=True,
                attributes_to="warm_prefix_cache",
            ),
        ]
    )
    assert r["x"].verdict == "refused" and r["x"].rule in ("R6", "R8")


def test_rule_r13_counters_keep_their_meaning():
    r = run(
        [
            metric("sm", "90.7%", "dmon_sm_mean", "activity_time_percent", "%"),
            derived("mfu", "90.7%", "utilization_percent", "convert", ["sm"], "%"),
        ]
    )
    assert r["sm"].verdict == "reproduced"
    assert r["mfu"].verdict == "refused" and r["mfu"].rule == "R13" and "MFU" in r["mfu"].why


def test_rule_r14_power_statistics_never_stand_for_each_other():
    r = run(
        [
            metric("mean", "3,814", "power_card_mean_sum", "power_card_mean_sum", "W"),
            derived("peak", "3,814", "power_peak_of_sum", "convert", ["mean"], "W"),
        ]
    )
    assert r["mean"].verdict == "reproduced"
    assert r["peak"].verdict == "refused" and r["peak"].rule == "R14"


def test_rule_r12_unconfirmed_units_never_convert():
    r = run(
        [
            metric("fb", "92,153", "dmon_fb_max", "device_memory", "unconfirmed"),
            derived("gib", "90.0", "device_memory", "convert", ["fb"], "GiB", from_unit="MiB"),
        ]
    )
    assert r["fb"].verdict == "reproduced"
    assert r["gib"].verdict == "refused" and r["gib"].rule == "R12"


def test_rule_r9_derived_from_na_is_na():
    r = run(
        [
            {
                "id": "na",
                "text": "N/A",
                "kind": "aggregate_token_rate",
                "unit": "tokens/min",
                "na": {
                    "reason": "only rounded summaries",
                    "would_fill": {
                        "op": "product",
                        "operands": [lit("397,849", "aggregate_token_rate", "tokens/min"), lit("0.001", "ratio")],
                    },
                },
            },
            derived("fill", "397", "aggregate_token_rate", "product", ["na", lit("1", "count", exact=True)]),
        ]
    )
    assert r["na"].verdict == "n/a-kept" and r["na"].evidence["would_fill"]["rule"] == "R9"
    assert r["fill"].verdict == "refused" and r["fill"].rule == "R9"


def test_rule_estimate_never_satisfies_measured():
    r = run(
        [
            {
                "id": "e",
                "text": "100",
                "kind": "aggregate_token_rate",
                "unit": "tokens/min",
                "estimated": {"basis": "target ratio"},
            },
            derived("d", "200", "aggregate_token_rate", "product", ["e", lit("2", "count", exact=True)], "tokens/min")
            | {"says": "measured"},
            metric("m", "100", "estimated_thing", "aggregate_token_rate", "tokens/min") | {"says": "measured"},
        ]
    )
    assert r["d"].verdict == "refused" and r["d"].rule == "provenance"
    assert r["m"].verdict == "refused" and r["m"].rule == "provenance"


def test_expected_verdicts_are_compared():
    r = run([PEAK | {"expected_verdict": "reproduced"}, LOW | {"expected_verdict": "mismatch"}])
    assert r["peak"].as_expected and not r["low"].as_expected


def test_claims_file_rejects_bad_references_and_bases():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown claim"):
        make([derived("x", "1", "ratio", "ratio", ["a", "b"])])
    with pytest.raises(ValidationError, match="exactly one"):
        make([{"id": "x", "text": "1", "kind": "ratio"}])
    with pytest.raises(ValidationError, match="unknown quantity kind"):
        make([quoted("x", "1", "speed")])
    with pytest.raises(ValidationError, match="cycle"):
        make([derived("a", "1", "ratio", "ratio", ["b", "b"]), derived("b", "1", "ratio", "ratio", ["a", "a"])])
