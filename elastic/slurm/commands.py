"""Every Slurm command the elastic client runs, through an injected runner.

The runner takes an argv and returns stdout, or raises :class:`SlurmCommandError`; unit tests
pass a fake that records the argv and answers from fixtures, the service passes
:func:`subprocess_runner`. Nothing here goes through a shell.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from typing import Protocol

from elastic.errors import PtcError


class SlurmCommandError(PtcError):
    """A Slurm command failed; ``argv``, ``returncode`` and ``output`` say how."""

    def __init__(self, argv: Sequence[str], returncode: int | None, output: str) -> None:
        detail = output.strip().splitlines()[-1] if output.strip() else "no output"
        super().__init__(f"{' '.join(argv)}: exit {returncode}: {detail}")
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output


class Runner(Protocol):
    def __call__(self, argv: Sequence[str]) -> str: ...


def subprocess_runner(timeout: float = 30.0, cwd: str | None = None) -> Runner:
    def run(argv: Sequence[str]) -> str:
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
            )
        except subprocess.TimeoutExpired as err:
            raise SlurmCommandError(argv, None, f"timed out after {timeout} s") from err
        except OSError as err:
            raise SlurmCommandError(argv, None, str(err)) from err
        if done.returncode != 0:
            raise SlurmCommandError(argv, done.returncode, done.stderr + done.stdout)
        return done.stdout

    return run


# How long a requeued job that was resized waits before it may start again: Slurm's KillWait
# (30 s by default, between the old step's SIGTERM and SIGKILL) and a margin for its last report.
RESIZED_REQUEUE_DELAY_S = 40
# How long any other requeued job waits: its old nodes revoke its credentials when they kill it,
# and slurmd compares credentials to the second, so a launch there within the same second (free
# nodes, and Slurm schedules the job again at once) is refused as "credential revoked" and the job
# fails instead of running. Seen once in a chaos run; a few seconds put the launch past it.
REQUEUE_DELAY_S = 5

# A feature name in a constraint: what lies between Slurm's operators (& | * [ ] ( ) , :).
FEATURE_NAME = re.compile(r"[^&|*\[\](),:\s]+")

# squeue's -o format: one running job per line, fields split by "|"; the name goes last
# because it may itself contain "|". The JSON output (--json) needs Slurm's openapi/data
# parser plugins, which Debian 12's slurm 22.05.8 packages do not promise; this format works
# on every Slurm since 2.x.
SQUEUE_FIELDS = ("job_id", "partition", "user", "qos", "state", "elapsed", "left", "nodes", "name")
SQUEUE_FORMAT = "%A|%P|%u|%q|%T|%M|%L|%N|%j"


class Slurm:
    """The commands, named by what they do."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    def expand(self, hostlist: str) -> list[str]:
        """``node-[0-2],head`` -> every name, by ``scontrol show hostnames``."""
        if not hostlist.strip():
            return []
        return self.run(["scontrol", "show", "hostnames", hostlist]).split()

    def compress(self, nodes: Sequence[str]) -> str:
        if not nodes:
            return ""
        return self.run(["scontrol", "show", "hostlist", ",".join(nodes)]).strip()

    def running_jobs(self, partition: str | None) -> str:
        """Jobs that hold nodes: running, completing, or configuring (their nodes powering up
        for them; Slurm counts their elapsed time from when the nodes are up)."""
        argv = [
            "squeue",
            "--noheader",
            "--states=RUNNING,COMPLETING,CONFIGURING",
            "--format",
            SQUEUE_FORMAT,
        ]
        if partition:
            argv += ["--partition", partition]
        return self.run(argv)

    def pending_demand(self, partition: str | None) -> tuple[int, int]:
        """(jobs, nodes they ask for) of the jobs waiting to start."""
        argv = ["squeue", "--noheader", "--states=PENDING", "--format=%D"]
        if partition:
            argv += ["--partition", partition]
        counts = [line.strip() for line in self.run(argv).splitlines() if line.strip()]
        try:
            return len(counts), sum(int(c) for c in counts)
        except ValueError as err:
            raise PtcError(f"squeue --format=%D: not a node count: {err}") from None

    def pending_features(self, partition: str | None) -> frozenset[str]:
        """The feature names the waiting jobs' constraints (``--constraint``) name, whatever
        the operators between them: a site's name among them is a site some job asks for."""
        argv = ["squeue", "--noheader", "--states=PENDING", "--format=%f"]
        if partition:
            argv += ["--partition", partition]
        names = {
            name
            for line in self.run(argv).splitlines()
            for name in FEATURE_NAME.findall(line)
            if not name.isdigit()  # a count (``a*2``), not a name
        }
        return frozenset(names - {"null"})  # squeue's "(null)": no constraint

    def jobs_on(self, nodes: Sequence[str]) -> str:
        """Running jobs that touch ``nodes`` (any partition)."""
        return self.run(
            [
                "squeue",
                "--noheader",
                "--states=RUNNING,COMPLETING,CONFIGURING",
                "--nodelist",
                ",".join(nodes),
                "--format",
                SQUEUE_FORMAT,
            ]
        )

    def update_nodes(self, nodes: Sequence[str], state: str, reason: str | None = None) -> None:
        argv = ["scontrol", "update", f"NodeName={','.join(nodes)}", f"State={state}"]
        if reason is not None:
            argv.append(f"Reason={reason}")
        self.run(argv)

    def set_address(self, node: str, address: str) -> None:
        """Slurm reaches ``node``'s slurmd at ``address`` from now on (a cloud instance's
        private address, known only once it is launched); its hostname stays its name."""
        self.run(
            ["scontrol", "update", f"NodeName={node}", f"NodeAddr={address}",
             f"NodeHostname={node}"]
        )  # fmt: skip

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        self.update_nodes(nodes, "DRAIN", reason)

    def down(self, nodes: Sequence[str], reason: str) -> None:
        self.update_nodes(nodes, "DOWN", reason)

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        """Slurm powers the nodes down now (jobs on them are killed), through SuspendProgram."""
        self.update_nodes(nodes, "POWER_DOWN_FORCE", reason)

    def undrain(self, nodes: Sequence[str]) -> None:
        """Clear DRAIN, leave the base state (powered down) as it is (Slurm >= 20.11)."""
        self.update_nodes(nodes, "UNDRAIN")

    def reservations(self, prefix: str) -> dict[str, list[str]]:
        """``{name: nodes}`` of the reservations whose names start with ``prefix``."""
        found: dict[str, list[str]] = {}
        for line in self.run(["scontrol", "show", "reservation", "-o"]).splitlines():
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            name = fields.get("ReservationName", "")
            if name.startswith(prefix):
                hostlist = fields.get("Nodes", "")
                found[name] = self.expand(hostlist) if hostlist and hostlist != "(null)" else []
        return found

    def reserve(self, name: str, nodes: Sequence[str]) -> None:
        """Hold ``nodes`` in reservation ``name`` from now on, for root alone: Slurm places no
        job on them, so power saving resumes none (a job running on one goes on)."""
        self.run(
            ["scontrol", "create", "reservation", f"ReservationName={name}",
             f"Nodes={','.join(nodes)}", "StartTime=now", "Duration=infinite", "Users=root",
             "Flags=IGNORE_JOBS"]
        )  # fmt: skip

    def set_reservation_nodes(self, name: str, nodes: Sequence[str]) -> None:
        self.run(["scontrol", "update", f"ReservationName={name}", f"Nodes={','.join(nodes)}"])

    def delete_reservation(self, name: str) -> None:
        self.run(["scontrol", "delete", f"ReservationName={name}"])

    def partitions(self) -> dict[str, tuple[str, list[str]]]:
        """``{partition: (State, its nodes)}`` from ``scontrol show partition -o``."""
        found: dict[str, tuple[str, list[str]]] = {}
        for line in self.run(["scontrol", "show", "partition", "-o"]).splitlines():
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            name = fields.get("PartitionName")
            if not name:
                continue
            hostlist = fields.get("Nodes", "")
            nodes = self.expand(hostlist) if hostlist and hostlist != "(null)" else []
            found[name] = (fields.get("State", ""), nodes)
        return found

    def set_partition_state(self, partition: str, state: str) -> None:
        """``UP``, or ``DOWN``: jobs are still queued but none starts (running ones go on)."""
        self.run(["scontrol", "update", f"PartitionName={partition}", f"State={state}"])

    def show_nodes(self, nodes: Sequence[str]) -> str:
        """``scontrol show node -o``: one line of ``Key=Value`` fields a node."""
        return self.run(["scontrol", "show", "node", "-o", ",".join(nodes)])

    def requeue(self, job_id: str) -> int:
        """Requeue the job; the seconds it waits before it may start again. Slurm 22.05 may
        start a requeued job again at once and then kill it as a "non-startable batch job":
        on a node that revoked its credentials that same second (any job), or when its old
        batch step reports after the new start (a job resized while it ran). So the job is
        held while it gets a begin time ahead (REQUEUE_DELAY_S, RESIZED_REQUEUE_DELAY_S when
        resized), then released."""
        resized = "ResizeTime=" in self.show_job(job_id)
        delay = RESIZED_REQUEUE_DELAY_S if resized else REQUEUE_DELAY_S
        self.run(["scontrol", "requeuehold", job_id])
        try:
            self.run(["scontrol", "update", f"JobId={job_id}", f"StartTime=now+{delay}"])
        finally:
            self.run(["scontrol", "release", job_id])
        return delay

    def show_job(self, job_id: str) -> str:
        """``scontrol show job -o``: the job's one line of ``Key=Value`` fields."""
        return self.run(["scontrol", "show", "job", "-o", job_id])

    def begin_soon(self, job_id: str) -> None:
        """The pending job may start in REQUEUE_DELAY_S (its begin time, ``EligibleTime``):
        as soon as a requeued job's old nodes are past revoking its credentials."""
        self.run(["scontrol", "update", f"JobId={job_id}", f"StartTime=now+{REQUEUE_DELAY_S}"])

    def cancel(self, job_id: str) -> None:
        self.run(["scancel", job_id])

    def node_states(self, nodes: Sequence[str]) -> dict[str, str]:
        """``{node: state}`` from ``sinfo -N`` (long state names, with Slurm's suffixes such
        as ``~`` powered down, ``#`` powering up, ``%`` powering down, ``*`` not responding)."""
        out = self.run(
            ["sinfo", "--noheader", "--Node", "--nodes", ",".join(nodes), "--format", "%N|%T"]
        )
        states: dict[str, str] = {}
        for line in out.splitlines():
            name, _, state = line.strip().partition("|")
            if name:
                states[name] = state.strip().lower()
        return states

    def dead_nodes(self, nodes: Sequence[str]) -> set[str]:
        """Those of ``nodes`` Slurm counts as not responding, powered down ones too (whose
        ``%T`` hides the ``*``): Slurm gives such a node to no job."""
        if not nodes:
            return set()
        # the dead few, not the pool's names on a command line: a pool may hold thousands
        out = self.run(["sinfo", "--noheader", "--Node", "--dead", "--format", "%N"])
        return {line.strip() for line in out.splitlines()} & set(nodes)

    def node_reasons(self, nodes: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``{node: (state, reason)}`` from ``sinfo -N`` (reason ``none`` comes back empty)."""
        if not nodes:
            return {}
        out = self.run(
            ["sinfo", "--noheader", "--Node", "--nodes", ",".join(nodes), "--format", "%N|%T|%E"]
        )
        found: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            name, _, rest = line.strip().partition("|")
            state, _, reason = rest.partition("|")
            if name:
                reason = reason.strip()
                found[name] = (state.strip().lower(), "" if reason == "none" else reason)
        return found
