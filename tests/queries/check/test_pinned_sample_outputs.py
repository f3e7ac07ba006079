"""`ledger check` over every real sample is pinned, byte for byte, on both backends (issue 17).

Each folder of ../shared/samples is imported as its own batch (named after the folder) and
`ledger check --batch FOLDER` is run; its whole output (every row, recomputed value, tolerance and
reason) must hash to the pin in tests/fixtures/check_samples.pins. The check's statistics were
rebuilt for speed (queries/metrics/exact_column.py): this is what shows that nothing it prints changed.

A change that means to change what `ledger check` prints (a new check, a new reason) rewrites
the pins, and the diff of that file shows which folders' output changed:

    .venv/bin/python tests/queries/check/test_pinned_sample_outputs.py ../shared/samples
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

PINS = Path(__file__).resolve().parents[2] / "fixtures" / "check_samples.pins"


def check_outputs(url: str, samples: Path) -> dict[str, str]:
    """Folder name -> the output of `ledger check --batch FOLDER` after importing the folder."""
    from tests.clirun import run

    out: dict[str, str] = {}
    for folder in sorted(p for p in samples.iterdir() if p.is_dir()):
        run("import", "--db", url, "-q", "--batch", folder.name, folder)
        out[folder.name] = run("check", "--db", url, "--batch", folder.name).output
    return out


def pin(text: str) -> str:
    return f"{len(text.splitlines())} {hashlib.sha256(text.encode()).hexdigest()}"


def read_pins() -> dict[str, str]:
    return dict(line.split(" ", 1) for line in PINS.read_text().splitlines() if line and not line.startswith("#"))


def test_check_output_of_every_sample_is_unchanged(ledger_url: str, samples: Path, tmp_path: Path) -> None:
    outputs = check_outputs(ledger_url, samples)
    pins = read_pins()
    assert sorted(outputs) == sorted(pins), "the sample folders changed: rewrite the pins (see the module docstring)"
    changed = []
    for name, text in outputs.items():
        if pin(text) != pins[name]:
            (tmp_path / f"{name}.txt").write_text(text)
            changed.append(f"{name}: {pin(text)} (pinned {pins[name]}), output in {tmp_path / name}.txt")
    assert not changed, "ledger check prints something else for:\n" + "\n".join(changed)


if __name__ == "__main__":  # rewrite the pins from this checkout (DuckDB), as the docstring says
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from bench_ledger.store import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        url = f"duckdb:///{tmp}/pins.duckdb"
        with Ledger(url) as led:
            led.init()
        outputs = check_outputs(url, Path(sys.argv[1]))
    PINS.write_text(
        "# folder of ../shared/samples -> lines and sha256 of `ledger check --batch FOLDER` "
        "(tests/queries/check/test_pinned_sample_outputs.py)\n" + "".join(f"{k} {pin(v)}\n" for k, v in outputs.items())
    )
    print(f"wrote {PINS}: {len(outputs)} folders")
