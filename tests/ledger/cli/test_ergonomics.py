"""Issue 39's command-line ergonomics on real files, both backends: "did you mean" for a mistyped batch,
deployment or run label; a re-import with other options says what was not applied (exit 1); `import --json`
and `verify --json`; `show run` filters; the demo folder in .gitignore."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import run
from tests.conftest import ROOT

DMON = "dmon/dmon_3gpu_rtx30xx.txt"
SMI = "nvidia-smi/vlm_optimization_rtx4090_gpu_log.csv"
SUMMARY = "llmperf/summary_groq_70b.json"
GUIDELLM = "guidellm/guidellm-bench_sanity_20260302_1856_Qwen3-4B-Thinking-2507_tp4_fp8_benchmarks.json"


def test_a_mistyped_batch_gets_did_you_mean_in_every_command(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    run("import", "--db", ledger_url, "--batch", "sweep", "-q", samples / SUMMARY)
    hint = "error: no batch named 'sweeep' (did you mean sweep?); `ledger batches` lists them\n"
    for command in (
        ["runs", "--batch", "sweeep"],
        ["metrics", "--batch", "sweeep"],
        ["check", "--batch", "sweeep"],
        ["hardware", "--batch", "sweeep"],
        ["logs", "--batch", "sweeep"],
        ["compare", "batch:sweeep", "batch:sweep"],
        ["close", "sweeep"],
        ["report", "--batch", "sweeep", "--out", tmp_path / "r.html"],
    ):
        assert run(*command, "--db", ledger_url, code=1).output == hint, command
    far = run("runs", "--db", ledger_url, "--batch", "zzz", code=1).output
    assert far == "error: no batch named 'zzz'; `ledger batches` lists them\n"


def test_a_new_batch_close_to_an_existing_one_is_named(ledger_url: str, samples: Path) -> None:
    run("import", "--db", ledger_url, "--batch", "sweep", "-q", samples / SUMMARY)
    out = run("import", "--db", ledger_url, "--batch", "sweeps", "-q", samples / GUIDELLM).output
    assert (
        f"note: batch 'sweeps' did not exist: created it (open) for {Path(GUIDELLM).name} (did you mean sweep?); "
        "`ledger batches` lists them"
    ) in out


def test_reimport_with_another_batch_node_or_zone_fails_naming_where_it_is(ledger_url: str, samples: Path) -> None:
    dmon, smi, summary = samples / DMON, samples / SMI, samples / SUMMARY
    run("import", "--db", ledger_url, "--batch", "a", "-q", "--node", "n0", dmon)
    run("import", "--db", ledger_url, "--batch", "a", "-q", "--time-zone", "Asia/Shanghai", smi)
    run("import", "--db", ledger_url, "--batch", "a", "-q", summary)
    same = run("import", "--db", ledger_url, "--batch", "a", "-q", "--node", "n0", dmon).output  # the same options: 0
    assert same.startswith(f"{dmon}: already imported as artefact 1 ") and same.endswith("); nothing changed\n")
    run("import", "--db", ledger_url, "-q", smi)  # no option given: nothing to apply
    rule = (
        "an artefact keeps the batch, deployment, node and time zone it was imported with, and no correction "
        "changes them (captured rows never move, R9)\n"
    )
    out = run("import", "--db", ledger_url, "--batch", "a", "-q", "--node", "n1", dmon, code=1).output
    assert out.startswith(f"error: {dmon}: already imported as artefact 1 ")
    assert out.endswith(
        f"; nothing changed: it is in batch 'a', no deployment, node 'n0', time zone unconfirmed; --node 'n1' "
        f"not applied: {rule}"
    )  # dmon prints host-local times: its zone is part of where it is
    out = run("import", "--db", ledger_url, "--batch", "a", "-q", "--time-zone", "UTC", smi, code=1).output
    assert out.endswith(
        f"it is in batch 'a', no deployment, no node, time zone 'Asia/Shanghai'; --time-zone 'UTC' not applied: {rule}"
    )
    out = run("import", "--db", ledger_url, "--batch", "b", "-q", summary, code=1).output
    assert out.endswith(f"it is in batch 'a', no deployment, no node; --batch 'b' not applied: {rule}")
    assert "'b'" not in run("batches", "--db", ledger_url).output  # nothing written


def test_import_json_gives_each_file_s_outcome_and_the_exit_code(
    ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"duration": 1, "completed": "x"}')
    res = run("import", "--db", ledger_url, "--batch", "a", "--json", samples / SUMMARY, samples / DMON, bad, code=1)
    doc = json.loads(res.stdout)
    assert doc["counts"] == {"imported": 2, "already imported": 0, "skipped": 0, "failed": 1}
    first, second, third = doc["files"]
    assert (first["outcome"], first["format"], first["reported_values"], first["created_batch"]) == (
        "imported",
        "llmperf-summary",
        67,
        "a",
    )
    assert [r["label"] for r in first["runs"]] == [
        run_["label"] for run_ in json.loads(run("runs", "--db", ledger_url, "--json").output)
    ]
    assert (second["outcome"], second["format"], second["samples"], second["error"]) == (
        "imported",
        "nvidia-smi-dmon",
        33,
        None,
    )
    assert third["outcome"] == "failed" and third["error"].startswith(f"{bad}: ")
    again = json.loads(run("import", "--db", ledger_url, "--batch", "a", "--json", samples / DMON).stdout)
    assert again["files"][0]["outcome"] == "already imported" and again["counts"]["already imported"] == 1


def test_verify_json_gives_a_verdict_per_batch(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    run("import", "--db", ledger_url, "--batch", "a", "-q", samples / SUMMARY)
    run("import", "--db", ledger_url, "--batch", "c", "-q", samples / DMON)
    run("close", "--db", ledger_url, "c")
    doc = json.loads(run("verify", "--db", ledger_url, "--json").stdout)
    assert doc["ok"] is True and doc["guard_problems"] == []
    assert [(c["batch"], c["books"], c["verdict"], c["artefacts"]) for c in doc["checks"]] == [
        ("c", "closed", "ok", 0),
        ("a", "open", "ok", 1),
    ]
    assert len(doc["checks"][0]["seal"]) == 64 and doc["checks"][1]["seal"] is None


def test_show_run_lists_at_most_limit_reported_values_and_says_what_was_left_out(
    ledger_url: str, samples: Path
) -> None:
    run("import", "--db", ledger_url, "--batch", "g", "-q", samples / GUIDELLM)
    out = run("show", "run", "1", "--db", ledger_url).output.splitlines()
    heading = out.index("  reported by the tool (as printed, not recomputed here): 3,645")
    assert len(out) - heading - 2 == 40  # the first 40 values between the heading and the last line
    assert out[-1] == (
        "  ... 3,605 more reported values left out (--limit 40); --limit 0 prints all, --key GLOB picks "
        "some, --json prints everything"
    )
    assert "  reported by the tool (as printed, not recomputed here): 3,645" in out
    every = run("show", "run", "1", "--db", ledger_url, "--limit", "0").output.splitlines()
    assert len(every) == len(out) - 1 + 3605
    some = run(
        "show",
        "run",
        "1",
        "--db",
        ledger_url,
        "--section",
        "reported",
        "--key",
        "*time_to_first_token_ms.successful.m*",
    ).output
    assert some.splitlines()[1] == (
        "  reported by the tool (as printed, not recomputed here): 5 matching '*time_to_first_token_ms.successful.m*'"
    )
    assert [line.split() for line in some.splitlines()[2:]] == [
        line.split() for line in every if ".time_to_first_token_ms.successful.m" in line
    ]


def test_the_demo_folder_is_ignored_by_git() -> None:
    assert "bench-ledger-demo/" in (ROOT / ".gitignore").read_text().splitlines()
