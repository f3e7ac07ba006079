"""vLLM sweep folders (`vllm bench sweep`): run files labelled from their folder, the summary on the same
runs, a payload contradicting its folder refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger.errors import ParseError

from tests.importers.parsing import one_run, parse, pub

SWEEP = "vllm-bench-sweep/vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8"


def test_sweep_run_files_are_repetitions_labelled_from_the_folder(samples: Path) -> None:
    run = one_run(samples / SWEEP / "run=1.json")
    assert run.info.label == (
        "vllm-sweep vllm_sweep_v0.25.1/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8 run=1"
    )
    meta = run.info.metadata
    assert (meta["serve.max_num_seqs"], meta["bench.max_concurrency"], meta["bench.num_prompts"]) == ("4", "2", "8")
    assert meta["launch"] == "vllm_sweep_v0.25.1/SERVE--max_num_seqs=4" and meta["run_number"] == "1"
    assert {"run_number", "max_num_seqs"}.isdisjoint(p.key for p in run.published)


def test_sweep_summary_lands_on_the_same_runs(samples: Path) -> None:
    runs = list(parse(samples / SWEEP / "summary.json").iter_runs())
    files = [one_run(samples / SWEEP / f"run={n}.json") for n in (0, 1)]
    assert [r.info.label for r in runs] == [r.info.label for r in files]
    assert [pub(r, "duration").text for r in runs] == [pub(r, "duration").text for r in files]


def test_sweep_payload_contradicting_its_folder_is_refused(tmp_path: Path, samples: Path) -> None:
    folder = tmp_path / "SERVE--max_num_seqs=8-BENCH--max_concurrency=2"
    folder.mkdir()
    (folder / "run=0.json").write_bytes((samples / SWEEP / "run=0.json").read_bytes())
    with pytest.raises(ParseError, match=r"payload says max_num_seqs=4, the folder name .* says 8"):
        list(parse(folder / "run=0.json").iter_runs())
