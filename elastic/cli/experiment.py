"""Experiment lifecycle commands: up, modify, replace, down, status, list, ssh, inventory, adopt."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.cli import control as control_cli
from elastic.cli import draw
from elastic.cli.options import (
    GroupOpt,
    GroupsFileOpt,
    ParamOpt,
    ParamsFileOpt,
    UserOpt,
    WarningsFatalOpt,
    parse_groups,
    parse_params,
)
from elastic.errors import InputError
from elastic.profile import rspec
from elastic.remote import ssh as remote_ssh
from elastic.testbed import backends, lifecycle
from elastic.testbed import experiment as experiments
from elastic.testbed.inventory import load_groups_file

console = Console()
err_console = Console(stderr=True)


def up(
    profile: Annotated[Path, typer.Argument(help="geni-lib profile script")],
    name: Annotated[str, typer.Option("--name", "-n", help="experiment name")] = "ptc",
    param: ParamOpt = None,
    params_file: ParamsFileOpt = None,
    testbed: Annotated[
        str | None,
        typer.Option("--testbed", help=f"one of: {', '.join(backends.names())} (default local)"),
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="same as --testbed local")] = False,
    site: Annotated[
        str | None,
        typer.Option(help="CloudLab site: utah, wisconsin, clemson, apt (implies cloudlab)"),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="local testbed only: the nodes' disk image, 'prepared' (the roles' packages "
            "installed, the default) or 'bare' (a fresh Debian, as a testbed's stock image)",
        ),
    ] = None,
) -> None:
    """Instantiate PROFILE as a named experiment and write its manifest and inventory.

    The profile's parameter warnings are always fatal here, as when the portal first
    instantiates a profile: see them with `ptc profile check`."""
    if local and (site or testbed not in (None, "local")):
        raise InputError("--local contradicts --site/--testbed: choose one testbed")
    chosen = testbed or ("cloudlab" if site else "local")
    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        params = parse_params(param, params_file)
        exp = lifecycle.up(profile, params, name, chosen, site, on_event, image=image)
    err_console.print(
        f"[green]experiment {exp.name} is ready[/] in {time.monotonic() - started:.1f}s: "
        f"inventory {exp.inventory_dir / 'hosts.yml'}"
    )
    _print_nodes(exp)


def modify(
    name: Annotated[str, typer.Argument(help="experiment name")],
    param: ParamOpt = None,
    params_file: ParamsFileOpt = None,
    warnings_fatal: WarningsFatalOpt = False,
) -> None:
    """Change a running experiment's profile parameters; nodes are added or removed to match.

    The profile's parameter warnings are shown; with --warnings-fatal they refuse the change.
    Ansible is not run: bring added nodes into the cluster with
    `ptc deploy NAME --limit NEW_NODES,head`, and drop removed ones with `--limit head`."""
    if not param and params_file is None:
        raise InputError("give the parameters to change, e.g. --param computeNodeCount=3")
    # Members and list items are given over the experiment's own values (nodes[2].name=c).
    params = parse_params(param, params_file, experiments.load(name).params)
    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        exp, change = lifecycle.modify(name, params, on_event, warnings_fatal=warnings_fatal)
    err_console.print(
        f"[green]experiment {exp.name} modified[/] ({change.describe()}) "
        f"in {time.monotonic() - started:.1f}s"
    )
    if change.added:
        hosts = ",".join(n.client_id for n in change.added)
        err_console.print(f"next: ptc deploy {exp.name} --limit {hosts},head")
    elif change.removed:
        err_console.print(f"next: ptc deploy {exp.name} --limit head")
    _print_nodes(exp)


def replace(
    name: Annotated[str, typer.Argument(help="experiment name")],
    nodes: Annotated[list[str], typer.Argument(help="the nodes to replace", show_default=False)],
) -> None:
    """Replace failed nodes with fresh ones: same names and addresses, empty disks.

    Locally the node's container and disks are removed and a new one starts in its place; on
    CloudLab, reload the node in the portal. Then `ptc deploy NAME` configures it, taking the
    cluster's identity (munge key, database password) from the configuration server."""
    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        exp = lifecycle.replace_nodes(name, nodes, on_event)
    err_console.print(
        f"[green]replaced {', '.join(nodes)}[/] in {exp.name} in {time.monotonic() - started:.1f}s"
    )
    err_console.print(f"next: ptc deploy {exp.name}")
    _print_nodes(exp)


def down(
    name: Annotated[str | None, typer.Argument(help="experiment name")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every experiment")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="do not ask (with --all)")] = False,
) -> None:
    """Delete an experiment's nodes, networks and state."""
    if all_:
        names = experiments.known()
        if names and not yes and not typer.confirm(f"delete {', '.join(names)}?"):
            raise typer.Abort()
    elif name:
        names = [name]
    else:
        raise InputError("name an experiment or pass --all")
    for each in names:
        started = time.monotonic()
        with draw.progress(err_console) as on_event:
            lifecycle.down(each, on_event)
        err_console.print(f"deleted {each} in {time.monotonic() - started:.1f}s")


def status(name: Annotated[str, typer.Argument(help="experiment name")]) -> None:
    """Show an experiment's state and its nodes."""
    exp = experiments.load(name)
    console.print(
        f"[bold]{exp.name}[/] testbed={exp.testbed} state={exp.state} "
        + ("adopted from a saved manifest" if exp.adopted else f"profile={exp.profile}")
    )
    control_cli.ensure(exp)
    _print_nodes(exp)


def list_() -> None:
    """List experiments."""
    table = Table("name", "testbed", "state", "nodes", "created")
    for name in experiments.known():
        exp = experiments.load(name)
        nodes = len(rspec.parse_manifest(exp.manifest()).nodes) if exp.manifest_path.exists() else 0
        table.add_row(
            exp.name,
            exp.testbed + (f" ({exp.site})" if exp.site else ""),
            exp.state,
            str(nodes),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(exp.created)),
        )
    console.print(table)


def ssh(
    name: Annotated[str, typer.Argument(help="experiment name")],
    node: Annotated[str, typer.Argument(help="node client_id")],
    command: Annotated[list[str] | None, typer.Argument(help="command to run")] = None,
) -> None:
    """SSH to a node of an experiment, as Ansible does."""
    exp = experiments.load(name)
    rspec.parse_manifest(exp.manifest()).node(node)  # names the known nodes if this one is not
    args = [*remote_ssh.argv(node, config=exp.ssh_config_path, batch=False), *(command or [])]
    os.execvp(args[0], args)


def inventory(
    name: Annotated[str, typer.Argument(help="experiment name")],
    user: UserOpt = None,
    group: GroupOpt = None,
    groups_file: GroupsFileOpt = None,
) -> None:
    """(Re)build the Ansible inventory and ssh_config from the experiment's manifest.

    A portal manifest lists a login for every project member: the user is --user, else the
    geni-lib context's, else the only one listed (ambiguity is refused). Nodes get the groups
    their manifest carries; --group/--groups-file map nodes to groups explicitly. Both
    choices are kept for later rebuilds."""
    exp = experiments.load(name)
    groups = load_groups_file(groups_file) if groups_file is not None else {}
    groups |= parse_groups(group)
    console.print(str(lifecycle.write_inventory(exp, user=user, groups=groups)))


def adopt(
    name: Annotated[str, typer.Argument(help="experiment name for ptc")],
    manifest: Annotated[
        Path, typer.Option("--manifest", "-m", help="the manifest RSpec saved from the portal")
    ],
    key: Annotated[
        Path, typer.Option("--key", "-k", help="your private SSH key that the portal installed")
    ],
    testbed: Annotated[
        str, typer.Option("--testbed", help="where the nodes run (group_vars)")
    ] = "cloudlab",
    replace: Annotated[
        bool, typer.Option("--replace", help="give an adopted experiment a new manifest")
    ] = False,
    user: UserOpt = None,
    group: GroupOpt = None,
    groups_file: GroupsFileOpt = None,
) -> None:
    """Use an experiment made in the portal: register its saved manifest, build the inventory.

    Nothing is created or contacted. `ptc deploy/verify/bench NAME` then work as after `ptc
    up`; `ptc down NAME` only forgets it (terminate it in the portal)."""
    groups = load_groups_file(groups_file) if groups_file is not None else {}
    groups |= parse_groups(group)
    exp = lifecycle.adopt(
        name,
        manifest,
        key,
        testbed=testbed,
        user=user,
        groups=groups,
        replace_manifest=replace,
    )
    err_console.print(f"adopted {exp.name}: next `ptc deploy {exp.name}`")
    _print_nodes(exp)


def _print_nodes(exp: experiments.Experiment) -> None:
    if not exp.manifest_path.exists():
        return
    manifest = rspec.parse_manifest(exp.manifest())
    # ptc holds no credentials for an adopted experiment's slice; the portal shows its state
    states = {} if exp.adopted else lifecycle.backend_for(exp).status(exp)
    table = Table("node", "state", "ssh", "addresses")
    for node in manifest.nodes:
        login = (
            f"{node.login.username}@{node.login.hostname}:{node.login.port}" if node.login else "-"
        )
        addresses = " ".join(i.ip for i in node.interfaces if i.ip)
        state = states.get(node.client_id, "see portal" if exp.adopted else "?")
        table.add_row(node.client_id, state, login, addresses)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(up)
    app.command()(modify)
    app.command()(replace)
    app.command()(down)
    app.command()(status)
    app.command("list")(list_)
    # Whatever follows the node is the command's, its options too (`ptc ssh N head curl -s URL`).
    app.command(context_settings={"allow_interspersed_args": False})(ssh)
    app.command()(inventory)
    app.command()(adopt)
