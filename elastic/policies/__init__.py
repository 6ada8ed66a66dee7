"""Preemption policies: a snapshot of a partition's running jobs in, a preemption vector out.

The same code serves the simulator (batch path) and the live Slurm elastic client (scalar path).
"""

from elastic.policies.batch import SnapshotBatch, build_batch
from elastic.policies.builtin import (
    POLICY_NAMES,
    FifoPolicy,
    LifoPolicy,
    PapPlusPolicy,
    PapPolicy,
    Policy,
    RandomPolicy,
    make_policy,
)
from elastic.policies.model import BUSY_FLOOR, JobInfo, PreemptionVector, Snapshot
from elastic.policies.priority import PriorityRule
from elastic.policies.selection import (
    DEFAULT_MAX_AGE_S,
    StalePreemptionVectorError,
    Waste,
    check_fresh,
    select_batch,
    select_nodes,
    wasted_batch,
    wasted_cycles,
)

__all__ = [
    "BUSY_FLOOR",
    "DEFAULT_MAX_AGE_S",
    "POLICY_NAMES",
    "FifoPolicy",
    "JobInfo",
    "LifoPolicy",
    "PapPlusPolicy",
    "PapPolicy",
    "Policy",
    "PreemptionVector",
    "PriorityRule",
    "RandomPolicy",
    "Snapshot",
    "SnapshotBatch",
    "StalePreemptionVectorError",
    "Waste",
    "build_batch",
    "check_fresh",
    "make_policy",
    "select_batch",
    "select_nodes",
    "wasted_batch",
    "wasted_cycles",
]
