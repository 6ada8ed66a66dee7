"""The elastic manager's event log, folded: who held each pool node when, and which jobs each
reclamation killed.

The log (``GET /v1/events``, :mod:`elastic.manager.core` and :mod:`elastic.manager.reclamation`)
says each change of a node's holder:

- ``nodes-added`` (partition, nodes): the partition holds the nodes from then on; a reclamation
  for a beneficiary hands a node over with one of these too (``reclamation`` set);
- ``nodes-deleted`` (partition, nodes): the partition gives the nodes back. A node a
  reclamation handed to its beneficiary already has a new holder, logged just before, and keeps
  it;
- ``reclamation-finished``: its ``forced`` nodes, taken at the deadline, leave the partition
  (to the pool, or to the beneficiary, logged as ``nodes-added``);
- ``node-removed``: the node leaves the pool.

Kills come from ``jobs-requeued`` (what the Slurm client did at a reclamation's deadline: each
job requeued, or cancelled when Slurm would not requeue it) and from ``reclamation-finished``'s
``jobs_killed`` (jobs on nodes taken at the deadline that the client did not report).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elastic.errors import InputError


@dataclass(frozen=True)
class Hold:
    """A pool node held by one partition from ``start`` to ``end`` (None: it still is)."""

    node: str
    partition: str
    start: float
    end: float | None


@dataclass(frozen=True)
class Kill:
    """A job a reclamation killed: requeued (or cancelled) between ``started`` (the
    reclamation's start) and ``at`` (when the manager heard of it). A kill the Slurm client
    reported carries the run's ``elapsed`` seconds and ``node_count`` as Slurm gave them
    (``squeue``) at the requeue; ``nodes`` are the job's nodes in the reclamation's vector."""

    reclamation: str
    job_id: str
    started: float
    at: float
    requeued: bool
    elapsed: float | None = None
    node_count: int | None = None
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PoolHistory:
    holds: tuple[Hold, ...]
    kills: tuple[Kill, ...]


def fold(events: Iterable[Mapping[str, Any]]) -> PoolHistory:
    """Holds and kills from the events, in the log's order (by ``seq``)."""
    ordered = sorted(events, key=lambda e: int(e.get("seq", 0)))
    holder: dict[str, tuple[str, float]] = {}  # node -> (partition, since)
    holds: list[Hold] = []
    kills: list[Kill] = []
    started: dict[str, float] = {}
    vector_nodes: dict[tuple[str, str], tuple[str, ...]] = {}  # (reclamation, job) -> nodes
    reported: set[tuple[str, str]] = set()

    def leave(node: str, partition: str | None, t: float) -> None:
        """``node`` leaves ``partition`` (any holder when None)."""
        held = holder.get(node)
        if held is None or (partition is not None and held[0] != partition):
            return
        holds.append(Hold(node, held[0], held[1], t))
        del holder[node]

    for event in ordered:
        try:
            kind, t, data = str(event["kind"]), float(event["time"]), event.get("data") or {}
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"manager event {event.get('seq', '?')}: malformed ({err})") from err
        if kind == "nodes-added":
            for node in data.get("nodes") or []:
                leave(node, None, t)
                holder[node] = (str(data["partition"]), t)
        elif kind == "nodes-deleted":
            for node in data.get("nodes") or []:
                leave(node, str(data["partition"]), t)
        elif kind == "node-removed":
            leave(str(data["node"]), None, t)
        elif kind == "reclamation-started":
            rec = str(data["reclamation"])
            started[rec] = t
            for job in data.get("jobs") or []:
                vector_nodes[rec, str(job["job_id"])] = tuple(job.get("nodes") or ())
        elif kind == "jobs-requeued":
            rec = str(data["reclamation"])
            for job in data.get("jobs") or []:
                job_id = str(job["job_id"])
                reported.add((rec, job_id))
                elapsed, count = job.get("elapsed"), job.get("node_count")
                kills.append(
                    Kill(
                        rec,
                        job_id,
                        started.get(rec, t),
                        t,
                        bool(job["requeued"]),
                        None if elapsed is None else float(elapsed),
                        None if count is None else int(count),
                        vector_nodes.get((rec, job_id), ()),
                    )
                )
        elif kind == "reclamation-finished":
            rec = str(data["reclamation"])
            for node in data.get("forced") or []:
                leave(node, str(data["partition"]), t)
            for job in data.get("jobs_killed") or []:
                job_id = str(job["job_id"])
                if (rec, job_id) not in reported:
                    nodes = tuple(job.get("nodes") or vector_nodes.get((rec, job_id), ()))
                    kills.append(Kill(rec, job_id, started.get(rec, t), t, True, nodes=nodes))
    holds += [Hold(node, part, since, None) for node, (part, since) in sorted(holder.items())]
    holds.sort(key=lambda h: (h.start, h.node))
    return PoolHistory(tuple(holds), tuple(kills))
