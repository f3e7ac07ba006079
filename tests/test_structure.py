"""The package's shape: imports point one way, migrations are frozen, one import name installed.

Read off the source with `ast` (function-level imports included), so a new module cannot slip
past the architecture of docs/architecture.md.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Repository folder -> the part of bench_ledger it installs as.
FOLDERS = {"ledger": "", "importers": "importers", "queries": "queries", "migrations": "migrations"}
# The shell may import every part; the others only what is listed (and themselves).
SHELL = {"cli", "api"}
ALLOWED = {
    "core": {"core"},
    "importers": {"core", "importers"},
    "queries": {"core", "queries"},
    "casestudy": {"core", "casestudy"},
    "migrations": set(),  # frozen snapshots: a revision imports nothing of the package
}


def part_of_module(dotted: str) -> str:
    """The part of ``bench_ledger.x.y`` (core, importers, queries, cli, casestudy, migrations, api)."""
    parts = dotted.split(".")
    if len(parts) == 1:
        return "core"
    return parts[1] if parts[1] in {"importers", "queries", "migrations", "cli", "casestudy", "api"} else "core"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    top = FOLDERS[rel.parts[0]]
    inner = [p for p in (top, *rel.parts[1:-1]) if p]
    stem = [] if path.stem == "__init__" else [path.stem]
    return ".".join(["bench_ledger", *inner, *stem])


def package_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    here = module_name(path).split(".")
    package = here if path.stem == "__init__" else here[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
            if mod == "bench_ledger":  # from bench_ledger import models, cli, ...
                found += [(node.lineno, f"bench_ledger.{alias.name}") for alias in node.names]
    return found


def test_imports_point_one_way() -> None:
    wrong: list[str] = []
    for path in package_files():
        me = module_name(path)
        mine = part_of_module(me)
        if mine in SHELL or (me == "bench_ledger"):
            continue
        allowed = ALLOWED[mine] | {mine}
        if path.relative_to(ROOT).as_posix() == "migrations/env.py":
            allowed = {"migrations", "core"}  # the environment hands Alembic the models' metadata
        for line, target in imports_of(path):
            top = target.split(".")[0]
            if top in {"ledger", "queries", "importers", "migrations"}:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: imports {target} (use bench_ledger.…)")
            elif top == "bench_ledger" and target != "bench_ledger" and part_of_module(target) not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {target} ({part_of_module(target)})")
    assert wrong == []


def test_migration_revisions_are_frozen() -> None:
    """A revision loads no package code and no other file: editing today's code cannot change it."""
    wrong = []
    for path in sorted((ROOT / "migrations" / "versions").glob("0*.py")):
        for line, target in imports_of(path):
            if target.split(".")[0] not in {"__future__", "alembic", "sqlalchemy"}:
                wrong.append(f"{path.name}:{line}: imports {target}")
        if "__file__" in path.read_text():
            wrong.append(f"{path.name}: reads files beside it")
    assert wrong == []


def test_the_checker_sees_a_wrong_import(tmp_path: Path) -> None:
    """The direction test is not vacuous: it resolves relative and function-level imports."""
    assert part_of_module("bench_ledger.queries.metrics") == "queries"
    assert part_of_module("bench_ledger.store") == "core"
    assert module_name(ROOT / "queries" / "audit" / "_auditor.py") == "bench_ledger.queries.audit._auditor"
    assert module_name(ROOT / "ledger" / "cli" / "app.py") == "bench_ledger.cli.app"
    assert "bench_ledger.importers.base" in {t for _, t in imports_of(ROOT / "importers" / "dmon.py")}


def test_wheel_installs_one_import_package(tmp_path: Path) -> None:
    """Installed, the project puts exactly one import package (and its dist-info) into site-packages."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"bench_ledger"}
    for needed in (
        "bench_ledger/migrations/env.py",
        "bench_ledger/migrations/script.py.mako",
        "bench_ledger/migrations/versions/0001_create_declared_tables.py",
        "bench_ledger/queries/metrics/registry.py",
        "bench_ledger/importers/dmon.py",
        "bench_ledger/casestudy/claims.yaml",
    ):
        assert needed in names, needed


# What a command loads, in a fresh interpreter (issue 17: start-up is a second or so of every command
# that opens a ledger, and of every `ledger` subprocess of the suite). `--help` loads none of the database
# stack; `status` (any command that opens a ledger) not Alembic (only `init` migrates), nor Arrow or pydantic
# (the import pipeline); an import of a vLLM result JSON (the first format detection asks) no other format's
# module (each is imported when detection reaches it) and so no PyYAML, nor the read side.
HEAVY = ("sqlalchemy", "duckdb", "alembic", "duckdb_sqlalchemy", "pyarrow", "psycopg", "pydantic", "numpy", "yaml")
VLLM_RESULT = ROOT / "tests" / "fixtures" / "vllm_bench" / "detailed_start_times.json"
LOADS = {
    "help": (["--help"], HEAVY, None),
    "status": (["status", "--db", "{url}"], ("alembic", "pyarrow", "pydantic", "numpy", "yaml", "psycopg"), None),
    "import": (
        ["import", "--db", "{url}", "--quiet", "--batch", "b", str(VLLM_RESULT)],
        ("alembic", "yaml", "psycopg"),
        {
            "bench_ledger.importers",
            "bench_ledger.importers.base",
            "bench_ledger.importers._toolfiles",
            "bench_ledger.importers._vllm_result",
            "bench_ledger.importers.vllm_bench",
            "bench_ledger.importers.vllm_sweep",
        },
    ),
}


@pytest.mark.parametrize("command", sorted(LOADS))
def test_a_command_loads_only_what_it_uses(command: str, tmp_path: Path) -> None:
    """A deferred import stays deferred: the heavy packages a command does not need are not in
    ``sys.modules`` after it ran (`ledger --help`: none of the database stack), nor any importer
    module beyond the ones the command named."""
    import json
    import subprocess
    import sys

    from bench_ledger.store import Ledger

    url = f"duckdb:///{tmp_path / 'ledger.duckdb'}"
    with Ledger(url) as ledger:
        ledger.init()
    args, absent, importers = LOADS[command]
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from bench_ledger.cli import main\n"
        f"r = CliRunner().invoke(main, {[a.format(url=url) for a in args]!r})\n"
        "assert r.exit_code == 0, r.output\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert sorted({m.split(".")[0] for m in loaded} & set(absent)) == []
    if importers is not None:
        assert {m for m in loaded if m.startswith("bench_ledger.importers")} == importers
    assert not {m for m in loaded if m.startswith("bench_ledger.queries")}


def test_the_console_script_freezes_the_heap_before_exit() -> None:
    """`ledger` runs ``cli.run``: the command's exit code unchanged, and every object frozen before the
    interpreter exits (its collections at exit walked them all: ~0.1 s of every command). In a process of
    its own: a freeze here would change the collector for the rest of the suite."""
    import subprocess
    import sys
    import tomllib

    # pyproject's entry (an installed venv's script is written at `pip install`, maybe from an older one)
    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["ledger"] == "bench_ledger.cli:run"
    )
    code = (
        "import gc, sys\n"
        "from bench_ledger.cli import run\n"
        "sys.argv = ['ledger', 'status', '--db', 'duckdb:///no/such/ledger.duckdb']\n"
        "try:\n"
        "    run()\n"
        "except SystemExit as exc:\n"
        "    print(exc.code, gc.get_freeze_count() > 10_000)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["1", "True"], out.stdout + out.stderr


def test_mypy_is_clean_on_the_package(tmp_path: Path) -> None:
    """mypy over ``bench_ledger`` as it installs (config: [tool.mypy] in pyproject.toml).

    mypy does not follow setuptools' editable-install hooks, so the package is laid out as it
    installs: a ``bench_ledger/`` folder of symlinks to ledger/*, with importers, queries and
    migrations as subfolders."""
    import shutil
    import subprocess
    import sys

    pkg = tmp_path / "bench_ledger"
    pkg.mkdir()
    for item in (ROOT / "ledger").iterdir():
        if item.name != "__pycache__":
            (pkg / item.name).symlink_to(item)
    for folder in ("importers", "queries", "migrations"):
        (pkg / folder).symlink_to(ROOT / folder)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    # The cache lives with the user's caches, not in the checkout: its ~1,100 modules of the standard
    # library's stubs and the dependencies cost ~11 s of CPU to analyse cold (a fresh clone, CI) and are
    # the same in every clone of one environment. mypy checks each cached module against its source
    # (size, mtime, then hash) and writes entries atomically, so clones and concurrent runs can share it.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench-ledger" / "mypy"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "-p", "bench_ledger"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
