"""The audit fails closed against a real ledger, on DuckDB and PostgreSQL (issue 10).

A small ledger: the manifest fixture (deployments h20-1017 and h20-old, batch fx) and three runs
of per-request records written by hand, so every figure below is computed by hand:

* b1/A (deployment h20-1017): 2 ok requests, input 100 + 200, output 10 + 20, sent at 1000 s and
  1001 s, ended at 1005 s and 1006 s: wall clock 6 s, total TPM 60 x 330 / 6 = 3,300, output TPM
  300; TTFT 0.5 and 1.5 s (p50 1.0); cached tokens 64 and 0 (cache-hit tokens 64).
* b1/P: the same tokens, no times (wall clock n/a).
* b2/A (deployment h20-old): like b1/A (another tool name, so that the file's bytes differ).
"""

from __future__ import annotations

import json
import re
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
    {
        "status": "ok",
        "input_tokens": 100,
        "output_tokens": 10,
        "cached_tokens": 64,
        "send_time": 1000.0,
        "first_token_time": 1000.5,
        "end_time": 1005.0,
        "ttft_s": 0.5,
        "latency_s": 5.0,
    },
    {
        "status": "ok",
        "input_tokens": 200,
        "output_tokens": 20,
        "cached_tokens": 0,
        "send_time": 1001.0,
        "first_token_time": 1002.5,
        "end_time": 1006.0,
        "ttft_s": 1.5,
        "latency_s": 5.0,
    },
]
UNTIMED = [
    {"status": "ok", "input_tokens": 100, "output_tokens": 10},
    {"status": "ok", "input_tokens": 200, "output_tokens": 20},
]
HEAD = {
    "tool": "t",
    "input_target_tokens": 100,
    "output_cap_tokens": 20,
    "concurrency": 2,
    "request_count": 2,
    "seed": 1,
}


FIXTURES_DIR = Path(__file__).resolve().parents[2] / "fixtures"


def _ok(res) -> None:
    assert res.exit_code == 0, res.output


def _write(path: Path, header: dict, records: list[dict]) -> Path:
    path.write_text("\n".join([json.dumps({"ledger_requests": 1, **header})] + [json.dumps(r) for r in records]) + "\n")
    return path


@pytest.fixture(scope="module")
def small(module_ledger_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The small ledger (:func:`build_small`) built once per module and backend, for the tests that read it."""
    return build_small(module_ledger_url, FIXTURES_DIR, tmp_path_factory.mktemp("small"))


@pytest.fixture
def small_own(ledger: Ledger, ledger_url: str, fixtures: Path, tmp_path: Path) -> str:
    """The small ledger in the test's own database, for a test that adds to it."""
    return build_small(ledger_url, fixtures, tmp_path)


def build_small(ledger_url: str, fixtures: Path, tmp_path: Path) -> str:
    """Declared deployments (tests/fixtures/manifest/system.yaml); batch b1: run A (timed) and run P
    (untimed) on h20-1017; batch b2: run A of another tool on h20-old."""
    for f in ("system.yaml", "report.txt"):
        shutil.copy(fixtures / "manifest" / f, tmp_path / f)
    runner = CliRunner()
    _ok(runner.invoke(main, ["declare", "--db", ledger_url, str(tmp_path / "system.yaml")]))
    a = _write(tmp_path / "a.jsonl", {"run": "A", "clock": "epoch_s", **HEAD}, TIMED)
    p = _write(tmp_path / "p.jsonl", {"run": "P", **HEAD}, UNTIMED)
    a2 = _write(tmp_path / "a2.jsonl", {"run": "A", "clock": "epoch_s", **HEAD, "tool": "t2"}, TIMED)
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(a), "--batch", "b1", "--deployment", "h20-1017", "-q"]))
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(p), "--batch", "b1", "--deployment", "h20-1017", "-q"]))
    _ok(runner.invoke(main, ["import", "--db", ledger_url, str(a2), "--batch", "b2", "--deployment", "h20-old", "-q"]))
    return ledger_url


def results(url: str, claims: list[dict]) -> dict:
    cf = ClaimsFile.model_validate({"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims})
    with Ledger(url) as led:
        return {r.claim_id: r for r in audit(cf, led).results}


def metric(
    cid: str, text: str, name: str, kind: str, unit: str | None, run: str | None = "A", batch: str = "b1", **kw
) -> dict:
    scope = {"batch": batch, **({"run": run} if run else {})}
    return {"id": cid, "text": text, "unit": unit, "kind": kind, "metric": {"name": name, "scope": scope}, **kw}


# --------------------------------------------------------------------------- 1. operand verdicts carry


def test_product_of_a_not_derivable_wall_clock_is_not_derivable(small: str) -> None:
    r = results(
        small,
        [
            metric("wall", "6", "wall_clock_s", "duration", "s", run="P"),
            {
                "id": "twice",
                "text": "12",
                "unit": "s",
                "kind": "duration",
                "derived": {"op": "product", "operands": ["wall", {"value": "2", "exact": True}]},
            },
        ],
    )
    assert r["wall"].verdict == "not-derivable"
    assert r["twice"].verdict == "not-derivable" and r["twice"].weakest == "wall"
    assert r["twice"].missing.startswith("operand wall is not-derivable: ")


def test_ratio_of_mismatched_claims_is_a_mismatch(small: str) -> None:
    r = results(
        small,
        [
            metric("tpm", "3,400", "total_tpm", "aggregate_token_rate", "tokens/min"),
            metric("out", "310", "output_tpm", "aggregate_token_rate", "tokens/min"),
            {
                "id": "share",
                "text": "11.0",
                "unit": "x",
                "kind": "ratio",
                "derived": {"op": "ratio", "operands": ["tpm", "out"]},
            },
        ],
    )
    assert r["tpm"].verdict == r["out"].verdict == "mismatch"
    assert r["tpm"].recomputed == "3,300"
    assert r["share"].verdict == "mismatch" and r["share"].weakest == "tpm"


# --------------------------------------------------------------------------- 2. cache-hit tokens


def test_cache_hit_tokens_from_ttft_refused_but_from_the_cache_field_reproduced(small: str) -> None:
    r = results(
        small,
        [
            metric("hits", "64", "cache_hit_tokens", "cache_hit_tokens", "tokens"),
            metric("input", "300", "input_tokens", "token_count", "tokens"),
            metric("ttft", "1.0", "ttft_p50", "latency", "s"),
            {
                "id": "guess",
                "text": "150",
                "unit": "tokens",
                "kind": "cache_hit_tokens",
                "says": "measured",
                "derived": {"op": "product", "operands": ["input", "ttft", {"value": "0.5", "exact": True}]},
            },
        ],
    )
    assert r["hits"].verdict == "reproduced"
    assert r["guess"].verdict == "refused" and r["guess"].rule == "R9"


# --------------------------------------------------------------------------- 3. the report's own definition (R3)


def test_total_tpm_as_60_tokens_over_wall_clock(small: str) -> None:
    wall = {"metric": "wall_clock_s", "scope": {"batch": "b1", "run": "A"}, "kind": "duration"}
    r = results(
        small,
        [
            metric("in", "300", "input_tokens", "token_count", "tokens"),
            metric("out", "30", "output_tokens", "token_count", "tokens"),
            {
                "id": "tpm",
                "text": "3,300",
                "unit": "tokens/min",
                "kind": "aggregate_token_rate",
                "derived": {
                    "op": "product",
                    "operands": [
                        {"value": "60", "unit": "s/min", "exact": True},
                        {"op": "divide", "operands": [{"op": "sum", "operands": ["in", "out"]}, wall]},
                    ],
                },
            },
        ],
    )
    assert r["tpm"].verdict == "consistent", r["tpm"].why
    assert r["tpm"].recomputed == "3,300"


# --------------------------------------------------------------------------- 4. metric claims of the wrong kind


def test_record_groups_claimed_as_requests_refused(small: str) -> None:
    r = results(small, [metric("n", "2", "record_groups", "request_count", "requests", run=None)])
    assert r["n"].verdict == "refused" and r["n"].rule == "R2"
    assert r["n"].why == "the metric record_groups is of kind record_count; the claim says request_count"


def _cli(url: str, tmp_path: Path, claims: list[dict], *args: str):
    path = tmp_path / "mine.yaml"
    path.write_text(
        yaml.safe_dump(
            {"version": 1, "source_report": {"slug": "r", "title": "T"}, "claims": claims},
            allow_unicode=True,
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    return CliRunner().invoke(main, ["audit", "--db", url, str(path), *args])


# --------------------------------------------------------------------------- 5. fail-closed comparisons

DMON = """# gpu    pwr  gtemp     sm    mem
# Idx      W      C      %      %
    0    100     50     90      5
    1    300     60     80      6
"""


def test_ledger_scopes_use_the_recorded_factors(small: str) -> None:
    """b1/A (h20-1017) vs b2/A (h20-old): the ledger records weights 1017 vs old and batch b1 vs b2;
    nothing is repeated in a context, and the attribution to the weights is still refused."""
    r = results(
        small,
        [
            metric("new", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min"),
            metric("old", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", batch="b2"),
            {
                "id": "w",
                "text": "1.00x",
                "unit": "x",
                "kind": "ratio",
                "derived": {"op": "ratio", "operands": ["new", "old"], "attributes_to": "weights_version"},
            },
        ],
    )
    assert r["w"].verdict == "refused" and r["w"].rule == "R6"
    assert r["w"].why.startswith(
        "weights_version is not the only difference; differences: weights_version (1017 vs old), batch (b1 vs b2)"
    )


def test_a_ledger_scope_against_a_partial_context_is_not_attributable(small: str) -> None:
    """The ledger side's hardware, engine, layout... are recorded; the quoted side gives only its
    weights and batch: those factors are unknown there, so the ratio is not a weights ratio."""
    r = results(
        small,
        [
            metric(
                "new", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", context={"weights_version": "1017"}
            ),
            {
                "id": "old",
                "text": "3,000",
                "unit": "tokens/min",
                "kind": "aggregate_token_rate",
                "context": {"weights_version": "old", "batch": "b1"},
                "quoted": {"source": "earlier stage"},
            },
            {
                "id": "w",
                "text": "+10%",
                "unit": "%",
                "kind": "percent_change",
                "derived": {"op": "percent_change", "operands": ["old", "new"], "attributes_to": "weights_version"},
            },
        ],
    )
    assert r["w"].verdict == "refused" and r["w"].rule == "R6"
    assert r["w"].why.startswith(
        "the other factors are not known to be equal (unknown: model, hardware, gpu_count, engine, "
        "engine_version, layout, engine_options, workload, seed"
    )
    assert "differences: weights_version (old vs 1017)" in r["w"].why


def test_a_context_contradicting_the_ledger_refuses_the_derivation(small: str) -> None:
    r = results(
        small,
        [
            metric(
                "new", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", context={"weights_version": "old"}
            ),
            metric("old", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", batch="b2"),
            {
                "id": "w",
                "text": "1.00x",
                "unit": "x",
                "kind": "ratio",
                "derived": {"op": "ratio", "operands": ["new", "old"]},
            },
        ],
    )
    assert r["w"].verdict == "refused" and r["w"].rule == "R6"
    assert "context weights_version='old', the ledger records '1017' for run:b1/A" in r["w"].why


def test_cli_a_context_contradicting_the_ledger_is_an_error(small: str, tmp_path: Path) -> None:
    out = _cli(
        small,
        tmp_path,
        [metric("new", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", context={"weights_version": "old"})],
    )
    assert out.exit_code == 2
    assert (
        "claim new, field context: context weights_version='old' contradicts the ledger, which records '1017' "
        "for run:b1/A"
    ) in out.stderr
    assert "reproduced" not in out.stdout


# --------------------------------------------------------------------------- 6. typos are errors, not verdicts


def test_cli_unknown_names_list_the_valid_ones_and_exit_2(small_own: str, tmp_path: Path) -> None:
    small = small_own
    (tmp_path / "dmon.txt").write_text(DMON)
    _ok(
        CliRunner().invoke(
            main, ["import", "--db", small, str(tmp_path / "dmon.txt"), "--batch", "hw", "--node", "n0", "-q"]
        )
    )
    out = _cli(
        small,
        tmp_path,
        [
            metric("m", "3,300", "totl_tpm", "aggregate_token_rate", "tokens/min"),
            metric("r", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", run="B"),
            metric("b", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min", batch="b3"),
            {
                "id": "g",
                "text": "85",
                "unit": "%",
                "kind": "activity_time_percent",
                "metric": {"name": "gpu_activity_time_pct_mean", "scope": {"batch": "hw", "gpu": "n0:gpu7"}},
            },
            {
                "id": "d",
                "text": "1",
                "kind": "startup_time",
                "unit": "s",
                "metric": {"name": "seconds_to_ready", "scope": {"deployment": "h20-1017", "launch": 3}},
            },
        ],
    )
    assert out.exit_code == 2, out.output
    assert out.stdout == ""  # no verdicts
    err = out.stderr
    assert "5 error(s); no verdicts were given" in err
    assert re.search(
        r"line \d+: claim m, field metric.name: no metric named 'totl_tpm' \(did you mean total_tpm, "
        r"output_tpm\?\); `ledger metrics --list` lists the \d+ metrics",
        err,
    )
    assert (
        "claim r, field metric.scope.run: no run labelled 'B' in batch 'b1'; its runs: A, P (`ledger runs --batch b1`)"
    ) in err
    assert "claim b, field metric.scope.batch: no batch named 'b3'; batches: fx, b1, b2, hw (`ledger batches`)" in err
    assert (
        "claim g, field metric.scope.gpu: no card 'n0:gpu7' in batch hw; its cards: n0:gpu0, n0:gpu1 "
        "(`ledger cards --batch hw`)"
    ) in err
    assert "claim d, field metric.scope.launch: deployment 'h20-1017' has no launch 3; its launches: 1, 2" in err
    cards = CliRunner().invoke(main, ["cards", "--db", small, "--batch", "hw"])
    assert cards.exit_code == 0 and "n0:gpu0" in cards.output and "n0:gpu1" in cards.output


def test_cli_metrics_list(small: str) -> None:
    out = CliRunner().invoke(main, ["metrics", "--db", small, "--list"])
    assert out.exit_code == 0, out.output
    assert "total_tpm" in out.output and "aggregate_token_rate" in out.output and "cache_hit_tokens" in out.output


def test_cli_every_file_error_at_once_with_lines(small: str, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        """version: 1
source_report: {slug: r, title: T}
claims:
  - id: share
    text: "0.09"
    kind: ratio
    derived:
      op: ratio
      operands:
        - out
        - {value: "330", unit: tokens}
  - id: out
    text: "30"
    kind: token_cont
    metric: {name: output_tokens, scope: {batch: b1, run: A}}
  - id: hw
    text: "1.77x"
    kind: ratio
    context: {hardwre: H20}
    derived: {op: ratio, operands: [out, outt], attributes_to: hardwar}
""",
        encoding="utf-8",
    )
    out = CliRunner().invoke(main, ["audit", "--db", small, str(path)])
    assert out.exit_code == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0] == f"error: {path}: 5 error(s); no verdicts were given:"
    assert lines[1:] == [
        "  line 11: claim share, field derived.operands[1]: `kind` is missing: a literal number needs its quantity "
        "kind, unless it is an exact constant (`exact: true`)",
        "  line 14: claim out, field kind: unknown quantity kind 'token_cont' (did you mean token_count, token_setting?); known: "
        + ", ".join(sorted(__import__("bench_ledger.kinds", fromlist=["KINDS"]).KINDS)),
        "  line 19: claim hw, field context: unknown factor(s) 'hardwre' in the context; factors: model, hardware, "
        "gpu_count, engine, engine_version, weights_version, layout, engine_options, workload, seed, "
        "warm_prefix_cache, warm_process, warm_compile, warm_file_cache, batch",
        "  line 20: claim hw, field derived.operands: refers to unknown claim 'outt' (did you mean out?)",
        "  line 20: claim hw, field derived.attributes_to: unknown factor 'hardwar'; factors: model, hardware, gpu_count, "
        "engine, engine_version, weights_version, layout, engine_options, workload, seed, warm_prefix_cache, "
        "warm_process, warm_compile, warm_file_cache, batch",
    ]


# --------------------------------------------------------------------------- output an auditor can read


def _from_column(line: str, col: int) -> str:
    """The rest of a line from display column ``col`` (a CJK character is two columns wide)."""
    from rich.cells import cell_len

    width = 0
    for i, ch in enumerate(line):
        if width >= col:
            return line[i:]
        width += cell_len(ch)
    return ""


def test_cli_output_legend_margins_cjk_width_hint_and_fail_on(small: str, tmp_path: Path) -> None:
    from rich.cells import cell_len

    out = _cli(
        small,
        tmp_path,
        [
            metric("tpm", "3,300", "total_tpm", "aggregate_token_rate", "tokens/min"),
            metric("tpm-zh", "总吞吐约 3,300", "total_tpm", "aggregate_token_rate", "tokens/min") | {"value": "3,300"},
            metric("out-wrong", "310", "output_tpm", "aggregate_token_rate", "tokens/min"),
            metric("ttft", "首字约 1.0 秒", "ttft_p50", "latency", "s") | {"value": "1.0"},
            {
                "id": "q",
                "text": "6,660",
                "unit": "tokens/s",
                "kind": "aggregate_token_rate",
                "quoted": {"source": "archive"},
            },
        ],
        "--fail-on",
        "mismatch,quoted",
    )
    assert out.exit_code == 1, out.stderr
    text = out.stdout
    assert "legend" in text and "NOT checked" in text and "never better than its weakest operand" in text
    assert "inside the printed rounding, 0.5 from its edge" in text
    assert "inside the printed rounding, 0.05 from its edge" in text
    assert "recomputed 300 vs printed 310: difference -10" in text
    assert f"ledger explain {tmp_path / 'mine.yaml'} out-wrong" in text
    assert all(cell_len(line) <= 120 for line in text.splitlines())
    lines = text.splitlines()
    head = lines.index("reproduced (3)") + 1
    unit_col = cell_len(lines[head][: lines[head].index("unit")])
    rows = {line.split()[0]: line for line in lines[head + 2 : head + 5]}
    assert set(rows) == {"tpm", "tpm-zh", "ttft"}
    # the unit column starts at one display column whether the printed text is CJK or not
    assert {k: _from_column(v, unit_col).split()[0] for k, v in rows.items()} == {
        "tpm": "tokens/min",
        "tpm-zh": "tokens/min",
        "ttft": "s",
    }
    assert out.stderr.strip().splitlines() == [
        "failing (--fail-on mismatch): 1 claim(s) mismatch: out-wrong",
        "failing (--fail-on quoted): 1 claim(s) quoted: q",
    ]
