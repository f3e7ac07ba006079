"""Two checkouts of bench-ledger measured in one session, one after the other: each checkout's own
``benchmarks/run.py`` (on the same generated inputs) and ``benchmarks/seal_bench.py``, with its own virtual
environment, in alternating order over ``--rounds`` rounds; per figure the best of the rounds of each version,
and the ratio new / base. Every row of BENCHMARKS.md thus has a baseline measured minutes apart on the same
machine, which a noisy shared machine needs (its absolute times move by more than the changes measured).

    python benchmarks/versions.py --base ../base --new . --inputs /tmp/bench --rounds 2 --out versions.md

Each checkout needs ``.venv`` with the project installed (the README's test command makes it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["compare", "main"]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _one_round(tree: Path, inputs: Path, out: Path, tag: str) -> dict[tuple[str, str], dict[str, float]]:
    """(row, backend) -> {"s": seconds, "cpu": CPU seconds when measured} of one run of both benchmarks."""
    python = str(tree / ".venv" / "bin" / "python")
    figures: dict[tuple[str, str], dict[str, float]] = {}
    report = out / f"{tag}.json"
    run = [python, "benchmarks/run.py", "--inputs", str(inputs), "--json", str(report), "--out", str(out / f"{tag}.md")]
    subprocess.run(run, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    for f in json.loads(report.read_text())["figures"]:
        if f.get("seconds") is not None:
            cpu = (f.get("extra") or {}).get("cpu")
            figures[(f["what"], f["backend"])] = {"s": f["seconds"], **({"cpu": cpu} if cpu else {})}
    seal = subprocess.run(
        [python, "benchmarks/seal_bench.py"], cwd=tree, check=True, capture_output=True, text=True
    ).stdout.strip()
    (out / f"{tag}.seal.json").write_text(seal.splitlines()[-1])
    for result in json.loads(seal.splitlines()[-1])["runs"][0]["results"]:
        for step in ("import", "close", "verify"):
            figures[(f"seal bench: {step} of a 200-run batch", result["backend"])] = {"s": result[f"{step}_s"]}
    return figures


def compare(rounds: list[dict[str, dict]]) -> list[tuple[str, str, float, float, float]]:
    """(row, backend, best base s, best new s, new / base) for the rows both versions measured."""
    rows = []
    keys = [k for k in rounds[0]["base"] if all(k in r["base"] and k in r["new"] for r in rounds)]
    for key in keys:
        base = min(r["base"][key]["s"] for r in rounds)
        new = min(r["new"][key]["s"] for r in rounds)
        rows.append((key[0], key[1], base, new, new / base))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the checkout measured as the baseline")
    ap.add_argument("--new", type=Path, required=True, help="the checkout compared with it")
    ap.add_argument("--inputs", type=Path, required=True, help="generated inputs, shared by both (run.py --inputs)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True, help="the Markdown table written here; raw JSON beside it")
    a = ap.parse_args(argv)
    raw = a.out.parent / (a.out.stem + ".raw")
    raw.mkdir(parents=True, exist_ok=True)
    rounds = []
    load = [os.getloadavg()[0]]
    for i in range(a.rounds):
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        this: dict[str, dict] = {}
        for version in order:
            _log(f"round {i + 1}: {version}")
            this[version] = _one_round(getattr(a, version).resolve(), a.inputs.resolve(), raw, f"{version}-{i + 1}")
        rounds.append(this)
        load.append(os.getloadavg()[0])
    rows = compare(rounds)
    lines = [
        f"Both versions measured by `python benchmarks/versions.py --base {a.base} --new {a.new} --rounds {a.rounds}` "
        f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, alternating; best of {a.rounds} per version; "
        f"1-minute load average {', '.join(f'{x:.1f}' for x in load)} (start, after each round).",
        "",
        "| row | backend | base | new | new / base |",
        "|---|---|---|---|---|",
        *(f"| {what} | {backend} | {b:.2f} s | {n:.2f} s | {r:.2f} |" for what, backend, b, n, r in rows),
        "",
        f"Slowest row: {max(rows, key=lambda row: row[4])[4]:.2f}x." if rows else "No row measured by both.",
    ]
    a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
