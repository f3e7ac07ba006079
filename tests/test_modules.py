"""The package's modules: no import cycle (function-level imports included), none over 600 lines, and a
public surface: each package and module names what it exports in a sorted ``__all__``, and tests import only
exported names, or say why on the line (``# private: ...``). That each ``__all__`` is sorted is ruff's rule RUF022
(tests/test_lint.py).

Read off the source with `ast` (helpers of tests/test_structure.py), like httpx's test of its exported members.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

from tests.test_structure import ROOT, imports_of, module_name, package_files

LIMIT = 600  # lines of a module, migrations excepted (issue 40)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for p in package_files() if p.relative_to(ROOT).parts[0] != "migrations"}


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules its code imports: ``from pkg import sub`` names the submodule, an import
    runs the packages above its target too, except those above the importer (already running)."""
    graph: dict[str, set[str]] = {}
    for me, path in modules.items():
        mine = {".".join(me.split(".")[:i]) for i in range(1, me.count(".") + 1)}
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {(n.lineno, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        for line, target in imports_of(path):
            subs = {f"{target}.{name}" for ln, name in names if ln == line} & modules.keys()
            for hit in subs or ({target} & modules.keys()):
                parts = hit.split(".")
                targets |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)} - mine
        graph[me] = (targets & modules.keys()) - {me}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(_edges(_modules())) == []


def test_the_cycle_finder_sees_a_function_level_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules().values()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert long == {}


@functools.cache
def _declared_all(path: Path) -> tuple[str, ...] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(getattr(t, "id", None) == "__all__" for t in targets) and node.value is not None:
            return tuple(ast.literal_eval(node.value))
    return None


def test_every_module_declares_an_all_of_names_it_binds() -> None:
    wrong = []
    for name, path in _modules().items():
        listed = _declared_all(path)
        if listed is None:
            wrong.append(f"{name}: no __all__")
            continue
        module = importlib.import_module(name)
        wrong += [f"{name}: __all__ lists {n!r}, which it does not bind" for n in listed if not hasattr(module, n)]
        wrong += [f"{name}: __all__ lists the private {n!r}" for n in listed if n.startswith("_")]
    assert wrong == []


def _exported(target: str, name: str, modules: dict[str, Path]) -> bool:
    if f"{target}.{name}" in modules:
        return not name.startswith("_")
    path = modules.get(target)
    return path is not None and name in (_declared_all(path) or ())


def _private_imports(paths: list[Path], modules: dict[str, Path]) -> list[str]:
    wrong = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("bench_ledger"):
                continue
            said = any("# private:" in lines[i - 1] for i in range(node.lineno, (node.end_lineno or 0) + 1))
            for alias in node.names:
                if not said and not _exported(node.module or "", alias.name, modules):
                    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                    wrong.append(f"{shown}:{node.lineno}: {node.module}.{alias.name}")
    return wrong


def test_tests_import_only_exported_names_or_say_why() -> None:
    tests = sorted(p for p in (ROOT / "tests").rglob("*.py") if "fixtures" not in p.parts)
    assert _private_imports(tests, _modules()) == []


def test_the_package_imports_only_exported_names() -> None:
    modules = _modules()
    assert _private_imports(list(modules.values()), modules) == []


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages (its folders are mapped in): a folder missing there is missing
    from the wheel, although an editable install finds it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = {module_name(p) for p in package_files() if p.name == "__init__.py"}
    assert folders - listed == set()


def test_the_import_check_sees_a_private_name_and_a_reason(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from bench_ledger.store import Ledger, now\n"
        "from bench_ledger.importers import _toolfiles\n"
        "from bench_ledger.queries.metrics.grouped import _order_stats  # private: a reason\n",
        encoding="utf-8",
    )
    assert _private_imports([probe], _modules()) == ["probe.py:2: bench_ledger.importers._toolfiles"]
