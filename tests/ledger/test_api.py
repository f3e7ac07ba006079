"""The Python facade (bench_ledger.api, re-exported by bench_ledger): workflows and Arrow tables."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import bench_ledger as bl
import pyarrow as pa
import pytest
from bench_ledger import api

from tests.clirun import spawn

ROOT = Path(__file__).resolve().parents[2]


def test_one_documented_facade() -> None:
    assert bl.__all__ == api.__all__
    for name in api.__all__:
        fn = getattr(bl, name)
        assert fn is getattr(api, name) and fn.__doc__, name
    assert {"import_file", "declare_file", "close", "verify", "run_metrics", "audit", "demo"} <= set(api.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        bl.nope  # noqa: B018


def test_the_worked_example_of_docs_python_md(demo_built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), re.S).group(1)
    code = code.replace("ledger/casestudy/claims.yaml", str(ROOT / "ledger" / "casestudy" / "claims.yaml"))
    monkeypatch.chdir(demo_built.parent)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/python.md", "exec"), {})  # noqa: S102
    lines = out.getvalue().splitlines()
    assert lines[0] == "16 runs in fx"
    assert lines[1] == "1840234 derived"
    assert lines[2] == "None | wall_clock_s: no send/end times captured and the tool recorded no duration"
    assert lines[3].startswith("8 TTFT values, max ")
    assert lines[4] == "4800 power samples on 8 GPU indexes"
    assert lines[5] == "['R1', 'R12', 'R13', 'R14', 'R2', 'R4', 'R5', 'R6', 'R7', 'R8']"
    assert lines[6].startswith("source report h20-dsv41-flash: ")


def test_tables_are_arrow_with_provenance_columns(demo_built: Path) -> None:
    ledger = bl.connect(f"duckdb:///{demo_built / 'ledger.duckdb'}")
    m = bl.metrics(ledger, ["fx", "m17"])
    assert isinstance(m, pa.Table) and m.num_rows == 20
    assert {"batch", "total_tpm", "total_tpm_flag", "total_tpm_na_reason"} <= set(m.column_names)
    assert sorted(set(m["batch"].to_pylist())) == ["fx", "m17"]
    req = bl.requests(ledger, batch="m17")
    assert req.num_rows == 176 and req.schema.field("latency_s").type == pa.float64()
    assert set(req["latency_s"].to_pylist()) == {None}  # not captured by the legacy writer: null, not 0 (R9)
    hw = bl.hardware_samples(ledger, batch="fx", counter="fb")
    assert set(hw["unit"].to_pylist()) == {"unconfirmed"}  # R12: never converted
    with pytest.raises(ImportError, match=r"pandas is not installed: pip install 'bench-ledger\[pandas\]'"):
        bl.to_pandas(m)


def test_read_only_connection_does_not_lock_the_cli_out(demo_copy: str) -> None:
    ledger = bl.connect(demo_copy)  # read-only
    assert bl.runs(ledger).num_rows == 20
    code, out = spawn("close", "m17", "--db", demo_copy).communicate(timeout=120)  # another process
    assert code == 0, out
    checks = bl.verify(
        ledger
    ).checks  # the closed m17 by its seal, the open fx and the launch logs (no batch) by import digests
    assert sorted((c.batch, c.unbatched) for c in checks) == [("", True), ("fx", False), ("m17", False)]
    assert all(c.ok for c in checks)
    with pytest.raises(Exception, match="read-only"):
        bl.close(ledger, "fx")


def test_demo_builds_into_the_ledger_whose_url_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bl.demo runs `ledger demo`'s build (api.build_demo, the one home of it: the session's `ledger demo`
    runs it end to end and the demo group's tests read what it built) into OUT/ledger.duckdb, OUT/data."""
    built: list[tuple[str, Path]] = []

    def build(ledger, data: Path, import_one=None) -> bool:  # noqa: ANN001
        ledger.init()  # a write through the ledger it was given: the file must be released after
        built.append((ledger.url, data))
        return True

    monkeypatch.setattr(api, "build_demo", build)
    url = bl.demo(tmp_path / "nb")
    assert url == f"duckdb:///{tmp_path / 'nb' / 'ledger.duckdb'}"
    assert built == [(url, tmp_path / "nb" / "data")]
    ledger = bl.connect(url, read_only=False)  # migrated, and not held by bl.demo any more
    assert bl.runs(ledger).num_rows == 0


def test_writing_workflows_through_the_facade(demo_copy: str, tmp_path: Path) -> None:
    ledger = bl.connect(demo_copy, read_only=False)  # what bl.demo builds (the test above): the demo's ledger
    assert bl.runs(ledger).num_rows == 20
    sealed = bl.close(ledger, "fx")
    assert bl.verify(ledger, "fx").ok and sealed.batch == "fx"
    counts = bl.audit(ledger, ROOT / "ledger" / "casestudy" / "claims.yaml").counts()
    assert counts["refused"] == 13
    out = bl.export(ledger, "fx", tmp_path / "fx-export")
    assert out.seal_digest == sealed.digest
