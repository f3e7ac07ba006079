"""`ledger export` / `ledger import-export` / `ledger attest`: the demo's fx batch leaves as Parquet
and comes back into a fresh ledger with the same seal."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bench_ledger.cli import main
from bench_ledger.seal import close_batch, verify
from bench_ledger.store import Ledger
from bench_ledger.transfer import export_batch
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def closed_fx(demo_built: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, str]:
    """(ledger URL, export folder, seal digest) of the demo ledger with fx closed and exported (+ CSV)."""
    base = tmp_path_factory.mktemp("export")
    shutil.copyfile(demo_built / "ledger.duckdb", base / "src.duckdb")
    url = f"duckdb:///{base / 'src.duckdb'}"
    with Ledger(url) as ledger:
        sealed = close_batch(ledger, "fx")
    result = CliRunner().invoke(main, ["export", "fx", "--to", str(base / "fx-export"), "--csv", "--db", url])
    assert result.exit_code == 0, result.output
    # 17 tables as Parquet and CSV (request_value too, empty here), the in-toto statement, README.json
    assert result.output.splitlines()[0] == f"exported batch fx to {base / 'fx-export'}/ (36 files)"
    return url, base / "fx-export", sealed.digest


def _fresh_copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_parquet_export_of_fx_reloads_into_a_fresh_ledger_with_the_same_seal(closed_fx, ledger_url: str) -> None:
    _, folder, digest = closed_fx
    result = CliRunner().invoke(main, ["import-export", str(folder), "--db", ledger_url])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["seal verified and batch fx loaded: 64,341 sealed rows", f"  seal: {digest}"]
    with Ledger(ledger_url) as target:
        checks = verify(target).checks
        assert [(c.batch, c.digest, c.ok) for c in checks] == [("fx", digest, True)]
        # the ledger works as a ledger: same per-run figures as the source
        out = CliRunner().invoke(main, ["metrics", "--batch", "fx", "--db", ledger_url]).output
    assert "fx     7 50k-200-c4n8       50000 / 200    4 / 8    8 d / 0 d   1,840,234 d  2,791 d" in out


def test_readme_names_schema_revision_seal_and_files(closed_fx) -> None:
    url, folder, digest = closed_fx
    readme = json.loads((folder / "README.json").read_text())
    with Ledger(url) as ledger:
        assert readme["schema_revision"] == ledger.revision()
    assert readme["batch"] == "fx" and readme["status"] == "closed"
    assert readme["seal"]["digest"] == digest and readme["seal"]["row_count"] == 64341
    assert readme["tables"]["request"]["rows"] == 322 and readme["tables"]["request"]["sealed"] is True
    assert readme["tables"]["deployment"]["sealed"] is True  # scheme 2 seals the system under test
    assert readme["tables"]["source_report"]["sealed"] is False
    assert readme["intoto_statement"] == "statement.intoto.json"
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".csv") == sorted(
        f"{t}.csv" for t in readme["tables"]
    )


def test_other_tools_read_the_export(closed_fx) -> None:
    _, folder, _ = closed_fx
    # DuckDB reads the Parquet as it is; exact decimals stay text, times stay microseconds
    con = duckdb.connect()
    assert con.sql(f"SELECT count(*) FROM '{folder}/request.parquet'").fetchone() == (322,)
    assert con.sql(f"SELECT count(*) FROM read_csv_auto('{folder}/request.csv')").fetchone() == (322,)
    values = pq.read_table(folder / "published_value.parquet")
    assert values.schema.field("value").type == pa.string()
    assert pq.read_table(folder / "request.parquet").schema.field("send_ns").type == pa.int64()


def test_seal_recomputes_from_the_export_alone(closed_fx) -> None:
    """docs/recompute_seal.py: pyarrow and the standard library only (docs/seals.md)."""
    _, folder, digest = closed_fx
    run = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "recompute_seal.py"), str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == f"digest      {digest}"


def test_a_changed_row_is_refused_before_anything_is_written(closed_fx, tmp_path: Path, ledger_url: str) -> None:
    _, folder, _ = closed_fx
    bad = _fresh_copy(folder, tmp_path / "bad")
    t = pq.read_table(bad / "request.parquet")
    i = t.schema.get_field_index("output_tokens")
    tokens = t.column(i).to_pylist()
    tokens[0] += 1
    pq.write_table(t.set_column(i, "output_tokens", pa.array(tokens, pa.int64())), bad / "request.parquet")
    result = CliRunner().invoke(main, ["import-export", str(bad), "--db", ledger_url])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {bad / 'request.parquet'}: sha256 differs from README.json's ")
    # with README.json's file digest forged too, the seal still refuses, naming the table
    readme = json.loads((bad / "README.json").read_text())

    readme["tables"]["request"]["sha256"] = hashlib.sha256((bad / "request.parquet").read_bytes()).hexdigest()
    (bad / "README.json").write_text(json.dumps(readme))
    result = CliRunner().invoke(main, ["import-export", str(bad), "--db", ledger_url])
    assert result.exit_code == 1
    assert "the rows do not give the seal of README.json" in result.output
    changed = t.column("artefact_id")[0].as_py()  # scheme 3 names the part: a table of one artefact
    assert result.output.rstrip().endswith(f"tables that differ: request@{changed}")
    with Ledger(ledger_url) as target:
        assert target.status().counts["batch"] == 0 and target.status().counts["request"] == 0


def test_a_listed_file_that_is_no_parquet_or_lies_outside_the_folder_is_refused(
    closed_fx, tmp_path: Path, ledger_url: str
) -> None:
    """A table file that is not Parquet but whose sha256 README.json names crashed (ArrowInvalid, exit 70), and
    a README.json naming ../x or an absolute path had that file read (issue 39). Both refused, nothing written."""
    _, folder, _ = closed_fx
    bad = _fresh_copy(folder, tmp_path / "bad")
    readme = json.loads((bad / "README.json").read_text())
    (bad / "run.parquet").write_text("id,label\n1,x\n")
    readme["tables"]["run"]["sha256"] = hashlib.sha256((bad / "run.parquet").read_bytes()).hexdigest()
    (bad / "README.json").write_text(json.dumps(readme))
    result = CliRunner().invoke(main, ["import-export", str(bad), "--db", ledger_url])
    assert (result.exit_code, result.output.split(" (")[0]) == (
        1,
        f"error: {bad / 'run.parquet'}: not a Parquet file of table 'run'",
    )
    outside = tmp_path / "outside.parquet"
    shutil.copyfile(folder / "run.parquet", outside)
    for name, why in (
        ("../outside.parquet", "is not a file name in the export folder"),
        (str(outside), "is not a file name in the export folder"),
    ):
        readme["tables"]["run"]["parquet"] = name
        (bad / "README.json").write_text(json.dumps(readme))
        result = CliRunner().invoke(main, ["import-export", str(bad), "--db", ledger_url])
        assert (result.exit_code, result.output) == (
            1,
            f"error: {bad / 'README.json'}: tables.run.parquet: {name!r} {why}; "
            "refused (an export names its own files only)\n",
        )
    (bad / "link.parquet").symlink_to(outside)
    readme["tables"]["run"]["parquet"] = "link.parquet"
    (bad / "README.json").write_text(json.dumps(readme))
    result = CliRunner().invoke(main, ["import-export", str(bad), "--db", ledger_url])
    assert (result.exit_code, result.output) == (
        1,
        f"error: {bad / 'README.json'}: tables.run.parquet: {bad / 'link.parquet'} "
        "is a link out of the export folder; refused\n",
    )
    with Ledger(ledger_url) as target:
        assert target.status().counts["batch"] == 0


def test_import_into_a_ledger_that_holds_the_batch_is_refused(closed_fx) -> None:
    url, folder, _ = closed_fx
    result = CliRunner().invoke(main, ["import-export", str(folder), "--db", url])
    assert result.exit_code == 3
    assert result.output.startswith(
        "refused (R10): import the export of batch 'fx'\n  why: the sealed rows keep their "
        "ids and the target already holds some of them: batch.id 1 already in the target"
    )


def test_open_batch_export_carries_its_content_root_and_reloads_open(
    demo_copy: str, tmp_path: Path, ledger_url: str
) -> None:
    with Ledger(demo_copy) as ledger:
        r = export_batch(ledger, "m17", tmp_path / "m17")
    readme = json.loads((tmp_path / "m17" / "README.json").read_text())
    assert readme["seal"] is None and readme["content"]["merkle_root"] == r.merkle_root
    assert not (tmp_path / "m17" / "statement.intoto.json").exists()
    result = CliRunner().invoke(main, ["import-export", str(tmp_path / "m17"), "--db", ledger_url])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == f"  open batch: content Merkle root {r.merkle_root}"
    # new rows of the target do not collide with the imported ids
    with Ledger(ledger_url) as target:
        from bench_ledger import models as m

        with target.session() as s:
            s.add(m.Batch(name="later", created_at=datetime(2026, 1, 1)))
            s.flush()
            assert s.query(m.Batch).filter_by(name="later").one().id > 2


def test_export_refuses_a_folder_that_is_not_empty(demo_copy: str, tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    result = CliRunner().invoke(main, ["export", "fx", "--to", str(tmp_path / "x"), "--db", demo_copy])
    assert result.exit_code == 1
    assert result.output == f"error: {tmp_path / 'x'}: not empty; give a new folder for the export\n"


def test_intoto_statement_of_a_closed_batch(closed_fx, demo_copy: str) -> None:
    url, folder, digest = closed_fx
    result = CliRunner().invoke(main, ["attest", "fx", "--db", url])
    assert result.exit_code == 0, result.output
    st = json.loads(result.output)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "urn:bench-ledger:seal:1"
    assert st["predicate"]["digest"] == digest and st["predicate"]["batch"] == "fx"
    arts = pq.read_table(folder / "artefact.parquet").to_pylist()
    assert st["subject"] == [{"name": a["file_name"], "digest": {"sha256": a["sha256"]}} for a in arts]
    assert json.loads((folder / "statement.intoto.json").read_text()) == st
    refused = CliRunner().invoke(main, ["attest", "fx", "--db", demo_copy])
    assert refused.exit_code == 1
    assert refused.output == "error: batch 'fx' is open: only a closed batch has a seal to attest (`ledger close fx`)\n"
