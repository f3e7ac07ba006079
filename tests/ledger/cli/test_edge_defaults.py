"""Surprising defaults at the edges of the CLI (issue 13): nothing created, destroyed or dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import run

NATIVE = Path(__file__).resolve().parents[2] / "fixtures" / "ledger_requests" / "native.jsonl"
CSV = Path(__file__).resolve().parents[2] / "fixtures" / "ledger_requests" / "native.csv"


def test_import_into_a_new_batch_says_it_created_it(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    first = run("import", "--db", ledger_url, "--batch", "fx", str(NATIVE))
    assert first.stderr == (
        f"note: batch 'fx' did not exist: created it (open) for {NATIVE.name}; `ledger batches` lists them\n"
    )
    again = run("import", "--db", ledger_url, "--batch", "fx", "--run", "csv", str(CSV))  # an existing batch: no note
    assert again.stderr == ""
    typo = run("import", "--db", ledger_url, "--batch", "fxx", "--run", "other", str(CSV.with_name("epoch_ns.csv")))
    assert "note: batch 'fxx' did not exist: created it (open)" in typo.stderr
    names = [b["name"] for b in json.loads(run("batches", "--db", ledger_url, "--json").output)]
    assert names == ["fx", "fxx"]


def test_no_command_but_init_creates_a_ledger_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LEDGER_DB", raising=False)
    res = run("status", code=1)
    assert res.output == (
        "error: no ledger at ledger.duckdb (no such file): `ledger init --db duckdb:///ledger.duckdb` creates one\n"
    )
    res = run("import", "--db", "foo", "--batch", "b", str(NATIVE), code=1)  # no scheme: a DuckDB file, not created
    assert res.output == "error: no ledger at foo (no such file): `ledger init --db duckdb:///foo` creates one\n"
    assert list(tmp_path.iterdir()) == []
    run("init", "--db", "foo")  # init is the one that creates it
    assert (tmp_path / "foo").is_file()
    assert "schema:   0" in run("status", "--db", "foo").output


def test_a_bad_db_url_is_a_usage_error(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run("status", "--db", "mysql://u@h/db", code=2)
    assert res.output == (
        "error: --db / $LEDGER_DB: unsupported database 'mysql' in mysql://u@h/db: "
        "use duckdb:///FILE or postgresql+psycopg://USER@HOST/DB\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_db_url_naming_a_driver_not_installed_is_a_usage_error(tmp_path, monkeypatch) -> None:
    """postgresql+psycopg2:// was an internal error (ModuleNotFoundError, exit 70, issue 39)."""
    monkeypatch.chdir(tmp_path)
    for driver in ("psycopg2", "asyncpg"):
        res = run("status", "--db", f"postgresql+{driver}://u:secret@h/db", code=2)
        assert res.output == (
            f"error: --db / $LEDGER_DB: driver '{driver}' in postgresql+{driver}://u:***@h/db is "
            "not supported: the ledger uses DuckDB's (duckdb:///FILE) and PostgreSQL's psycopg 3 "
            "(postgresql+psycopg://USER@HOST/DB, or postgresql://)\n"
        )
    res = run("status", "--db", "duckdb+other:///l.duckdb", code=2)
    assert res.output.startswith(
        "error: --db / $LEDGER_DB: driver 'other' in duckdb+other:///l.duckdb is not supported"
    )
    assert list(tmp_path.iterdir()) == []


def test_duckdb_url_settings_are_a_documented_few(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_DB", "duckdb:///l.duckdb?allow_unsigned_extensions=true")
    res = run("init", code=2)
    assert res.output == (
        "error: --db / $LEDGER_DB: DuckDB setting(s) allow_unsigned_extensions "
        "not allowed in a ledger URL; allowed: threads, memory_limit, temp_directory, "
        "max_temp_directory_size\n"
    )
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("LEDGER_DB", "duckdb:///l.duckdb?threads=1&memory_limit=1GB")
    run("init")
    assert "backend:  duckdb" in run("status").output


def test_demo_refuses_a_folder_it_did_not_make(tmp_path) -> None:
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "ledger.duckdb").write_text("a user's ledger")
    (mine / "data" / "keep.txt").write_text("a user's file")
    res = run("demo", "--out", str(mine), code=1)
    assert res.output == (
        f"error: {mine} is not empty and was not made by `ledger demo` (no .bench-ledger-demo in it): "
        "nothing deleted; give a new or empty folder with --out\n"
    )
    assert (mine / "ledger.duckdb").read_text() == "a user's ledger"
    assert (mine / "data" / "keep.txt").read_text() == "a user's file"
    assert sorted(p.name for p in mine.iterdir()) == ["data", "ledger.duckdb"]


LLMPERF = Path(__file__).resolve().parents[2] / "fixtures" / "llmperf"


def test_usage_mistakes_exit_2(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    res = run("compare", "7", "11", "--db", ledger_url, code=2)
    assert res.output == "error: '7': write run:ID, batch:NAME or deployment:NAME\n"
    run("import", "--db", ledger_url, "--batch", "b", str(NATIVE))
    res = run("compare", "run:1", "run:1", "--attribute-to", "bogus", "--db", ledger_url, code=2)
    assert res.output.startswith("error: no factor named 'bogus'; factors: model, hardware, gpu_count,")
    res = run("import", "--db", ledger_url, "--format", "bogus", "--batch", "b", str(CSV), code=2)
    assert res.output.startswith("error: unknown format 'bogus'; known formats: ")
    res = run("import", "--db", ledger_url, str(CSV), code=2)  # runs, but no --batch
    assert res.output == f"error: {CSV}: holds benchmark runs; name the batch they belong to with --batch\n"
    res = run("check", "--db", ledger_url, "--fail-on", "bogus", code=2)
    assert (
        "Error: Invalid value for --fail-on: unknown bogus; choose from agree, disagree, not-re-derivable" in res.output
    )
    assert json.loads(run("status", "--db", ledger_url, "--json").output)["counts"]["artefact"] == 1


def _llmperf_pair(tmp_path: Path, ttft_mean: float | None = None) -> list[str]:
    summary = json.loads((LLMPERF / "summary.json").read_text())
    if ttft_mean is not None:
        summary["results_ttft_s_mean"] = ttft_mean
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    records = json.loads((LLMPERF / "individual_responses.json").read_text())
    (tmp_path / "individual.json").write_text(json.dumps(records, indent=None if ttft_mean is None else 1))
    return [str(tmp_path / "individual.json"), str(tmp_path / "summary.json")]


def test_check_fail_on_disagree_says_why(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    (tmp_path / "ok").mkdir()
    run("import", "--db", ledger_url, "--batch", "good", "--run", "x", *_llmperf_pair(tmp_path / "ok"))
    clean = run("check", "--db", ledger_url, "--batch", "good", "--fail-on", "disagree")
    assert clean.stderr == ""
    run("import", "--db", ledger_url, "--batch", "bad", "--run", "y", *_llmperf_pair(tmp_path, ttft_mean=0.9))
    res = run("check", "--db", ledger_url, "--batch", "bad", "--fail-on", "disagree", code=1)
    rows = json.loads(run("check", "--db", ledger_url, "--batch", "bad", "--json").output)
    wrong = [f"run {r['run_id']} {r['key']}" for r in rows if r["status"] == "disagree"]
    assert wrong == [f"run {rows[0]['run_id']} results_ttft_s_mean"]
    assert res.stderr == f"failing (--fail-on disagree): 1 reported value(s) disagree: {wrong[0]}\n"
    # --batch repeated: both batches, not only the last one
    both = json.loads(run("check", "--db", ledger_url, "--batch", "good", "--batch", "bad", "--json").output)
    assert sorted({r["batch"] for r in both}) == ["bad", "good"]
    run("check", "--db", ledger_url, "--batch", "good", "--batch", "bad", "--fail-on", "disagree", code=1)


def test_runs_with_repeated_batch_lists_every_one(ledger_url: str) -> None:
    run("init", "--db", ledger_url)
    run("import", "--db", ledger_url, "--batch", "a", str(NATIVE))
    run("import", "--db", ledger_url, "--batch", "b", str(CSV))
    run("import", "--db", ledger_url, "--batch", "c", str(CSV.with_name("epoch_ns.csv")))
    rows = json.loads(run("runs", "--db", ledger_url, "--batch", "a", "--batch", "c", "--json").output)
    assert [r["batch"] for r in rows] == ["a", "c"]
    res = run("runs", "--db", ledger_url, "--batch", "a", "--batch", "nope", code=1)
    assert res.output == "error: no batch named 'nope'; `ledger batches` lists them\n"


def _stored(url: str) -> list[str | None]:
    from bench_ledger.store import Ledger

    with Ledger(url) as led, led.connection() as conn:
        return [r[0] for r in conn.exec_driver_sql("SELECT stored_path FROM artefact ORDER BY id")]


def test_import_copy_keeps_a_verified_copy_and_never_follows_a_symlink(ledger_url: str, tmp_path, monkeypatch) -> None:
    import hashlib

    monkeypatch.chdir(tmp_path)  # PostgreSQL: the store is ./ledger-artefacts; DuckDB: next to the file
    run("init", "--db", ledger_url)
    store = tmp_path / "ledger-artefacts"
    sha = hashlib.sha256(NATIVE.read_bytes()).hexdigest()
    (store / sha[:2]).mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    (store / sha[:2] / sha).symlink_to(outside)  # dangling, pointing out of the store
    run("import", "--db", ledger_url, "--batch", "b", "--copy", str(NATIVE))
    dest = store / sha[:2] / sha
    assert not outside.exists() and not dest.is_symlink()
    assert dest.read_bytes() == NATIVE.read_bytes()
    assert _stored(ledger_url) == [str(dest)]
    # a store sub-folder that leads elsewhere is refused, nothing imported
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sha2 = hashlib.sha256(CSV.read_bytes()).hexdigest()
    (store / sha2[:2]).symlink_to(elsewhere)
    res = run("import", "--db", ledger_url, "--batch", "b", "--copy", str(CSV), code=1)
    assert res.output == (
        f"error: {store / sha2[:2]} leads outside the artefact store {store} (a symlink?): nothing copied\n"
    )
    assert list(elsewhere.iterdir()) == [] and len(_stored(ledger_url)) == 1


MANIFEST_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "manifest"


def _manifest(folder: Path, log: str | None = None, report: str = "report.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text((MANIFEST_DIR / "report.txt").read_text())
    text = (
        "version: 1\nsource_reports:\n  - {slug: r, title: R, file: " + json.dumps(report) + "}\n"
        "deployments:\n  - name: d\n    launches:\n      - {attempt: 1, outcome: ready"
        + (", log: " + json.dumps(log) if log else "")
        + "}\n"
    )
    (folder / "system.yaml").write_text(text)
    return folder / "system.yaml"


def test_manifest_files_stay_inside_the_manifest_folder(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    (tmp_path / "secret.log").write_text("not yours\n")
    m = _manifest(tmp_path / "m", log="../secret.log")
    res = run("declare", "--db", ledger_url, str(m), code=1)
    assert res.output == (
        f"error: manifest deployments.0.launches.0.log: '../secret.log' is outside the manifest's "
        f"folder {m.parent}: name a file inside it\n"
    )
    m = _manifest(tmp_path / "m2", report=str(tmp_path / "secret.log"))  # absolute
    res = run("declare", "--db", ledger_url, str(m), code=1)
    assert (
        f"error: manifest source_reports.0.file: '{tmp_path / 'secret.log'}' is outside the manifest's folder"
        in res.output
    )
    (tmp_path / "m3").mkdir()
    (tmp_path / "m3" / "link.log").symlink_to(tmp_path / "secret.log")  # a symlink leading out
    m = _manifest(tmp_path / "m3", log="link.log")
    assert "'link.log' is outside the manifest's folder" in run("declare", "--db", ledger_url, str(m), code=1).output
    m = _manifest(tmp_path / "m4", log="missing.log")
    res = run("declare", "--db", ledger_url, str(m), code=1)
    assert res.output == f"error: manifest deployments.0.launches.0.log: 'missing.log': no such file in {m.parent}\n"
    counts = json.loads(run("status", "--db", ledger_url, "--json").output)["counts"]
    assert counts["deployment"] == counts["artefact"] == counts["source_report"] == 0


def test_a_launch_log_that_is_not_a_server_log_is_refused(ledger_url: str, tmp_path: Path) -> None:
    run("init", "--db", ledger_url)
    m = _manifest(tmp_path / "m", log="results.jsonl")
    (m.parent / "results.jsonl").write_text(NATIVE.read_text())
    res = run("declare", "--db", ledger_url, str(m), code=1)
    assert "results.jsonl" in res.output and "vllm-server-log" in res.output
    counts = json.loads(run("status", "--db", ledger_url, "--json").output)["counts"]
    assert counts["artefact"] == 0
