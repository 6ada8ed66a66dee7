"""Node-level operations on a running experiment: power off and on, reload.

Each checks the node names against the experiment's manifest (an unknown node is refused,
naming it, before anything changes), asks the experiment's backend, and reports events with
the time of every step."""

from __future__ import annotations

from collections.abc import Sequence

from elastic.events import OnEvent
from elastic.testbed.experiment import Experiment


def power_off(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes stop; their disks are kept. Stopping a stopped node does nothing."""
    raise NotImplementedError


def power_on(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes start from their kept disks, wired as before, and answer over SSH on return.
    Starting a running node does nothing."""
    raise NotImplementedError


def reload(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes get fresh disks from the image, same names and addresses; their new host keys
    are pinned on return."""
    raise NotImplementedError


def states(exp: Experiment) -> dict[str, str]:
    """node client_id -> "running" | "stopped" | "missing" (or the testbed's own word)."""
    raise NotImplementedError
