"""The ``ptc`` command line: each concern registers its own commands; this module wires them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import typer
from rich.console import Console

from elastic.errors import PtcError

app = typer.Typer(
    name="ptc",
    help="Part-Time Cloud toolkit: profiles -> nodes -> playbooks -> tests -> benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    # A callback keeps ``ptc`` a group when only one module's commands are registered: typer
    # runs an app of a single command as that command, without its name.
    pass


@dataclass(frozen=True)
class Module:
    """A module of ``elastic.cli`` and the top-level commands it adds: either a group of its own
    (``group`` and its ``help``; the group is the one command), or the commands its
    ``register(app)`` adds."""

    name: str
    commands: tuple[str, ...]
    help: str = ""

    @property
    def group(self) -> bool:
        return bool(self.help)


# In the order ``ptc --help`` lists them. tests/unit/test_cli_registry.py holds each module's
# commands to what it really registers.
MODULES = (
    Module(
        "experiment",
        ("up", "modify", "replace", "down", "status", "list", "ssh", "inventory", "adopt"),
    ),
    Module("cluster", ("deploy", "verify")),
    Module("fanout", ("run", "put", "get")),
    Module("image", ("image",), "The local testbed's node image."),
    Module("testbed", ("testbed",), "The local testbed's machines."),
    Module("node", ("node",), "Power nodes off and on, reload their disks."),
    Module("profile", ("profile",), "Render and check geni-lib profiles."),
    Module("sim", ("sim",), "Simulate preemption policies on job traces."),
    Module("bench", ("bench",), "Benchmark campaigns through Slurm."),
    Module("learn", ("learn",), "Active learning over performance datasets."),
    Module("demo", ("demo",)),
    Module("elastic", ("elastic",)),
    Module("config", ("config",), "The configuration server (etcd)."),
    Module("control", ("control",), "An experiment's testbed control service."),
    Module("fake_ec2", ("fake-ec2",), "A FAKE EC2 region (an emulation) for an experiment."),
)


def _add(module: Module) -> None:
    loaded = importlib.import_module(f"elastic.cli.{module.name}")
    if module.group:
        app.add_typer(loaded.app, name=module.commands[0], help=module.help)
    else:
        loaded.register(app)


def _register(argv: Sequence[str] = ()) -> None:
    """Register the module of the command ``argv`` names, or every module (``ptc --help``, an
    unknown command). Only what a command needs is imported: the simulator's, the benchmarks'
    and the learners' libraries take seconds of CPU to import, and every test and script that
    runs ``ptc`` would pay them."""
    first = next((word for word in argv if not word.startswith("-")), None)
    chosen = [m for m in MODULES if first in m.commands]
    for module in chosen or MODULES:
        _add(module)


def main() -> None:
    _register(sys.argv[1:])
    try:
        # Usage and error lines name the command the user typed, however it was started
        # (``bin/ptc`` runs ``python -m elastic.cli``).
        app(prog_name="ptc")
    except PtcError as err:
        console = Console(stderr=True)
        console.print(f"[bold red]error:[/] {err}", highlight=False)
        for note in getattr(err, "__notes__", []):
            console.print(f"  {note}", highlight=False)
        sys.exit(err.exit_code)
