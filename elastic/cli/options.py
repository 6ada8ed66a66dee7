"""Options and argument parsers that several commands share, so command modules never import
each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from elastic.errors import InputError
from elastic.profile.render import (
    ParameterWarning,
    load_params_file,
    merge_params,
    parse_param_args,
)

ParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        help="profile parameter NAME=VALUE, NAME:=JSON (a list or struct), or a member "
        "path such as lan.bandwidth=100 or nodes[0].name=a (repeatable)",
    ),
]
ParamsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--params-file",
        help='parameter values as JSON, in the portal\'s form {"bindings": {NAME: {"value": V}}}'
        " or as {NAME: V}; --param values override it, member by member",
    ),
]
WarningsFatalOpt = Annotated[
    bool,
    typer.Option(
        "--warnings-fatal",
        help="refuse the parameters when the profile reports a warning (reportWarning), as "
        "the portal does when it first instantiates a profile; otherwise warnings are shown",
    ),
]
UserOpt = Annotated[
    str | None,
    typer.Option(
        "--user",
        "-u",
        help="SSH as this user: a portal manifest lists a login for every project member "
        "(default: the geni-lib context's user, or the only user the manifest lists)",
    ),
]
GroupOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--group",
        "-g",
        help="put a node in Ansible groups, NODE=GROUP[,GROUP...] (repeatable), for a "
        "manifest whose nodes carry no ptc groups; replaces that node's groups",
    ),
]
GroupsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--groups-file",
        help="a YAML mapping NODE: [GROUP, ...] (or NODE: GROUP,GROUP); --group overrides it",
    ),
]


def parse_params(
    values: list[str] | None,
    params_file: Path | None = None,
    current: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """--param values over those of --params-file, over ``current`` (a running experiment's
    parameters); errors name the parameter or member."""
    base = dict(current or {})
    if params_file is not None:
        base = merge_params(base, load_params_file(params_file))
    return parse_param_args(values, base)


def parse_groups(values: Sequence[str] | None) -> dict[str, list[str]]:
    """``--group NODE=GROUP,GROUP`` values as a node -> groups map (groups checked later)."""
    out: dict[str, list[str]] = {}
    for item in values or []:
        node, sep, groups = item.partition("=")
        node = node.strip()
        if not sep or not node:
            raise InputError(f"--group {item!r} is not of the form NODE=GROUP[,GROUP...]")
        if node in out:
            raise InputError(f"--group {item!r}: node {node!r} is given twice")
        out[node] = [g.strip() for g in groups.split(",") if g.strip()]
    return out


def print_warnings(console: Console, warnings: Sequence[ParameterWarning]) -> None:
    """Show the profile's parameter warnings (they did not stop the command)."""
    for warning in warnings:
        console.print(f"[yellow]warning[/]: {warning}", highlight=False, soft_wrap=True)
