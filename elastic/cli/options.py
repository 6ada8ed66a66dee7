"""Options and argument parsers that several commands share, so command modules never import
each other."""

from __future__ import annotations

from typing import Annotated

import typer

from elastic.errors import InputError

ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="profile parameter NAME=VALUE (repeatable)"),
]


def parse_params(values: list[str] | None) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--param {item!r} is not of the form NAME=VALUE")
        if key in params:
            raise InputError(f"--param {key!r} is given twice")
        params[key] = value
    return params
