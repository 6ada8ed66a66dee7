"""Holds on an experiment's power: while a deploy or a verify works on the nodes, none of them
is powered off under it (an elastic partition's suspend, or its loop settling the pool, would
otherwise stop a machine in the middle of a playbook).

A hold is a file per holding process (its pid and start time), so a holder that died holds
nothing and no lock is left to clear by hand. Powering on is never held back."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from elastic import atomic, processes
from elastic.errors import TestbedError
from elastic.testbed.experiment import Experiment


class PowerHeld(TestbedError):
    """A power off refused because a deploy or a verify holds the experiment's nodes up."""


def holders(exp: Experiment) -> list[str]:
    """What holds the experiment's nodes up now ("deploy (pid 123)", ...); dead holders'
    files are removed on the way."""
    found: list[str] = []
    directory = exp.power_holds_dir
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            pid, started, what = int(data["pid"]), data.get("started"), str(data["what"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # a torn or foreign file holds nothing
            continue
        if processes.alive(pid, started if isinstance(started, int) else None):
            found.append(f"{what} (pid {pid})")
        else:
            path.unlink(missing_ok=True)
    return found


def refuse_if_held(exp: Experiment, operation: str) -> None:
    held = holders(exp)
    if held:
        raise PowerHeld(
            f"{operation}: experiment {exp.name!r} has its nodes held up by "
            f"{', '.join(held)}; try again once it ends"
        )


@contextlib.contextmanager
def hold(exp: Experiment, what: str) -> Iterator[None]:
    """Hold the experiment's nodes up for the ``with`` block."""
    pid = os.getpid()
    # One file per hold, even for holds one process nests: a temporary object's id would do
    # neither, since CPython gives the next object the freed address.
    path: Path = exp.power_holds_dir / f"{pid}-{uuid.uuid4().hex}.json"
    atomic.write_json(path, {"pid": pid, "started": processes.start_time(pid), "what": what})
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
