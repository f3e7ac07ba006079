"""Group commit (issue 17): `ledger import` of many small files writes them a group per transaction,
and every file keeps its own outcome: the same output, notes and exit code as one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_ledger import ingest
from bench_ledger.ingest import pipeline  # its group limits and its writer call, set and watched here

from tests.clirun import run


def counts(url: str) -> dict[str, int]:
    return json.loads(run("status", "--db", url, "--json").output)["counts"]


def request_file(path: Path, label: str, seed: int, extra: dict | None = None, n: int = 3, **head) -> Path:
    header = {"ledger_requests": 1, "run": label, "tool": "t", "clock": "epoch_s", **head}
    recs = [
        {"status": "ok", "input_tokens": 10 + seed, "send_time": 1751880000.25 + k, **(extra or {})} for k in range(n)
    ]
    path.write_text("\n".join(json.dumps(x) for x in [header, *recs]) + "\n")
    return path


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of files of each write_artefacts call (a group, or one file)."""
    seen: list[int] = []
    real = pipeline.write_artefacts

    def spy(ledger, files, *args, **kwargs):
        seen.append(len(files))
        return real(ledger, files, *args, **kwargs)

    monkeypatch.setattr(pipeline, "write_artefacts", spy)
    return seen


def test_small_files_are_written_in_one_transaction_with_the_output_of_one_by_one(
    ledger_url: str, tmp_path: Path, groups: list[int]
) -> None:
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(5)]
    out = run("import", "--db", ledger_url, "--batch", "b", *files)
    assert groups == [5]
    assert out.stdout.splitlines()[::2] == [
        f"{f}: imported as artefact {i} [ledger-requests] sha256 {ingest.sha256_file(f)[0][:12]}…: 1 run(s), 3 requests"
        for i, f in enumerate(files, start=1)
    ]
    assert out.stdout.splitlines()[1::2] == [f"  run {i} run {i - 1}: 3 requests" for i in range(1, 6)]
    assert out.stderr == "note: batch 'b' did not exist: created it (open) for r0.jsonl; `ledger batches` lists them\n"
    c = counts(ledger_url)
    assert (c["artefact"], c["run"], c["capture"], c["request"], c["artefact_digest"]) == (5, 5, 5, 15, 5 * 7)
    # each artefact's digest is the one ledger verify recomputes from the database
    out = run("verify", "--db", ledger_url).output
    assert out.startswith("batch b (open): ok, 5 artefact(s) match their import digests over 40 rows\n")
    if ledger_url.startswith("duckdb"):  # and the declared rows the group wrote, each with its digest
        assert out.endswith("\ndeclared rows: ok, 6 rows match the digests the ledger kept at its writes\n")
    again = run("import", "--db", ledger_url, "--batch", "b", *files).stdout
    assert again.splitlines() == [
        f"{f}: already imported as artefact {i} ({f.name}, ledger-requests, sha256 "
        f"{ingest.sha256_file(f)[0][:12]}…); nothing changed"
        for i, f in enumerate(files, start=1)
    ]


def test_a_file_that_fails_to_parse_in_the_middle_leaves_the_others_imported(
    ledger_url: str, tmp_path: Path, groups: list[int]
) -> None:
    good = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(4)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ledger_requests": 1, "run": "bad", "tool": "t"}\n{"status": "ok", "input_tokens": 12.5}\n')
    again = good[1]  # the same bytes twice: the second is already imported
    out = run("import", "--db", ledger_url, "--batch", "b", good[0], good[1], bad, good[2], again, good[3], code=1)
    assert f"error: {bad}, line 2: field 'input_tokens': input should be a valid integer, got 12.5\n" in out.stderr
    lines = [x for x in out.stdout.splitlines() if not x.startswith("  run")]
    assert [x.split(":")[0] for x in lines] == [str(good[0]), str(good[1]), str(good[2]), str(again), str(good[3])]
    assert "already imported as artefact 2 (r1.jsonl" in lines[3]
    # r0 and r1 in one transaction; the bad file and the repeated one alone, in their places, around r2 and r3
    assert groups == [2, 1, 1]
    c = counts(ledger_url)
    assert (c["artefact"], c["run"], c["request"]) == (4, 4, 12)


MANIFEST = """version: 1
batches:
  - {name: b, description: "declared runs"}
runs:
  - {batch: b, label: d1, concurrency: 8, seed: 1}
  - {batch: b, label: d2, concurrency: 8, seed: 2}
"""


def test_a_group_that_fails_while_written_is_rolled_back_and_imported_file_by_file(
    ledger_url: str, tmp_path: Path, groups: list[int]
) -> None:
    (tmp_path / "system.yaml").write_text(MANIFEST)
    run("declare", "--db", ledger_url, tmp_path / "system.yaml")
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(4)]
    odd = request_file(tmp_path / "odd.jsonl", "odd", 9, concurrency=8)  # two declared runs agree: refused as ambiguous
    out = run("import", "--db", ledger_url, "--batch", "b", files[0], files[1], odd, files[2], files[3], code=1)
    assert groups == [5, 1, 1, 1, 1, 1]  # the group, rolled back; then each file alone
    assert (
        f"error: {odd}: run 'odd' (per-request records) could belong to 2 runs of batch 'b' by declared workload "
        "(concurrency 8): run 1 'd1', run 2 'd2'; none was chosen: name one with --run LABEL"
    ) in out.stderr
    for f in (*files[:2], *files[2:]):  # each other file: imported, with its own note
        assert (
            f"note: {f.name}: run '{f.stem.replace('r', 'run ')}' (per-request records) matches none of the 2 "
            "declared run(s) of batch 'b' still free for it by workload; imported as a new run"
        ) in out.stderr
    assert [x.split(":")[0] for x in out.stdout.splitlines() if not x.startswith("  run")] == list(map(str, files))
    c = counts(ledger_url)
    assert (c["artefact"], c["capture"], c["request"]) == (4, 4, 12)
    # the ids the rolled-back group took are not reused; nothing of it remains
    assert c["run"] == 2 + 4


def test_two_files_of_a_group_on_one_run_are_imported_one_after_the_other(
    ledger_url: str, samples: Path, tmp_path: Path, groups: list[int]
) -> None:
    """llmperf's two files of one run given in one command: each is imported alone, and
    the second pairs with the first's run."""
    files = [samples / "llmperf" / f for f in ("individual_groq_70b.json", "summary_groq_70b.json")]
    same = request_file(tmp_path / "c.jsonl", "llmperf groq_70b", 3)  # the run's label, another result: another run
    out = run("import", "--db", ledger_url, "--batch", "b", *files, same)
    assert groups == [1, 1, 1]  # files with a pairing key go alone; the third after them
    assert "note: summary_groq_70b.json: attached to run 1 'llmperf groq_70b' by same pairing key" in out.output
    assert "note: c.jsonl: run label 'llmperf groq_70b' is taken by run 1 'llmperf groq_70b'" in out.output
    assert (counts(ledger_url)["artefact"], counts(ledger_url)["run"]) == (3, 2)


def digest_roots(url: str) -> list[tuple]:
    """Each artefact's stored part of the tables whose rows do not hold the import time."""
    import sqlalchemy as sa
    from bench_ledger.store import Ledger

    with Ledger(url) as led, led.session() as s:
        return [
            tuple(r)
            for r in s.execute(
                sa.text(
                    "SELECT artefact_id, table_name, row_count, root FROM artefact_digest "
                    "WHERE table_name NOT IN ('artefact', 'capture') ORDER BY artefact_id, table_name"
                )
            )
        ]


def test_a_groups_digests_hashed_once_are_those_of_one_file_at_a_time(
    ledger_url: str, tmp_path: Path, groups: list[int]
) -> None:
    """ledger.seal.import_digests.PooledRows: a group's request and chunk-gap rows are hashed once for all its files; each
    artefact's parts are the ones an import of the file alone stores, and verify agrees."""
    files = [
        request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i, {"chunk_gaps": [0.25, 0.5][: i % 3]}, n=3 + i)
        for i in range(6)
    ]
    assert run("import", "--db", ledger_url, "--batch", "b", *files).exit_code == 0
    assert groups == [6]
    assert run("verify", "--db", ledger_url).output.startswith("batch b (open): ok, 6 artefact(s) match")
    alone = f"duckdb:///{tmp_path / 'alone.duckdb'}"
    assert run("init", "--db", alone).exit_code == 0
    for f in files:
        assert run("import", "--db", alone, "--batch", "b", f).exit_code == 0
    assert groups[1:] == [1] * 6
    got = digest_roots(ledger_url)
    assert got == digest_roots(alone) and {t for _, t, _, _ in got} >= {"request", "chunk_gap"}


def test_pooled_rows_out_of_key_order_are_read_back() -> None:
    import pyarrow as pa
    from bench_ledger.seal import import_digests, scheme3

    pooled = import_digests.PooledRows()
    t = pa.table(
        {
            "artefact_id": pa.array([2, 1], pa.int32()),
            "request_idx": pa.array([0, 0], pa.int32()),
            "seq": pa.array([0, 0], pa.int32()),
            "gap_s": pa.array([0.5, 0.25]),
        }
    )
    pooled.add("chunk_gap", t)
    parts, counts = pooled.parts([1, 2])
    assert parts["chunk_gap"] is None and counts["chunk_gap"] == {1: 1, 2: 1}  # the caller reads both back
    assert parts["request"] == {1: scheme3.HeldPart("request", 1, 0, []), 2: scheme3.HeldPart("request", 2, 0, [])}
    pooled = import_digests.PooledRows()
    pooled.add("chunk_gap", t.slice(1))
    with pytest.raises(ValueError, match="name artefacts"):
        pooled.parts([2])


def test_pooled_rows_of_an_artefact_split_over_two_writes_are_one_part() -> None:
    import pyarrow as pa
    from bench_ledger.seal import import_digests, scheme3

    def gaps(art: list[int], idx: list[int]) -> pa.Table:
        return pa.table(
            {
                "artefact_id": pa.array(art, pa.int32()),
                "request_idx": pa.array(idx, pa.int32()),
                "seq": pa.array([0] * len(art), pa.int32()),
                "gap_s": pa.array([0.5] * len(art)),
            }
        )

    whole, split = import_digests.PooledRows(), import_digests.PooledRows()
    whole.add("chunk_gap", gaps([1, 2, 2, 2, 3], [0, 0, 1, 2, 0]))
    split.add("chunk_gap", gaps([1, 2], [0, 0]))
    split.add("chunk_gap", gaps([2, 2], [1, 2]))
    split.add("chunk_gap", gaps([3], [0]))
    (a, _), (b, _) = whole.parts([1, 2, 3, 4]), split.parts([1, 2, 3, 4])
    assert a == b and a["chunk_gap"][2].count == 3 and a["chunk_gap"][4] == scheme3.HeldPart("chunk_gap", 4, 0, [])


def test_detection_asks_the_last_format_first_and_finds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench_ledger import importers

    path = request_file(tmp_path / "r.jsonl", "r", 1)
    found = importers.detect(path)
    asked: list[str] = []
    for imp in importers.all_importers():
        monkeypatch.setattr(imp, "sniff", lambda head, imp=imp, real=imp.sniff: asked.append(imp.name) or real(head))
    assert importers.detect(path, prefer=found) is found and asked == [found.name]
    asked.clear()
    other = next(i for i in importers.all_importers() if i is not found)
    assert importers.detect(path, prefer=other) is found and asked[0] == other.name and asked[-1] == found.name


def test_groups_prepared_ahead_keep_the_order_and_a_repeat_in_a_later_group(
    ledger_url: str, tmp_path: Path, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next group is hashed and parsed while the one before is written: outputs stay in file order,
    and a file of an earlier group given again (not committed when the later group was prepared) is
    already imported, not a failed group."""
    monkeypatch.setattr(pipeline, "GROUP_FILES", 2)
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(5)]
    given = [files[0], files[1], files[2], files[0], files[3], files[4]]
    out = run("import", "--db", ledger_url, "--batch", "b", *given)
    lines = [x for x in out.stdout.splitlines() if not x.startswith("  run")]
    assert [x.split(":")[0] for x in lines] == list(map(str, given))
    assert "already imported as artefact 1 (r0.jsonl" in lines[3] and "imported as artefact 4 " in lines[4]
    assert groups == [2, 1, 2]  # r0 r1; r2 alone beside the repeat (imported alone, in its place); r3 r4
    c = counts(ledger_url)
    assert (c["artefact"], c["run"], c["request"]) == (5, 5, 15)


def test_groups_on_postgresql_start_small_and_double_so_the_database_starts_early(
    ledger_url: str, tmp_path: Path, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the first group is FIRST_GROUP_FILES files, each next one twice the one before, up to
    GROUP_FILES (its writes wait for the first group's parse only); on DuckDB every group is GROUP_FILES
    files (a commit there costs more than the wait; profile note 35)."""
    monkeypatch.setattr(pipeline, "FIRST_GROUP_FILES", 2)
    monkeypatch.setattr(pipeline, "GROUP_FILES", 8)
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(24)]
    out = run("import", "--db", ledger_url, "--batch", "b", *files)
    assert out.stdout.count("imported as artefact") == 24
    assert groups == ([2, 4, 8, 8, 2] if ledger_url.startswith("postgresql") else [8, 8, 8])
    assert counts(ledger_url)["request"] == 72


def test_files_already_in_the_ledger_are_answered_from_the_groups_query(
    ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's one query names the artefact of each file already imported: the message is the one
    import_file gives, without a hash, a session and a query per file (1,000 files: 18.6 s on
    PostgreSQL at load ~5, each a new connection)."""
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(3)]
    run("import", "--db", ledger_url, "--batch", "b", *files)
    alone_lines = [run("import", "--db", ledger_url, "--batch", "b", f).stdout for f in files]  # each file alone
    monkeypatch.setattr(pipeline, "_alone", lambda *a, **k: pytest.fail("a file already imported written alone"))
    out = run("import", "--db", ledger_url, "--batch", "b", *files)
    assert out.stdout == "".join(alone_lines) and out.exit_code == 0
    assert "already imported as artefact 1 (r0.jsonl, ledger-requests, sha256" in out.stdout


def test_a_batch_of_files_beyond_the_row_limit_is_split_into_groups_of_about_equal_size(
    ledger_url: str, tmp_path: Path, groups: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files prepared together whose requests pass GROUP_ROWS are the fewest groups within it, of about
    equal size: cut where a group reached the limit, 7 files of 3 requests under a limit of 18 were a
    group of 6 and a group of 1 (256 files of 1,000 requests: 250 and 6, a transaction each, profile
    note 28). Files without requests are one group; every file's rows and output as before."""
    monkeypatch.setattr(pipeline, "GROUP_ROWS", 18)
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(7)]
    out = run("import", "--db", ledger_url, "--batch", "b", *files)
    assert groups == [4, 3]  # 21 requests: two groups (12 + 9), not 18 + 3
    assert [x.split(":")[0] for x in out.stdout.splitlines() if not x.startswith("  run")] == list(map(str, files))
    assert (counts(ledger_url)["artefact"], counts(ledger_url)["request"]) == (7, 21)
    groups.clear()
    monkeypatch.setattr(pipeline, "GROUP_ROWS", 9)
    more = [request_file(tmp_path / f"s{i}.jsonl", f"more {i}", 10 + i) for i in range(7)]
    assert run("import", "--db", ledger_url, "--batch", "b", *more).exit_code == 0
    assert groups == [3, 2, 2]  # 21 requests within 9 each: three groups of 9, 6 and 6
    groups.clear()
    empty = [request_file(tmp_path / f"e{i}.jsonl", f"empty {i}", i, n=0) for i in range(3)]
    assert run("import", "--db", ledger_url, "--batch", "b", *empty).exit_code == 0
    assert groups == [3]


def test_ctrl_c_while_a_group_is_written_says_what_was_kept(
    ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the write of the second group: the first group's files are committed and stay, the second
    group is rolled back. The message said "nothing of the unfinished command was written" (issue 39)."""
    monkeypatch.setattr(pipeline, "GROUP_FILES", 4)
    monkeypatch.setattr(pipeline, "FIRST_GROUP_FILES", 4)
    real, calls = pipeline.write_artefacts, []

    def interrupted(ledger, files, *args, **kwargs):
        calls.append(len(files))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(ledger, files, *args, **kwargs)

    monkeypatch.setattr(pipeline, "write_artefacts", interrupted)
    files = [request_file(tmp_path / f"r{i}.jsonl", f"run {i}", i) for i in range(10)]
    out = run("import", "--db", ledger_url, "-q", "--batch", "b", *files, code=130)
    assert calls == [4, 4] and out.stderr.splitlines()[-1] + "\n" == (
        "interrupted (Ctrl-C): the 4 file(s) imported before it are kept (each committed); the file or group of files "
        "being written was rolled back and the files after it were not read; run the same command again to import "
        "them (files already imported are skipped)\n"
    )
    assert counts(ledger_url)["artefact"] == 4
