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
        "lending",
        "manager",
        "policies",
        "remote",
        "sim",
        "slurm",
        "testbed",
    },
    "bench": {"remote"},
    "configserver": {"remote", "testbed"},
    "deploy": {"remote", "testbed"},
    "learn": {"bench"},
    "lending": {"deploy", "manager", "remote", "testbed"},
    "manager": {"configserver", "policies", "remote"},
    "policies": set(),
    "remote": set(),
    "sim": {"bench", "policies"},
    "slurm": {"manager", "policies", "remote", "testbed"},
    "testbed": set(),
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


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser behind the check finds imports in functions and in ``from`` forms."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from elastic import manager\n    import elastic.cli.main\n")
    assert {"elastic", "elastic.manager", "elastic.cli.main"} <= imported_modules(probe)
