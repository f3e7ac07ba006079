"""genai-bench ``metrics/aggregated_metrics_collector.py``: numpy over the records without
``error_code`` (population ``std``, linear ``percentile``, ``sum``), per-record values from
``request_metrics_collector.py``; rates = stats sums / ``run_duration``; ``error_rate`` =
``num_error_requests / num_requests``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from fractions import Fraction

from bench_ledger.queries.check.core import Records, Reported
from bench_ledger.queries.check.identity import Identity, ToolCheck, ratio, sum_of
from bench_ledger.queries.check.stat_definitions import NUMPY_LINEAR, NotDerivable
from bench_ledger.tools import Tool

__all__ = ["GENAI_BENCH"]

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
