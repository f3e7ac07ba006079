"""Launch rows from what the tools' folders name (issue 15): one launch per inference-perf report folder
and per vLLM sweep SERVE setting, found again by its label; a declared launch with that label and its
server log gives the runs the log's measured compile-cache state (issue 14 item 8). Both backends."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sqlalchemy as sa
from bench_ledger import models as m
from bench_ledger.cli import main
from bench_ledger.store import Ledger
from click.testing import CliRunner

from tests.clirun import run

SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"
SERVE = "vllm_sweep_v0.25.1/SERVE--max_num_seqs=4"
LOG = "vllm-server-log/vllm-7B-1gpuA10080GB-0.5GRAM.log"


def launches(ledger: Ledger) -> list[tuple[int, str, str, str | None]]:
    with ledger.connection() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.select(m.Launch.attempt, m.Launch.outcome, m.Launch.label, m.Launch.log_artefact_id).order_by(
                    m.Launch.id
                )
            )
        ]


def served_by(samples: Path, tmp_path: Path, model: str) -> Path:
    """The sweep combination's files as the declared deployment's model would have written them: a file
    stating another model than its deployment's is refused (issue 37)."""
    folder = tmp_path / Path(SWEEP).relative_to("vllm-bench-sweep")
    folder.mkdir(parents=True)
    for f in (samples / SWEEP).iterdir():
        (folder / f.name).write_text(f.read_text().replace('"facebook/opt-125m"', json.dumps(model)))
    return folder


def test_sweep_setting_is_one_launch_found_again_by_its_label(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    run("declare", str(Path(__file__).resolve().parents[2] / "fixtures/manifest/system.yaml"), "--db", ledger_url)
    dep = "h20-1017"
    sweep = served_by(samples, tmp_path, "DeepSeek-V4.1-Flash")  # the model h20-1017 declares
    first = run("import", str(sweep / "run=0.json"), "--batch", "sw", "--deployment", dep, "--db", ledger_url)
    assert f"  launch {dep}#3 ({SERVE})\n" in first.output  # the manifest declared attempts 1 and 2
    again = run(
        "import",
        str(sweep / "run=1.json"),
        str(sweep / "summary.json"),
        "--batch",
        "sw",
        "--deployment",
        dep,
        "--db",
        ledger_url,
    )
    assert again.output.count(f"  launch {dep}#3 ({SERVE})\n") == 2
    assert launches(ledger)[-1] == (3, "unknown", SERVE, None) and len([x for x in launches(ledger) if x[2]]) == 1
    shown = json.loads(run("show", "run", str(first_run(ledger, "sw")), "--json", "--db", ledger_url).output)
    assert (shown["launch"]["deployment"], shown["launch"]["attempt"], shown["launch"]["label"]) == (dep, 3, SERVE)
    assert shown["launch_reason"] == "run.metadata.launch = the launch's label"
    assert shown["warm_compile_basis"] == "n/a: no server log linked to the run's launch"


def first_run(ledger: Ledger, batch: str) -> int:
    with ledger.connection() as conn:
        return conn.execute(
            sa.select(sa.func.min(m.Run.id)).join(m.Batch, m.Batch.id == m.Run.batch_id).where(m.Batch.name == batch)
        ).scalar_one()


def test_without_a_deployment_no_launch_row_and_a_note(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    res = CliRunner().invoke(main, ["import", str(samples / SWEEP / "run=0.json"), "--batch", "sw", "--db", ledger_url])
    assert res.exit_code == 0, res.output
    assert (
        f"note: run=0.json: the file names launch {SERVE}: no launch row without a deployment (--deployment, or "
        "the batch's); kept as run.metadata.launch\n"
    ) in res.output
    assert launches(ledger) == []
    out = run("show", "run", str(first_run(ledger, "sw")), "--db", ledger_url).output
    assert (
        f"  launch: n/a (the run names launch '{SERVE}' but has no deployment, and launches belong to a deployment)\n"
    ) in out


def test_inference_perf_report_folder_is_one_launch(ledger: Ledger, ledger_url: str, samples: Path) -> None:
    run("declare", str(Path(__file__).resolve().parents[2] / "fixtures/manifest/system.yaml"), "--db", ledger_url)
    files = sorted(str(p) for p in (samples / "inference-perf").glob("*metrics.json"))
    res = run("import", *files, "--batch", "ip", "--deployment", "h20-1017", "--db", ledger_url)
    labelled = [x for x in launches(ledger) if x[2]]
    assert len(labelled) == 1 and labelled[0][:2] == (3, "unknown")
    assert res.output.count(f"  launch h20-1017#3 ({labelled[0][2]})\n") == len(files)
    with ledger.connection() as conn:
        metas = [
            json.loads(r[0])["launch"]
            for r in conn.execute(
                sa.select(m.Run.metadata_json).join(m.Batch, m.Batch.id == m.Run.batch_id).where(m.Batch.name == "ip")
            )
        ]
    assert len(metas) == 3 and set(metas) == {labelled[0][2]}  # stage 0, stage 6, all stages


def test_declared_launch_label_and_log_give_runs_the_measured_compile_state(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    shutil.copyfile(samples / LOG, tmp_path / "serve.log")
    (tmp_path / "m.yaml").write_text(
        "version: 1\ndeployments:\n  - name: a100\n    launches:\n"
        f"      - {{attempt: 1, outcome: ready, log: serve.log, label: '{SERVE}'}}\n",
        encoding="utf-8",
    )
    run("declare", str(tmp_path / "m.yaml"), "--db", ledger_url)
    res = run(
        "import", str(samples / SWEEP / "run=0.json"), "--batch", "sw", "--deployment", "a100", "--db", ledger_url
    )
    assert f"  launch a100#1 ({SERVE})\n" in res.output
    assert [x[:3] for x in launches(ledger)] == [(1, "ready", SERVE)]  # found by its label, none added
    rid = first_run(ledger, "sw")
    out = run("show", "run", str(rid), "--db", ledger_url).output
    assert f"  launch: a100#1 ({SERVE})\n" in out
    assert (
        "  compile cache (measured): warm (log artefact 1: measured: compiled graphs loaded from the compile cache "
        "(line 35), none compiled)\n"
    ) in out
    logs = json.loads(run("logs", "--deployment", "a100", "--json", "--db", ledger_url).output)
    assert logs["logs"][0]["launch"] == f"a100#1 ({SERVE})"
    assert [r["run"] for r in logs["logs"][0]["runs"]] == [rid] and logs["logs"][0]["runs_reason"] is None
    text = run("logs", "--deployment", "a100", "--db", ledger_url).output
    assert f"    runs: {rid} vllm-sweep " in text
    log_id = logs["logs"][0]["artefact"]
    assert f"  log of launch: a100#1 ({SERVE})\n" in run("show", "artefact", str(log_id), "--db", ledger_url).output


def test_a_declared_launch_without_label_says_why_no_runs(
    ledger: Ledger, ledger_url: str, samples: Path, tmp_path: Path
) -> None:
    shutil.copyfile(samples / LOG, tmp_path / "serve.log")
    (tmp_path / "m.yaml").write_text(
        "version: 1\ndeployments:\n  - name: a100\n    launches:\n"
        "      - {attempt: 1, outcome: ready, log: serve.log}\n",
        encoding="utf-8",
    )
    run("declare", str(tmp_path / "m.yaml"), "--db", ledger_url)
    logs = json.loads(run("logs", "--deployment", "a100", "--json", "--db", ledger_url).output)
    assert logs["logs"][0]["runs"] is None
    assert logs["logs"][0]["runs_reason"] == (
        "its launch has no label, and runs find their launch by label "
        "(run.metadata.launch; a manifest launch's `label:`)"
    )
