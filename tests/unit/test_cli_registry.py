"""`ptc X` loads only the module that registers X, and the table that says which one does holds
what each module really registers."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import typer
from typer.main import get_command

from elastic import cli, paths


def registered_by(module: cli.Module) -> list[str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    loaded = importlib.import_module(f"elastic.cli.{module.name}")
    if module.group:
        app.add_typer(loaded.app, name=module.commands[0])
    else:
        loaded.register(app)
    return sorted(get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", cli.MODULES, ids=lambda m: m.name)
def test_each_module_registers_the_commands_the_table_gives_it(module: cli.Module) -> None:
    assert registered_by(module) == sorted(module.commands)


def test_no_command_is_claimed_by_two_modules() -> None:
    names = [c for m in cli.MODULES for c in m.commands]
    assert len(names) == len(set(names))


# Run in a fresh interpreter, as bin/ptc does; on exit it says which heavy libraries it imported.
PROBE = """
import atexit, json, runpy, sys
HEAVY = ("pandas", "matplotlib", "sklearn", "scipy")
atexit.register(lambda: print(json.dumps(sorted(m for m in HEAVY if m in sys.modules)), file=sys.stderr))
sys.argv = ["ptc", *sys.argv[1:]]
runpy.run_module("elastic.cli", run_name="__main__")
"""


def probe(*args: str) -> tuple[list[str], str]:
    """(the heavy libraries ``ptc ARGS`` imported, what it printed)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=paths.REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    heavy: list[str] = json.loads(proc.stderr.splitlines()[-1])
    return heavy, proc.stdout


def test_a_command_of_the_testbed_imports_no_library_of_the_simulator() -> None:
    heavy, out = probe("node", "--help")
    assert heavy == [] and "power-off" in out, (heavy, out)


def test_ptc_help_still_lists_every_command() -> None:
    _, out = probe("--help")
    for name in [c for m in cli.MODULES for c in m.commands]:
        assert f" {name} " in out, name
