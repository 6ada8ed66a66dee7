"""The ``ptc`` command line: each concern registers its own commands; this module wires them."""

from __future__ import annotations

import sys

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


def _register() -> None:
    # Imported here so `ptc --help` lists everything while each module stays independent.
    from elastic.cli import (
        bench,
        cluster,
        demo,
        elastic,
        experiment,
        fanout,
        image,
        learn,
        node,
        profile,
        sim,
        testbed,
    )
    from elastic.cli import config as config_cli
    from elastic.cli import control as control_cli

    experiment.register(app)
    cluster.register(app)
    fanout.register(app)
    app.add_typer(image.app, name="image", help="The local testbed's node image.")
    app.add_typer(testbed.app, name="testbed", help="The local testbed's machines.")
    app.add_typer(node.app, name="node", help="Power nodes off and on, reload their disks.")
    app.add_typer(profile.app, name="profile", help="Render and check geni-lib profiles.")
    app.add_typer(sim.app, name="sim", help="Simulate preemption policies on job traces.")
    app.add_typer(bench.app, name="bench", help="Benchmark campaigns through Slurm.")
    app.add_typer(learn.app, name="learn", help="Active learning over performance datasets.")
    demo.register(app)
    elastic.register(app)
    app.add_typer(config_cli.app, name="config", help="The configuration server (etcd).")
    app.add_typer(control_cli.app, name="control", help="An experiment's testbed control service.")


def main() -> None:
    _register()
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
