"""What every testbed backend (local containers, CloudLab) provides to the experiment lifecycle."""

from __future__ import annotations

from typing import Protocol

from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment
from elastic.testbed.topology import Topology


class Backend(Protocol):
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
