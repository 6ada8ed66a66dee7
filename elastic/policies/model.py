"""What a policy sees (a snapshot of one partition) and what it returns (a preemption vector)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic.errors import PtcError

# Busy nodes never score below this, so an idle node (0.0) is always released before a busy
# one even when the consumer sees nothing but the vector (the elastic manager does).
BUSY_FLOOR = 1e-12


@dataclass(frozen=True)
class JobInfo:
    """One running job. Times are in seconds; ``remaining``/``requested`` are None when unknown."""

    job_id: str
    nodes: tuple[str, ...]
    elapsed: float
    priority: float = 1.0
    queue: str = ""
    application: str = ""
    user: str = ""
    remaining: float | None = None
    requested: float | None = None

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise PtcError(f"job {self.job_id}: runs on no node")
        if self.elapsed < 0:
            raise PtcError(f"job {self.job_id}: elapsed time {self.elapsed} is negative")
        if not self.priority > 0:
            raise PtcError(f"job {self.job_id}: priority {self.priority} must be > 0")


@dataclass(frozen=True)
class Snapshot:
    """The state of a partition at ``time``; ``nodes`` fixes the node order used for tie-breaks."""

    time: float
    nodes: tuple[str, ...]
    jobs: tuple[JobInfo, ...] = ()
    _owner: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(set(self.nodes)) != len(self.nodes):
            raise PtcError(f"snapshot at t={self.time}: duplicate node names")
        known = set(self.nodes)
        owner: dict[str, int] = {}
        for index, job in enumerate(self.jobs):
            for node in job.nodes:
                if node not in known:
                    raise PtcError(f"job {job.job_id}: node {node!r} is not in the partition")
                if node in owner:
                    other = self.jobs[owner[node]].job_id
                    raise PtcError(f"node {node!r} runs two jobs: {other} and {job.job_id}")
                owner[node] = index
        object.__setattr__(self, "_owner", owner)

    def job_on(self, node: str) -> JobInfo | None:
        index = self._owner.get(node)
        return None if index is None else self.jobs[index]


@dataclass(frozen=True)
class PreemptionVector:
    """``values[node]`` in [0, 1], 1.0 most valued; insertion order is the snapshot's node order."""

    time: float
    values: Mapping[str, float]
    policy: str = ""

    def __post_init__(self) -> None:
        for node, value in self.values.items():
            if not 0.0 <= value <= 1.0:
                raise PtcError(f"preemption vector ({self.policy}): node {node!r} = {value}")
