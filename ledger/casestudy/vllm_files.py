"""Writers for the benchmark tools' own file shapes (formats.md section 1) and the probe JSON Lines.

The aggregates are computed the way vLLM computes them (numpy linear percentiles, population std,
TPOT = (latency - ttft) / (output_len - 1), ITL over the flattened chunk gaps, the per-second
``max_output_tokens_per_s`` / ``max_concurrent_requests`` buckets), so that an importer that
recomputes them from the per-request arrays finds the tool's summary consistent (R15).
"""

from __future__ import annotations

import json
import math
from typing import Any

from bench_ledger.casestudy.plan import MODEL_ID, SYNTHETIC_NOTE
from bench_ledger.casestudy.runs import RunRecords

__all__ = ["dumps_result", "legacy_result", "probe_jsonl", "vllm_result"]

_NEW_PERCENTILES = (50.0, 95.0, 99.0)  # --metric-percentiles 50,95,99
_LEGACY_PERCENTILES = (99.0,)  # the legacy script's default
_PLACEHOLDER_TEXT = "(synthetic: no text generated)"


def _np_percentile(xs: list[float], p: float) -> float:
    """numpy.percentile(xs, p) with the default linear method, including numpy's lerp."""
    s = sorted(xs)
    n = len(s)
    q = p / 100
    idx = n * q + (1 + q * (1 - 1 - 1)) - 1
    lo = min(max(math.floor(idx), 0), n - 1)
    hi = min(lo + 1, n - 1)
    t = idx - lo
    a, b = s[lo], s[hi]
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _np_median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs)


def _std(xs: list[float]) -> float:
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))


def _stats(name: str, values_s: list[float], percentiles: tuple[float, ...]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s] or [0.0]
    out = {
        f"mean_{name}_ms": _mean(ms),
        f"median_{name}_ms": _np_median(ms),
        f"std_{name}_ms": _std(ms),
    }
    for p in percentiles:
        word = str(int(p)) if int(p) == p else str(p)
        out[f"p{word}_{name}_ms"] = _np_percentile(ms, p)
    return out


def _latency_stats(run: RunRecords, percentiles: tuple[float, ...]) -> dict[str, float]:
    tpots = [(lat - t) / (o - 1) for lat, t, o in zip(run.latencies, run.ttfts, run.outs) if o > 1]
    itls = [g for gaps in run.itls for g in gaps]
    stats: dict[str, float] = {}
    stats.update(_stats("ttft", run.ttfts, percentiles))
    stats.update(_stats("tpot", tpots, percentiles))
    stats.update(_stats("itl", itls, percentiles))
    stats.update(_stats("e2el", run.latencies, percentiles))
    return stats


def _peaks(starts: list[float], run: RunRecords) -> tuple[float, int]:
    """vLLM's per-second buckets: peak streamed chunks per second and peak requests per second."""
    t0 = min(starts)
    end = max(s + lat for s, lat in zip(starts, run.latencies))
    buckets = math.ceil(end - t0) + 1
    chunks, active = [0] * buckets, [0] * buckets
    for s, t, lat, gaps in zip(starts, run.ttfts, run.latencies, run.itls):
        now = s + t
        times = [now]
        for g in gaps:
            now += g
            times.append(now)
        for tt in times:
            b = int(tt - t0)
            if 0 <= b < buckets:
                chunks[b] += 1
        for b in range(int(s - t0), int(s + lat - t0) + 1):
            active[b] += 1
    return float(max(chunks)), max(active)


def _header(run: RunRecords, date: str, legacy: bool) -> dict[str, Any]:
    spec = run.spec
    head: dict[str, Any] = {"date": date}
    if not legacy:
        head["endpoint_type"] = "openai"
    head["backend"] = "vllm" if legacy else "openai"
    if not legacy:
        head["label"] = None
    head.update(model_id=MODEL_ID, tokenizer_id=MODEL_ID, num_prompts=spec.requests)
    # --metadata batch=... tier=... run=... synthetic=...: string values, as vLLM stores them.
    head.update(batch=spec.batch, tier=spec.tier, run=spec.label, synthetic=SYNTHETIC_NOTE)
    head.update(request_rate="inf", burstiness=1.0, max_concurrency=spec.concurrency)
    return head


def _summary(run: RunRecords, duration: float, failed: int | None, goodput_key: str) -> dict[str, Any]:
    """The aggregates both writers print, in their order; the legacy one has no ``failed`` key and
    spells the goodput key with a colon."""
    total_in, total_out = sum(run.ins), sum(run.outs)
    out: dict[str, Any] = {"duration": duration, "completed": len(run.ins)}
    if failed is not None:
        out["failed"] = failed
    out.update(
        {
            "total_input_tokens": total_in,
            "total_output_tokens": total_out,
            "request_throughput": len(run.ins) / duration,
            goodput_key: None,
            "output_throughput": total_out / duration,
            "total_token_throughput": (total_in + total_out) / duration,
        }
    )
    return out


def _arrays(run: RunRecords, **timing: list[float]) -> dict[str, Any]:
    """The per-request arrays; ``timing`` (latencies, start_times) only where the writer keeps them."""
    n = len(run.ins)
    return {
        "input_lens": run.ins,
        "output_lens": run.outs,
        "ttfts": run.ttfts,
        "itls": run.itls,
        **timing,
        "generated_texts": [_PLACEHOLDER_TEXT] * n,
        "errors": [""] * n,
    }


def vllm_result(run: RunRecords, date: str, clock_base: float) -> dict[str, Any]:
    """``vllm bench serve --save-result --save-detailed`` (new key set, with ``start_times``).

    ``clock_base`` is the perf_counter value of the first request (an arbitrary monotonic clock).
    ``duration`` is the span of the requests on that clock: the common wall clock T.
    """
    starts = [clock_base + s for s in run.starts]
    duration = max(s + lat for s, lat in zip(starts, run.latencies)) - min(starts)
    peak_chunks, peak_active = _peaks(starts, run)
    body = _summary(run, duration, failed=0, goodput_key="request_goodput")
    body.update(_arrays(run, latencies=run.latencies, start_times=starts))
    body.update(max_output_tokens_per_s=peak_chunks, max_concurrent_requests=peak_active, rtfx=0.0)
    body.update(_latency_stats(run, _NEW_PERCENTILES))
    return {**_header(run, date, legacy=False), **body}


def legacy_result(run: RunRecords, date: str) -> dict[str, Any]:
    """Legacy ``benchmarks/benchmark_serving.py --save-result``: arrays always, no start times.

    Its ``duration`` is the tool's perf_counter span, which also covers the moment between starting
    the clock and sending the first request; the latencies are ttft + the sum of the chunk gaps.
    """
    body = _summary(run, run.wall_clock, failed=None, goodput_key="request_goodput:")
    body.update(_arrays(run))
    body.update(_latency_stats(run, _LEGACY_PERCENTILES))
    return {**_header(run, date, legacy=True), **body}


def dumps_result(result: dict[str, Any]) -> str:
    """One JSON object on one line, as ``json.dump`` writes it (ASCII escapes, no indentation)."""
    return json.dumps(result)


def probe_jsonl(label: str, ttft_s: float, input_tokens: int, output_tokens: int) -> str:
    """The ledger's own per-request JSON Lines: a header line, then one line per request."""
    head = {"ledger_requests": 1, "run": label, "tool": "probe-script", "token_source": "server_usage"}
    row = {"status": "ok", "input_tokens": input_tokens, "output_tokens": output_tokens, "ttft_s": ttft_s}
    return json.dumps(head) + "\n" + json.dumps(row) + "\n"
