"""The manager's state: one JSON document, validated by pydantic on every load and save."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from elastic.policies import JobInfo

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"

# A node's value in a preemption vector: the one statement of its range, for the API's requests
# and the manager's own calls alike.
NodeValue = Annotated[float, Field(ge=0.0, le=1.0)]


class JobRecord(BaseModel):
    """A running job: what the Slurm client reads from ``squeue``, sends with its preemption
    vector, and the manager keeps; the one shape from the queue to the store. ``info`` is the
    same job for the policies."""

    job_id: str = Field(min_length=1, max_length=64)
    nodes: tuple[str, ...] = Field(min_length=1, max_length=10000)
    elapsed: float = Field(ge=0, le=1e9, description="seconds the job had run at the PV's time")
    remaining: float | None = Field(
        default=None, ge=0, le=1e9, description="seconds left (time limit), if known"
    )
    priority: float = Field(default=1.0, gt=0, le=1e6)
    user: str = Field(default="", max_length=64)
    queue: str = Field(default="", max_length=64, description="the job's QOS")
    application: str = Field(default="", max_length=1000, description="the job's name")

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            nodes=self.nodes,
            elapsed=self.elapsed,
            priority=self.priority,
            queue=self.queue,
            application=self.application,
            user=self.user,
            remaining=self.remaining,
        )


@dataclass(frozen=True)
class Queue:
    """What a partition's scheduler showed with its preemption vector: each node's state there
    and the demand waiting (see ``PreemptionRecord``)."""

    node_states: dict[str, str] = field(default_factory=dict)
    pending_jobs: int = 0
    pending_nodes: int = 0


class JobReport(BaseModel):
    """What the Slurm client did to a job still running at a reclamation's deadline."""

    job_id: str = Field(min_length=1, max_length=64)
    elapsed: float | None = Field(default=None, ge=0, le=1e9)
    node_count: int | None = Field(default=None, ge=0, le=1_000_000)
    requeued: bool
    detail: str = Field(default="", max_length=1000)


ModelNodeName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=63)]
StepName = Annotated[str, Field(pattern=r"^[a-z][a-z_]{0,31}$")]
SchedulerState = Annotated[str, Field(min_length=1, max_length=64)]


class ResumeReport(BaseModel):
    """What one ResumeProgram call did, reported by the Slurm client when it ends: the nodes
    Slurm asked for, those that came up, those that failed (why), and the seconds of each
    step (manager, power_on, playbook, register, total). The manager's event log keeps it:
    the client's part of the overhead taxonomy of every resume."""

    nodes: list[ModelNodeName] = Field(min_length=1, max_length=10000)
    ready: list[ModelNodeName] = Field(default_factory=list, max_length=10000)
    failed: dict[ModelNodeName, Annotated[str, Field(max_length=300)]] = Field(
        default_factory=dict, max_length=10000
    )
    timings: dict[StepName, Annotated[float, Field(ge=0, le=1e7)]] = Field(
        default_factory=dict, max_length=16
    )
    # Failed nodes whose resume a power down called off (a reclamation took them back, or the
    # partition is protected): not the node's failure, so protected mode does not count them.
    called_off: list[ModelNodeName] = Field(default_factory=list, max_length=10000)


class PreemptionRecord(BaseModel):
    """A partition's latest preemption vector, as received."""

    time: float = Field(description="wall-clock time (epoch s) of the snapshot the PV describes")
    received: float = Field(description="when the manager received it")
    policy: str = ""
    values: dict[str, NodeValue] = Field(default_factory=dict)
    jobs: list[JobRecord] = Field(default_factory=list)
    # What the partition's scheduler showed with it, for people watching the pool: each held
    # node's state there (Slurm's long state: ``idle~`` powered down, ``mixed#`` powering up),
    # and the jobs waiting and the nodes they ask for.
    node_states: dict[str, SchedulerState] = Field(default_factory=dict)
    pending_jobs: int = Field(default=0, ge=0)
    pending_nodes: int = Field(default=0, ge=0)


class Node(BaseModel):
    name: str
    cpus: int = 0
    memory_mb: int = 0
    features: list[str] = Field(default_factory=list)
    owner: str | None = None
    since: float = 0.0


class Protection(BaseModel):
    """A partition's run of failed resumes, and whether it is in protected mode (``since``):
    see ``elastic.manager.protection``."""

    failures: int = 0  # nodes whose resume failed in a row, since the last one that came up
    last_failure: str = ""  # that node and why
    since: float | None = None  # when protected mode began; None: resumes go ahead
    reason: str = ""  # why it began
    ended: float | None = None  # when the last protected mode ended


class Repair(BaseModel):
    """One node's repairs (see ``elastic.manager.repairs``): the loop repairing it now, whose
    claim lapses at ``lease_until``, and its run of failed repairs, which backs the next one off
    until ``not_before``."""

    holder: str = ""  # the repair loop that claimed the node; "": nobody repairs it now
    lease_until: float = 0.0
    started: float | None = None
    cause: str = ""  # why the node is being (or was last) repaired
    failures: int = 0  # failed repairs in a row
    not_before: float = 0.0  # no repair starts before this (the backoff)
    last_error: str = ""
    repaired: int = 0  # repairs that brought the node back, in all


class Partition(BaseModel):
    name: str
    endpoint: str | None = None
    created: float = 0.0
    pv: PreemptionRecord | None = None
    # The partition's minimum: nodes it holds from the start and never gives up,
    # neither to a reclamation nor by DeleteNodes (Slurm never suspends them: SuspendExcNodes).
    minimum: list[str] = Field(default_factory=list)
    protection: Protection = Field(default_factory=Protection)
    repairs: dict[str, Repair] = Field(default_factory=dict)  # node -> its repairs


class Reclamation(BaseModel):
    id: str
    partition: str
    beneficiary: str | None = None  # the partition that gets the nodes; None: the pool
    requested_by: str
    count: int
    grace: float
    requested_at: float
    deadline: float
    policy: str
    pv_time: float
    values: dict[str, float]  # the vector the nodes were chosen from (restricted to the partition)
    chosen: list[str]
    jobs: list[JobRecord]  # jobs of the PV that ran on the chosen nodes
    released: dict[str, float] = Field(default_factory=dict)  # node -> time the client let go
    forced: list[str] = Field(default_factory=list)  # nodes taken at the deadline
    killed_reported: list[str] = Field(default_factory=list)  # jobs the client requeued/killed
    state: Literal["pending", "done"] = "pending"
    finished_at: float | None = None
    last_notified: float | None = None
    notifications: int = 0
    notify_error: str = ""
    wasted_cycles: float | None = None

    @property
    def outstanding(self) -> list[str]:
        return [n for n in self.chosen if n not in self.released and n not in self.forced]


class Event(BaseModel):
    seq: int
    time: float
    kind: str
    data: dict[str, Any] = Field(default_factory=dict)


class AppliedRequest(BaseModel):
    """A request that carried an ``Idempotency-Key`` and changed the state: recorded in the same
    write as its change, so a retry (after a failover ate the answer) gets the same result
    instead of applying it twice."""

    op: str
    time: float
    result: Any = None


class State(BaseModel):
    schema_version: int = 1
    nodes: dict[str, Node] = Field(default_factory=dict)
    partitions: dict[str, Partition] = Field(default_factory=dict)
    reclamations: dict[str, Reclamation] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    next_reclamation: int = 1
    requests: dict[str, AppliedRequest] = Field(default_factory=dict)

    def append(self, time: float, kind: str, **data: Any) -> Event:
        event = Event(seq=len(self.events) + 1, time=time, kind=kind, data=data)
        self.events.append(event)
        return event
