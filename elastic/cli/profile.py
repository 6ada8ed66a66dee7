"""`ptc profile` commands (placeholder until the profile module lands)."""

import typer

app = typer.Typer(no_args_is_help=True)
