"""Concurrent imports on the team backend (PostgreSQL): eight processes at once, no error, no duplicate.

Each scenario forks eight processes that wait on one barrier and then run `ledger import` at the
same moment. Before get-or-create was race-free, a new batch failed most of them with
``duplicate key value violates unique constraint "uq_batch_name"`` and same-label runs ended in a
raw psycopg traceback from the COPY path. DuckDB is one writer per file (a second process gets a
"held by another process" error), so the race exists on PostgreSQL only.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import traceback
from pathlib import Path

import pytest
from bench_ledger.cli import main
from click.testing import CliRunner

PROCESSES = 8
REQUESTS = 3000  # per file: long enough transactions for the processes to overlap
TIMEOUT_S = 180  # the whole scenario, all processes

pytestmark = pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def request_file(path: Path, label: str, seed: int) -> Path:
    """A ledger-requests file (docs/request-format.md) of REQUESTS records; ``seed`` makes the bytes differ."""
    head = {
        "ledger_requests": 1,
        "run": label,
        "tool": "racer",
        "clock": "epoch_s",
        "token_source": "server_usage",
        "success_rule": "HTTP 200",
    }
    lines = [json.dumps(head)]
    lines += [
        json.dumps(
            {
                "status": "ok",
                "input_tokens": 100 + seed,
                "output_tokens": 10 + k,
                "send_time": 1751880000 + k,
                "end_time": 1751880001 + k,
            }
        )
        for k in range(REQUESTS)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _child(url: str, path: str, batch: str, barrier, queue) -> None:
    try:
        barrier.wait(timeout=60)
        result = CliRunner().invoke(main, ["import", "--db", url, "--batch", batch, "-q", path])
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        tb = "".join(traceback.format_exception(result.exception)) if crashed else ""
        queue.put((result.exit_code, result.stdout, result.stderr, tb))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        queue.put((-1, "", "", repr(exc)))


def race(url: str, paths: list[Path], batch: str) -> list[tuple[int, str, str, str]]:
    """Import each path in its own process, all released at once; (exit code, stdout, stderr, traceback)."""
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(len(paths)), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(url, str(p), batch, barrier, queue)) for p in paths]
    for p in procs:
        p.start()
    try:
        results = [queue.get(timeout=TIMEOUT_S) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return results


def assert_clean(results: list[tuple[int, str, str, str]]) -> None:
    problems = [r for r in results if r[0] != 0 or r[3] or "error" in r[2] or "Traceback" in r[1] + r[2]]
    assert not problems, problems


@pytest.fixture
def pg_url(ledger_url: str) -> str:
    run("init", "--db", ledger_url)
    return ledger_url


def counts(url: str) -> dict[str, int]:
    return json.loads(run("status", "--db", url, "--json"))["counts"]


def test_eight_imports_into_a_new_batch(pg_url: str, tmp_path: Path) -> None:
    paths = [request_file(tmp_path / f"r{i}.jsonl", f"r{i}", i) for i in range(PROCESSES)]
    results = race(pg_url, paths, "fresh")
    assert_clean(results)
    assert sum(": imported as artefact" in r[1] for r in results) == PROCESSES
    created = [r[2] for r in results if "note: batch" in r[2]]
    assert len(created) == 1  # exactly one process created the batch, and said so
    batches = json.loads(run("batches", "--db", pg_url, "--json"))
    assert [(b["name"], b["runs"], b["requests"], b["artefacts"]) for b in batches] == [
        ("fresh", PROCESSES, PROCESSES * REQUESTS, PROCESSES)
    ]
    run("close", "fresh", "--db", pg_url)
    assert "batch fresh: ok" in run("verify", "--db", pg_url)


def test_eight_imports_of_one_run_label(pg_url: str, tmp_path: Path) -> None:
    request_file(tmp_path / "first.jsonl", "other", 99)
    run("import", "--db", pg_url, "--batch", "b", str(tmp_path / "first.jsonl"))  # the batch exists already
    paths = [request_file(tmp_path / f"same{i}.jsonl", "same", i) for i in range(PROCESSES)]
    results = race(pg_url, paths, "b")
    assert_clean(results)
    runs = json.loads(run("runs", "--db", pg_url, "--json"))
    # eight results are eight runs (issue 37): a label taken meanwhile gets the next free one, as in order
    assert sorted((r["label"], r["requests"], r["artefacts"]) for r in runs) == sorted(
        [("other", REQUESTS, 1), ("same", REQUESTS, 1), *((f"same #{k}", REQUESTS, 1) for k in range(2, PROCESSES + 1))]
    )
    assert counts(pg_url)["capture"] == PROCESSES + 1


def test_eight_imports_of_the_same_bytes(pg_url: str, tmp_path: Path) -> None:
    path = request_file(tmp_path / "one.jsonl", "one", 0)
    results = race(pg_url, [path] * PROCESSES, "new")
    assert_clean(results)
    assert sum(": imported as artefact" in r[1] for r in results) == 1
    assert sum("already imported" in r[1] for r in results) == PROCESSES - 1
    c = counts(pg_url)
    assert (c["batch"], c["artefact"], c["run"], c["request"]) == (1, 1, 1, REQUESTS)


def test_eight_imports_of_four_llmperf_pairs(pg_url: str, tmp_path: Path, samples: Path) -> None:
    """Summary and records of one run imported at the same moment still pair (ledger.pairing's lock)."""
    summary = (samples / "llmperf" / "summary_groq_70b.json").read_text()
    records = (samples / "llmperf" / "individual_groq_70b.json").read_text()
    paths = []
    for i in range(PROCESSES // 2):
        (tmp_path / f"p{i}_summary.json").write_text(
            summary.replace('"llama2-70b-4096_550_150_summary"', f'"p{i}_summary"')
        )
        (tmp_path / f"p{i}_individual_responses.json").write_text(records + "\n" * (i + 1))  # other bytes, same records
        paths += [tmp_path / f"p{i}_summary.json", tmp_path / f"p{i}_individual_responses.json"]
    run("import", "--db", pg_url, "--batch", "lp", str(tmp_path / "p0_summary.json"))  # the batch exists already
    results = race(pg_url, paths[1:] + [paths[1]], "lp")
    assert_clean(results)
    runs = json.loads(run("runs", "--db", pg_url, "--json"))
    assert sorted((r["requests"], r["artefacts"]) for r in runs) == [(150, 2)] * (PROCESSES // 2)


def test_eight_imports_of_four_vllm_console_and_result_pairs(pg_url: str, tmp_path: Path, samples: Path) -> None:
    """A console and the result JSON it names (result_filename), imported at the same moment, still pair."""
    d = samples / "vllm-bench-serve"
    name = "tm-l40sx2_qwen27b_in4096_out128_p50_c1_d48e1d"
    console = (d / f"benchmaq_{name}.stdout.txt").read_text()
    result = json.loads((d / f"benchmaq_{name}.json").read_text())
    paths = []
    for i in range(PROCESSES // 2):
        (tmp_path / f"p{i}.stdout.txt").write_text(
            console.replace(f"result_filename='{name}.json'", f"result_filename='p{i}.json'")
        )
        (tmp_path / f"benchmaq_p{i}.json").write_text(json.dumps({**result, "date": f"20260428-08191{i}"}))
        paths += [tmp_path / f"p{i}.stdout.txt", tmp_path / f"benchmaq_p{i}.json"]
    run("import", "--db", pg_url, "--batch", "v", str(paths[0]))  # the batch exists already
    results = race(pg_url, paths[1:] + [paths[1]], "v")
    assert_clean(results)
    runs = json.loads(run("runs", "--db", pg_url, "--json"))
    assert sorted((r["requests"], r["artefacts"]) for r in runs) == [(50, 2)] * (PROCESSES // 2)


def test_a_run_label_taken_by_another_import_meanwhile_is_another_run(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the label chosen for a new run and the run written, another import commits a run of that label:
    the import ran on and wrote its result into that other run (three artefacts on run 'same', seen once in
    test_eight_imports_of_one_run_label). It loses the race instead, runs again, and takes a distinct label."""
    from bench_ledger import pairing

    run("import", "--db", pg_url, "--batch", "b", str(request_file(tmp_path / "first.jsonl", "other", 99)))
    ours, theirs = request_file(tmp_path / "ours.jsonl", "same", 1), request_file(tmp_path / "theirs.jsonl", "same", 2)
    resolve = pairing.Matcher.resolve
    calls: list[str] = []

    def resolve_then_race(self: pairing.Matcher, path: Path, pr, fmt: str) -> str:
        label = resolve(self, path, pr, fmt)
        calls.append(label)
        if len(calls) == 1:  # another import (its own connection) commits a run of the label meanwhile
            run("import", "--db", pg_url, "--batch", "b", str(theirs))
        return label

    monkeypatch.setattr(pairing.Matcher, "resolve", resolve_then_race)
    out = run("import", "--db", pg_url, "--batch", "b", str(ours))
    assert calls == ["same", "same", "same #2"], out  # ours, theirs (nested), ours again after the lost race
    runs = json.loads(run("runs", "--db", pg_url, "--json"))
    assert sorted((r["label"], r["artefacts"]) for r in runs) == [("other", 1), ("same", 1), ("same #2", 1)]
