"""A stand-in for Slurm's commands (the real ones run in the integration tests): it keeps node
states and jobs (running, or pending once a power down requeued them), answers
squeue/sinfo/scontrol like Slurm 22.05, and records argv."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from elastic.slurm.commands import SlurmCommandError


def expand(hostlist: str) -> list[str]:
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hostlist):
        part = part.strip(",")
        m = re.fullmatch(r"(.*)\[(.*)\]", part)
        if not m:
            out.append(part)
            continue
        prefix, ranges = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i}")
    return out


@dataclass
class Job:
    job_id: str
    nodes: list[str]
    elapsed: str = "1:40"
    left: str = "10:00"
    qos: str = "normal"
    user: str = "alice"
    name: str = "sleep"
    partition: str = "elastic"
    requeueable: bool = True
    resized: bool = False  # Slurm resized it while it ran (a ResizeTime in its record)
    state: str = "RUNNING"  # RUNNING or CONFIGURING hold ``nodes``; PENDING waits for any
    eligible: float | None = None  # its begin time (EligibleTime), by the fake's clock
    features: str = "(null)"  # its constraint (--constraint), as squeue's %f prints it


def slurm_time(seconds: float) -> str:
    """A time as scontrol prints it: local time, to the second."""
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass
class FakeSlurm:
    jobs: list[Job] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # requeued and held, not released yet
    pending: list[int] = field(default_factory=list)  # node counts of the jobs waiting
    begin: dict[str, str] = field(default_factory=dict)  # job -> StartTime it was given
    register_after: int = 0  # sinfo polls before a resumed node shows registered
    known: tuple[str, ...] = ("node-0", "node-1", "node-2", "node-3")  # Slurm's nodes
    slurmd_started: dict[str, str] = field(default_factory=dict)  # node -> ISO time
    reservations: dict[str, list[str]] = field(default_factory=dict)  # name -> nodes
    dead: set[str] = field(default_factory=set)  # not responding, as sinfo --dead shows
    # partition -> [State, its hostlist]
    partitions: dict[str, list[str]] = field(
        default_factory=lambda: {"main": ["UP", "node-[0-3]"], "debug": ["UP", "head"]}
    )
    clock: Callable[[], float] = time.time  # the controller's time (begin times)
    # A job on a node powered down is requeued, as Slurm 22.05 does, with a begin time this far
    # ahead (measured: requeue + 121 s); for so many ``scontrol show job`` it shows COMPLETING
    # first (the requeue not done yet).
    requeue_begin_s: float = 121.0
    requeue_lag: int = 0
    _lagging: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def line(self, job: Job) -> str:
        nodes = ",".join(job.nodes)
        return (
            f"{job.job_id}|{job.partition}|{job.user}|{job.qos}|{job.state}|{job.elapsed}"
            f"|{job.left}|{nodes}|{job.name}"
        )

    def holding(self) -> list[Job]:
        """The jobs that hold their nodes (not pending)."""
        return [j for j in self.jobs if j.state != "PENDING"]

    def _requeue_on(self, node: str) -> None:
        """Slurm's requeue of the jobs on a node powered down: pending again, a begin time ahead;
        one that cannot be requeued ends."""
        for job in [j for j in self.holding() if node in j.nodes]:
            if not job.requeueable:
                self.jobs.remove(job)
                continue
            job.state, job.eligible = "PENDING", self.clock() + self.requeue_begin_s
            self._lagging[job.job_id] = self.requeue_lag

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.calls.append(argv)
        cmd = argv[0]
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "\n".join(expand(argv[3])) + "\n"
        if cmd == "squeue" and "--states=PENDING" in argv and "--format=%f" in argv:
            asked = [j.features for j in self.jobs if j.state == "PENDING"]
            return "".join(f"{features}\n" for features in ["(null)"] * len(self.pending) + asked)
        if cmd == "squeue" and "--states=PENDING" in argv:
            waiting = [len(j.nodes) for j in self.jobs if j.state == "PENDING"]
            return "".join(f"{count}\n" for count in self.pending + waiting)
        if cmd == "squeue":
            jobs = self.holding()
            if "--nodelist" in argv:
                wanted = set(expand(argv[argv.index("--nodelist") + 1]))
                jobs = [j for j in jobs if wanted & set(j.nodes)]
            if "--partition" in argv:
                part = argv[argv.index("--partition") + 1]
                jobs = [j for j in jobs if j.partition == part]
            return "".join(self.line(j) + "\n" for j in jobs)
        if argv[:4] == ["scontrol", "show", "node", "-o"]:
            return "".join(
                f"NodeName={n} Arch=x86_64 SlurmdStartTime={self.slurmd_started.get(n, 'None')} "
                f"State={self.states.get(n, 'idle~').upper()} Reason=x y\n"
                for n in expand(argv[4])
                if n in self.known
            )
        if argv[:4] == ["scontrol", "show", "job", "-o"]:
            job = next((j for j in self.jobs if j.job_id == argv[4]), None)
            if job is None:
                raise SlurmCommandError(argv, 1, "slurm_load_jobs error: Invalid job id specified")
            resize = " ResizeTime=2026-11-28T17:41:18" if job.resized else ""
            state = job.state
            if self._lagging.get(job.job_id, 0) > 0:
                self._lagging[job.job_id] -= 1
                state = "COMPLETING"
            eligible = "Unknown" if job.eligible is None else slurm_time(job.eligible)
            return (
                f"JobId={job.job_id} JobName={job.name} JobState={state} Reason=None{resize} "
                f"Partition={job.partition} EligibleTime={eligible} StartTime=Unknown\n"
            )
        if argv[:4] == ["scontrol", "show", "partition", "-o"]:
            return "".join(
                f"PartitionName={name} AllowGroups=ALL Nodes={hosts} State={state} TotalNodes=4\n"
                for name, (state, hosts) in self.partitions.items()
            )
        if argv[:4] == ["scontrol", "show", "reservation", "-o"]:
            if not self.reservations:
                return "No reservations in the system\n"
            return "".join(
                f"ReservationName={name} StartTime=2026-11-30T12:00:00 Nodes={','.join(nodes)} "
                f"NodeCnt={len(nodes)} Users=root Flags=IGNORE_JOBS,SPEC_NODES\n"
                for name, nodes in self.reservations.items()
            )
        if argv[:3] == ["scontrol", "create", "reservation"]:
            fields = dict(a.split("=", 1) for a in argv[3:])
            self.reservations[fields["ReservationName"]] = expand(fields["Nodes"])
            return f"Reservation created: {fields['ReservationName']}\n"
        if argv[:2] == ["scontrol", "update"] and argv[2].startswith("ReservationName="):
            self.reservations[argv[2].removeprefix("ReservationName=")] = expand(
                argv[3].removeprefix("Nodes=")
            )
            return ""
        if argv[:2] == ["scontrol", "delete"]:
            del self.reservations[argv[2].removeprefix("ReservationName=")]
            return ""
        if argv[:2] == ["scontrol", "update"] and argv[2].startswith("PartitionName="):
            self.partitions[argv[2].removeprefix("PartitionName=")][0] = argv[3].split("=")[1]
            return ""
        if argv[:2] == ["scontrol", "update"] and argv[2].startswith("JobId="):
            job_id, when = argv[2].removeprefix("JobId="), argv[3].removeprefix("StartTime=")
            self.begin[job_id] = when
            job = next((j for j in self.jobs if j.job_id == job_id), None)
            if job is not None:  # (a job requeued by ``scontrol requeue`` has left ``jobs``)
                if job.state != "PENDING":
                    raise SlurmCommandError(
                        argv, 1, f"Job is no longer pending execution for JobId={job_id}"
                    )
                ahead = float(when.removeprefix("now+")) if when.startswith("now+") else 0.0
                job.eligible = self.clock() + ahead
            return ""
        if argv[:2] == ["scontrol", "release"]:
            self.held.remove(argv[2])
            return ""
        if argv[:2] == ["scontrol", "update"]:
            nodes = expand(argv[2].removeprefix("NodeName="))
            state = argv[3].removeprefix("State=").lower()
            for n in nodes:
                self.states[n] = self._next_state(self.states.get(n, "idle~"), state)
                if state.startswith("power_down"):  # as Slurm does; RESUME keeps it
                    self.dead.discard(n)
                    self._requeue_on(n)
                if len(argv) > 4:
                    self.reasons[n] = argv[4].removeprefix("Reason=")
                elif state in ("undrain", "resume"):
                    self.reasons.pop(n, None)
            return ""
        if argv[:2] in (["scontrol", "requeue"], ["scontrol", "requeuehold"]):
            job = next(j for j in self.jobs if j.job_id == argv[2])
            if argv[1] == "requeuehold":
                self.held.append(job.job_id)
            if not job.requeueable:
                raise SlurmCommandError(
                    argv,
                    1,
                    "Requeue of JobId=7 returned an error: Only batch jobs are accepted or processed",
                )
            self.requeued.append(job.job_id)
            self.jobs.remove(job)
            return ""
        if cmd == "scancel":
            self.cancelled.append(argv[1])
            self.jobs = [j for j in self.jobs if j.job_id != argv[1]]
            return ""
        if cmd == "sinfo" and "--dead" in argv:
            return "".join(f"{n}\n" for n in sorted(self.dead))
        if cmd == "sinfo" and argv[-1] == "%N|%T|%E":
            nodes = expand(argv[argv.index("--nodes") + 1])
            return "".join(
                f"{n}|{self.states.get(n, 'idle~')}|{self.reasons.get(n) or 'none'}\n"
                for n in nodes
                if n in self.known
            )
        if cmd == "sinfo":
            nodes = expand(argv[argv.index("--nodes") + 1])
            if self.register_after > 0:
                self.register_after -= 1
                return "".join(f"{n}|idle#\n" for n in nodes)
            return "".join(f"{n}|{self.states.get(n, 'idle')}\n" for n in nodes)
        raise SlurmCommandError(argv, 127, f"fake slurm: unknown command {argv}")

    @staticmethod
    def _next_state(current: str, update: str) -> str:
        """Slurm's node state after ``scontrol update State=...``: a base state with flags
        (drain, ``~`` powered down), as sinfo's %T prints it."""
        suffix = current[-1] if current[-1:] in ("~", "%") else ""  # powered / powering down
        base = current.rstrip("~%")
        if update in ("power_down", "power_down_force", "power_down_asap"):
            return base + "~"
        if update == "down":
            base = "down"
        elif update == "drain":
            base = "drained"
        elif update in ("undrain", "resume"):
            base = "idle" if base in ("drained", "draining", "down") else base
        else:
            base = update
        return base + suffix

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls if c[:2] == ["scontrol", "update"]]
