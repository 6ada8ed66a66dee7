"""Commands and copies across an experiment's nodes: ``ptc run``, ``ptc put``, ``ptc get``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from elastic.cli import draw
from elastic.errors import RemoteError
from elastic.events import OnEvent
from elastic.remote import group
from elastic.remote.select import Hosts, select
from elastic.testbed import experiment as experiments

console = Console()
err_console = Console(stderr=True)

SelectorArg = Annotated[
    str,
    typer.Argument(
        help="hosts: inventory groups (all, slurm_compute, ...), node names or globs "
        "(node-*), separated by commas"
    ),
]
ParallelOpt = Annotated[
    int, typer.Option("--parallel", "-k", help="at most this many hosts at once", min=1)
]
TimeoutOpt = Annotated[
    float,
    typer.Option("--timeout", help="seconds each host gets for its command or copy", min=0.1),
]
ConnectTimeoutOpt = Annotated[
    float,
    typer.Option("--connect-timeout", help="seconds each host gets to connect and log in", min=0.1),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="one JSON document on stdout")]


# A copy gets longer than a command by default: files can be large.
COPY_TIMEOUT = 300.0


def _fan_out(
    name: str,
    selector: str,
    options: tuple[int, float, float],
    act: Callable[[list[str], group.Options, OnEvent], list[group.HostResult]],
) -> list[group.HostResult]:
    """``act`` on the hosts ``selector`` picks from the experiment's inventory, with the
    command line's ``(parallel, timeout, connect_timeout)``, its progress drawn."""
    exp = experiments.load(name)
    doc = yaml.safe_load(exp.require_inventory().read_text()) or {}
    hosts = select(selector, Hosts.from_inventory(doc))
    reach = group.Options(exp.ssh_config_path, *options)
    with draw.progress(err_console, transient=True) as on_event:
        return act(hosts, reach, on_event)


def _report(
    results: list[group.HostResult], what: str, as_json: bool, detail: str = "last lines"
) -> None:
    summary = group.Summary(results)
    if as_json:
        print(json.dumps({"results": [r.as_dict() for r in results]}, indent=1))
    else:
        table = Table("host", "status", "time", detail, title=what, caption=summary.describe())
        for r in results:
            if r.ok:
                status = "ok" if r.exit_status is None else f"exit {r.exit_status}"
            elif r.exit_status is not None:
                status = f"[red]exit {r.exit_status}[/]"
            else:
                status = f"[red]{r.failure}[/]"
            table.add_row(
                r.host,
                status,
                f"{r.elapsed_s:.1f} s",
                r.tail() if (r.ok or r.exit_status is not None) else r.message,
            )
        console.print(table)
    if summary.failed:
        raise RemoteError(
            summary.describe(),
            host=",".join(r.host for r in summary.failed),
            command=what,
            returncode=None,
        )


def run(
    name: Annotated[str, typer.Argument(help="experiment name")],
    selector: SelectorArg,
    command: Annotated[list[str], typer.Argument(help="the command (after --)")],
    parallel: ParallelOpt = group.Options.parallel,
    timeout: TimeoutOpt = group.Options.timeout,
    connect_timeout: ConnectTimeoutOpt = group.Options.connect_timeout,
    sudo: Annotated[bool, typer.Option("--sudo", help="run the command as root")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a command on the selected nodes: `ptc run NAME node-* -- uptime`.

    A table of host, exit status, time and last output lines (or --json); the exit status
    is non-zero when any host failed, and the failed hosts are named."""
    line = " ".join(command)
    results = _fan_out(
        name,
        selector,
        (parallel, timeout, connect_timeout),
        lambda hosts, reach, on_event: group.run(hosts, line, reach, sudo=sudo, on_event=on_event),
    )
    _report(results, line, as_json)


def put(
    name: Annotated[str, typer.Argument(help="experiment name")],
    selector: SelectorArg,
    local: Annotated[Path, typer.Argument(help="the file to copy")],
    remote: Annotated[str, typer.Argument(help="where on each node (a directory ends in /)")],
    parallel: ParallelOpt = group.Options.parallel,
    timeout: TimeoutOpt = COPY_TIMEOUT,
    connect_timeout: ConnectTimeoutOpt = group.Options.connect_timeout,
    as_json: JsonOpt = False,
) -> None:
    """Copy a file to the selected nodes."""
    results = _fan_out(
        name,
        selector,
        (parallel, timeout, connect_timeout),
        lambda hosts, reach, on_event: group.put(hosts, local, remote, reach, on_event=on_event),
    )
    _report(results, f"put {local} {remote}", as_json, detail="copied to")


def get(
    name: Annotated[str, typer.Argument(help="experiment name")],
    selector: SelectorArg,
    remote: Annotated[str, typer.Argument(help="the file on each node")],
    local_dir: Annotated[
        Path, typer.Argument(help="a directory here: each node's copy lands in DIR/NODE/")
    ],
    parallel: ParallelOpt = group.Options.parallel,
    timeout: TimeoutOpt = COPY_TIMEOUT,
    connect_timeout: ConnectTimeoutOpt = group.Options.connect_timeout,
    as_json: JsonOpt = False,
) -> None:
    """Copy a file from the selected nodes, into LOCAL_DIR/NODE/NAME."""
    results = _fan_out(
        name,
        selector,
        (parallel, timeout, connect_timeout),
        lambda hosts, reach, on_event: group.get(
            hosts, remote, local_dir, reach, on_event=on_event
        ),
    )
    _report(results, f"get {remote} {local_dir}", as_json, detail="copied to")


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(put)
    app.command()(get)
