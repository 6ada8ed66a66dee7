"""Experiment lifecycle commands: up, down, status, list, ssh, inventory."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
