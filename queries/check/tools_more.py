"""Statistic definitions and summary identities of the tools of issue 15 (registered in check_tools).

inference-perf, trtllm-bench, MLPerf loadgen and genai-bench, each read from the tool's source:

* inference-perf ``reportgen/base.py`` ``summarize_requests``: numpy (``np.mean``, ``np.percentile``
  linear) over the successes' per-request values; ``send_duration`` = last start - first start,
  ``achieved_rate`` = count / send_duration; throughputs = sums / (last end - first start).
  Prometheus values (``prometheus.*``) are server counters: never recomputed from the client's
  records, never combined with them (R6).
* trtllm-bench ``bench/dataclasses/statistics.py`` ``PercentileStats.from_iterable``: the value at
  index ``int(n x q)`` of the sorted values (floor index), ``reporting.py`` for the rates (counts
  over ``total_latency``, the span from the first start to the last end).
* MLPerf loadgen ``loadgen/results.cc``: Offline ``samples_per_second = sample_count / max_latency``;
  the detail log rounds its numbers (about 6 significant digits), so each summary value is
  compared with the detail value of the same quantity as intervals (R11). Validity (text): the
  summary's "Result is" and constraint lines against the detail's ``result_validity`` and
  ``*_met`` keys, and each log's validity against its own constraints (``LogSummary``/``LogDetail``).
* genai-bench ``metrics/aggregated_metrics_collector.py``: numpy over the records without
  ``error_code`` (population ``std``, linear ``percentile``, ``sum``), per-record values from
  ``request_metrics_collector.py``; rates = stats sums / ``run_duration``; ``error_rate`` =
  ``num_error_requests / num_requests``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from fractions import Fraction

from bench_ledger.queries.check.core import AGREE, DISAGREE, NOT_DERIVABLE, Records, Reported
from bench_ledger.queries.check.stat_definitions import FLOOR_INDEX, NUMPY_LINEAR, NotDerivable
from bench_ledger.queries.check.tools import Identity, TextResult, ToolCheck, equal, ratio, sum_of
from bench_ledger.tools import Tool

NS = 10**9

# --------------------------------------------------------------------------- inference-perf

_IP_STAT = re.compile(r"(?P<base>.+)\.(?P<stat>mean|min|max|median|p\d+(?:\.\d+)?)")
_IP_SERIES = {  # lifecycle distribution -> (request column, over ok or failed records)
    "successes.latency.request_latency": ("latency_s", "ok"),
    "successes.latency.time_to_first_token": ("ttft_s", "ok"),
    "successes.prompt_len": ("input_tokens", "ok"),
    "successes.output_len": ("output_tokens", "ok"),
    "failures.request_latency": ("latency_s", "failed"),
    "failures.prompt_len": ("input_tokens", "failed"),
}
_IP_NOT = {
    "load_summary.schedule_delay": "needs each request's scheduled time, which the per-request file does not keep",
    "successes.latency.time_per_output_token": "needs each request's last token time; the records keep its end time",
    "successes.latency.normalized_time_per_output_token": "inference-perf divides by its own (possibly server-side) "
    "output token count, which the records do not say",
}


def _span(rec: Records, start: str, end: str) -> Fraction:
    rows = rec.ok + rec.failed
    if any(r.get(start) is None or r.get(end) is None for r in rows) or not rows:
        raise NotDerivable(f"needed fields {start} / {end} not captured for every record")
    return Fraction(max(r[end] for r in rows) - min(r[start] for r in rows), NS)


def _inference_perf(key: str, rec: Records) -> tuple[Fraction, str]:
    if key.startswith("prometheus."):
        raise NotDerivable(
            "a server-side Prometheus counter over the scrape window: not recomputed from the "
            "client's records, never combined with them (R6)"
        )
    rec.need_status()
    if key == "successes.count":
        return Fraction(rec.statuses.count("ok")), "records without an error"
    if key == "failures.count":
        return Fraction(rec.statuses.count("failed")), "records with an error"
    if key == "load_summary.count":
        return Fraction(len(rec.statuses)), "all records"
    if key == "load_summary.send_duration":
        return _span(rec, "send_ns", "send_ns"), "last start - first start"
    if key == "load_summary.achieved_rate":
        return Fraction(len(rec.statuses)) / _span(rec, "send_ns", "send_ns"), "count / (last start - first start)"
    if key.startswith("successes.throughput."):
        span = _span(rec, "send_ns", "end_ns")
        what = key.rsplit(".", 1)[1]
        num = {
            "requests_per_sec": lambda: Fraction(rec.statuses.count("ok")),
            "input_tokens_per_sec": lambda: sum(rec.column("input_tokens"), Fraction(0)),
            "output_tokens_per_sec": lambda: sum(rec.column("output_tokens"), Fraction(0)),
            "total_tokens_per_sec": lambda: sum(rec.column("input_tokens") + rec.column("output_tokens"), Fraction(0)),
        }.get(what)
        if num is None:
            raise NotDerivable(f"key {key!r} not known to the check")
        return num() / span, "over successes / (last end - first start)"
    mt = _IP_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    base, stat = mt["base"], mt["stat"]
    if base in _IP_NOT:
        raise NotDerivable(_IP_NOT[base])
    if base == "successes.latency.inter_token_latency":
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needs every token time; the records keep gaps only where no two tokens share a chunk")
        return NUMPY_LINEAR.stat(rec.gaps, stat), "over the flattened token gaps of successes"
    if base not in _IP_SERIES:
        raise NotDerivable(f"key {key!r} not known to the check")
    col, group = _IP_SERIES[base]
    series: Sequence[Fraction]
    if group == "ok":
        series = rec.column(col)
    else:
        if col not in rec.fields:
            raise NotDerivable(f"needed field {col} not captured")
        series = [Fraction(r[col]) for r in rec.failed if r.get(col) is not None]
    return NUMPY_LINEAR.stat(series, stat), f"over the {'successes' if group == 'ok' else 'failures'}"


def _inference_perf_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    yield ratio(
        "achieved_rate = count / send_duration",
        "load_summary.achieved_rate",
        "load_summary.count",
        "load_summary.send_duration",
    )
    yield sum_of(
        "load_summary.count = successes.count + failures.count",
        "load_summary.count",
        ("successes.count", "failures.count"),
    )
    # the throughputs share one divisor (last end - first start) with requests_per_sec
    t = "successes.throughput."
    for rate, dist in (
        ("output_tokens_per_sec", "successes.output_len.mean"),
        ("input_tokens_per_sec", "successes.prompt_len.mean"),
    ):
        yield Identity(
            f"{rate} = {dist} x requests_per_sec", f"{t}{rate}", (dist, f"{t}requests_per_sec"), lambda a, b: a * b
        )
    yield sum_of(
        "total_tokens_per_sec = input_tokens_per_sec + output_tokens_per_sec",
        f"{t}total_tokens_per_sec",
        (f"{t}input_tokens_per_sec", f"{t}output_tokens_per_sec"),
    )


INFERENCE_PERF = ToolCheck(
    Tool.INFERENCE_PERF,
    NUMPY_LINEAR,
    "inference-perf reportgen/base.py summarize_requests (np.mean, np.percentile)",
    recompute=_inference_perf,
    families=(_inference_perf_identities,),
)


# --------------------------------------------------------------------------- trtllm-bench

_TRT_BLOCKS = (
    "performance.request_latency_percentiles_ms",
    "streaming_metrics.tpot_percentiles",
    "streaming_metrics.ttft_percentiles",
    "streaming_metrics.gen_tps_percentiles",
    "dataset.isl_stats",
    "dataset.osl_stats",
    "dataset.seq_len_stats",
)


def _trtllm_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    n, lat = "request_info.num_requests", "performance.total_latency_ms"
    p = "performance."
    yield Identity(
        "request_throughput_req_s = num_requests / (total_latency_ms / 1000)",
        f"{p}request_throughput_req_s",
        (n, lat),
        lambda a, b: a * 1000 / b,
    )
    yield Identity(
        "system_output_throughput_tok_s = num_requests x avg_output_length / (total_latency_ms / 1000)",
        f"{p}system_output_throughput_tok_s",
        (n, "request_info.avg_output_length", lat),
        lambda a, b, c: a * b * 1000 / c,
    )
    yield Identity(
        "system_total_throughput_tok_s = num_requests x (avg_input_length + avg_output_length) / "
        "(total_latency_ms / 1000)",
        f"{p}system_total_throughput_tok_s",
        (n, "request_info.avg_input_length", "request_info.avg_output_length", lat),
        lambda a, b, c, d: a * (b + c) * 1000 / d,
    )
    yield ratio(
        "output_throughput_per_gpu_tok_s = system_output_throughput_tok_s / world_size",
        f"{p}output_throughput_per_gpu_tok_s",
        f"{p}system_output_throughput_tok_s",
        "world_info.world_size",
    )
    yield equal(f"{p}avg_request_latency_ms", f"{p}request_latency_percentiles_ms.average")
    s = "streaming_metrics."
    yield equal(f"{s}avg_ttft_ms", f"{s}ttft_percentiles.average")
    yield equal(f"{s}avg_tpot_ms", f"{s}tpot_percentiles.average")
    yield equal(f"{s}token_output_speed_tok_s", f"{s}gen_tps_percentiles.average")
    yield equal("dataset.num_requests", n)
    # floor index: p_q is the sorted value at int(n x q); where that is the last index it IS the maximum
    if n in values and values[n].value.denominator == 1:
        count = int(values[n].value)
        for block in _TRT_BLOCKS:
            for q in ("p50", "p90", "p95", "p99"):
                idx = floor_index_at(count, q)
                if idx == count - 1:
                    yield Identity(
                        f"{block}.{q} = {block}.maximum (floor index int({count} x 0.{q[1:]}) = {idx}, the last)",
                        f"{block}.{q}",
                        (f"{block}.maximum",),
                        lambda a: a,
                    )
                elif idx == 0:
                    yield Identity(
                        f"{block}.{q} = {block}.minimum (floor index 0)",
                        f"{block}.{q}",
                        (f"{block}.minimum",),
                        lambda a: a,
                    )


def floor_index_at(n: int, q: str) -> int:
    """The index trtllm-bench reads for ``q`` of ``n`` sorted values: ``int(n x 0.99)`` as a float."""
    return min(n - 1, int(n * (int(q[1:]) / 100)))


TRTLLM_BENCH = ToolCheck(
    Tool.TRTLLM_BENCH,
    FLOOR_INDEX,
    "tensorrt_llm/bench/dataclasses/statistics.py PercentileStats (sorted[int(n x q)]), "
    "reporting.py (rates over total_latency)",
    families=(_trtllm_identities,),
)


# --------------------------------------------------------------------------- MLPerf loadgen

# summary label (as printed) -> detail key, for the R11 pairing of the two logs of one run
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


# --------------------------------------------------------------------------- genai-bench

_GB_STAT = re.compile(r"stats\.(?P<metric>[a-z0-9_]+)\.(?P<stat>min|max|mean|stddev|sum|p\d+)")


def _gb_series(rec: Records, metric: str) -> Sequence[Fraction]:
    """One per-record metric over the ok records, by genai-bench's request_metrics_collector."""
    direct = {
        "ttft": "ttft_s",
        "e2e_latency": "latency_s",
        "tpot": "itl_mean_s",
        "num_input_tokens": "input_tokens",
        "num_output_tokens": "output_tokens",
    }
    if metric in direct:
        return rec.column(direct[metric])
    ttft, e2e = rec.column("ttft_s"), rec.column("latency_s")
    inp, out = rec.column("input_tokens"), rec.column("output_tokens")
    # replay the tool's float arithmetic, then exactly
    f = [float(x) for x in ttft]
    lat = [float(x) for x in e2e]
    olat = [b - a for a, b in zip(f, lat, strict=True)]
    if metric == "output_latency":
        return [Fraction(x) for x in olat]
    if metric == "total_tokens":
        return [a + b for a, b in zip(inp, out, strict=True)]
    if metric == "input_throughput":
        return [Fraction(float(i) / t) if t else Fraction(0) for i, t in zip(inp, f, strict=True)]
    if metric in ("output_throughput", "output_inference_speed"):
        if any(o <= 1 for o in out):
            raise NotDerivable("a record with at most 1 output token: genai-bench leaves its output metrics unset")
        if metric == "output_throughput":
            return [Fraction((int(o) - 1) / ol) for o, ol in zip(out, olat, strict=True)]
        return [Fraction(1 / (ol / (int(o) - 1))) for o, ol in zip(out, olat, strict=True)]
    raise NotDerivable(f"metric {metric!r} not known to the check")


def _genai_bench(key: str, rec: Records) -> tuple[Fraction, str]:
    rec.need_status()
    a = "aggregated_metrics."
    if mt := _GB_STAT.fullmatch(key):
        stat = "std" if mt["stat"] == "stddev" else mt["stat"]
        return NUMPY_LINEAR.stat(_gb_series(rec, mt["metric"]), stat), "over records without error_code"
    n, failed = len(rec.statuses), rec.statuses.count("failed")
    if key == f"{a}num_completed_requests":
        return Fraction(n - failed), "records without error_code"
    if key == f"{a}num_error_requests":
        return Fraction(failed), "records with an error_code"
    if key == f"{a}num_requests":
        return Fraction(n), "all records"
    if key == f"{a}error_rate":
        return (Fraction(failed, n) if n else Fraction(0)), "records with an error_code / all records"
    if key.startswith(f"{a}error_codes_frequency."):
        code = key.rsplit(".", 1)[1]
        return Fraction(
            sum(1 for r in rec.failed if str(r.get("error") or "").split(":", 1)[0] == code)
        ), f"records with error_code {code}"
    if (
        key in (f"{a}run_duration", f"{a}total_arrivals", f"{a}arrival_requests_per_second")
        or key.endswith("_per_s")
        or key.endswith("per_second")
        or key.endswith("_per_hour")
    ):
        raise NotDerivable(
            "the records carry no timestamps: genai-bench's rates divide by its own run_duration "
            "(see the identities), never re-derived from the records"
        )
    raise NotDerivable(f"key {key!r} not known to the check")


def _genai_bench_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    a, d = "aggregated_metrics.", "aggregated_metrics.run_duration"
    for rate, total in (
        ("mean_output_throughput_tokens_per_s", "stats.num_output_tokens.sum"),
        ("mean_input_throughput_tokens_per_s", "stats.num_input_tokens.sum"),
        ("mean_total_tokens_throughput_tokens_per_s", "stats.total_tokens.sum"),
    ):
        yield ratio(f"{rate} = {total} / run_duration", f"{a}{rate}", total, d)
    yield ratio(
        "requests_per_second = num_completed_requests / run_duration",
        f"{a}requests_per_second",
        f"{a}num_completed_requests",
        d,
    )
    yield ratio(
        "error_rate = num_error_requests / num_requests", f"{a}error_rate", f"{a}num_error_requests", f"{a}num_requests"
    )
    yield sum_of(
        "num_requests = num_completed_requests + num_error_requests",
        f"{a}num_requests",
        (f"{a}num_completed_requests", f"{a}num_error_requests"),
    )
    codes = tuple(k for k in values if k.startswith(f"{a}error_codes_frequency."))
    if codes:
        yield sum_of("num_error_requests = sum of error_codes_frequency", f"{a}num_error_requests", codes)


GENAI_BENCH = ToolCheck(
    Tool.GENAI_BENCH,
    NUMPY_LINEAR,
    "genai-bench metrics/aggregated_metrics_collector.py (np.percentile, np.std, "
    "np.sum over records without error_code)",
    recompute=_genai_bench,
    families=(_genai_bench_identities,),
)

MORE = (INFERENCE_PERF, TRTLLM_BENCH, MLPERF_LOADGEN, GENAI_BENCH)
