"""Node operations on a running experiment: power-off, power-on, reload, release, allocate,
status."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.cli import draw
from elastic.events import OnEvent
from elastic.profile import rspec
from elastic.testbed import experiment as experiments
from elastic.testbed import nodeops
from elastic.testbed.experiment import Experiment

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

Name = Annotated[str, typer.Argument(help="experiment name")]
Nodes = Annotated[list[str], typer.Argument(help="node client_ids", show_default=False)]
AsJson = Annotated[
    bool, typer.Option("--json", help="the experiment's node states after, as JSON on stdout")
]


def _run(
    name: str,
    nodes: Sequence[str],
    operation: Callable[[Experiment, Sequence[str], OnEvent | None], None],
    done: str,
) -> None:
    exp = experiments.load(name)
    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        operation(exp, nodes, on_event)
    err_console.print(
        f"[green]{done} {', '.join(dict.fromkeys(nodes))}[/] in {exp.name} "
        f"in {time.monotonic() - started:.1f}s"
    )


@app.command("power-off")
def power_off(name: Name, nodes: Nodes) -> None:
    """Stop nodes with their disks kept; locally each becomes a stopped container."""
    _run(name, nodes, nodeops.power_off, "powered off")


@app.command("power-on")
def power_on(name: Name, nodes: Nodes) -> None:
    """Start powered-off nodes from their kept disks, wired and reachable as before."""
    _run(name, nodes, nodeops.power_on, "powered on")


@app.command("reload")
def reload(name: Name, nodes: Nodes) -> None:
    """Give nodes fresh disks from the image, same names and addresses (as `ptc replace`).

    Then `ptc deploy NAME` configures them."""
    _run(name, nodes, nodeops.reload, "reloaded")
    err_console.print(f"next: ptc deploy {name}")


def _after(name: str, done: str, nodes: Sequence[str], as_json: bool) -> None:
    if as_json:
        exp = experiments.load(name)
        print(
            json.dumps(
                {
                    "experiment": name,
                    done: list(dict.fromkeys(nodes)),
                    "nodes": nodeops.states(exp),
                },
                indent=1,
            )
        )


@app.command("release")
def release(name: Name, nodes: Nodes, as_json: AsJson = False) -> None:
    """Take nodes out of the experiment; their machines go back to the testbed's free pool.

    The manifest, the other nodes' /etc/hosts and the inventory no longer name them."""
    _run(name, nodes, nodeops.release, "released")
    _after(name, "released", nodes, as_json)


@app.command("allocate")
def allocate(
    name: Name,
    nodes: Nodes,
    like: Annotated[
        str | None,
        typer.Option(
            "--like", help="make new nodes of these names, copies of this node", metavar="NODE"
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Bring nodes from the testbed's free pool into the experiment, with fresh disks.

    Without --like, nodes of the experiment's profile it does not hold (released earlier);
    with --like NODE, new nodes copied from NODE, on its LANs. Then `ptc deploy NAME`
    configures them."""

    def operation(exp: Experiment, chosen: Sequence[str], on_event: OnEvent | None) -> None:
        nodeops.allocate(exp, chosen, like, on_event)

    _run(name, nodes, operation, "allocated")
    _after(name, "allocated", nodes, as_json)


@app.command("status")
def status(
    name: Name,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document on stdout")] = False,
) -> None:
    """Each node's power state: running, stopped, parked (its elastic partition gave the machine
    back and will take it again), lent (to another experiment) or missing."""
    exp = experiments.load(name)
    states = nodeops.states(exp)
    if as_json:
        print(json.dumps({"experiment": exp.name, "nodes": states}, indent=1))
        return
    manifest = rspec.parse_manifest(exp.manifest())
    table = Table("node", "power", "addresses")
    for node in manifest.nodes:
        state = states.get(node.client_id, "?")
        style = "" if state == "running" else "yellow"
        addresses = " ".join(i.ip for i in node.interfaces if i.ip)
        table.add_row(node.client_id, f"[{style}]{state}[/]" if style else state, addresses)
    console.print(table)
