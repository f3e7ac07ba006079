"""The import pipeline as a library call (``ingest.import_file``) and the format choice
(``importers.choose``): what the CLI, the demo and a notebook share."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_ledger import importers
from bench_ledger.errors import AlreadyImported, InputError
from bench_ledger.ingest import ImportTarget, import_file
from bench_ledger.store import Ledger
from click.testing import CliRunner

VLLM = "vllm/openai-1.0qps-Qwen2.5-Coder-7B-Instruct-20260707-093920.json"


def test_import_file_is_the_whole_pipeline(ledger: Ledger, samples: Path) -> None:
    path = samples / "llmperf" / "individual_groq_70b.json"
    res = import_file(ledger, path, importers.choose(path), ImportTarget(batch="b"))
    assert (res.format, len(res.runs), res.runs[0][2]) == ("llmperf-individual", 1, 150)
    assert res.sha256.startswith("948a9414793e")
    with pytest.raises(AlreadyImported, match=r"already imported as artefact 1 \(individual_groq_70b.json"):
        import_file(ledger, path, importers.choose(path), ImportTarget(batch="b"))


def test_a_named_format_its_own_sniff_rejects_is_refused(samples: Path) -> None:
    path = samples / VLLM
    with pytest.raises(InputError) as exc:
        importers.choose(path, "sglang-bench")
    assert str(exc.value) == (
        f"{path}: --format sglang-bench refused: has vLLM's 'endpoint_type' key; "
        "pass --force-format to import it as sglang-bench anyway"
    )
    assert importers.choose(path, "sglang-bench", force=True).name == "sglang-bench"
    assert importers.choose(path, "vllm-bench").name == "vllm-bench"


def test_refused_format_takes_no_sha_so_the_right_import_still_works(ledger_url: str, samples: Path) -> None:
    from bench_ledger.cli import main

    def run(*args: str):
        return CliRunner().invoke(main, [*args, "--db", ledger_url])

    assert run("init").exit_code == 0
    f = str(samples / VLLM)
    wrong = run("import", "--batch", "b", "--format", "sglang-bench", f)
    assert wrong.exit_code == 1 and "--format sglang-bench refused" in wrong.output
    right = run("import", "--batch", "b", f)
    assert right.exit_code == 0 and "imported as artefact 1 [vllm-bench]" in right.output
    usage = run("import", "--batch", "b", "--force-format", f)
    assert usage.exit_code == 2 and "--force-format needs --format F" in usage.output
