"""tests/infra reports a check that does not apply as skipped, never as passed.

A testinfra check that returns before checking anything is counted as passed by pytest, so
`ptc verify` would claim it checked what it did not. A bare ``return`` in a test is allowed only
after the test has asserted something (what follows it is then an extra that does not apply)."""

from __future__ import annotations

import ast
from pathlib import Path

INFRA = Path(__file__).resolve().parents[2] / "infra"


def early_returns(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        inner = list(ast.walk(node))
        asserts = [n.lineno for n in inner if isinstance(n, ast.Assert)]
        for ret in (n for n in inner if isinstance(n, ast.Return) and n.value is None):
            if not any(line < ret.lineno for line in asserts):
                found.append(f"{path.name}:{ret.lineno} ({node.name})")
    return found


def test_no_infra_check_passes_without_checking() -> None:
    files = sorted(INFRA.glob("test_*.py"))
    assert len(files) >= 5
    found = [where for path in files for where in early_returns(path)]
    assert not found, f"return before any assert (use pytest.skip with a reason): {found}"
