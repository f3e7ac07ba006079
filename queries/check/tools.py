"""Each benchmark tool's statistic definitions and summary identities: one registry (R15).

:data:`REGISTRY` maps a :class:`bench_ledger.tools.Tool` to a :class:`ToolCheck`: the tool's
statistic definition (:mod:`queries.check.stat_definitions`), how each of its reported keys is recomputed
from per-request records, and the identities its own summary satisfies. Adding a format's checks
is one entry here (and a line in docs/formats.md): the framework in :mod:`queries.check.core` loads the
records and the reported values, compares by intervals and renders both sections.

Definitions are read from the tools' sources (named per entry); where the source and a real file
disagree the real file is not fitted: the identity is stated as the source computes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
from bench_ledger.queries.check.core import AGREE, DISAGREE, REL_IDENTITY, Records, Reported
from bench_ledger.queries.check.stat_definitions import (
    GUIDELLM_INVERTED_CDF,
    NUMPY_LINEAR,
    PANDAS_LINEAR,
    GuidellmDist,
    NotDerivable,
    StatDefinition,
    guidellm_concurrency_pairs,
    guidellm_rate_pairs,
)
from bench_ledger.queries.intervals import Interval
from bench_ledger.queries.metrics.exact_column import ExactColumn
from bench_ledger.queries.metrics.requests import exact_sum
from bench_ledger.tools import SERVING_LATENCY_STAT, Tool

Recompute = Callable[[str, Records], tuple[Fraction, str]]


# --------------------------------------------------------------------------- identities


@dataclass
class IdentityResult:
    name: str  # the identity as a formula over the tool's keys
    key: str  # the reported value it checks
    recomputed: float | None  # None: beyond a double (the reason prints it)
    status: str
    tolerance: str
    reason: str


@dataclass(frozen=True)
class TextResult:
    """An identity over printed text: ``key`` printed ``expected``, or why it cannot be said."""

    name: str  # the identity, with the tool source it encodes
    key: str
    expected: str | None  # the text the identity gives; None: not re-derivable
    status: str
    reason: str


@dataclass(frozen=True)
class Identity:
    """``key = formula(inputs)`` over reported values; skipped unless every key is reported."""

    name: str
    key: str
    inputs: tuple[str, ...]
    formula: Callable[..., Interval]

    def evaluate(self, values: dict[str, Reported]) -> IdentityResult | None:
        if self.key not in values or any(k not in values for k in self.inputs):
            return None
        try:
            got = self.formula(*(values[k].interval for k in self.inputs))
        except ZeroDivisionError:
            return None
        target = values[self.key].interval
        slack = REL_IDENTITY * abs(values[self.key].value)
        widened = Interval(got.lo - slack, got.hi + slack)
        ok = widened.meets(target)
        half = (widened.width + target.width) / 2
        mid = _double(got.mid)
        return IdentityResult(
            self.name,
            self.key,
            mid,
            AGREE if ok else DISAGREE,
            f"±{_shown(half, 3)}",
            f"{self.name}: {_shown(got.mid, 17)}{'' if mid is not None else ' (beyond a double)'} from the reported "
            + ", ".join(f"{k} {values[k].text}" for k in self.inputs),
        )


def _double(q: Fraction) -> float | None:
    """``q`` as a float, or None where it is beyond a double (a reported duration of 1e-320 s makes a rate
    of about 1e323: compared exactly all the same)."""
    try:
        return float(q)
    except OverflowError:
        return None


def _shown(q: Fraction, digits: int) -> str:
    """``q`` with ``digits`` significant digits, also beyond a double's range."""
    if (f := _double(q)) is not None:
        return f"{f:.{digits}g}"
    with localcontext() as ctx:
        ctx.prec = digits
        return f"{Decimal(q.numerator) / Decimal(q.denominator):.{digits - 1}E}"


def ratio(name: str, key: str, num: str, den: str, scale: int = 1) -> Identity:
    return Identity(name, key, (num, den), lambda a, b: a * scale / b)


def total_ratio(name: str, key: str, nums: tuple[str, ...], den: str) -> Identity:
    def f(*xs: Interval) -> Interval:
        acc = xs[0]
        for x in xs[1:-1]:
            acc = acc + x
        return acc / xs[-1]

    return Identity(name, key, (*nums, den), f)


def equal(key: str, other: str) -> Identity:
    return Identity(f"{key} = {other}", key, (other,), lambda a: a)


def product(name: str, key: str, a: str, b: str) -> Identity:
    return Identity(name, key, (a, b), lambda x, y: x * y)


def sum_of(name: str, key: str, parts: tuple[str, ...]) -> Identity:
    def f(*xs: Interval) -> Interval:
        acc = xs[0]
        for x in xs[1:]:
            acc = acc + x
        return acc

    return Identity(name, key, parts, f)


# --------------------------------------------------------------------------- the registry entry


@dataclass(frozen=True)
class ToolCheck:
    tool: Tool
    definition: StatDefinition
    source: str  # where the definition was read
    recompute: Recompute | None = None
    recompute_text: Callable[[str, str, Records], tuple[bool, str]] | None = None
    fixed: tuple[Identity, ...] = ()
    families: tuple[Callable[[dict[str, Reported]], Iterable[Identity]], ...] = field(default_factory=tuple)
    # the tool's files hold Python-repr floats (json.dump): a value is one exact binary float, so an
    # identity allows one ulp, not half a unit of its last printed digit ("150.0" is exactly 150)
    machine_floats: bool = True
    # identities over the reported values and the run's declared settings (vLLM's num_prompts)
    declared: Callable[[dict[str, Reported], Any], Iterable[Identity]] | None = None
    # identities over values printed as text (MLPerf's "Result is : VALID"): {key: text as printed}
    text_checks: Callable[[dict[str, str]], Iterable[TextResult]] | None = None

    def identities(self, values: dict[str, Reported], run) -> Iterator[IdentityResult]:
        """Every identity whose keys the run reported, evaluated (run: its declared row, used by
        the ``declared`` identities)."""
        seen = set()
        extra = self.declared(values, run) if self.declared is not None else ()
        for ident in (*self.fixed, *(i for fam in self.families for i in fam(values)), *extra):
            if (ident.name, ident.key) in seen:
                continue
            seen.add((ident.name, ident.key))
            res = ident.evaluate(values)
            if res is not None:
                yield res


# --------------------------------------------------------------------------- vLLM and SGLang


def _serving_series(rec: Records, name: str) -> Sequence[Fraction]:
    """vLLM / SGLang per-request series over successful requests, in seconds."""
    rec.need_status()
    if name == "ttft":
        return rec.column("ttft_s")
    if name in ("e2el", "e2e_latency"):
        return rec.column("latency_s")
    if name == "itl":
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        return rec.gaps
    if name == "tpot":
        out = rec.column("output_tokens").array
        ttft, lat = rec.column("ttft_s").array, rec.column("latency_s").array
        # the tool divides in floats, (latency - ttft) / (output_tokens - 1) for output_tokens > 1: the same
        # IEEE operations elementwise (numpy's int64 -> float64 rounds as Python's int / float), then exactly
        many = out > 1
        return ExactColumn((lat[many] - ttft[many]) / (out[many] - 1))
    raise NotDerivable(f"series {name!r} unknown")


_SERVING_OWN = {
    "duration": "the tool's own perf_counter span of the whole run: the base of its rates, not in the records",
    "total_output_tokens_retokenized": "needs the generated texts and the tool's tokenizer",
    "rtfx": "the inverse real-time factor of audio requests: needs their audio durations, which the records do not carry",
}
_SERVING_SETTINGS = ("request_goodput", "request_goodput:", "accept_length")
BOUNDARY = Fraction(1, 10**6)  # a token this close to a second boundary cannot be placed from ns-truncated starts


_NS = 10**9
_EPS = 2.0**-50  # a generous bound of float64's relative rounding per operation (2**-53), times 8


def _exact_second(t: Fraction, lo: Fraction, idx: Callable[[], int]) -> int:
    """The whole second of ``t`` since ``lo``, refused within :data:`BOUNDARY` of a second boundary."""
    second, into = divmod(t - lo, 1)
    if into < BOUNDARY or 1 - into < BOUNDARY:
        raise NotDerivable(
            f"request {idx()} has a time within 1 us of a second boundary ({float(t - lo):.9f} "
            "s): the start times, kept to the ns, cannot place it"
        )
    return int(second)


def _near(t: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Where a float time ``t`` (its exact value within ``err``) may lie within BOUNDARY of a whole
    second: only there does the exact value decide; elsewhere floor(t) is the exact value's second."""
    into = t - np.floor(t)  # exact in float64 (the fraction bits of t)
    margin = float(BOUNDARY) + err + 1e-12
    return (into < margin) | (1.0 - into < margin)


def _tally(counts: dict, seconds: np.ndarray) -> None:
    """Add one to each of ``seconds`` (int64) in the per-second tally ``counts`` {"base", "n"}."""
    if not len(seconds):
        return
    lo, hi = int(seconds.min()), int(seconds.max())
    base, n = counts["base"], counts["n"]
    if lo < base or hi >= base + len(n):
        new_base = min(base, lo)
        grown = np.zeros(max(base + len(n), hi + 1) - new_base, dtype=np.int64)
        grown[base - new_base : base - new_base + len(n)] = n
        counts["base"], counts["n"] = new_base, grown
    counts["n"] += np.bincount(seconds - counts["base"], minlength=len(counts["n"]))


def peak_inputs(key: str, rec: Records) -> None:
    """NotDerivable unless the records carry what vLLM's peak second ``key`` reads (statuses, starts,
    ttfts; latencies for max_concurrent_requests)."""
    rec.need_status()
    if key == "max_concurrent_requests" and "latency_s" not in rec.fields:
        raise NotDerivable(
            "vLLM counts a request in each second from its start to start + latency; the records carry no latencies"
        )
    for f in ("send_time", "ttft_s"):
        if f not in rec.fields:
            raise NotDerivable(f"needed field {f} not captured (token times are start + ttft + the itls)")


def _peak_second(key: str, rec: Records) -> tuple[Fraction, str]:
    """vLLM ``calculate_metrics`` (benchmarks/serve.py): each successful request's token times start +
    ttft, then + each itl, counted per whole second since the earliest start; max_output_tokens_per_s
    is the fullest second. max_concurrent_requests counts a request in every second from its start to
    start + latency, so it needs the latencies.

    Exact: each time is start (ns) + ttft + the itls as rationals, refused within BOUNDARY of a second.
    Computed over the columns: numpy replays each request's times in float64 in vLLM's order (start -
    earliest start, + ttft, += each itl, one itl position at a time over the requests that have it),
    with a bound on the rounding; only a time whose float lies within BOUNDARY + that bound of a
    boundary is placed from its exact rational (tests/test_check_peak.py: equal to the row-by-row
    rational replay)."""
    peak_inputs(key, rec)
    send = rec.column("send_ns", "send_time").array
    if not len(send):
        return Fraction(0), "no successful request"
    lo_ns = int(send.min())
    lo = Fraction(lo_ns, _NS)
    rel_ns = send - lo_ns  # exact (int64)
    rel = rel_ns / _NS  # float64, within |rel| * 2**-53
    idx = lambda i: lambda: int(rec.source.ok_column("idx").to_numpy()[i])  # noqa: E731 (read on an error only)
    counts: dict = {"base": 0, "n": np.zeros(0, dtype=np.int64)}

    if key == "max_concurrent_requests":
        lat = rec.column("latency_s").array
        sec0, into0 = np.divmod(rel_ns, _NS)
        bound_ns = _NS // 10**6  # BOUNDARY in ns: the start is exact in ns
        bad0 = (rel_ns != 0) & ((into0 < bound_ns) | (_NS - into0 < bound_ns))
        end = rel + lat
        near = _near(end, (np.abs(rel) + np.abs(lat)) * _EPS)
        sec1 = np.floor(end).astype(np.int64)
        for i in np.flatnonzero(near | bad0):  # in record order, the start before the end, as vLLM walks them
            start = Fraction(int(send[i]), _NS)
            if bad0[i]:
                _exact_second(start, lo, idx(i))
            sec1[i] = _exact_second(start + Fraction(float(lat[i])), lo, idx(i))
        span = sec1 - sec0 + 1
        keep = span > 0
        first, span = sec0[keep], span[keep]
        # each request's seconds sec0 .. sec1: repeat each first second, plus 0, 1, ... within its span
        within = np.arange(int(span.sum()), dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
        _tally(counts, np.repeat(first, span) + within)
        what = "spans (start to start + latency)"
    else:
        ttft = rec.column("ttft_s").array
        if "chunk_gaps" in rec.fields:
            cc = rec.source.ok_column("chunk_count").to_numpy(zero_copy_only=False)
            ngap = np.maximum(np.nan_to_num(cc.astype(np.float64), nan=0.0).astype(np.int64) - 1, 0)
            gaps = rec.gaps.array
            if int(ngap.sum()) != len(gaps):
                raise NotDerivable(
                    f"the ok records' chunk counts imply {int(ngap.sum())} chunk gaps; the ledger holds {len(gaps)}"
                )
        else:
            rec.record_gaps()  # raises NotDerivable (chunk_gaps not captured), as the row walk did
            raise AssertionError("unreachable")
        offs = np.cumsum(ngap) - ngap
        # the rounding bound of each request's times: every partial sum is at most this in magnitude
        size = np.abs(rel) + np.abs(ttft)
        if len(gaps):
            absg = gaps if gaps.min() >= 0 else np.abs(gaps)
            size += np.add.reduceat(absg, np.minimum(offs, len(gaps) - 1)) * (ngap > 0)
        err = size * (ngap + 2) * _EPS
        t = rel + ttft
        order = np.argsort(-ngap, kind="stable")  # requests with more itls first: position j's are a prefix
        # have[j]: how many requests have a j-th itl (the first have[j] of order)
        have = np.searchsorted(-ngap[order], -np.arange(int(ngap.max(initial=0)) + 1), side="right")
        near_at: list[tuple[np.ndarray, Any]] = []  # (requests, positions) of times the float cannot place

        def place(who: np.ndarray, tj: np.ndarray, j: Any) -> None:
            near = _near(tj, err[who])
            _tally(counts, np.floor(tj[~near]).astype(np.int64))
            if near.any():
                near_at.append((who[near], j if np.isscalar(j) else j[near]))

        place(np.arange(len(t)), t, 0)
        # one step per itl position while at least as many requests have it as positions are left ...
        j, npos = 1, len(have)
        while j < npos and have[j] >= npos - j:
            who = order[: have[j]]
            t[who] += gaps[offs[who] + j - 1]
            place(who, t[who], j)
            j += 1
        if j < npos:  # ... then the few requests with more: each one's remaining itls in one accumulate
            who = order[: have[j]]  # (np.add.accumulate adds in order, t += itl after itl: the same floats)
            times = [
                np.add.accumulate(np.concatenate((t[r : r + 1], gaps[offs[r] + j - 1 : offs[r] + ngap[r]])))[1:]
                for r in who.tolist()
            ]
            n_each = ngap[who] - j + 1
            place(
                np.repeat(who, n_each),
                np.concatenate(times),
                np.arange(int(n_each.sum())) - np.repeat(np.cumsum(n_each) - n_each, n_each) + j,
            )
        if near_at:  # the exact times of the few near a boundary, in record order then token order
            pairs = sorted(
                (int(r), int(k))
                for who, ks in near_at
                for r, k in zip(who.tolist(), np.broadcast_to(ks, who.shape).tolist(), strict=True)
            )
            exact: dict[int, list[Fraction]] = {}
            seconds = []
            for r, k in pairs:
                if r not in exact:
                    ts = [Fraction(int(send[r]), _NS) + Fraction(float(ttft[r]))]
                    for g in gaps[offs[r] : offs[r] + ngap[r]].tolist():
                        ts.append(ts[-1] + Fraction(g))
                    exact[r] = ts
                seconds.append(_exact_second(exact[r][k], lo, idx(r)))
            _tally(counts, np.array(seconds, dtype=np.int64))
        what = "token times (start + ttft + itls)"
    n = counts["n"]
    if not n.any():
        raise NotDerivable(f"no second holds a successful request's {what.split(' (')[0]}")
    return Fraction(
        int(n.max())
    ), f"the fullest whole second of the successful requests' {what}, of {int(np.count_nonzero(n))} seconds"


def _serving(key: str, rec: Records) -> tuple[Fraction, str]:
    """vLLM ``bench serve`` and SGLang ``bench_serving`` aggregates (docs/formats.md)."""
    if mt := SERVING_LATENCY_STAT.fullmatch(key):
        stat = "mean" if mt["stat"] == "mean" else mt["stat"]
        return 1000 * NUMPY_LINEAR.stat(_serving_series(rec, mt["series"]), stat), "over ok requests, x1000 (ms)"
    if key in ("completed", "failed"):
        rec.need_status()
        return Fraction(rec.statuses.count("ok" if key == "completed" else "failed")), "count of records by status"
    if key == "total_input_tokens":
        rec.need_status()
        return exact_sum(rec.column("input_tokens")), "sum over ok requests"
    if key == "total_output_tokens":
        rec.need_status()
        return exact_sum(rec.column("output_tokens")), "sum over ok requests"
    if key in _SERVING_OWN:
        raise NotDerivable(_SERVING_OWN[key])
    if key in ("max_output_tokens_per_s", "max_concurrent_requests"):
        return _peak_second(key, rec)
    if key in _SERVING_SETTINGS:
        raise NotDerivable("needs the tool's own settings (SLOs, speculative accounting) not in the records")
    if key in ("request_throughput", "output_throughput", "total_token_throughput", "input_throughput", "concurrency"):
        if rec.duration is None:
            raise NotDerivable("the tool's duration was not reported for this run")
        rec.need_status()
        num = {
            "request_throughput": lambda: Fraction(rec.statuses.count("ok")),
            "output_throughput": lambda: exact_sum(rec.column("output_tokens")),
            "input_throughput": lambda: exact_sum(rec.column("input_tokens")),
            "total_token_throughput": lambda: exact_sum(rec.column("input_tokens") + rec.column("output_tokens")),
            "concurrency": lambda: exact_sum(rec.column("latency_s")),
        }[key]()
        return num / rec.duration, "over the tool's own duration"
    raise NotDerivable(f"key {key!r} not known to the check")


def _median_is_p50(values: dict[str, Reported]) -> Iterator[Identity]:
    for key in values:
        if key.startswith("median_") and f"p50_{key[len('median_') :]}" in values:
            yield equal(key, f"p50_{key[len('median_') :]}")


_SERVING_RATES = (
    ratio("request_throughput = completed / duration", "request_throughput", "completed", "duration"),
    ratio("output_throughput = total_output_tokens / duration", "output_throughput", "total_output_tokens", "duration"),
    ratio("input_throughput = total_input_tokens / duration", "input_throughput", "total_input_tokens", "duration"),
    total_ratio(
        "total_token_throughput = (total_input_tokens + total_output_tokens) / duration",
        "total_token_throughput",
        ("total_input_tokens", "total_output_tokens"),
        "duration",
    ),
)


def _num_prompts(values: dict[str, Reported], run) -> Iterator[Identity]:
    """vLLM ``calculate_metrics``: every one of the ``num_prompts`` requests is either completed or
    failed, so completed = num_prompts - failed (num_prompts is the run's request_count setting)."""
    n = getattr(run, "request_count", None)
    if n is None or "failed" not in values:
        return
    yield Identity(
        f"completed = num_prompts - failed (completed + failed = num_prompts {n})",
        "completed",
        ("failed",),
        lambda f: Interval.point(Fraction(n)) - f,
    )


VLLM = ToolCheck(
    Tool.VLLM_BENCH,
    NUMPY_LINEAR,
    "vllm benchmarks/serve.py calculate_metrics (np.mean, np.median, np.std, np.percentile)",
    recompute=_serving,
    fixed=_SERVING_RATES,
    families=(_median_is_p50,),
    declared=_num_prompts,
)
SGLANG = ToolCheck(
    Tool.SGLANG_BENCH,
    NUMPY_LINEAR,
    "sglang python/sglang/bench_serving.py calculate_metrics (numpy)",
    recompute=_serving,
    fixed=_SERVING_RATES,
    families=(_median_is_p50,),
)


# --------------------------------------------------------------------------- llmperf

LLMPERF_STAT = re.compile(r"results_(?P<metric>.+?)_(?P<stat>quantiles_p\d+|mean|min|max|stddev)")
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
    if mt := LLMPERF_STAT.fullmatch(key):
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


# --------------------------------------------------------------------------- AIPerf and GenAI-Perf

_METRIC_STAT = re.compile(r"(?:records\.)?(?P<metric>[a-z0-9_]+)\.(?P<stat>avg|min|max|std|count|sum|p\d+(?:\.\d+)?)")
_PERF_SERIES = {  # metric tag -> (request column, scale to the tool's unit)
    "ttft": ("ttft_s", 1000),
    "time_to_first_token": ("ttft_s", 1000),
    "request_latency": ("latency_s", 1000),
    "input_sequence_length": ("input_tokens", 1),
    "output_sequence_length": ("output_tokens", 1),
}


# AIPerf's run-level metrics (BaseAggregateMetric / BaseDerivedMetric, aiperf/metrics/types/*.py): one
# value per run, which the aggregate file writes as MetricResult(avg=value, count=1)
_PERF_TOTALS = {
    "total_isl": "input_sequence_length",
    "total_osl": "output_sequence_length",
    "total_output_tokens": "output_token_count",
    "total_reasoning_tokens": "reasoning_token_count",
}
_AIPERF_RUN = (
    "request_count",
    "error_request_count",
    "min_request_timestamp",
    "max_response_timestamp",
    "benchmark_duration",
    "request_throughput",
    "output_token_throughput",
    *_PERF_TOTALS,
)
# the old schema's record tags (AIPerf ~0.1/0.2: ttft, ttst) for the metric names of its CSV export and newer files
_AIPERF_OLD_TAGS = {"time_to_second_token": "ttst"}
_ERROR_SUMMARY = re.compile(r"(?:records\.)?error_summary\.(?P<i>\d+)\.count")


def _aiperf(key: str, rec: Records) -> tuple[Fraction, str]:
    """AIPerf ``metric.stat`` by AIPerf's own definitions (aiperf/metrics/types/*.py,
    post_processors): a record metric's statistics are numpy's over the valid records that carry it
    (a record whose metric raises NoMetricValue has none); run-level metrics are counted, summed or
    taken min/max over the valid records; error counts over the error records."""
    rec.need_status()
    if _ERROR_SUMMARY.fullmatch(key):
        details = rec.notes.get(key)
        if details is None:
            raise NotDerivable("the error_summary entry's error details (code, type, message) were not kept")
        # records_manager get_error_summary: error records counted per ErrorDetails (code, type, message)
        n = sum(1 for r in rec.failed if r.get("error") == details)
        return Fraction(n), f"error records whose error is {details!r} (AIPerf groups errors by code, type and message)"
    mt = _METRIC_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, stat = mt["metric"], mt["stat"]
    if metric in _AIPERF_RUN:
        value, how = _aiperf_run(metric, rec)
        if stat == "count":
            return Fraction(1), "a run-level metric is one value: AIPerf writes MetricResult(avg=value, count=1)"
        if stat != "avg":
            raise NotDerivable(
                f"a run-level metric's result holds avg and count (MetricResult(avg=value, count=1)), no {stat}"
            )
        return value, how
    if metric == "inter_chunk_latency":  # every chunk gap of the ok records, flattened, in ms
        if "chunk_gaps" not in rec.fields:
            raise NotDerivable("needed field chunk_gaps not captured")
        return NUMPY_LINEAR.stat(rec.gaps.scaled(1000), stat), "over the ok records' chunk gaps, flattened"
    if metric in _PERF_SERIES:
        col, scale = _PERF_SERIES[metric]
        return NUMPY_LINEAR.stat(rec.column(col).scaled(scale), stat), "over ok records"
    tag = _AIPERF_OLD_TAGS.get(metric, metric) if metric not in rec.values else metric
    series, lacking = rec.present(tag)
    how = "over ok records" + (f" ({tag})" if tag != metric else "")
    if lacking:
        how = (
            f"over the {len(series)} of {len(series) + lacking} ok records that carry {tag} (AIPerf computes a "
            "record's metric only where it has one)"
        )
    return NUMPY_LINEAR.stat(series, stat), how


def _aiperf_run(metric: str, rec: Records) -> tuple[Fraction, str]:
    """One run-level AIPerf metric from the records, in the unit AIPerf reports it (s, requests/s,
    tokens/s, ns, tokens), and how."""
    if metric == "request_count":  # RequestCountMetric: 1 per valid record, summed
        return Fraction(len(rec.ok)), "valid (error-free) records, 1 each (RequestCountMetric)"
    if metric == "error_request_count":  # ErrorRequestCountMetric: 1 per error record, summed
        return Fraction(len(rec.failed)), "error records, 1 each (ErrorRequestCountMetric)"
    if metric in _PERF_TOTALS:
        series, lacking = rec.present(_PERF_TOTALS[metric])
        return sum(series, Fraction(0)), f"sum of the ok records' {_PERF_TOTALS[metric]}" + (
            f" ({len(series)} records carry it, {lacking} do not)" if lacking else ""
        )
    for name, needed in (("min_request_timestamp", "send_time"), ("max_response_timestamp", "end_time")):
        if needed not in rec.fields:
            raise NotDerivable(f"needed field {needed} not captured (AIPerf's {name} is over the records' times)")
    if not rec.ok:
        raise NotDerivable("no valid record: AIPerf has no request timestamps to span")
    if lacking := sum(r["send_ns"] is None or r["end_ns"] is None for r in rec.ok):
        raise NotDerivable(f"{lacking} of the {len(rec.ok)} valid records lack a start or end time")
    lo, hi = min(Fraction(r["send_ns"]) for r in rec.ok), max(Fraction(r["end_ns"]) for r in rec.ok)
    if metric == "min_request_timestamp":
        return lo, "earliest request start of the valid records, epoch ns (MinRequestTimestampMetric)"
    if metric == "max_response_timestamp":
        return hi, "latest last-response time of the valid records, epoch ns (MaxResponseTimestampMetric)"
    duration = (hi - lo) / 10**9
    if metric == "benchmark_duration":
        return (
            duration,
            "max_response_timestamp - min_request_timestamp of the valid records, in s (BenchmarkDurationMetric)",
        )
    if metric == "request_throughput":
        return Fraction(len(rec.ok)) / duration, "request_count / benchmark_duration, both from the records"
    # output_token_throughput: BenchmarkTokenCount (total output sequence length) / benchmark_duration
    series, _ = rec.present("output_sequence_length")
    return sum(series, Fraction(0)) / duration, "total_osl / benchmark_duration, both from the records"


GENAI_PERF_SOURCE = (
    "genai-perf/genai_perf/profile_data_parser/llm_profile_data_parser.py _parse_requests @00168fe7 "
    "and genai_perf/metrics/statistics.py Statistics @0518df11 (triton-inference-server/perf_analyzer)"
)
_GENAI_TIMES = {"time_to_first_token": "ttft_s", "request_latency": "latency_s"}
_GENAI_TOKENS = (
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_request",
    "output_sequence_length",
    "input_sequence_length",
)


def _genai_perf(key: str, rec: Records) -> tuple[Fraction, str]:
    """GenAI-Perf ``metric.stat`` by its own definitions (:data:`GENAI_PERF_SOURCE`): per request, after
    dropping responses without content, TTFT = first response - request timestamp, latency = last
    response - request timestamp, TTST = second - first response (requests with a response only);
    request_throughput = len(requests) / ((max last response - min request timestamp) / 1e9) (every
    request of the experiment counted, also one skipped for an empty response); statistics np.mean,
    np.percentile (linear), np.min, np.max, np.std (population), times in ns scaled by 1e-6 to ms,
    the system metrics (throughputs) avg only."""
    rec.need_status()
    if rec.failed:
        raise NotDerivable(
            f"{len(rec.failed)} of the records failed: GenAI-Perf stops at an error response "
            "(GenAIPerfException), so no summary of it covers a failed request"
        )
    mt = _METRIC_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, stat = mt["metric"], mt["stat"]
    if stat in ("count", "sum"):
        raise NotDerivable(f"GenAI-Perf's Statistics writes no {stat}")
    # _parse_requests skips a request left without a response that has content (its TTFT is None here)
    answered = [r for r in rec.ok if r["ttft_s"] is not None and r["latency_s"] is not None]
    skipped = (
        f"; {len(rec.ok) - len(answered)} without content skipped, as GenAI-Perf does"
        if len(answered) < len(rec.ok)
        else ""
    )
    if metric in _GENAI_TIMES:
        if _GENAI_TIMES[metric] not in rec.fields:
            raise NotDerivable(f"needed field {_GENAI_TIMES[metric]} not captured")
        if not answered:
            raise NotDerivable("no request has a response with content")
        series = [Fraction(r[_GENAI_TIMES[metric]]) * 1000 for r in answered]
        return NUMPY_LINEAR.stat(series, stat), f"over the {len(answered)} requests with a response, in ms{skipped}"
    if metric == "time_to_second_token":
        firsts = [Fraction(g[0]) * 1000 for g in rec.record_gaps() if g]
        if not firsts:
            raise NotDerivable("no request has a second response")
        return NUMPY_LINEAR.stat(firsts, stat), "second - first response of the requests with two or more, in ms"
    if metric == "request_throughput":
        if stat != "avg":
            raise NotDerivable("a system metric: GenAI-Perf writes its avg only")
        if not {"send_time", "end_time"} <= rec.fields:
            raise NotDerivable("needed fields send_time and end_time not captured")
        if not answered:
            raise NotDerivable("no request has a response with content")
        lo, hi = min(r["send_ns"] for r in answered), max(r["end_ns"] for r in answered)
        n = len(rec.statuses)
        return Fraction(n) / (Fraction(hi - lo) / 10**9), (
            f"all {n} requests / (max last response - min request timestamp of the {len(answered)} with a response)"
        )
    if metric in _GENAI_TOKENS:
        counts = (
            "their token counts are the server's usage, not GenAI-Perf's tokenizer's"
            if "output_tokens" in rec.fields
            else "they carry no token counts"
        )
        raise NotDerivable(
            f"GenAI-Perf counts tokens with its own tokenizer over the request and response texts; {counts}"
        )
    if metric == "request_goodput":
        raise NotDerivable("needs GenAI-Perf's goodput constraints (--goodput), not in the records")
    raise NotDerivable(f"{metric!r} is not a metric of the GenAI-Perf source read (Statistics over LLMMetrics)")


def _avg_times_count(values: dict[str, Reported]) -> Iterator[Identity]:
    """AIPerf: a metric's sum is avg x count (its MetricResult); totals are sums over the records."""
    for key in values:
        if key.endswith(".avg"):
            base = key[: -len(".avg")]
            if f"{base}.sum" in values and f"{base}.count" in values:
                yield product(f"{base}.sum = {base}.avg x {base}.count", f"{base}.sum", f"{base}.avg", f"{base}.count")
    for pre in _aiperf_prefixes(values):
        for total, dist in (
            ("total_isl", "input_sequence_length"),
            ("total_osl", "output_sequence_length"),
            ("total_output_tokens", "output_token_count"),
            ("total_reasoning_tokens", "reasoning_token_count"),
        ):
            t, a, c = f"{pre}{total}.avg", f"{pre}{dist}.avg", f"{pre}{dist}.count"
            yield product(f"{t} = {a} x {c}", t, a, c)


def _aiperf_prefixes(values: dict[str, Reported]) -> list[str]:
    """Where a run's AIPerf metrics sit: ``records.`` (the old JSON export), top level (the new JSON
    export, the CSV export); a run holding both exports has both."""
    return [
        pre
        for pre, present in (
            ("records.", any(k.startswith("records.") for k in values)),
            ("", any(not k.startswith("records.") for k in values)),
        )
        if present
    ]


def _aiperf_rates(values: dict[str, Reported]) -> Iterator[Identity]:
    for pre in _aiperf_prefixes(values):
        yield from _aiperf_rates_at(pre)


def _aiperf_rates_at(pre: str) -> Iterator[Identity]:
    d = f"{pre}benchmark_duration.avg"
    yield ratio(
        f"{pre}request_throughput.avg = {pre}request_count.avg / {d}",
        f"{pre}request_throughput.avg",
        f"{pre}request_count.avg",
        d,
    )
    # BenchmarkTokenCount: the total output sequence length (output + reasoning tokens)
    yield ratio(
        f"{pre}output_token_throughput.avg = {pre}total_osl.avg / {d}",
        f"{pre}output_token_throughput.avg",
        f"{pre}total_osl.avg",
        d,
    )
    yield Identity(
        f"{d} = ({pre}max_response_timestamp.avg - {pre}min_request_timestamp.avg) / 1e9",
        d,
        (f"{pre}max_response_timestamp.avg", f"{pre}min_request_timestamp.avg"),
        lambda a, b: (a - b) / 10**9,
    )
    yield equal(f"{pre}request_count.avg", f"{pre}request_latency.count")


AIPERF = ToolCheck(
    Tool.AIPERF,
    NUMPY_LINEAR,
    "aiperf metrics (numpy percentiles over the record arrays; derived metrics "
    "aiperf/metrics/types/*_throughput_metric.py)",
    recompute=_aiperf,
    families=(_avg_times_count, _aiperf_rates),
)
GENAI_PERF = ToolCheck(Tool.GENAI_PERF, NUMPY_LINEAR, GENAI_PERF_SOURCE, recompute=_genai_perf)


# --------------------------------------------------------------------------- guidellm

_GUIDELLM_STAT = re.compile(
    r"metrics\.(?P<metric>[a-z_]+(?:\.[a-z_]+)*?)\.(?P<group>successful|errored|incomplete|total)\."
    r"(?P<stat>mean|median|mode|variance|std_dev|min|max|count|total_sum|percentiles\.p\d+)"
)
_GUIDELLM_COUNT = re.compile(
    r"(?:metrics\.request_totals|request_totals|scheduler_metrics\.requests_made)\."
    r"(?P<group>successful|errored|incomplete|total)"
)
# guidellm's groups (GenerativeMetrics.compile) and the statuses its importer gives their records
_GUIDELLM_GROUPS = {
    "successful": ("ok",),
    "incomplete": ("unknown",),
    "errored": ("failed",),
    "total": ("ok", "unknown", "failed"),
}
# from_values_function over one request column: guidellm's ``req.<field> or 0.0`` (x scale to the unit)
_GUIDELLM_SERIES = {
    "request_latency": ("latency_s", 1),
    "time_to_first_token_ms": ("ttft_s", 1000),
    "prompt_token_count": ("input_tokens", 1),
    "output_token_count": ("output_tokens", 1),
}
_GUIDELLM_TOKEN_TIMINGS = (
    "prompt_tokens_per_second",
    "output_tokens_per_second",
    "tokens_per_second",
    "output_tokens_per_iteration",
    "iter_tokens_per_iteration",
)


def _guidellm_group(rec: Records, group: str) -> list[dict]:
    if "status" not in rec.fields:
        raise NotDerivable("request success not captured")
    statuses = _GUIDELLM_GROUPS[group]
    return [
        r
        for st, rows in (("ok", rec.ok), ("unknown", rec.unknown), ("failed", rec.failed))
        if st in statuses
        for r in rows
    ]


def _guidellm(key: str, rec: Records) -> tuple[Fraction, str]:
    """guidellm ``GenerativeMetrics.compile``: each metric a ``StatusDistributionSummary`` over the
    records of each group (benchmark/schemas/generative/metrics.py), statistics by
    ``DistributionSummary`` (schemas/statistics.py, :func:`check_stats.guidellm_stat`)."""
    if key == "duration":
        try:
            lo, hi = (float(rec.metadata[k]) for k in ("measure_start_time", "measure_end_time"))
        except KeyError:
            raise NotDerivable(
                "guidellm's measurement window (the benchmark's end_time - start_time, scheduler "
                "times that no record holds)"
            ) from None
        return Fraction(
            hi - lo
        ), "measure_end_time - measure_start_time (scheduler_metrics: the window its metrics cover)"
    if mc := _GUIDELLM_COUNT.fullmatch(key):
        rows = _guidellm_group(rec, mc["group"])
        return Fraction(len(rows)), f"records in the file's requests.{mc['group']}" if mc[
            "group"
        ] != "total" else "records in requests.successful, incomplete and errored"
    mt = _GUIDELLM_STAT.fullmatch(key)
    if mt is None:
        raise NotDerivable(f"key {key!r} not known to the check")
    metric, group, stat = mt["metric"], mt["group"], mt["stat"].removeprefix("percentiles.")
    cached = rec.cache.get(("guidellm", metric, group))
    if cached is None:
        try:
            dist, how = _guidellm_dist(metric, group, rec)
        except NotDerivable as exc:
            rec.cache[("guidellm", metric, group)] = exc
            raise
        rec.cache[("guidellm", metric, group)] = cached = (dist, how)
    if isinstance(cached, NotDerivable):
        raise NotDerivable(str(cached))
    dist, how = cached
    return dist.stat(stat), how


def _guidellm_dist(metric: str, group: str, rec: Records) -> tuple[GuidellmDist, str]:
    """The distribution guidellm summarised as ``metrics.<metric>.<group>``, and how it was built."""
    rows = _guidellm_group(rec, group)
    if not rows:
        # every distribution of no values (plain, rate or concurrency) is DistributionSummary.from_pdf
        # of an empty PDF: all statistics 0.0, count 0
        return GuidellmDist([]), f"no {group} records: guidellm's summary of no values is 0"
    if metric in _GUIDELLM_TOKEN_TIMINGS:
        return _guidellm_token_timings(metric, group, rows)
    if metric in ("requests_per_second", "request_concurrency") or metric.endswith(("_per_second", "_concurrency")):
        return _guidellm_timed(metric, group, rows, rec)
    if metric in _GUIDELLM_SERIES:
        col, scale = _GUIDELLM_SERIES[metric]
        if col not in rec.fields:
            raise NotDerivable(f"needed field {col} not captured")
        pairs = [(Fraction(r[col] or 0) * scale, Fraction(1)) for r in rows]
        return GuidellmDist(pairs), f"over the {group} records"
    if metric in _GUIDELLM_VALUES:
        key, weight, how = _GUIDELLM_VALUES[metric]
        _need_values(rows, key)
        pairs = [(Fraction(r["values"].get(key) or 0), weight(r)) for r in rows]
        return GuidellmDist(pairs), f"over the {group} records' {key}{how}"
    if mt2 := _GUIDELLM_TEXT.fullmatch(metric):
        what, side = mt2["what"], mt2["side"]
        sides = ("input", "output") if side == "total" else (side,)
        keys = [f"{s}_metrics.text_{what}" for s in sides]
        # extract_property_metrics_for_summary: records with a start and end time and a value; total =
        # the input values followed by the output values (one list, not their sums)
        timed = [r for r in rows if r["values"].get("request_start_time") and r["values"].get("request_end_time")]
        pairs = [(Fraction(r["values"][k]), Fraction(1)) for k in keys for r in timed if r["values"].get(k) is not None]
        if not pairs and any(r["values"] for r in rows):
            raise NotDerivable(f"the records carry no per-request {' or '.join(keys)}")
        return GuidellmDist(pairs), f"over the {group} records' {' and '.join(keys)}"
    raise NotDerivable(f"the records carry no per-request {metric}")


def _guidellm_timed(metric: str, group: str, rows: list[dict], rec: Records) -> tuple[GuidellmDist, str]:
    """guidellm's time-weighted distributions (schemas/statistics.py): requests_per_second over each
    request's end time and request_concurrency over its (start, end), both within the benchmark's
    measurement window; text.*_per_second / _concurrency over the timed values, no window."""
    _need_values(rows, "request_end_time")
    start_end = [(r["values"].get("request_start_time"), r["values"].get("request_end_time")) for r in rows]
    if metric in ("requests_per_second", "request_concurrency"):
        try:
            lo, hi = (float(rec.metadata[k]) for k in ("measure_start_time", "measure_end_time"))
        except KeyError:
            raise NotDerivable(
                "the file does not give guidellm's measurement window "
                "(scheduler_metrics.measure_start_time / measure_end_time)"
            ) from None
        count: int | None
        if metric == "requests_per_second":
            pairs, count = guidellm_rate_pairs([(e, 1.0) for _, e in start_end if e is not None], lo, hi)
            how = "each request's end time, rate_distribution_from_timings over the measurement window"
        else:
            pairs, cnt = guidellm_concurrency_pairs(
                [(a, e, 1.0) for a, e in start_end if a is not None and e is not None], lo, hi
            )
            count, how = cnt, "each request's (start, end), concurrency_distribution_from_timings over the window"
        return GuidellmDist(pairs, count), f"over the {group} records: {how}"
    mt = _GUIDELLM_TEXT.fullmatch(
        metric.rsplit("_", 2)[0] if metric.endswith("_per_second") else metric.removesuffix("_concurrency")
    )
    if mt is None:
        raise NotDerivable(f"the records carry no per-request {metric}")
    what, side = mt["what"], mt["side"]
    keys = [f"{s}_metrics.text_{what}" for s in (("input", "output") if side == "total" else (side,))]
    both = [f"{s}_metrics.text_{what}" for s in ("input", "output")]
    timed = [
        r
        for r in rows
        if r["values"].get("request_start_time")
        and r["values"].get("request_end_time")
        and any(r["values"].get(k) is not None for k in both)
    ]
    if metric.endswith("_per_second"):
        pairs, count = guidellm_rate_pairs(
            [(r["values"]["request_end_time"], float(r["values"].get(k) or 0.0)) for k in keys for r in timed]
        )
        how = "rate_distribution_from_timings at each request's end time"
    else:
        pairs, cnt = guidellm_concurrency_pairs(
            [
                (r["values"]["request_start_time"], r["values"]["request_end_time"], float(r["values"].get(k) or 0.0))
                for k in keys
                for r in timed
            ]
        )
        count, how = cnt, "concurrency_distribution_from_timings over each request's (start, end)"
    return GuidellmDist(pairs, count), f"over the {group} records' {' and '.join(keys)}: {how}"


def _token_timings(r: dict) -> tuple[tuple[float, float], list[tuple[float, float]], list[tuple[float, float]]]:
    """guidellm ``GenerativeRequestStats`` (schemas/request_stats.py): the prompt's (time, tokens), the
    output's (time, tokens) list and the iterations after the first token, evenly spaced between the
    first and last token iteration (``np.linspace``, replayed in floats) since the file has no
    per-iteration times."""
    v = r["values"]
    first, last = v.get("info.timings.first_token_iteration"), v.get("info.timings.last_token_iteration")
    n = int(v.get("info.timings.token_iterations") or 0)
    out_tokens, end = r["output_tokens"], v.get("request_end_time")
    prompt = (first if first is not None else end, float(r["input_tokens"] or 0.0))
    per_iter = None if out_tokens is None or out_tokens <= 1 or n <= 1 else (out_tokens - 1.0) / (n - 1.0)
    iters: list[tuple[float, float]] = []
    if first is not None and last is not None and per_iter is not None and n > 1:
        step = (last - first) / (n - 1)
        times = [i * step + first for i in range(n)]
        times[-1] = last
        iters = [(t, per_iter) for t in times[1:]]
    if first is None or last is None or n <= 1:
        output = [(last if last is not None else end, float(out_tokens or 0.0))]
    else:
        output = [(first, 1.0 * bool(out_tokens)), *iters]
    return prompt, output, iters


def _guidellm_token_timings(metric: str, group: str, rows: list[dict]) -> tuple[GuidellmDist, str]:
    """prompt/output/total tokens per second: rate_distribution_from_timings over the token timings
    (no window); output/iter tokens per iteration: the token counts of those timings, unweighted."""
    for key in ("request_end_time", "info.timings.token_iterations"):
        _need_values(rows, key)
    timings = [_token_timings(r) for r in rows]
    how = "guidellm's token timings (iterations evenly spaced between first and last token)"
    if metric.endswith("_per_iteration"):
        counts = [tok for p, o, it in timings for _, tok in (o if metric == "output_tokens_per_iteration" else it)]
        return GuidellmDist([(Fraction(c), Fraction(1)) for c in counts]), f"over the {group} records: {how}"
    events = {
        "prompt_tokens_per_second": lambda p, o: [p],
        "output_tokens_per_second": lambda p, o: o,
        "tokens_per_second": lambda p, o: [p, *o],
    }[metric]
    flat = [e for p, o, _ in timings for e in events(p, o) if e[0] is not None]
    pairs, count = guidellm_rate_pairs(flat)
    return GuidellmDist(pairs, count), f"over the {group} records: rate_distribution_from_timings of {how}"


def _need_values(rows: list[dict], key: str) -> None:
    if not any(key in r["values"] for r in rows):
        raise NotDerivable(f"the records carry no per-request {key}")


def _output_tokens(r: dict) -> Fraction:
    return Fraction(r["output_tokens"] or 0)


# from_values_function over a per-request value the file keeps (request_value), with guidellm's weight
_GUIDELLM_VALUES: dict[str, tuple[str, Callable[[dict], Fraction], str]] = {
    "request_streaming_iterations_count": ("info.timings.request_iterations", lambda r: Fraction(1), ""),
    "total_token_count": ("total_tokens", lambda r: Fraction(1), ""),
    "time_per_output_token_ms": ("time_per_output_token_ms", _output_tokens, ", weighted by output_tokens"),
    "inter_token_latency_ms": (
        "inter_token_latency_ms",
        lambda r: Fraction(r["output_tokens"] or 1) - 1,
        ", weighted by output_tokens - 1",
    ),
}
_GUIDELLM_TEXT = re.compile(r"text\.(?P<what>tokens|words|characters)\.(?P<side>input|output|total)")


def _guidellm_identities(values: dict[str, Reported]) -> Iterator[Identity]:
    for key in values:
        if not key.endswith(".mean") or not key.startswith("metrics."):
            continue
        base = key[: -len(".mean")]
        yield product(f"{base}.total_sum = {base}.mean x {base}.count", f"{base}.total_sum", key, f"{base}.count")
        yield equal(f"{base}.median", f"{base}.percentiles.p50")
        yield Identity(f"{base}.variance = {base}.std_dev^2", f"{base}.variance", (f"{base}.std_dev",), lambda s: s * s)
        parts = tuple(f"{base.rsplit('.', 1)[0]}.{g}.count" for g in ("successful", "errored", "incomplete"))
        if base.endswith(".total"):
            yield sum_of(f"{base}.count = successful + errored + incomplete counts", f"{base}.count", parts)
    for prefix in ("request_totals", "scheduler_metrics.requests_made"):
        yield sum_of(
            f"{prefix}.total = successful + errored + incomplete",
            f"{prefix}.total",
            tuple(f"{prefix}.{g}" for g in ("successful", "errored", "incomplete")),
        )


GUIDELLM = ToolCheck(
    Tool.GUIDELLM,
    GUIDELLM_INVERTED_CDF,
    "guidellm src/guidellm/schemas/statistics.py DistributionSummary",
    recompute=_guidellm,
    families=(_guidellm_identities,),
)


REGISTRY: dict[str, ToolCheck] = {tc.tool: tc for tc in (VLLM, SGLANG, LLMPERF, AIPERF, GENAI_PERF, GUIDELLM)}
REGISTRY[Tool.VLLM_BENCHMARK_SERVING] = VLLM


def tool_check(tool: str | None) -> ToolCheck | None:
    """The registry entry of ``tool`` (a ``run.tool`` string), or None when the ledger has none."""
    if Tool.GENAI_BENCH not in REGISTRY:  # the tools of issue 15 live in their own module (imports this one)
        from bench_ledger.queries.check.tools_more import MORE

        REGISTRY.update({tc.tool: tc for tc in MORE})
    return REGISTRY.get(tool or "")
