"""`ptc sim` commands (placeholder until the sim module lands)."""

import typer

app = typer.Typer(no_args_is_help=True)
