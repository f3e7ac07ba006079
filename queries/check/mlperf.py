"""MLPerf loadgen ``loadgen/results.cc``: Offline ``samples_per_second = sample_count / max_latency``;
the detail log rounds its numbers (about 6 significant digits), so each summary value is
compared with the detail value of the same quantity as intervals (R11). Validity (text): the
summary's "Result is" and constraint lines against the detail's ``result_validity`` and
``*_met`` keys, and each log's validity against its own constraints (``LogSummary``/``LogDetail``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bench_ledger.queries.check.core import AGREE, DISAGREE, NOT_DERIVABLE, NS, Reported
from bench_ledger.queries.check.identity import Identity, TextResult, ToolCheck
from bench_ledger.queries.check.stat_definitions import NUMPY_LINEAR
from bench_ledger.tools import Tool

__all__ = ["MLPERF_LOADGEN"]

_MLPERF_PAIRS = {
    "Samples per second": "result_samples_per_second",
    "Tokens per second": "result_tokens_per_second",
    "Completed samples per second": "result_completed_samples_per_sec",
    "Completed tokens per second": "result_completed_tokens_per_second",
    "Scheduled samples per second": "result_scheduled_samples_per_sec",
    "Min latency (ns)": "result_min_latency_ns",
    "Max latency (ns)": "result_max_latency_ns",
    "Mean latency (ns)": "result_mean_latency_ns",
    "Min First Token latency (ns)": "result_first_token_min_latency_ns",
    "Max First Token latency (ns)": "result_first_token_max_latency_ns",
    "Mean First Token latency (ns)": "result_first_token_mean_latency_ns",
    "Min Time to Output Token (ns)": "result_time_to_output_token_min",
    "Max Time to Output Token (ns)": "result_time_to_output_token_max",
    "Mean Time to Output Token (ns)": "result_time_to_output_token_mean",
    "samples_per_query": "effective_samples_per_query",
    "target_qps": "effective_target_qps",
    "min_duration (ms)": "effective_min_duration_ms",
    "max_duration (ms)": "effective_max_duration_ms",
    "min_query_count": "effective_min_query_count",
    "max_query_count": "effective_max_query_count",
    "max_async_queries": "effective_max_async_queries",
    "qsl_rng_seed": "effective_qsl_rng_seed",
    "sample_index_rng_seed": "effective_sample_index_rng_seed",
    "schedule_rng_seed": "effective_schedule_rng_seed",
    "performance_sample_count": "effective_performance_sample_count",
    "target_latency (ns)": "effective_target_latency_ns",
}
_MLPERF_PCT = re.compile(
    r"(?P<p>\d+\.\d+) percentile (?P<what>latency|first token latency|time to output token) \(ns\)"
)
_MLPERF_PCT_KEY = {
    "latency": "result_{p}_percentile_latency_ns",
    "first token latency": "result_first_token_{p}_percentile_latency_ns",
    "time to output token": "result_time_per_output_token_{p}_percentile_ns",
}


def _mlperf_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    for label in values:
        detail = _MLPERF_PAIRS.get(label)
        if detail is None and (m := _MLPERF_PCT.fullmatch(label)):
            detail = _MLPERF_PCT_KEY[m["what"]].format(p=m["p"])
        if detail is not None:
            yield Identity(
                f"summary '{label}' = detail {detail} (rounded, R11)", f"detail.{detail}", (label,), lambda a: a
            )
    d = "detail."
    # Offline: samples_per_second = sample_count / max_latency (results.cc)
    yield Identity(
        "result_samples_per_second = result_query_count x generated_samples_per_query / (result_max_latency_ns / 1e9)",
        f"{d}result_samples_per_second",
        (f"{d}result_query_count", f"{d}generated_samples_per_query", f"{d}result_max_latency_ns"),
        lambda q, s, mx: q * s * NS / mx,
    )


# Validity (loadgen/results.cc). LogSummary prints "Result is : VALID" when min duration, the
# performance constraints (Server only) and early stopping are met, and min queries too when the max
# duration is enforced; it prints each constraint "Yes"/"NO" ("Skipped" for min queries not met and
# not enforced). LogDetail logs result_validity over all four and each as a boolean.
_SUMMARY_CONSTRAINTS = {  # summary label -> detail key
    "Performance constraints satisfied": "detail.result_perf_constraints_met",
    "Min duration satisfied": "detail.result_min_duration_met",
    "Min queries satisfied": "detail.result_min_queries_met",
    "Early stopping satisfied": "detail.early_stopping_met",
}
_YES = {"Yes": True, "NO": False, "Skipped": False}  # "Skipped": min queries not met, not enforced
_TRUE = {"true": True, "false": False}
_VALID = {"VALID": True, "INVALID": False}
_SRC = "loadgen results.cc"


def _mlperf_validity(texts: dict[str, str]) -> Iterator[TextResult]:
    """R15: the summary's validity and constraint lines against the detail log's validity keys, and
    each log's validity against its own constraints (the rule of results.cc)."""

    def read(key: str, words: dict[str, bool]) -> bool | str | None:
        """The boolean a printed word means; the text itself when it is none of ``words``."""
        if key not in texts:
            return None
        return words.get(texts[key], texts[key])

    def verdict(name: str, key: str, expected: bool | None, words: dict[str, bool], why: str) -> TextResult:
        got = read(key, words)
        if isinstance(got, str):
            return TextResult(name, key, None, NOT_DERIVABLE, f"printed {got!r}, not one of {', '.join(words)}")
        shown = next(w for w, b in words.items() if b == expected)
        return TextResult(
            name, key, shown, AGREE if got == expected else DISAGREE, f"{name}: expected {shown!r} ({why})"
        )

    summary_valid = read("Result is", _VALID)
    # summary constraint lines against the detail keys
    for label, dkey in _SUMMARY_CONSTRAINTS.items():
        s, d = read(label, _YES), read(dkey, _TRUE)
        if s is None or d is None:
            continue
        name = f"R15 validity: summary '{label}' = detail {dkey.removeprefix('detail.')} ({_SRC})"
        if isinstance(d, str):
            yield TextResult(name, label, None, NOT_DERIVABLE, f"detail printed {d!r}, not true or false")
            continue
        expected_word = "Yes" if d else ("Skipped" if texts[label] == "Skipped" else "NO")
        if isinstance(s, str):
            yield TextResult(name, label, None, NOT_DERIVABLE, f"printed {s!r}, not one of {', '.join(_YES)}")
            continue
        yield TextResult(
            name,
            label,
            expected_word,
            AGREE if s == d else DISAGREE,
            f"{name}: detail {texts[dkey]} -> {expected_word!r}",
        )
    # the summary's own rule
    if summary_valid is not None and "Min duration satisfied" in texts and "Early stopping satisfied" in texts:
        parts = [
            read(k, _YES)
            for k in ("Performance constraints satisfied", "Min duration satisfied", "Early stopping satisfied")
            if k in texts
        ]
        mq = texts.get("Min queries satisfied")
        if all(isinstance(x, bool) for x in parts) and mq in (None, *_YES):
            expected = all(parts) and mq != "NO"
            yield verdict(
                f"R15 validity: summary 'Result is' = VALID iff its printed constraints are met ({_SRC} LogSummary)",
                "Result is",
                expected,
                _VALID,
                "constraints " + ", ".join(f"{k} {texts[k]}" for k in _SUMMARY_CONSTRAINTS if k in texts),
            )
    # the detail's own rule
    dkeys = [k for k in _SUMMARY_CONSTRAINTS.values() if k in texts]
    if "detail.result_validity" in texts and {
        "detail.result_min_duration_met",
        "detail.result_min_queries_met",
        "detail.early_stopping_met",
    } <= set(dkeys):
        parts = [read(k, _TRUE) for k in dkeys]
        if all(isinstance(x, bool) for x in parts):
            yield verdict(
                f"R15 validity: detail result_validity = VALID iff every constraint key is true ({_SRC} LogDetail)",
                "detail.result_validity",
                all(parts),
                _VALID,
                ", ".join(f"{k.removeprefix('detail.')} {texts[k]}" for k in dkeys),
            )
    # the summary's validity against the detail's: the same rule except min queries, which the summary
    # enforces only with the max duration ("Skipped"), the detail always
    if isinstance(summary_valid, bool) and "detail.result_validity" in texts:
        skipped = texts.get("Min queries satisfied") == "Skipped"
        yield verdict(
            f"R15 validity: summary 'Result is' = detail result_validity ({_SRC}; 'Skipped' min queries: "
            "detail INVALID)",
            "detail.result_validity",
            False if skipped else summary_valid,
            _VALID,
            f"summary 'Result is : {texts['Result is']}'" + (", min queries Skipped" if skipped else ""),
        )


MLPERF_LOADGEN = ToolCheck(
    Tool.MLPERF_LOADGEN,
    NUMPY_LINEAR,
    "mlperf inference loadgen/results.cc (PerformanceSummary::LogDetail)",
    families=(_mlperf_identities,),
    machine_floats=False,
    text_checks=_mlperf_validity,
)
