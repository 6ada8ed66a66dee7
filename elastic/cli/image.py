"""`ptc image`: the local testbed's node images."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from elastic.cli import draw
from elastic.testbed.backends.local import image as node_image
from elastic.testbed.backends.local import podman

app = typer.Typer(no_args_is_help=True)

KindOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--kind",
        help="prepared (the roles' packages installed) or bare; default both",
        show_default=False,
    ),
]


@app.command()
def build(kind: KindOpt = None) -> None:
    """Build the node images unless images of the current recipe are cached."""
    recipe = node_image.default_recipe()
    kinds = kind or list(node_image.KINDS)
    for k in kinds:
        node_image.check_kind(k)
    for k in sorted(kinds, key=lambda k: k != node_image.BARE):  # the prepared one builds on it
        cached = podman.image_exists(recipe.ref_of(k))
        with draw.progress(Console(stderr=True)) as on_event:
            ref = node_image.ensure(recipe, on_event, kind=k)
        Console().print(f"{k}: {ref} ({'cached' if cached else 'built'})")


@app.command()
def show() -> None:
    """Print the references of the current recipe's images and whether each is built."""
    recipe = node_image.default_recipe()
    for k in node_image.KINDS:
        ref = recipe.ref_of(k)
        default = " (default)" if k == node_image.DEFAULT_KIND else ""
        built = "built" if podman.image_exists(ref) else "not built"
        Console().print(f"{k}{default}: {ref} {built}")
