"""Turning a preemption vector into nodes to release, and what that costs (§4.1).

Tie-break: nodes are ordered by (value, position in the vector); the vector's order is the
snapshot's node order. Idle nodes score 0.0 and busy nodes at least BUSY_FLOOR, so idle nodes
always go first. The batch path (a stable argsort per row) applies the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.errors import PtcError
from elastic.policies.batch import SnapshotBatch
from elastic.policies.model import PreemptionVector, Snapshot

# The elastic manager re-notifies every minute (§3); a vector two rounds old is refused.
DEFAULT_MAX_AGE_S = 120.0


class StalePreemptionVectorError(PtcError):
    """The vector describes a past state too far from now to act on (§4.5)."""


def check_fresh(pv: PreemptionVector, now: float, max_age: float = DEFAULT_MAX_AGE_S) -> None:
    age = now - pv.time
    if age > max_age:
        raise StalePreemptionVectorError(
            f"preemption vector ({pv.policy or 'unknown policy'}) is {age:.1f} s old "
            f"(taken at t={pv.time}, now t={now}); the limit is {max_age:.1f} s"
        )


def select_nodes(
    pv: PreemptionVector,
    count: int,
    *,
    now: float | None = None,
    max_age: float = DEFAULT_MAX_AGE_S,
) -> list[str]:
    """The ``count`` lowest-valued nodes; refuses a vector older than ``max_age`` if ``now``."""
    if now is not None:
        check_fresh(pv, now, max_age)
    if not 0 <= count <= len(pv.values):
        raise PtcError(f"cannot preempt {count} of {len(pv.values)} nodes")
    order = sorted(enumerate(pv.values.items()), key=lambda item: (item[1][1], item[0]))
    return [node for _, (node, _) in order[:count]]


def select_batch(values: NDArray[np.float64], count: int) -> NDArray[np.int64]:
    """Column indices of the ``count`` lowest values per row, same tie-break as select_nodes."""
    if not 0 <= count <= values.shape[1]:
        raise PtcError(f"cannot preempt {count} of {values.shape[1]} nodes")
    return np.argsort(values, axis=1, kind="stable")[:, :count].astype(np.int64)


@dataclass(frozen=True)
class Waste:
    total: float
    per_job: dict[str, float]


def wasted_cycles(snapshot: Snapshot, preempted: Iterable[str], grace_period: float) -> Waste:
    """Node-seconds lost when ``preempted`` nodes are reclaimed after ``grace_period`` seconds.

    WC_j = 0 if remaining < GP, else (elapsed + GP) * node_count; a parallel job counts once
    however many of its nodes are taken, and loses all of its nodes' work.
    """
    if grace_period < 0:
        raise PtcError(f"grace period {grace_period} s is negative")
    per_job: dict[str, float] = {}
    for node in preempted:
        if node not in snapshot.nodes:
            raise PtcError(f"preempted node {node!r} is not in the partition")
        job = snapshot.job_on(node)
        if job is None or job.job_id in per_job:
            continue
        if job.remaining is None:
            raise PtcError(f"job {job.job_id}: remaining time unknown, cannot count waste")
        finishes = job.remaining < grace_period
        per_job[job.job_id] = 0.0 if finishes else (job.elapsed + grace_period) * job.node_count
    return Waste(sum(per_job.values()), per_job)


def wasted_batch(
    batch: SnapshotBatch,
    selected: NDArray[np.int64],
    grace_periods: Iterable[float],
    *,
    high_priority_above: float = 1.0,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Batch twin of ``wasted_cycles``: (total, high-priority part), each (len(GPs), S).

    Jobs with priority > ``high_priority_above`` make up the high-priority part.
    """
    job = np.take_along_axis(batch.job, selected, axis=1)
    order = np.argsort(job, axis=1, kind="stable")
    job = np.take_along_axis(job, order, axis=1)
    cols = np.take_along_axis(selected, order, axis=1)
    first = np.ones(job.shape, dtype=bool)
    first[:, 1:] = job[:, 1:] != job[:, :-1]  # a parallel job is lost once
    counted = first & (job >= 0)
    elapsed = np.take_along_axis(batch.elapsed, cols, axis=1)
    remaining = np.take_along_axis(batch.remaining, cols, axis=1)
    node_count = np.take_along_axis(batch.node_count, cols, axis=1)
    high = np.take_along_axis(batch.priority, cols, axis=1) > high_priority_above
    gps = [float(gp) for gp in grace_periods]
    total = np.empty((len(gps), job.shape[0]))
    high_part = np.empty_like(total)
    for g, gp in enumerate(gps):
        if gp < 0:
            raise PtcError(f"grace period {gp} s is negative")
        lost = np.where(counted & (remaining >= gp), (elapsed + gp) * node_count, 0.0)
        total[g] = lost.sum(axis=1)
        high_part[g] = np.where(high, lost, 0.0).sum(axis=1)
    return total, high_part
