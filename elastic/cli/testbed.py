"""`ptc testbed`: the local testbed's size and who holds its machines."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from elastic.errors import InputError
from elastic.testbed.backends.local import capacity, provisioning

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
    queue = provisioning.snapshot()
    bounds = provisioning.limits()
    if as_json:
        print(json.dumps(now.as_json() | {"provisioning": _queue_json(bounds, queue)}, indent=2))
        return
    sized = "set with `ptc testbed set`" if now.from_file else "default, sized to this host"
    console.print(
        f"local testbed {capacity.directory()}: {now.machines} machines ({sized}), "
        f"{now.in_use} in use, {now.free} free",
        highlight=False,
    )
    print_provisioning(bounds, queue)
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


def _queue_json(bounds: provisioning.Limits, queue: provisioning.Queue) -> dict[str, Any]:
    return {
        "limits": bounds.as_json(),
        "running": [e.as_json() for e in queue.running],
        "waiting": [e.as_json() for e in sorted(queue.waiting, key=lambda e: e.ticket)],
        "started_last_minute": queue.started_in_window(time.time()),
    }


def print_provisioning(
    bounds: provisioning.Limits, queue: provisioning.Queue, experiment: str | None = None
) -> None:
    """The testbed's provisioning limits and its queue (one experiment's part of it, if named)."""

    def mine(entries: list[provisioning.Entry]) -> list[provisioning.Entry]:
        return [e for e in entries if experiment is None or e.experiment == experiment]

    running, waiting = mine(queue.running), mine(sorted(queue.waiting, key=lambda e: e.ticket))
    console.print(
        f"provisioning: {bounds.describe()}; {queue.running_nodes()} nodes provisioning, "
        f"{len(queue.waiting)} requests waiting, "
        f"{queue.started_in_window(time.time())} nodes started in the last minute",
        highlight=False,
    )
    if not running and not waiting:
        return
    table = Table(title="provisioning queue")
    for column in ("ticket", "experiment", "action", "nodes", "state", "for"):
        table.add_column(column)
    now = time.time()
    for state, entries in (("running", running), ("waiting", waiting)):
        for e in entries:
            table.add_row(
                str(e.ticket),
                e.experiment,
                e.action,
                ", ".join(e.nodes),
                state,
                f"{now - e.since:.0f} s",
            )
    console.print(table)


@app.command("set")
def set_(
    machines: Annotated[
        int | None, typer.Option("--machines", min=1, help="the testbed's number of machines")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--provision-concurrency",
            min=0,
            help="nodes provisioned (powered on, reloaded, allocated) at once; 0: no limit",
        ),
    ] = None,
    per_minute: Annotated[
        int | None,
        typer.Option(
            "--provisions-per-minute",
            min=0,
            help="nodes whose provisioning starts in any minute; 0: no limit",
        ),
    ] = None,
    full_per_minute: Annotated[
        int | None,
        typer.Option(
            "--full-provisions-per-minute",
            min=0,
            help="of those, full ones (reload, allocate: a fresh disk) starting in any minute "
            f"(Multiverse: {provisioning.MULTIVERSE_FULL_PER_MINUTE} full clones); instant "
            "power-ons are not counted; 0: no limit",
        ),
    ] = None,
) -> None:
    """Resize the testbed (refused below the number of machines in use), or set its
    provisioning limits: requests beyond them wait their turn, in order, never dropped."""
    limits_given = (concurrency, per_minute, full_per_minute)
    if machines is None and all(v is None for v in limits_given):
        raise InputError(
            "ptc testbed set: give --machines, --provision-concurrency, --provisions-per-minute "
            "or --full-provisions-per-minute"
        )
    if machines is not None:
        now = capacity.set_machines(machines)
        console.print(
            f"local testbed: {now.machines} machines, {now.in_use} in use, {now.free} free",
            highlight=False,
        )
    if any(v is not None for v in limits_given):
        capacity.set_limits(concurrency, per_minute, full_per_minute)
        console.print(f"provisioning: {provisioning.limits().describe()}", highlight=False)
