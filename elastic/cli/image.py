"""`ptc image`: the local testbed's node image."""

from __future__ import annotations

import typer
from rich.console import Console

from elastic.cli import render
from elastic.testbed.backends.local import image as node_image
from elastic.testbed.backends.local import podman

app = typer.Typer(no_args_is_help=True)


@app.command()
def build() -> None:
    """Build the node image unless an image of the current recipe is cached."""
    recipe = node_image.default_recipe()
    cached = podman.image_exists(recipe.ref)
    with render.progress(Console(stderr=True)) as on_event:
        ref = node_image.ensure(recipe, on_event)
    Console().print(f"{ref} ({'cached' if cached else 'built'})")


@app.command()
def show() -> None:
    """Print the reference of the current recipe's image and whether it is built."""
    recipe = node_image.default_recipe()
    Console().print(f"{recipe.ref} {'built' if podman.image_exists(recipe.ref) else 'not built'}")
