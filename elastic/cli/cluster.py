"""`ptc deploy` and `ptc verify`: configure an experiment's nodes and check the result."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from elastic.cli import control as control_cli
from elastic.cli import draw
from elastic.errors import InputError
from elastic.testbed import backends, nodeops, power_hold
from elastic.testbed import experiment as experiments

console = Console()
err_console = Console(stderr=True)


def parse_extravars(values: list[str] | None) -> dict[str, Any]:
    """-e k=v pairs; values are YAML so `-e ptc_hpgmg_enabled=true` is a boolean. ``-e @FILE``
    reads a YAML mapping of variables: the way to give a secret without showing it in ``ps``."""
    out: dict[str, Any] = {}
    for item in values or []:
        if item.startswith("@"):
            out.update(_vars_file(item[1:]))
            continue
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"-e {item!r} is not of the form NAME=VALUE")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError as err:
            raise InputError(f"-e {item!r}: the value is not valid YAML ({err})") from err
    return out


def check_sites_file(exp: experiments.Experiment, extravars: dict[str, Any]) -> None:
    """The pool's sites file, checked before anything changes; given relative to here, it
    reaches Ansible by its absolute path."""
    given = extravars.get("elastic_sites_file")
    if not given:
        return
    from elastic.cluster_groups import SLURM_COMPUTE
    from elastic.manager.workstation import inventory_groups
    from elastic.slurm.sites import check_for_deploy

    path = Path(str(given)).expanduser().absolute()
    compute = inventory_groups(exp.inventory_path).get(SLURM_COMPUTE, [])
    credentials = extravars.get("elastic_ec2_credentials_src") or None
    check_for_deploy(path, compute, credentials)
    extravars["elastic_sites_file"] = str(path)
    if credentials:  # Ansible's copy reads it by its absolute path, as the sites file
        extravars["elastic_ec2_credentials_src"] = str(
            Path(str(credentials)).expanduser().absolute()
        )


def _vars_file(name: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(name).read_text())
    except OSError as err:
        raise InputError(f"-e @{name}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise InputError(f"-e @{name}: not valid YAML ({err})") from err
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise InputError(f"-e @{name}: expected a mapping of variable names to values")
    return data


def deploy(
    experiment: Annotated[str, typer.Argument(help="experiment name")],
    limit: Annotated[
        str | None, typer.Option("--limit", "-l", help="hosts or groups, e.g. node-2,head")
    ] = None,
    playbook: Annotated[
        str, typer.Option(help="playbook, relative to the repository")
    ] = "site.yml",
    extra: Annotated[
        list[str] | None,
        typer.Option("--extra-vars", "-e", help="NAME=VALUE or @FILE (YAML; repeatable)"),
    ] = None,
    no_mitogen: Annotated[
        bool, typer.Option("--no-mitogen", help="Ansible's own strategy (also: PTC_MITOGEN=0)")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="run the playbook even when every node is up to date with its inputs"
        ),
    ] = False,
) -> None:
    """Run the playbook on an experiment's nodes (ansible-runner), with progress and a recap.

    Without --limit or --full, nodes last deployed from the same inputs (playbook, roles,
    inventory, variables), with nothing changed on them since, are left as they are: when all
    are, Ansible does not run at all."""
    from elastic.deploy import runner
    from elastic.deploy.target import Target

    exp = experiments.load(experiment)
    target = Target.of_experiment(exp)
    extravars = parse_extravars(extra)
    check_sites_file(exp, extravars)
    control_cli.ensure(exp)  # the roles reach the testbed's services (the local file server)
    with draw.progress(err_console) as on_event, nodeops.awake(exp, "deploy", on_event):
        result = runner.deploy(
            target,
            playbook,
            limit,
            extravars,
            on_event,
            mitogen=False if no_mitogen else None,
            skip_if_current=not full,
        )
    if result.up_to_date:
        err_console.print(
            f"[green]{result.describe()}[/]; `ptc deploy {exp.name} --full` runs "
            "the playbook anyway"
        )
        control_cli.ensure(exp)
        return
    table = Table(title=f"{exp.name}: {result.playbook}", show_header=True)
    for column in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, c in result.hosts.items():
        table.add_row(
            host, str(c.ok), str(c.changed), str(c.failed), str(c.unreachable), str(c.skipped)
        )
    console.print(table)
    for host, why in sorted(result.why_run.items()):
        err_console.print(f"ran for {host}: {why}")
    err_console.print(f"[green]deployed[/] {result.describe()}; run: {result.run_dir}")
    control_cli.ensure(exp)


def verify(experiment: Annotated[str, typer.Argument(help="experiment name")]) -> None:
    """Check every node with the testinfra suite (tests/infra); failures name node and check."""
    from elastic.deploy import verify as verifier
    from elastic.deploy.target import Target

    exp = experiments.load(experiment)
    target = Target.of_experiment(exp)
    with draw.progress(err_console) as on_event, _held_states(exp) as found:
        # A powered-off node is not checked (checking would power it on, changing the cluster
        # being checked): its checks are skipped, saying so. The hold keeps the others up.
        off = [n for n, s in found.items() if s == "stopped"]
        result = verifier.verify(target, on_event, powered_off=off)
    table = Table(title=f"{exp.name}: tests/infra", show_header=True)
    for column in ("node", "check", "result", "why"):
        table.add_column(column)
    # A skip that applies to its node, and a known hole, are shown with their reason: "passed"
    # means checked.
    for r in sorted(result.results, key=lambda r: (r.node, r.check)):
        if r.applies:
            why = r.message if r.outcome in ("skipped", "known") else ""
            table.add_row(r.node, r.check, r.outcome, why)
    console.print(table)
    err_console.print(f"[green]verified[/] {result.describe()}; run: {result.run_dir}")


@contextlib.contextmanager
def _held_states(exp: experiments.Experiment) -> Iterator[dict[str, str]]:
    """The nodes' power states, held so for the block (none where the testbed has no
    machines of its own to power)."""
    if exp.adopted or not backends.capabilities(exp.testbed).host_machines:
        with power_hold.hold(exp, "verify"):
            yield {}
        return
    with nodeops.held(exp, "verify") as found:
        yield found


def register(app: typer.Typer) -> None:
    app.command()(deploy)
    app.command()(verify)
