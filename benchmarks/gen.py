"""Deterministic input generators for benchmarks/run.py (stdlib only, fixed seed).

* vLLM ``--save-result --save-detailed`` results as JSON Lines: one line per run, per-request arrays
  (input_lens, output_lens, ttfts, itls, latencies, errors, start_times);
* the same requests in the ledger's own JSON Lines format (docs/request-format.md), one file per run;
* ``nvidia-smi dmon -o DT`` text (12 counters, headers repeating) and a CSV of the same rows.
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta
from pathlib import Path

SEED = 20261129
COUNTERS = ("pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk", "fb")
UNITS = ("W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz", "MB")
HEADER_EVERY_TICKS = 20  # dmon repeats its two header lines


def _vllm_peaks(
    starts: list[float], ttfts: list[float], itls: list[list[float]], lats: list[float], errors: list[str]
) -> tuple[float, int]:
    """max_output_tokens_per_s and max_concurrent_requests as vLLM's calculate_metrics computes them
    (benchmarks/serve.py): in floats, token times start + ttft then += each itl, bucketed by
    int(time - earliest start); a request counted in each second int(start - lo) .. int(start + latency - lo)."""
    ok = [j for j, e in enumerate(errors) if not e]
    if not ok:
        return 0.0, 0
    lo = min(starts[j] for j in ok)
    seconds = int(math.ceil(max(starts[j] + lats[j] for j in ok) - lo)) + 1
    tokens, active = [0] * seconds, [0] * seconds
    for j in ok:
        t = starts[j] + ttfts[j]
        times = [t]
        for g in itls[j]:
            t += g
            times.append(t)
        for t in times:
            if 0 <= int(t - lo) < seconds:
                tokens[int(t - lo)] += 1
        for sec in range(int(starts[j] - lo), int((starts[j] + lats[j]) - lo) + 1):
            active[sec] += 1
    return float(max(tokens)), max(active)


def _run(rng: random.Random, i: int, n: int, gaps: int, peaks: bool = False) -> tuple[dict, list[dict]]:
    """One run as a vLLM result object, plus the same requests as ledger-format records (with
    ``peaks``, the object reports max_output_tokens_per_s and max_concurrent_requests too)."""
    t0 = 1000.0 + i * 500.0
    input_lens, output_lens, ttfts, itls, lats, errors, starts = [], [], [], [], [], [], []
    ledger_recs = []
    for j in range(n):
        start = round(t0 + j * 0.0125 + rng.random() * 0.01, 6)
        failed = rng.random() < 0.01
        inp = rng.randint(100, 4000)
        if failed:
            out, ttft, lat, itl, err = 0, 0.0, 0.0, [], "HTTP 500: Internal Server Error"
        else:
            out = rng.randint(gaps + 1, gaps + 500)
            ttft = round(0.02 + rng.random() * 0.3, 6)
            itl = [round(0.005 + rng.random() * 0.03, 6) for _ in range(gaps)]
            lat = round(ttft + sum(itl) + rng.random() * 0.01, 6)
            err = ""
        input_lens.append(inp), output_lens.append(out), ttfts.append(ttft), itls.append(itl)
        lats.append(lat), errors.append(err), starts.append(start)
        rec: dict = {
            "status": "failed" if failed else "ok",
            "input_tokens": inp,
            "output_tokens": out,
            "send_time": start,
        }
        if failed:
            rec["error"] = err
        else:
            rec.update(
                ttft_s=ttft,
                latency_s=lat,
                first_token_time=round(start + ttft, 6),
                end_time=round(start + lat, 6),
                chunk_gaps=itl,
            )
        ledger_recs.append(rec)
    ok = n - sum(1 for e in errors if e)
    dur = round(starts[-1] - starts[0] + max(lats), 6)
    obj = {
        "date": f"20261129-{i:06d}",
        "endpoint_type": "openai-chat",
        "backend": "vllm",
        "label": f"run-{i:04d}",
        "model_id": "Qwen/Qwen2.5-7B-Instruct",
        "tokenizer_id": "Qwen/Qwen2.5-7B-Instruct",
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 64,
        "duration": dur,
        "completed": ok,
        "total_input_tokens": sum(input_lens),
        "total_output_tokens": sum(output_lens),
        "request_throughput": round(ok / dur, 6),
        "output_throughput": round(sum(output_lens) / dur, 6),
        "mean_ttft_ms": 170.0,
        "median_ttft_ms": 169.5,
        "p99_ttft_ms": 318.0,
        "input_lens": input_lens,
        "output_lens": output_lens,
        "ttfts": ttfts,
        "itls": itls,
        "latencies": lats,
        "errors": errors,
        "start_times": starts,
    }
    if peaks:
        obj["max_output_tokens_per_s"], obj["max_concurrent_requests"] = _vllm_peaks(starts, ttfts, itls, lats, errors)
    return obj, ledger_recs


def vllm_and_ledger(
    out: Path, runs: int, per_run: int, gaps: int, ledger_dir: Path | None, seed: int = SEED, peaks: bool = False
) -> int:
    """Write the vLLM JSON Lines file (and, if ledger_dir, one ledger-format file per run); with
    ``peaks``, each run reports vLLM's max_output_tokens_per_s and max_concurrent_requests."""
    rng = random.Random(seed)
    total = 0
    with open(out, "w") as fh:
        for i in range(runs):
            obj, recs = _run(rng, i, per_run, gaps, peaks)
            fh.write(json.dumps(obj) + "\n")
            total += per_run
            if ledger_dir is not None:
                head = {
                    "ledger_requests": 1,
                    "run": f"run-{i:04d}",
                    "tool": "vllm-bench",
                    "clock": "monotonic_s",
                    "token_source": "unknown",
                    "concurrency": 64,
                    "request_count": per_run,
                }
                with open(ledger_dir / f"run-{i:04d}.jsonl", "w") as lf:
                    lf.write(json.dumps(head) + "\n")
                    lf.writelines(json.dumps(r) + "\n" for r in recs)
    return total


def dmon(out_txt: Path, out_csv: Path, gpus: int, ticks: int, seed: int = SEED) -> int:
    """nvidia-smi dmon -o DT text and a CSV of the same rows; returns the number of data lines."""
    rng = random.Random(seed)
    names = "#Date       Time        gpu " + " ".join(f"{c:>6}" for c in COUNTERS) + "\n"
    units = "#YYYYMMDD   HH:MM:SS    Idx " + " ".join(f"{u:>6}" for u in UNITS) + "\n"
    t = datetime(2026, 11, 28, 12, 0, 0)
    # a small pool of plausible rows per GPU, so values repeat as real dmon output does
    pools = []
    for g in range(gpus):
        pool = []
        for _ in range(64):
            sm = rng.randint(0, 100)
            pool.append(
                [
                    rng.randint(60, 700),
                    rng.randint(30, 85),
                    "-" if g % 4 == 3 else rng.randint(30, 90),
                    sm,
                    rng.randint(0, sm),
                    0,
                    0,
                    0,
                    0,
                    2619,
                    rng.choice((1980, 1755, 1410)),
                    rng.randint(1000, 80000),
                ]
            )
        pools.append(pool)
    lines = 0
    with open(out_txt, "w") as fh, open(out_csv, "w") as fc:
        fc.write("date,time,gpu," + ",".join(COUNTERS) + "\n")
        buf, cbuf = [], []
        for k in range(ticks):
            if k % HEADER_EVERY_TICKS == 0:
                buf.append(names)
                buf.append(units)
            d, tm = t.strftime("%Y%m%d"), t.strftime("%H:%M:%S")
            for g in range(gpus):
                row = pools[g][rng.randrange(64)]
                buf.append(f" {d}   {tm}    {g:>3} " + " ".join(f"{v:>6}" for v in row) + "\n")
                cbuf.append(f"{d},{tm},{g}," + ",".join("" if v == "-" else str(v) for v in row) + "\n")
            lines += gpus
            t += timedelta(seconds=1)
            if len(buf) > 50_000:
                fh.writelines(buf), fc.writelines(cbuf)
                buf, cbuf = [], []
        fh.writelines(buf), fc.writelines(cbuf)
    return lines


def claims(vllm_path: Path, out: Path, n: int, batch: str = "bench") -> dict[str, int]:
    """A claims file (docs/claims.md) of ``n`` claims about the runs of ``vllm_path`` imported into
    ``batch``; returns how many claims of each basis (``metric``, ``derived``) and how many
    ``evaluate()`` calls the audit makes (metric claims plus metric operands).

    The printed numbers are computed here from the generated requests (ok / failed request counts,
    output tokens per run), so a correct ledger reproduces every one of them. Claims come in blocks
    of five about run i: three metric claims (requests_ok, requests_failed, output_tokens), a derived
    ``sum`` (ok + failed = the run's request count) and a derived ``ratio`` of run i's output tokens
    to run i+1's, over the two claims (every fourth block: over two metric operands instead, which
    the audit evaluates itself). Blocks cycle over the runs when there are fewer runs than blocks.
    Written as YAML flow mappings with JSON scalars (stdlib only).
    """
    runs: list[tuple[str, int, int, int]] = []  # label, ok, failed, output tokens
    with open(vllm_path) as fh:
        for line in fh:
            o = json.loads(line)
            failed = sum(1 for e in o["errors"] if e)
            runs.append((o["label"], len(o["errors"]) - failed, failed, sum(o["output_lens"])))
    if len(runs) < 2:
        raise ValueError("claims need at least two runs")
    d = json.dumps
    lines = [
        "version: 1",
        "synthetic: true",
        "source_report:",
        f"  slug: {d('bench-' + batch)}",
        f"  title: {d(f'benchmark claims over batch {batch} ({n} claims)')}",
        "claims:",
    ]
    counts = {"metric": 0, "derived": 0, "evaluate_calls": 0}

    def scope(label: str) -> str:
        return f"{{batch: {d(batch)}, run: {d(label)}}}"

    def add(line: str, basis: str) -> bool:
        if counts["metric"] + counts["derived"] >= n:
            return False
        lines.append("  - " + line)
        counts[basis] += 1
        return True

    block = 0
    while counts["metric"] + counts["derived"] < n:
        i = block % len(runs)
        (lab, ok, failed, out_tok), (lab2, _, _, out2) = runs[i], runs[(i + 1) % len(runs)]
        b = f"b{block:05d}"
        for cid, metric, value, unit, kind in (
            (f"{b}-ok", "requests_ok", ok, "requests", "request_count"),
            (f"{b}-failed", "requests_failed", failed, "requests", "request_count"),
            (f"{b}-out", "output_tokens", out_tok, "tokens", "token_count"),
        ):
            if add(
                f"{{id: {cid}, text: {d(f'{value:,}')}, unit: {unit}, kind: {kind}, "
                f"metric: {{name: {metric}, scope: {scope(lab)}}}}}",
                "metric",
            ):
                counts["evaluate_calls"] += 1
        add(
            f"{{id: {b}-count, text: {d(f'{ok + failed:,}')}, unit: requests, kind: request_count, "
            f"derived: {{op: sum, operands: [{b}-ok, {b}-failed]}}}}",
            "derived",
        )
        nxt = f"b{block + 1:05d}-out"
        ratio = d(f"{out_tok / out2:.3f}") if out2 else d("0")
        if block % 4 == 3 and out2:
            ops = (
                f"{{metric: output_tokens, scope: {scope(lab)}, kind: token_count}}, "
                f"{{metric: output_tokens, scope: {scope(lab2)}, kind: token_count}}"
            )
            if add(
                f"{{id: {b}-ratio, text: {ratio}, unit: x, kind: ratio, derived: {{op: ratio, operands: [{ops}]}}}}",
                "derived",
            ):
                counts["evaluate_calls"] += 2
        elif out2 and counts["metric"] + counts["derived"] + 3 < n:  # run i+1's claim comes in the next block
            add(
                f"{{id: {b}-ratio, text: {ratio}, unit: x, kind: ratio, derived: {{op: ratio, operands: [{b}-out, {nxt}]}}}}",
                "derived",
            )
        block += 1
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return counts
