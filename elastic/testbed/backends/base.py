"""What every testbed backend (local containers, CloudLab) provides to the experiment lifecycle.

A backend declares what its testbed can do (:class:`Capabilities`) and owns the machinery that
only its testbed has (a count of machines, provisioning limits, a service its nodes call), as
class-level hooks the core calls on any backend: the core asks capabilities, never a backend's
name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar, Protocol

from elastic.events import OnEvent
from elastic.profile.topology import Topology
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment


@dataclass(frozen=True)
class Capabilities:
    """What a testbed can do, as its backend declares it."""

    # Its nodes are machines on this host: counted against the host's size, provisioned under
    # its limits, known to its container engine by name.
    host_machines: bool = False
    # Its nodes call a service on this host to power themselves and their pool (the local
    # testbed's control service); a testbed with a portal of its own has none.
    control_service: bool = False
    # It makes the nodes itself and pins each node's host keys in the experiment's known_hosts
    # before the first SSH connection; with the others a key is recorded at first contact.
    pins_host_keys: bool = False
    # The disk images a user may choose between (the first is the default); none: the profile
    # decides.
    disk_images: tuple[str, ...] = ()
    # Nodes can leave the experiment for the testbed's free pool and join from it
    # (``ptc node release`` and ``allocate``), so another experiment can borrow them.
    moves_nodes: bool = False
    # A cluster on it powers its own nodes off (elastic partitions), so a deploy or a verify
    # wakes them first.
    sleeping_nodes: bool = False


class Backend(Protocol):
    capabilities: ClassVar[Capabilities]

    def preflight(self) -> None:
        """Check tools and credentials; raise PtcError before anything is created."""
        ...

    def claim_name(self, name: str) -> None:
        """Refuse an experiment name the testbed already uses outside this PTC_HOME."""
        ...

    def create(self, exp: Experiment, request: Topology) -> bytes:
        """Instantiate the request; return the manifest RSpec (CloudLab's form) as XML bytes.

        Must leave nothing behind when it raises (clean up partial resources)."""
        ...

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        """Add and remove the nodes of ``change``; return the new manifest RSpec.

        ``exp`` carries the new parameters. Must leave the experiment as it was when it raises
        before any running node was touched."""
        ...

    def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Put fresh nodes, with empty disks, in the place of ``nodes``: same names and
        addresses. Return the new manifest RSpec. The old nodes are gone even when it raises."""
        ...

    def delete(self, exp: Experiment) -> None:
        """Release every resource of the experiment; safe to call twice."""
        ...

    def power_off(self, exp: Experiment, nodes: list[str]) -> None:
        """Stop ``nodes`` (known to the manifest) with their disks kept; a stopped one is left
        alone. A TestbedError names the node and the step."""
        ...

    def power_on(self, exp: Experiment, nodes: list[str]) -> None:
        """Start ``nodes`` from their kept disks, wired and reachable as before, with the host
        keys pinned at creation; a running one is left alone. A TestbedError names the node
        and the step."""
        ...

    def release(self, exp: Experiment, nodes: list[str]) -> bytes:
        """Take ``nodes`` (known to the manifest, not all of them) out of the experiment and
        give their machines back to the testbed; tell the remaining nodes. Return the new
        manifest RSpec."""
        ...

    def allocate(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Make ``nodes`` of ``request`` (absent from the manifest) with fresh disks and join
        them to the experiment, whose other nodes are those of the manifest; tell them all.
        Return the new manifest RSpec. Leaves the experiment as it was when it raises."""
        ...

    def power_states(self, exp: Experiment) -> dict[str, str]:
        """Map node client_id -> "running", "stopped" or "missing" (or the testbed's word)."""
        ...

    def status(self, exp: Experiment) -> dict[str, str]:
        """Map node client_id -> a short state word ("ready", "stopped", "missing", ...)."""
        ...

    # -- the testbed's own machinery, called on the class by the core ------------------------
    # The defaults fit a testbed that keeps its own count, limits and services (CloudLab's
    # portal): a backend subclassing this protocol inherits them, and overrides what it owns.

    @staticmethod
    def reserved(experiment: str, nodes: Sequence[str]) -> AbstractContextManager[None]:
        """Hold what making ``nodes`` of ``experiment`` takes from the testbed for the block;
        refused (a PtcError naming what is short) before the block when too little is free."""
        return contextlib.nullcontext()

    @staticmethod
    def provisioned(
        experiment: str,
        action: str,
        nodes: list[str],
        on_event: OnEvent | None,
        run: Callable[[list[str]], None],
    ) -> None:
        """``run`` on ``nodes`` (powered on, reloaded or allocated by ``action``), part by part
        in the turns the testbed's provisioning limits give."""
        run(nodes)

    @staticmethod
    def prepare_services(exp: Experiment) -> None:
        """What the nodes will mount of the host's services, before the first node exists."""

    @staticmethod
    def start_services(exp: Experiment) -> None:
        """Start the host's services for a ready experiment (none where the testbed has none)."""

    @staticmethod
    def stop_services(exp: Experiment) -> None:
        """Stop them before the experiment goes; safe when none runs."""
