"""The audit fails closed against a real ledger, on DuckDB and PostgreSQL (issue 10).

A small ledger: the manifest fixture (deployments h20-1017 and h20-old, batch fx) and three runs
of per-request records written by hand, so every figure below is computed by hand:

* b1/A (deployment h20-1017): 2 ok requests, input 100 + 200, output 10 + 20, sent at 1000 s and
  1001 s, ended at 1005 s and 1006 s: wall clock 6 s, total TPM 60 x 330 / 6 = 3,300, output TPM
  300; TTFT 0.5 and 1.5 s (p50 1.0); cached tokens 64 and 0 (cache-hit tokens 64).
* b1/P: the same tokens, no times (wall clock n/a).
* b2/A (deployment h20-old): like b1/A.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from bench_ledger.cli import main
from bench_ledger.queries.audit import audit
from bench_ledger.queries.claims import ClaimsFile
from bench_ledger.store import Ledger
from click.testing import CliRunner

TIMED = [
    {"status": "ok", "input_tokens": 100, "output_tokens": 10, "cached_tokens": 64, "send_time": 1000.0,
     "first_token_time": 1000.5, "end_time": 1005.0, "ttft_s": 0.5, "latency_s": 5.0},
    {"status": "ok", "input_tokens": 200, "output_tokens": 20, "cached_tokens": 0, "send_time": 1001.0,
     "first_token_time": 1002.5, "end_time": 1006.0, "ttft_s": 1.5, "latency_s": 5.0},
]  # fmt: skip
UNTIMED = [{"status": "ok", "input_tokens": 100, "output_tokens": 10}, {"status": "ok", "input_tokens": 200,
                                                                         "output_tokens": 20}]  # fmt: skip
HEAD = {"tool": "t", "input_target_tokens": 100, "output_cap_tokens": 20, "concurrency": 2, "request_count": 2,
        "seed": 1}  # fmt: skip


def _ok(res) -> None:
    assert res.exit_code == 0, res.output


def _write(path: Path, header: dict, records: list[dict]) -> Path:
    path.write_text("\n".join([json.dumps({"ledger_requests": 1, **header})] + [json.dumps(r) for r in records]) + "\n")
    return path


@pytest.fixture
def small(ledger: Ledger, ledger_url: str, fixtures: Path, tmp_path: Path) -> str:
    for f in ("system.yaml", "report.txt"):
        shutil.copy(fixtures / "manifest" / f, tmp_path / f)
    runner = CliRunner()
    _ok(runner.invoke(main, ["declare", "--db", ledger_url, str(tmp_path / "system.yaml")]))
    a = _write(tmp_path / "a.jsonl", {"run": "A", "clock": "epoch_s", **HEAD}, TIMED)
    p = _write(tmp_path / "p.jsonl", {"run": "P", **HEAD}, UNTIMED)
    a2 = _write(tmp_path / "a2.jsonl", {"run": "A", "clock": "epoch_s", **HEAD}, TIMED)
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(a), "--batch", "b1", "--deployment", "h20-1017", "-q"]))
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(p), "--batch", "b1", "--deployment", "h20-1017", "-q"]))
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(a2), "--batch", "b2", "--deployment", "h20-old", "-q"]))
    return ledger_url


def results(url: str, claims: list[dict]) -> dict:
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    with Ledger(url) as led:
        return {r.claim_id: r for r in audit(cf, led).results}


def metric(cid: str, text: str, name: str, kind: str, unit: str | None, run: str | None = "A", batch: str = "b1",
           **kw) -> dict:  # fmt: skip
    scope = {"batch": batch, **({"run": run} if run else {})}
    return {"id": cid, "text": text, "unit": unit, "kind": kind, "metric": {"name": name, "scope": scope}, **kw}


# --------------------------------------------------------------------------- 1. operand verdicts carry


def test_product_of_a_not_derivable_wall_clock_is_not_derivable(small: str) -> None:
    r = results(small, [
        metric("wall", "6", "wall_clock_s", "duration", "s", run="P"),
        {"id": "twice", "text": "12", "unit": "s", "kind": "duration",
         "derived": {"op": "product", "operands": ["wall", {"value": "2", "exact": True}]}},
    ])  # fmt: skip
    assert r["wall"].verdict == "not-derivable"
    assert r["twice"].verdict == "not-derivable" and r["twice"].weakest == "wall"
    assert r["twice"].missing.startswith("operand wall is not-derivable: ")


def test_ratio_of_mismatched_claims_is_a_mismatch(small: str) -> None:
    r = results(small, [
        metric("tpm", "3,400", "total_tpm", "aggregate_token_rate", "tokens/min"),
        metric("out", "310", "output_tpm", "aggregate_token_rate", "tokens/min"),
        {"id": "share", "text": "11.0", "unit": "x", "kind": "ratio", "derived": {"op": "ratio", "operands": ["tpm", "out"]}},
    ])  # fmt: skip
    assert r["tpm"].verdict == r["out"].verdict == "mismatch"
    assert r["tpm"].recomputed == "3,300"
    assert r["share"].verdict == "mismatch" and r["share"].weakest == "tpm"


# --------------------------------------------------------------------------- 2. cache-hit tokens


def test_cache_hit_tokens_from_ttft_refused_but_from_the_cache_field_reproduced(small: str) -> None:
    r = results(small, [
        metric("hits", "64", "cache_hit_tokens", "cache_hit_tokens", "tokens"),
        metric("input", "300", "input_tokens", "token_count", "tokens"),
        metric("ttft", "1.0", "ttft_p50", "latency", "s"),
        {"id": "guess", "text": "150", "unit": "tokens", "kind": "cache_hit_tokens", "says": "measured",
         "derived": {"op": "product", "operands": ["input", "ttft", {"value": "0.5", "exact": True}]}},
    ])  # fmt: skip
    assert r["hits"].verdict == "reproduced"
    assert r["guess"].verdict == "refused" and r["guess"].rule == "R9"


# --------------------------------------------------------------------------- 3. the report's own definition (R3)


def test_total_tpm_as_60_tokens_over_wall_clock(small: str) -> None:
    wall = {"metric": "wall_clock_s", "scope": {"batch": "b1", "run": "A"}, "kind": "duration"}
    r = results(small, [
        metric("in", "300", "input_tokens", "token_count", "tokens"),
        metric("out", "30", "output_tokens", "token_count", "tokens"),
        {"id": "tpm", "text": "3,300", "unit": "tokens/min", "kind": "aggregate_token_rate",
         "derived": {"op": "product", "operands": [
             {"value": "60", "unit": "s/min", "exact": True},
             {"op": "divide", "operands": [{"op": "sum", "operands": ["in", "out"]}, wall]}]}},
    ])  # fmt: skip
    assert r["tpm"].verdict == "consistent", r["tpm"].why
    assert r["tpm"].recomputed == "3,300"


# --------------------------------------------------------------------------- 4. metric claims of the wrong kind


def test_record_groups_claimed_as_requests_refused(small: str) -> None:
    r = results(small, [metric("n", "2", "record_groups", "request_count", "requests", run=None)])
    assert r["n"].verdict == "refused" and r["n"].rule == "R2"
    assert r["n"].why == "the metric record_groups is of kind record_count; the claim says request_count"


def _cli(url: str, tmp_path: Path, claims: list[dict], *args: str):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims},
                                   allow_unicode=True, sort_keys=False), encoding="utf-8")  # fmt: skip
    return CliRunner().invoke(main, ["audit", "--db", url, str(path), *args])
