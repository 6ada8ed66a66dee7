"""Options and argument parsers that several commands share, so command modules never import
each other."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from elastic.testbed.render import load_params_file, merge_params, parse_param_args

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
        " or as {NAME: V}; --param values override it",
    ),
]


def parse_params(values: list[str] | None, params_file: Path | None = None) -> dict[str, Any]:
    """--param values (over those of --params-file); errors name the parameter or member."""
    args = parse_param_args(values)
    if params_file is None:
        return args
    return merge_params(load_params_file(params_file), args)
