"""``ptc fake-ec2``: a FAKE EC2 region for an experiment of the local testbed (moto's server,
an emulation of EC2's API, and a realiser that makes its instances machines of the testbed)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console

from elastic.errors import InputError
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local.fake_ec2 import DEFAULT_REGION, HEAD_CREDENTIALS, service

app = typer.Typer(no_args_is_help=True)
fault = typer.Typer(no_args_is_help=True)
app.add_typer(fault, name="fault", help="Inject EC2's faults: no capacity, spot interruptions.")
console = Console()

Name = Annotated[str, typer.Argument(help="experiment name")]


@app.command()
def start(
    name: Name,
    boot_delay: Annotated[
        float, typer.Option(help="seconds from launch until an instance runs its user data")
    ] = 0.0,
    region: Annotated[str, typer.Option(help="the region's name")] = DEFAULT_REGION,
    node: Annotated[
        str, typer.Option(help="the node that reaches the API (the Slurm controller)")
    ] = "head",
    lan: Annotated[
        str | None, typer.Option(help="the LAN the instances join (default: the node's first)")
    ] = None,
) -> None:
    """Start a FAKE EC2 region (an emulation, not AWS) whose instances become machines of the
    experiment's LAN; print what a sites file needs."""
    exp = experiments.load(name)
    st = service.start(exp, service.Settings(region, boot_delay, node, lan))
    _show(st, header=f"{name}: FAKE EC2 region running (pid {st.pid})")


@app.command()
def status(name: Name) -> None:
    """Whether the region runs, its ids and endpoint, and its instances' machines."""
    st = service.status(experiments.load(name))
    if not st.running:
        console.print(f"{name}: no FAKE EC2 region running", highlight=False)
        raise typer.Exit(1)
    _show(st, header=f"{name}: FAKE EC2 region running (pid {st.pid})")
    state = service.faults(experiments.load(name)).read()
    if state.capacity is not None:
        left = "until cleared" if state.capacity < 0 else f"{state.capacity} more calls"
        console.print(f"  fault: RunInstances refused for capacity, {left}", highlight=False)
    for asked in state.interrupts:
        console.print(f"  fault: {asked.node} interrupted at {time.ctime(asked.due)}",
                      highlight=False)  # fmt: skip
    report = st.report or {}
    for m in report.get("machines", []):
        console.print(f"  {m['node']:<12} {m['instance_id']:<20} {m['address']:<15} {m['phase']}",
                      highlight=False)  # fmt: skip


def _show(st: service.Status, header: str) -> None:
    report = st.report or {}
    ids, settings, plan = report["ids"], report["settings"], report["plan"]
    console.print(header, highlight=False)
    for label, value in (
        ("region", settings["region"]),
        ("endpoint_url", f"{report['endpoint_url']}  (on {settings['api_node']} only)"),
        ("subnet_id", f"{ids['subnet_id']}  ({plan['subnet']} of LAN {plan['lan']})"),
        ("image_id", f"{ids['image_id']}  (the testbed's prepared image)"),
        ("vpc_id", ids["vpc_id"]),
        ("credentials", f"{HEAD_CREDENTIALS} on {settings['api_node']}"),
        ("", f"{st.credentials} on this host (root only; AWS_SHARED_CREDENTIALS_FILE)"),
        ("boot_delay", f"{settings['boot_delay']:g} s"),
        ("log", str(st.log)),
    ):  # fmt: skip
        console.print(f"  {label:<13}{value}", highlight=False)


@app.command()
def stop(name: Name) -> None:
    """Stop the region: its instances' machines are removed, its state is gone."""
    stopped = service.stop(experiments.load(name))
    console.print(f"{name}: {'stopped' if stopped else 'was not running'}")


@fault.command("capacity")
def capacity(
    name: Name,
    count: Annotated[int | None, typer.Option(help="refuse the next N RunInstances calls")] = None,
    until_cleared: Annotated[
        bool, typer.Option("--until-cleared", help="refuse every call until --clear")
    ] = False,
    clear: Annotated[bool, typer.Option("--clear", help="refuse no more")] = False,
) -> None:
    """RunInstances fails with InsufficientInstanceCapacity (HTTP 500, as EC2 answers; boto3
    retries it, and every attempt counts)."""
    if sum((count is not None, until_cleared, clear)) != 1:
        raise InputError("fault capacity: give one of --count N, --until-cleared, --clear")
    faults = service.faults(_running(name))
    if clear:
        had = faults.clear_capacity()
        console.print(f"{name}: capacity {'restored' if had else 'was not refused'}")
        return
    faults.set_capacity(count)
    what = "until cleared" if count is None else f"for the next {count} calls"
    console.print(f"{name}: RunInstances refused {what}", highlight=False)


@fault.command("interrupt")
def interrupt(
    name: Name,
    node: Annotated[str, typer.Argument(help="the node (ptc:node tag) whose instance ends")],
    notice: Annotated[
        float, typer.Option(help="seconds of notice on the machine before it ends (EC2: 120)")
    ] = 0.0,
) -> None:
    """A spot interruption: the instance ends with EC2's reason
    (Server.SpotInstanceTermination); with --notice, the machine's
    metadata service (IMDSv2 at 169.254.169.254) says when first, in
    latest/meta-data/spot/instance-action."""
    exp = _running(name)
    machines = {m["node"]: m for m in (service.status(exp).report or {}).get("machines", [])}
    if node not in machines:
        raise InputError(
            f"fault interrupt: no instance of {name}'s region is node {node!r} "
            f"(its instances' nodes: {', '.join(sorted(machines)) or 'none'})"
        )
    asked = service.faults(exp).interrupt(node, notice, time.time())
    console.print(f"{name}: {node} ({machines[node]['instance_id']}) ends at "
                  f"{time.ctime(asked.due)}", highlight=False)  # fmt: skip


def _running(name: str) -> experiments.Experiment:
    exp = experiments.load(name)
    if not service.status(exp).running:
        raise InputError(f"experiment {name!r} has no FAKE EC2 region running: "
                         f"`ptc fake-ec2 start {name}`")  # fmt: skip
    return exp
