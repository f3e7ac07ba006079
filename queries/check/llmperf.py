"""llmperf: pandas statistics over its per-request records, and its error-code texts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from bench_ledger.queries.check.core import Records
from bench_ledger.queries.check.identity import Identity, ToolCheck, ratio, sum_of
from bench_ledger.queries.check.stat_definitions import (
    PANDAS_LINEAR,
    NotDerivable,
)
from bench_ledger.tools import Tool

__all__ = ["LLMPERF"]

_LLMPERF_STAT = re.compile(r"results_(?P<metric>.+?)_(?P<stat>quantiles_p\d+|mean|min|max|stddev)")
_LLMPERF_SERIES = {
    "ttft_s": "ttft_s",
    "end_to_end_latency_s": "latency_s",
    "inter_token_latency_s": "itl_mean_s",
    "number_input_tokens": "input_tokens",
    "number_output_tokens": "output_tokens",
}


def _llmperf(key: str, rec: Records) -> tuple[Fraction, str]:
    """llmperf ``metrics_summary``: over records with error_code null, pandas (token_benchmark_ray.py)."""
    rec.need_status()
    if key in ("results_mean_output_throughput_token_per_s", "results_num_completed_requests_per_min"):
        raise NotDerivable(
            "divides by llmperf's own start-to-end monotonic time of the run; the records carry "
            "no times (see the identity linking the two)"
        )
    if mt := _LLMPERF_STAT.fullmatch(key):
        metric, stat = mt["metric"], mt["stat"].removeprefix("quantiles_")
        series: Sequence[Fraction]
        if metric in _LLMPERF_SERIES:
            series = rec.column(_LLMPERF_SERIES[metric])
        elif metric == "number_total_tokens":
            series = [a + b for a, b in zip(rec.column("input_tokens"), rec.column("output_tokens"), strict=True)]
        elif metric == "request_output_throughput_token_per_s":
            series = rec.value(metric)
        else:
            raise NotDerivable(f"metric {metric!r} not known to the check")
        return PANDAS_LINEAR.stat(series, stat), "over error_code-null records"
    n, failed = len(rec.statuses), rec.statuses.count("failed")
    if key == "results_num_completed_requests":
        return Fraction(n - failed), "records with error_code null"
    if key == "results_number_errors":
        return Fraction(failed), "records with an error_code"
    if key == "results_num_requests_started":
        return Fraction(n), "all records"
    if key == "results_error_rate":
        return Fraction(failed, n) if n else Fraction(0), "records with an error_code / all records"
    raise NotDerivable(f"key {key!r} not known to the check")


_LLMPERF_CODES = re.compile(r"(?:np\.\w+\()?['\"]?(?P<code>[^'\",{}:()]+?)['\"]?\)?\s*:\s*(?:np\.\w+\()?(?P<n>\d+)\)?")


def _llmperf_text(key: str, text: str, rec: Records) -> tuple[bool, str]:
    """``results_error_code_frequency``: ``str(dict(error_codes.value_counts()))`` in llmperf."""
    if key != "results_error_code_frequency":
        raise NotDerivable("printed as text, not a number")
    rec.need_status()
    counts: dict[str, int] = {}
    for r in rec.failed:
        code = str(r.get("error") or "").split(":", 1)[0].strip() or "?"
        counts[code] = counts.get(code, 0) + 1
    printed: dict[Fraction | str, int] = {}
    # "{429: 3}", "{'429': 3}", numpy's "{np.int64(429): np.int64(3)}", or "{429.0: 3}": pandas keeps the
    # codes of a column with nulls as floats, and llmperf prints str(dict(value_counts())) of them
    for m in _LLMPERF_CODES.finditer(text):
        printed[_code(m["code"])] = printed.get(_code(m["code"]), 0) + int(m["n"])
    if not counts:
        return text.strip() == "{}", "no record has an error_code: llmperf prints {}"
    numeric: dict[Fraction | str, int] = {}
    for code, n in counts.items():
        numeric[_code(code)] = numeric.get(_code(code), 0) + n
    return printed == numeric, "error codes counted over the records: " + ", ".join(
        f"{k} x{v}" for k, v in counts.items()
    )


def _code(text: str) -> Fraction | str:
    """An error code compared as a number where it is one (429, '429' and 429.0 are one code)."""
    text = text.strip()
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return text


LLMPERF = ToolCheck(
    Tool.LLMPERF,
    PANDAS_LINEAR,
    "llmperf token_benchmark_ray.py metrics_summary (pandas Series.quantile/std)",
    recompute=_llmperf,
    recompute_text=_llmperf_text,
    fixed=(
        sum_of(
            "results_num_requests_started = results_num_completed_requests + results_number_errors",
            "results_num_requests_started",
            ("results_num_completed_requests", "results_number_errors"),
        ),
        ratio(
            "results_error_rate = results_number_errors / results_num_requests_started",
            "results_error_rate",
            "results_number_errors",
            "results_num_requests_started",
        ),
        # both divide by the same (end_time - start_time): throughput = mean output tokens x requests per s
        Identity(
            "results_mean_output_throughput_token_per_s = results_number_output_tokens_mean x "
            "results_num_completed_requests_per_min / 60",
            "results_mean_output_throughput_token_per_s",
            ("results_number_output_tokens_mean", "results_num_completed_requests_per_min"),
            lambda a, b: a * b / 60,
        ),
    ),
)
