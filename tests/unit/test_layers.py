"""The layering of ``elastic``: data flows one way and nothing imports upward.

For each subpackage, the elastic subpackages it may import, taken from the code as it is (every
``import`` anywhere in the file, functions included: a late import is still a dependency). The
root modules (``errors``, ``events``, ``atomic``, ``paths``, ...) are the floor: any subpackage may
import them, and they import no subpackage. A new edge fails here; if it goes down the layers,
add it to ``MAY_IMPORT`` (the graph must stay acyclic), else move the code it needs down.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import elastic

ROOT = Path(elastic.__file__).parent

MAY_IMPORT: dict[str, set[str]] = {
    "cli": {
        "bench",
        "configserver",
        "deploy",
        "learn",
        "ledger",
        "lending",
        "manager",
        "policies",
        "profile",
        "remote",
        "sim",
        "slurm",
        "testbed",
    },
    "bench": {"remote"},
    "configserver": {"remote", "testbed"},
    "deploy": {"remote", "testbed"},
    "learn": {"bench"},
    "ledger": {"bench", "manager", "remote", "slurm"},
    "lending": {"deploy", "manager", "profile", "remote", "testbed"},
    "manager": {"configserver", "policies", "remote"},
    "papers": {"bench", "learn", "policies", "sim"},
    "history": set(),
    "policies": set(),
    "remote": set(),
    "sim": {"bench", "policies"},
    "slurm": {"manager", "policies", "remote", "sites", "testbed"},
    "testbed": {"profile"},
    "profile": set(),
    "sites": set(),
}


def subpackages() -> set[str]:
    return {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}: relative import; name the module from elastic.")
    return found


def edges() -> dict[str, dict[str, set[Path]]]:
    """source ("(root)" for the root modules) -> imported subpackage -> the files importing it."""
    packages = subpackages()
    graph: dict[str, dict[str, set[Path]]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        source = rel[0] if len(rel) > 1 else "(root)"
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "elastic" and len(parts) > 1 and parts[1] in packages - {source}:
                graph.setdefault(source, {}).setdefault(parts[1], set()).add(path)
    return graph


def test_every_subpackage_has_its_place() -> None:
    assert subpackages() == set(MAY_IMPORT)


def test_the_allowed_imports_have_no_cycle() -> None:
    try:
        list(TopologicalSorter(MAY_IMPORT).static_order())
    except CycleError as e:  # pragma: no cover - a message for whoever edits MAY_IMPORT
        pytest.fail(f"MAY_IMPORT has a cycle: {e.args[1]}")


def test_nothing_imports_up_the_layers() -> None:
    wrong = [
        f"{source} imports {target} ({', '.join(sorted(str(p.relative_to(ROOT)) for p in files))})"
        for source, targets in sorted(edges().items())
        for target, files in sorted(targets.items())
        if target not in MAY_IMPORT.get(source, set())
    ]
    assert not wrong, "imports across the layers that MAY_IMPORT does not allow:\n" + "\n".join(
        wrong
    )


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_names(path: Path) -> set[str]:
    """What a file imports, by full name: ``import M`` gives M; ``from P import n`` gives P.n
    (a submodule, or a name defined in P, which the graph resolves to P)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_graph() -> dict[str, set[str]]:
    """module -> the elastic modules it imports, over every file of the package, late imports
    included. A package counts only where a module uses what its ``__init__`` defines: taking a
    submodule from it is an edge to that submodule alone."""
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = graph.setdefault(name, set())
        for module in imported_names(path):
            while module and module not in files:
                module = module.rpartition(".")[0]
            if module and module != name and module.startswith("elastic"):
                targets.add(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    """Inside a subpackage too: a circle of modules (late imports count) is a design to undo."""
    found = cycles(module_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser behind the check finds imports in functions and in ``from`` forms."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from elastic import manager\n    import elastic.cli.main\n")
    assert {"elastic", "elastic.manager", "elastic.cli.main"} <= imported_modules(probe)
