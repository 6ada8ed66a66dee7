"""`ptc testbed`: the local testbed's size and who holds its machines."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.testbed import capacity

app = typer.Typer(no_args_is_help=True)
console = Console()


@app.command()
def show(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """The testbed's machines, how many are free, and per experiment the nodes it holds.

    A stopped (powered-off) node still holds its machine; a removed one does not. Experiments
    of every PTC_HOME on this host are listed."""
    now = capacity.usage()
    if as_json:
        print(json.dumps(now.as_json(), indent=2))
        return
    sized = "set with `ptc testbed set`" if now.from_file else "default, sized to this host"
    console.print(
        f"local testbed {capacity.directory()}: {now.machines} machines ({sized}), "
        f"{now.in_use} in use, {now.free} free",
        highlight=False,
    )
    if not now.holdings:
        return
    table = Table(show_header=True)
    table.add_column("experiment")
    table.add_column("machines", justify="right")
    table.add_column("running", justify="right")
    table.add_column("stopped", justify="right")
    table.add_column("nodes")
    for held in now.holdings:
        powers = list(held.nodes.values())
        nodes = ", ".join(f"{n} ({p})" for n, p in sorted(held.nodes.items()))
        creating = held.reserved - len(held.nodes)
        if creating > 0:
            nodes = ", ".join(filter(None, [nodes, f"{creating} being created"]))
        table.add_row(
            held.experiment,
            str(held.machines),
            str(powers.count("running")),
            str(len(powers) - powers.count("running")),
            nodes,
        )
    console.print(table)


@app.command("set")
def set_(
    machines: Annotated[
        int, typer.Option("--machines", min=1, help="the testbed's number of machines")
    ],
) -> None:
    """Resize the testbed; refused below the number of machines in use."""
    now = capacity.set_machines(machines)
    console.print(
        f"local testbed: {now.machines} machines, {now.in_use} in use, {now.free} free",
        highlight=False,
    )
