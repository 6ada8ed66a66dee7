"""From ``squeue`` to a preemption vector: parse the running jobs, build a policies Snapshot.

Each job becomes an ``elastic.manager.model.JobRecord``, the record the manager receives with
the vector and keeps (``JobRecord.info`` is the same job for the policies): its nodes (expanded with
``scontrol show hostnames``), elapsed time, remaining time (the time limit's ``%L``; None when
unlimited), user, ``queue`` = the job's QOS and ``application`` = its name, so PAP+ priority
rules can say ``queue=high:10`` or ``user=alice:5``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from elastic.errors import PtcError
from elastic.manager.model import JobRecord
from elastic.policies import Policy, PreemptionVector, Snapshot
from elastic.slurm.commands import SQUEUE_FIELDS, Slurm
from elastic.slurm_time import parse_duration


def parse_squeue(output: str, slurm: Slurm) -> list[JobRecord]:
    jobs = []
    for number, line in enumerate(output.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", len(SQUEUE_FIELDS) - 1)
        if len(fields) != len(SQUEUE_FIELDS):
            raise PtcError(f"squeue line {number}: {len(fields)} fields, expected: {line!r}")
        row = dict(zip(SQUEUE_FIELDS, fields, strict=True))
        elapsed = parse_duration(row["elapsed"])
        nodes = row["nodes"].strip()
        if not nodes or nodes == "(null)":
            continue  # a job between allocation and start holds no node yet
        expanded = slurm.expand(nodes) if any(c in nodes for c in "[,") else [nodes]
        jobs.append(
            JobRecord(
                job_id=row["job_id"].strip(),
                nodes=tuple(expanded),
                elapsed=elapsed or 0.0,
                remaining=parse_duration(row["left"]),
                user=row["user"].strip(),
                queue=row["qos"].strip(),
                application=row["name"].strip(),
            )
        )
    return jobs


def snapshot(jobs: Iterable[JobRecord], nodes: Iterable[str], time: float) -> Snapshot:
    """The partition at ``time``: ``nodes`` in name order, then any other node a job uses."""
    order = sorted(set(nodes))
    seen = set(order)  # a list's membership test made the snapshot quadratic in the pool
    infos = []
    for job in jobs:
        for node in job.nodes:
            if node not in seen:
                seen.add(node)
                order.append(node)
        infos.append(job.info())
    return Snapshot(time, tuple(order), tuple(infos))


@dataclass(frozen=True)
class Vector:
    pv: PreemptionVector
    snapshot: Snapshot
    jobs: tuple[JobRecord, ...]  # the snapshot's jobs as the manager keeps them


def compute_pv(
    slurm: Slurm, policy: Policy, partition: str | None, nodes: Iterable[str], time: float
) -> Vector:
    """The partition's PV from the live queue with ``policy``, over ``nodes`` (the nodes the
    manager says the partition holds)."""
    held = set(nodes)
    jobs = [j for j in parse_squeue(slurm.running_jobs(partition), slurm) if held & set(j.nodes)]
    snap = snapshot(jobs, held, time)
    full = policy.evaluate(snap)
    pv = PreemptionVector(
        full.time, {n: v for n, v in full.values.items() if n in held}, full.policy
    )
    return Vector(pv, snap, tuple(jobs))
