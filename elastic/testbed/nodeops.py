"""Node-level operations on a running experiment: power off and on, reload.

Each checks the node names against the experiment's manifest (an unknown node is refused,
naming it, before anything changes), asks the experiment's backend, and reports events with
the time of every step. The testbed is the truth of a node's power state: nothing is kept
here."""

from __future__ import annotations

import time
from collections.abc import Sequence

from elastic.errors import InputError, NotFoundError
from elastic.events import OnEvent, Reporter
from elastic.testbed import lifecycle, rspec
from elastic.testbed.experiment import Experiment

STATES = ("running", "stopped", "missing")


def power_off(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes stop; their disks are kept. Stopping a stopped node does nothing."""
    chosen = _checked(exp, nodes, "power off")
    report = Reporter("power-off", on_event)
    started = time.monotonic()
    report.begin(f"{exp.name}: powering off {', '.join(chosen)}", total=len(chosen))
    lifecycle.backend_for(exp, on_event).power_off(exp, chosen)
    _end(report, started, chosen)


def power_on(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes start from their kept disks, wired as before, and answer over SSH on return.
    Starting a running node does nothing."""
    chosen = _checked(exp, nodes, "power on")
    report = Reporter("power-on", on_event)
    started = time.monotonic()
    report.begin(f"{exp.name}: powering on {', '.join(chosen)}", total=len(chosen))
    lifecycle.backend_for(exp, on_event).power_on(exp, chosen)
    _end(report, started, chosen)


def reload(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes get fresh disks from the image, same names and addresses; their new host keys
    are pinned on return."""
    chosen = _checked(exp, nodes, "reload")
    report = Reporter("reload", on_event)
    started = time.monotonic()
    report.begin(f"{exp.name}: reloading {', '.join(chosen)}", total=len(chosen))
    # `ptc replace` is exactly this: new disks in the same places, the manifest, host keys
    # and inventory rewritten.
    lifecycle.replace_nodes_of(exp, chosen, on_event)
    _end(report, started, chosen)


def states(exp: Experiment) -> dict[str, str]:
    """node client_id -> "running" | "stopped" | "missing" (or the testbed's own word)."""
    if exp.adopted:
        raise InputError(f"experiment {exp.name!r} was adopted: the portal shows its nodes' state")
    return lifecycle.backend_for(exp).power_states(exp)


def _checked(exp: Experiment, nodes: Sequence[str], operation: str) -> list[str]:
    """The nodes once each, in the order given; refused before anything changes if one is
    not the experiment's, or the experiment cannot take node operations."""
    _usable(exp, operation)
    if not nodes:
        raise InputError(f"{operation}: name the nodes of {exp.name!r}")
    known = [n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes]
    if unknown := [n for n in nodes if n not in known]:
        raise NotFoundError(
            f"{operation}: experiment {exp.name!r} has no node "
            f"{', '.join(map(repr, dict.fromkeys(unknown)))}; its nodes are {', '.join(known)}"
        )
    return list(dict.fromkeys(nodes))


def _usable(exp: Experiment, operation: str) -> None:
    if exp.adopted:
        raise InputError(
            f"{operation}: experiment {exp.name!r} was adopted from a saved manifest, so ptc "
            "cannot act on its nodes: use the portal"
        )
    if exp.state != "ready":
        raise InputError(
            f"{operation}: experiment {exp.name!r} is {exp.state}, not ready: "
            f"`ptc status {exp.name}`"
        )


def _end(report: Reporter, started: float, nodes: list[str]) -> None:
    seconds = time.monotonic() - started
    report.end(f"{', '.join(nodes)} in {seconds:.1f}s", nodes=nodes, seconds=seconds)
