"""Write the SYNTHETIC case-study data set: raw files in the real tools' formats plus a manifest.

The report behind the case study (``h20-dsv41-flash-report.zh.txt``) publishes only rounded
summaries; its raw per-request data is not public. So that ``ledger demo`` can run the whole chain
(declare, import through the real importers, recompute, check the report's claims), this module
writes a deterministic stand-in: vLLM bench JSON for the ``fx`` batch, legacy
``benchmark_serving.py`` JSON for the ``m17`` batch, the ledger's own JSON Lines for the cold/warm
probe whose wall clock was not kept, ``nvidia-smi dmon`` captures and nine vLLM start-up logs.
Recomputed with the report's definitions they give back the report's numbers (see ``timeline`` for
how), except two TTFT medians that no timeline can give (see ``plan._INFEASIBLE_TTFT_P50``).

Everything says it is synthetic: a ``synthetic`` metadata key in every vLLM JSON, the word
SYNTHETIC in every other file name, and ``synthetic: true`` in the manifest.

Usage: ``python -m ledger.casestudy.generate OUT_DIR``
"""

from __future__ import annotations

import random
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from bench_ledger.casestudy import dmon, logs
from bench_ledger.casestudy.manifest import REPORT_FILE, import_commands, manifest_text
from bench_ledger.casestudy.plan import ALL_RUNS, FX_RUNS, M17_RUNS, PROBE_INPUT, PROBES
from bench_ledger.casestudy.runs import build_run
from bench_ledger.casestudy.vllm_files import dumps_result, legacy_result, probe_jsonl, vllm_result

__all__ = ["Generated", "generate", "main"]

_REPORT_SOURCE = Path(__file__).with_name(REPORT_FILE)
_M17_START = datetime(2026, 10, 17, 10, 5, 0)
_FX_START = datetime(2026, 10, 17, 13, 40, 0)
_RUN_GAP_S = 45.0  # pause between two runs of a sweep
_FX_CLOCK_BASE = 861_204.518337  # perf_counter of the bench host when fx started (arbitrary)
_DMON_RUN = "160k-1300-c32n64"  # the 300 s dmon window lies inside this run
_DMON_OFFSET_S = 40  # ... starting this many seconds after the run's first request


@dataclass(frozen=True)
class _ImportJob:
    """One ``ledger import PATH --batch B [--run LABEL] [--node N]``."""

    path: Path
    batch: str
    run: str | None
    node: str | None


@dataclass(frozen=True)
class Generated:
    manifest: Path
    imports: list[_ImportJob]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def generate(out_dir: Path, seed: int = 20261017) -> Generated:
    """Write the data set into ``out_dir``; return the manifest and the imports in order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = {spec.label: build_run(spec, seed) for spec in ALL_RUNS}
    jobs: list[_ImportJob] = []

    def job(rel: str, text: str, batch: str, run: str | None, node: str | None = None) -> None:
        _write(out_dir / rel, text)
        jobs.append(_ImportJob(Path(rel), batch, run, node))

    # m17 first: it is the earlier batch. Legacy files carry no start times.
    clock = _M17_START
    for spec in M17_RUNS:
        rec = records[spec.label]
        clock += timedelta(seconds=rec.wall_clock)
        result = legacy_result(rec, f"{clock:%Y%m%d-%H%M%S}")
        job(f"m17/SYNTHETIC-m17-{spec.label}.json", dumps_result(result), "m17", spec.label)
        clock += timedelta(seconds=_RUN_GAP_S)

    clock, dmon_start = _FX_START, None
    for spec in FX_RUNS:
        rec = records[spec.label]
        base = _FX_CLOCK_BASE + (clock - _FX_START).total_seconds()
        if spec.label == _DMON_RUN:
            dmon_start = clock.replace(microsecond=0) + timedelta(seconds=_DMON_OFFSET_S)
        clock += timedelta(seconds=rec.wall_clock)
        result = vllm_result(rec, f"{clock:%Y%m%d-%H%M%S}", base)
        job(f"fx/SYNTHETIC-fx-{spec.label}.json", dumps_result(result), "fx", spec.label)
        clock += timedelta(seconds=_RUN_GAP_S)
    for label, ttft, out, _prefix in PROBES:
        job(f"fx/SYNTHETIC-fx-{label}.jsonl", probe_jsonl(label, ttft, PROBE_INPUT, out), "fx", label)

    assert dmon_start is not None
    rng = random.Random(f"{seed}:dmon")
    for node, text in enumerate(dmon.dmon_pu_files(rng, dmon_start)):
        job(f"fx/dmon/SYNTHETIC-dmon-node{node}.txt", text, "fx", None, f"node{node}")
    mem_start = dmon_start + timedelta(seconds=dmon.TICKS + 20)
    job("fx/dmon/SYNTHETIC-dmon-mem-node0.txt", dmon.dmon_mem_file(rng, mem_start), "fx", None, "node0")

    for launch in logs.LAUNCHES:
        _write(out_dir / launch.log_name, logs.launch_log(launch))
    shutil.copyfile(_REPORT_SOURCE, out_dir / REPORT_FILE)
    manifest = _write(out_dir / "manifest.yaml", manifest_text(ALL_RUNS))
    script = _write(out_dir / "import-commands.sh", import_commands((j.path, j.batch, j.run, j.node) for j in jobs))
    script.chmod(0o755)
    return Generated(manifest, [_ImportJob(out_dir / j.path, j.batch, j.run, j.node) for j in jobs])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ledger.casestudy.generate OUT_DIR", file=sys.stderr)
        return 2
    generated = generate(Path(args[0]))
    print(
        f"wrote {generated.manifest} and {len(generated.imports)} import jobs "
        f"(SYNTHETIC data set; see import-commands.sh)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
