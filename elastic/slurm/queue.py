"""From ``squeue`` to a preemption vector: parse the running jobs, build a policies Snapshot.

Each job becomes an ``elastic.policies.JobInfo``: its nodes (expanded with
``scontrol show hostnames``), elapsed time, remaining time (the time limit's ``%L``; None when
unlimited), user, ``queue`` = the job's QOS and ``application`` = its name, so PAP+ priority
rules can say ``queue=high:10`` or ``user=alice:5``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from elastic.errors import PtcError
from elastic.policies import JobInfo, Policy, PreemptionVector, Snapshot
from elastic.slurm.commands import SQUEUE_FIELDS, Slurm

_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(?:(\d+):)?(\d+)$")


def parse_duration(text: str) -> float | None:
    """Slurm's ``[days-][hours:]minutes:seconds`` in seconds; None for UNLIMITED and the like."""
    value = text.strip()
    if value.upper() in {"UNLIMITED", "NOT_SET", "INVALID", "N/A", ""}:
        return None
    m = _TIME.match(value)
    if not m:
        raise PtcError(f"squeue: time {text!r} is not [days-][hours:]minutes:seconds")
    days, a, b, secs = m.groups()
    parts = [int(p) for p in (a, b) if p is not None]
    hours, minutes = (parts[0], parts[1]) if len(parts) == 2 else (0, parts[0] if parts else 0)
    if "-" in value and len(parts) == 1:  # "1-02:03" is days-hours:minutes
        hours, minutes, secs = parts[0], int(secs), "0"
    return float(int(days or 0) * 86400 + hours * 3600 + minutes * 60 + int(secs))


@dataclass(frozen=True)
class RunningJob:
    job_id: str
    partition: str
    user: str
    qos: str
    state: str
    elapsed: float
    remaining: float | None
    nodes: tuple[str, ...]
    name: str

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            nodes=self.nodes,
            elapsed=self.elapsed,
            queue=self.qos,
            application=self.name,
            user=self.user,
            remaining=self.remaining,
        )


def parse_squeue(output: str, slurm: Slurm) -> list[RunningJob]:
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
            RunningJob(
                job_id=row["job_id"].strip(),
                partition=row["partition"].strip(),
                user=row["user"].strip(),
                qos=row["qos"].strip(),
                state=row["state"].strip(),
                elapsed=elapsed or 0.0,
                remaining=parse_duration(row["left"]),
                nodes=tuple(expanded),
                name=row["name"].strip(),
            )
        )
    return jobs


def snapshot(jobs: Iterable[RunningJob], nodes: Iterable[str], time: float) -> Snapshot:
    """The partition at ``time``: ``nodes`` in name order, then any other node a job uses."""
    order = sorted(set(nodes))
    infos = []
    for job in jobs:
        order += [n for n in job.nodes if n not in order]
        infos.append(job.info())
    return Snapshot(time, tuple(order), tuple(infos))


@dataclass(frozen=True)
class Vector:
    pv: PreemptionVector
    snapshot: Snapshot


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
    return Vector(pv, snap)
