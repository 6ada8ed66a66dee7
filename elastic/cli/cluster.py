"""`ptc deploy` / `ptc verify` (placeholder until the roles land)."""

import typer


def register(app: typer.Typer) -> None:
    pass
