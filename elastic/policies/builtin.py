"""The five policies of the Part-Time Cloud paper (§3.3), each with a scalar and a batch path.

Every policy maps a busy node to a score in [BUSY_FLOOR, 1] and an idle node to 0.0:

- RANDOM: a uniform draw per node from the policy's own seeded generator (N draws per snapshot,
  idle nodes included, so the stream does not depend on occupancy).
- LIFO:   elapsed / max(elapsed)                   -- long-running jobs are kept.
- FIFO:   1 - elapsed / max(elapsed)               -- long-running jobs are released.
- PAP:    elapsed*node_count / max(...)           -- equals LIFO on single-node workloads.
- PAP+:   elapsed*node_count*priority / max(...)  -- priority from a PriorityRule, if given,
          else the job's own ``priority`` (the simulator applies the rule to the whole trace).

The maximum is over busy nodes of the same snapshot; if it is 0 every busy node scores as if
its ratio were 0. The scalar ``evaluate`` is the reference; ``evaluate_batch`` is the same
arithmetic in the same order on (S, N) arrays, so both give bit-identical values.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError, PtcError
from elastic.policies.batch import SnapshotBatch
from elastic.policies.model import BUSY_FLOOR, JobInfo, PreemptionVector, Snapshot
from elastic.policies.priority import PriorityRule


@runtime_checkable
class Policy(Protocol):
    name: str

    def evaluate(self, snapshot: Snapshot) -> PreemptionVector: ...

    def evaluate_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]: ...


class _ScaledPolicy:
    """Policies that scale a per-job raw score by the snapshot's maximum."""

    name = ""
    descending = False  # True: value = 1 - scaled (FIFO)

    def raw(self, job: JobInfo) -> float:
        raise NotImplementedError

    def raw_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        raise NotImplementedError

    def evaluate(self, snapshot: Snapshot) -> PreemptionVector:
        raws = {job.job_id: self.raw(job) for job in snapshot.jobs}
        top = max(raws.values(), default=0.0)
        values: dict[str, float] = {}
        for node in snapshot.nodes:
            job = snapshot.job_on(node)
            if job is None:
                values[node] = 0.0
                continue
            scaled = raws[job.job_id] / top if top > 0 else 0.0
            if self.descending:
                scaled = 1.0 - scaled
            values[node] = max(scaled, BUSY_FLOOR)
        return PreemptionVector(snapshot.time, values, self.name)

    def evaluate_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        raw = self.raw_batch(batch)  # idle cells are 0 and never exceed a busy maximum
        top = raw.max(axis=1, keepdims=True) if raw.size else np.zeros((raw.shape[0], 1))
        scaled = np.divide(raw, top, out=np.zeros_like(raw), where=top > 0)
        if self.descending:
            scaled = 1.0 - scaled
        return np.where(batch.busy, np.maximum(scaled, BUSY_FLOOR), 0.0)


class LifoPolicy(_ScaledPolicy):
    name = "LIFO"

    def raw(self, job: JobInfo) -> float:
        return job.elapsed

    def raw_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        return batch.elapsed


class FifoPolicy(LifoPolicy):
    name = "FIFO"
    descending = True


class PapPolicy(_ScaledPolicy):
    name = "PAP"

    def raw(self, job: JobInfo) -> float:
        return job.elapsed * float(job.node_count)

    def raw_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        return batch.elapsed * batch.node_count


class PapPlusPolicy(_ScaledPolicy):
    name = "PAP+"

    def __init__(self, rule: PriorityRule | None = None) -> None:
        self.rule = rule

    def priority(self, job: JobInfo) -> float:
        if self.rule is None:
            return job.priority
        attributes = {"queue": job.queue, "application": job.application, "user": job.user}
        return self.rule.priority({**attributes, "job_id": job.job_id})

    def raw(self, job: JobInfo) -> float:
        return job.elapsed * float(job.node_count) * self.priority(job)

    def raw_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        if self.rule is not None:
            # A batch holds numbers only; silently using its priorities would ignore the rule.
            raise PtcError("PAP+ with a priority rule: apply the rule to the trace's priorities")
        return batch.elapsed * batch.node_count * batch.priority


class RandomPolicy:
    name = "RANDOM"

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def evaluate(self, snapshot: Snapshot) -> PreemptionVector:
        draws = self._rng.random(len(snapshot.nodes))
        values = {
            node: (max(float(draws[i]), BUSY_FLOOR) if snapshot.job_on(node) else 0.0)
            for i, node in enumerate(snapshot.nodes)
        }
        return PreemptionVector(snapshot.time, values, self.name)

    def evaluate_batch(self, batch: SnapshotBatch) -> NDArray[np.float64]:
        # One (S, N) draw consumes the stream exactly like S successive draws of N.
        draws = self._rng.random(batch.shape)
        return np.where(batch.busy, np.maximum(draws, BUSY_FLOOR), 0.0)


POLICY_NAMES = ("RANDOM", "FIFO", "LIFO", "PAP", "PAP+")
_CLASSES: dict[str, type[_ScaledPolicy]] = {
    "FIFO": FifoPolicy,
    "LIFO": LifoPolicy,
    "PAP": PapPolicy,
}


def make_policy(name: str, seed: int = 0, rule: PriorityRule | None = None) -> Policy:
    """A fresh policy by (case-insensitive) name; ``seed`` only matters for RANDOM and ``rule``
    only for PAP+."""
    key = name.strip().upper()
    if key == "RANDOM":
        return RandomPolicy(seed)
    if key == "PAP+":
        return PapPlusPolicy(rule)
    if key in _CLASSES:
        return _CLASSES[key]()
    raise InputError(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")
