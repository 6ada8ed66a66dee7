"""Reclamations on the manager's state: starting one, a node's release, the end, what was wasted.

Functions of the state alone (no store, no clock, no transport): ``elastic.manager.core.Manager``
calls them inside its compare-and-swap writes and drives the deadlines and notifications.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from elastic.manager.errors import Conflict, FieldError
from elastic.manager.model import JobRecord, Reclamation, State
from elastic.policies import (
    PreemptionVector,
    Snapshot,
    StalePreemptionVectorError,
    check_fresh,
    select_nodes,
    wasted_cycles,
)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pending_nodes(state: State) -> set[str]:
    return {n for r in state.reclamations.values() if r.state == "pending" for n in r.outstanding}


def start(
    state: State,
    requested_by: str,
    partition: str,
    count: int,
    grace: float,
    now: float,
    *,
    max_pv_age: float,
    beneficiary: str | None = None,
    eligible: set[str] | None = None,
) -> Reclamation:
    """Start taking ``count`` nodes of ``partition`` (those of ``eligible``, outside its minimum
    and other reclamations), chosen by its preemption vector; the deadline is ``now + grace``."""
    part = state.partitions[partition]
    busy = pending_nodes(state)
    owned = [n for n, node in state.nodes.items() if node.owner == partition]
    # A reclamation takes other nodes than the partition's minimum, never those.
    kept = set(part.minimum)
    candidates = {
        n for n in owned if n not in busy and n not in kept and (eligible is None or n in eligible)
    }
    if count < 1:
        raise FieldError("count", f"must be at least 1, got {count}")
    if count > len(candidates):
        raise FieldError(
            "count",
            f"{count} is more than the {len(candidates)} nodes partition {partition} holds "
            "outside other reclamations"
            + (f" and its minimum ({', '.join(sorted(kept))})" if kept else ""),
        )
    if part.pv is None:
        raise Conflict(f"partition {partition} has reported no preemption vector", "pv")
    pv = part.pv
    # The vector's own order first (its tie-break), then nodes it does not cover at 1.0:
    # they joined after it was taken, so nothing says they are cheap to take.
    values = {n: v for n, v in pv.values.items() if n in candidates}
    values.update({n: 1.0 for n in sorted(candidates) if n not in values})
    vector = PreemptionVector(pv.time, values, pv.policy)
    try:
        check_fresh(vector, now, max_pv_age)
    except StalePreemptionVectorError as err:
        raise Conflict(f"partition {partition}: stale vector refused: {err}", "pv") from err
    chosen = select_nodes(vector, count)
    return _begin(
        state,
        now,
        {
            "pv": {
                "time": pv.time,
                "policy": pv.policy,
                "values": dict(values),
                "jobs": [job.model_dump(mode="json") for job in pv.jobs],
            }
        },
        partition=partition,
        beneficiary=beneficiary,
        requested_by=requested_by,
        count=count,
        grace=grace,
        policy=pv.policy,
        pv_time=pv.time,
        values=values,
        chosen=chosen,
        jobs=[job for job in pv.jobs if set(job.nodes) & set(chosen)],
    )


def _begin(state: State, now: float, shown: dict[str, Any], **fields: Any) -> Reclamation:
    """Record a new reclamation of ``fields`` (its id the next one, its deadline ``now`` plus
    its grace) and its "reclamation-started" event, which also carries ``shown``."""
    rec = Reclamation(
        id=f"r{state.next_reclamation}",
        requested_at=now,
        deadline=now + fields["grace"],
        **fields,
    )
    state.next_reclamation += 1
    state.reclamations[rec.id] = rec
    state.append(
        now,
        "reclamation-started",
        reclamation=rec.id,
        partition=rec.partition,
        beneficiary=rec.beneficiary,
        requested_by=rec.requested_by,
        policy=rec.policy,
        grace=rec.grace,
        deadline=rec.deadline,
        chosen=rec.chosen,
        jobs=[job.model_dump(mode="json") for job in rec.jobs],
        predicted_wasted_cycles=predicted_waste(rec),
        **shown,
    )
    return rec


def notice(
    state: State,
    requested_by: str,
    partition: str,
    nodes: list[str],
    deadline: float,
    now: float,
    *,
    source: str,
) -> Reclamation | None:
    """A provider's notice that it ends ``nodes`` of ``partition`` at ``deadline`` (a spot
    interruption): a reclamation of those very nodes, its grace what is left of the notice.
    Nodes another reclamation is already taking are left to it; None when that is all of them.
    The partition's last vector, when it has one, describes the jobs there; no policy chooses."""
    wrong = sorted(n for n in nodes if n not in state.nodes or state.nodes[n].owner != partition)
    if wrong:
        raise FieldError("nodes", f"partition {partition} does not hold {', '.join(wrong)}")
    busy = pending_nodes(state)
    chosen = sorted(n for n in set(nodes) if n not in busy)
    if not chosen:
        return None
    pv = state.partitions[partition].pv
    grace = max(deadline - now, 0.0)
    jobs = [job for job in pv.jobs if set(job.nodes) & set(chosen)] if pv is not None else []
    return _begin(
        state,
        now,
        {"notice": source},
        partition=partition,
        requested_by=f"{requested_by}: {source}",
        count=len(chosen),
        grace=grace,
        policy=pv.policy if pv is not None else "none",
        pv_time=pv.time if pv is not None else now,
        values={n: pv.values.get(n, 1.0) if pv is not None else 1.0 for n in chosen},
        chosen=chosen,
        jobs=jobs,
    )


def release(state: State, name: str, now: float, *, forced: bool) -> None:
    """``name`` leaves its partition: to a pending reclamation's beneficiary (or the pool),
    finishing the reclamation when it was the last node outstanding."""
    node = state.nodes[name]
    for rec in state.reclamations.values():
        if rec.state != "pending" or name not in rec.outstanding:
            continue
        if forced:
            rec.forced.append(name)
        else:
            rec.released[name] = now
        heir = rec.beneficiary if rec.beneficiary in state.partitions else None
        node.owner, node.since = heir, now
        if heir is not None:
            state.append(now, "nodes-added", partition=heir, nodes=[name], reclamation=rec.id)
        if not rec.outstanding:
            finish(state, rec, now)
        return
    node.owner, node.since = None, now


def finish(state: State, rec: Reclamation, now: float) -> None:
    waste, killed = observed_waste(rec)
    rec.state, rec.finished_at, rec.wasted_cycles = "done", now, waste
    state.append(
        now,
        "reclamation-finished",
        reclamation=rec.id,
        partition=rec.partition,
        policy=rec.policy,
        grace=rec.grace,
        chosen=rec.chosen,
        released={n: t - rec.requested_at for n, t in rec.released.items()},
        forced=rec.forced,
        jobs_killed=killed,
        wasted_cycles=waste,
        predicted_wasted_cycles=predicted_waste(rec),
    )


def payload(state: State, rec: Reclamation) -> dict[str, Any]:
    """NotifyDeletePending's body for ``rec``."""
    return {
        "reclamation": rec.id,
        "partition": rec.partition,
        "nodes": rec.outstanding,
        "grace": rec.grace,
        "deadline": rec.deadline,
        "deadline_iso": iso(rec.deadline),
        "reason": f"ptc reclamation {rec.id} deadline {iso(rec.deadline)}",
        "beneficiary": rec.beneficiary,
        "manager_values": {
            n: 0.0 if node.owner is None else 1.0
            for n, node in sorted(state.nodes.items())
            if node.owner != rec.partition
        },
    }


def _snapshot(rec: Reclamation, remaining: Callable[[JobRecord], float]) -> Snapshot:
    """The partition as the reclamation saw it; elapsed times brought forward from the PV's
    time to the reclamation's, as the simulator's snapshot is taken at the reclamation."""
    shift = max(rec.requested_at - rec.pv_time, 0.0)
    nodes = list(rec.values)
    for job in rec.jobs:
        nodes += [n for n in job.nodes if n not in nodes]
    jobs = tuple(
        replace(job.info(), elapsed=job.elapsed + shift, remaining=remaining(job))
        for job in rec.jobs
    )
    return Snapshot(rec.requested_at, tuple(nodes), jobs)


def observed_waste(rec: Reclamation) -> tuple[float, list[dict[str, Any]]]:
    """Wasted cycles with the simulator's formula (elastic.policies.wasted_cycles) applied to
    what happened: a job on a node taken at the deadline, or one the client reports it
    requeued or killed, did not finish within the grace period (remaining >= GP); every other
    job did (remaining < GP, no waste)."""
    forced = set(rec.forced)
    reported = set(rec.killed_reported)

    def remaining(job: JobRecord) -> float:
        return math.inf if forced & set(job.nodes) or job.job_id in reported else -1.0

    snap = _snapshot(rec, remaining)
    waste = wasted_cycles(snap, [n for n in rec.chosen if n in snap.nodes], rec.grace)
    killed = []
    for job in snap.jobs:
        if job.job_id in waste.per_job and waste.per_job[job.job_id] > 0:
            killed.append(
                {
                    "job_id": job.job_id,
                    "elapsed": job.elapsed,
                    "node_count": job.node_count,
                    "nodes": list(job.nodes),
                    "wasted_cycles": waste.per_job[job.job_id],
                }
            )
    return waste.total, killed


def predicted_waste(rec: Reclamation) -> float | None:
    """The simulator's prediction from the PV's remaining times (Slurm time limits, an upper
    bound); None when a job's remaining time is unknown."""
    if any(job.remaining is None for job in rec.jobs):
        return None
    shift = max(rec.requested_at - rec.pv_time, 0.0)
    snap = _snapshot(rec, lambda job: max((job.remaining or 0.0) - shift, 0.0))
    return wasted_cycles(snap, [n for n in rec.chosen if n in snap.nodes], rec.grace).total
