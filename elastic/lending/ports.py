"""What lending needs from the manager and from the testbed, as two small interfaces: the live
ones are in :mod:`elastic.lending.live`; unit tests pass fakes of them."""

from __future__ import annotations

from typing import Protocol

REFERENCE = "ref"  # the reference client's partition: the one that holds lent machines


class Pool(Protocol):
    """The manager's pool of one experiment."""

    def owners(self) -> dict[str, str | None]:
        """Every pool node -> the partition holding it (None: free)."""
        ...

    def acquire(self, count: int, grace: float | None, wait: float) -> list[str]:
        """The reference partition takes ``count`` nodes (reclaiming with ``grace``, waiting up
        to ``wait`` s for them); the nodes it newly holds."""
        ...

    def take(self, node: str) -> None:
        """The reference partition holds ``node``, from the pool or from the partition holding
        it."""
        ...

    def give_back(self, node: str) -> None:
        """The reference partition releases ``node`` to the pool."""
        ...


class Testbed(Protocol):
    """The testbed's experiments, by name."""

    def exists(self, exp: str) -> bool: ...

    def nodes(self, exp: str) -> list[str]:
        """The experiment's nodes (client_ids of its manifest)."""
        ...

    def parked(self, exp: str) -> list[str]:
        """The nodes its elastic partition parked: released, their machines in the testbed's
        free pool, still the experiment's to take back."""
        ...

    def head(self, exp: str) -> str: ...

    def moves_nodes(self, exp: str, other: str) -> str | None:
        """Why a machine cannot move from ``exp`` into ``other``, or None when it can."""
        ...

    def release(self, exp: str, node: str) -> None: ...

    def allocate(self, exp: str, node: str, like: str | None) -> None: ...

    def configure(self, exp: str, node: str) -> None:
        """Deploy ``node`` with the experiment's head, as the experiment was deployed."""
        ...
