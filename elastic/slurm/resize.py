"""Running jobs that grow and shrink (E-HPC's expand and contract), through Slurm's own job
expansion; the cluster needs the slurm role's ``slurm_job_expansion``.

Growing job J to N nodes takes Slurm 22.05's documented steps: a helper allocation of the
missing nodes (``salloc --no-shell --dependency=expand:J``, away from J's nodes, in J's
partition; powered-down pool nodes are resumed for it as for any job), ``NumNodes=0`` on the
helper, which hands its nodes to J, the helper cancelled, and ``NumNodes=ALL`` on J. Shrinking
keeps J's batch host and its first nodes (``scontrol update JobId=J NodeList=...``); the nodes
let go return to the partition, and an elastic partition's power saving gives them back to the
pool once idle.

Everything is checked against the job and its partition before Slurm is asked: a size the
partition cannot hold, a shrink below one node, a job that is not running are refused, naming
the parameter, and the job keeps running unchanged.

A job's own environment still describes the allocation it started with, and srun inside the job
reads it (``Only allocated 1 nodes asked for 2``). Slurm answers that with a ``slurm_job_J_resize.sh``
it drops in the working directory of ``NumNodes`` updates only; ``environment`` gives the same
settings for any resize, from the job as Slurm holds it.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from elastic.errors import InputError, PtcError
from elastic.slurm.commands import Runner, Slurm

# Past the second a shrink was made in, how long more it waits before it returns (see
# ``Resizer._past_the_revocation``): the controller's clock and ours may differ a little.
REVOCATION_MARGIN_S = 0.25


class ResizeRefused(InputError):
    """A resize refused before Slurm was asked; the job is unchanged."""


@dataclass(frozen=True)
class JobShape:
    """What a resize needs to know of a job."""

    job_id: str
    state: str
    partition: str
    nodes: tuple[str, ...]  # the batch host first
    time_limit: str  # as Slurm prints it (``UNLIMITED``, ``30:00``, ``1-00:00:00``)
    hostlist: str = ""  # Slurm's NodeList
    cpus: tuple[int, ...] = ()  # CPUs allocated on each node, in the hostlist's order


# ``scontrol show job -d``'s allocation details: ``Nodes=node-[0-1] CPU_IDs=0-1 Mem=...``
_ALLOCATION = re.compile(r"(?:^|\s)Nodes=(\S+)\s+CPU_IDs=(\S+)")


def show_fields(line: str) -> dict[str, str]:
    """The ``Key=Value`` fields of one line of ``scontrol show ... -o``."""
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def parse_job(text: str, job_id: str, slurm: Slurm) -> JobShape:
    """``scontrol show job -o J``'s one line."""
    fields = show_fields(text)
    if not fields.get("JobId"):
        raise ResizeRefused(f"job: {job_id!r} is not a job Slurm knows")
    hostlist = fields.get("NodeList", "")
    nodes = slurm.expand(hostlist) if hostlist and hostlist != "(null)" else []
    batch = fields.get("BatchHost", "")
    ordered = ([batch] if batch in nodes else []) + [n for n in nodes if n != batch]
    cpus: dict[str, int] = {}
    for group, ids in _ALLOCATION.findall(text):
        for node in [group] if _single(group) else slurm.expand(group):
            cpus[node] = cpu_count(ids)
    return JobShape(
        job_id=fields["JobId"],
        state=fields.get("JobState", ""),
        partition=fields.get("Partition", ""),
        nodes=tuple(ordered),
        time_limit=fields.get("TimeLimit", "UNLIMITED"),
        hostlist=hostlist if nodes else "",
        cpus=tuple(cpus.get(n, 1) for n in nodes),
    )


def _single(hostlist: str) -> bool:
    return re.fullmatch(r"[\w.-]+", hostlist) is not None


def cpu_count(ids: str) -> int:
    """``0-1,4`` -> 3."""
    total = 0
    for part in ids.split(","):
        low, _, high = part.partition("-")
        total += int(high) - int(low) + 1 if high else 1
    return total


def repeated(counts: Sequence[int]) -> str:
    """Slurm's ``2,1(x3)`` form of a per-node list."""
    runs: list[list[int]] = []
    for count in counts:
        if runs and runs[-1][0] == count:
            runs[-1][1] += 1
        else:
            runs.append([count, 1])
    return ",".join(f"{c}(x{n})" if n > 1 else str(c) for c, n in runs)


# What Slurm's own resize script unsets: task counts of the old allocation.
STALE = ("SLURM_NPROCS", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE")


def environment(shape: JobShape) -> dict[str, str]:
    """The SLURM_* settings of the job's allocation as it is now (those in STALE go)."""
    count = str(len(shape.nodes))
    return {
        "SLURM_NODELIST": shape.hostlist,
        "SLURM_JOB_NODELIST": shape.hostlist,
        "SLURM_NNODES": count,
        "SLURM_JOB_NUM_NODES": count,
        "SLURM_JOB_CPUS_PER_NODE": repeated(shape.cpus),
    }


def environment_script(shape: JobShape) -> str:
    """``environment`` as a script the job sources (``. FILE``), as Slurm's resize script."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in environment(shape).items()]
    return "\n".join([*lines, f"unset {' '.join(STALE)}", ""])


def in_environment(shape: JobShape, argv: Sequence[str]) -> list[str]:
    """``argv`` run with ``environment`` (``env -u ... K=V ... argv``): a step the job
    launches itself sees the allocation as it is now, not as the job started."""
    unset = [f"--unset={k}" for k in STALE]
    settings: Mapping[str, str] = environment(shape)
    return ["env", *unset, *(f"{k}={v}" for k, v in settings.items()), *argv]


class Resizer:
    """Expand and contract running jobs through the Slurm commands ``run`` runs (as the job's
    owner: Slurm lets a user resize their own jobs). ``run`` must allow a resume's time for
    ``salloc``, which waits for the new nodes to be ready."""

    def __init__(
        self,
        run: Runner,
        *,
        wait_for_nodes_s: int = 60,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.slurm = Slurm(run)
        self.run = run
        self.clock, self.sleep = clock, sleep
        # How long an expansion waits for the partition to have the nodes free (not for them
        # to boot): past it, salloc gives up and the job stays as it was.
        self.wait_for_nodes_s = wait_for_nodes_s

    def job(self, job_id: str) -> JobShape:
        if not job_id.isdigit():
            raise ResizeRefused(f"job: {job_id!r} is not a job id")
        text = self.run(["scontrol", "show", "job", "-d", "-o", job_id])
        return parse_job(text, job_id, self.slurm)

    def partition_size(self, partition: str) -> int:
        line = self.run(["scontrol", "show", "partition", "-o", partition])
        return int(show_fields(line).get("TotalNodes", "0"))

    def expand(self, job_id: str, to: int) -> JobShape:
        """Grow running job ``job_id`` to ``to`` nodes; the job as Slurm then holds it (its
        nodes batch host first)."""
        shape = self._running(job_id)
        if isinstance(to, bool) or not isinstance(to, int) or to <= len(shape.nodes):
            raise ResizeRefused(
                f"--to: {to!r} is not more than job {job_id}'s {len(shape.nodes)} node(s)"
            )
        size = self.partition_size(shape.partition)
        if to > size:
            raise ResizeRefused(
                f"--to: {to} is more than partition {shape.partition}'s {size} node(s)"
            )
        helper = f"ptc-expand-{job_id}"
        argv = [
            "salloc", "--no-shell", "--quiet", f"--job-name={helper}",
            f"--nodes={to - len(shape.nodes)}", f"--partition={shape.partition}",
            f"--exclude={','.join(shape.nodes)}", f"--dependency=expand:{job_id}",
            f"--immediate={self.wait_for_nodes_s}", "--wait-all-nodes=1",
        ]  # fmt: skip
        if shape.time_limit not in ("UNLIMITED", "Partition_Limit"):
            argv.append(f"--time={shape.time_limit}")
        self.run(argv)
        helper_ids = self.run(["squeue", "--noheader", f"--name={helper}", "--format=%A"]).split()
        if len(helper_ids) != 1:
            # Another expansion of the job at the same time, or one that died half-way: which
            # allocation is this one's cannot be told, so none is merged.
            for stray in helper_ids:
                self.slurm.cancel(stray)
            raise PtcError(
                f"job {job_id}: expected one allocation {helper}, found {len(helper_ids)} "
                f"({', '.join(helper_ids) or 'none'}); cancelled them, the job is unchanged"
            )
        helper_id = helper_ids[0]
        try:
            self.run(["scontrol", "update", f"JobId={helper_id}", "NumNodes=0"])
        finally:
            self.slurm.cancel(helper_id)
        self.run(["scontrol", "update", f"JobId={job_id}", "NumNodes=ALL"])
        return self.job(job_id)

    def contract(self, job_id: str, by: int) -> JobShape:
        """Shrink running job ``job_id`` by ``by`` nodes, keeping its batch host and first
        nodes; the job as Slurm then holds it."""
        shape = self._running(job_id)
        if isinstance(by, bool) or not isinstance(by, int) or by < 1:
            raise ResizeRefused(f"--by: {by!r} is not a whole number of nodes >= 1")
        if len(shape.nodes) - by < 1:
            raise ResizeRefused(
                f"--by: {by} would leave job {job_id} with {len(shape.nodes) - by} node(s); "
                "a job keeps at least one"
            )
        return self._keep(shape, shape.nodes[: len(shape.nodes) - by])

    def done(self, job_id: str) -> JobShape:
        """Give back every node but the batch host (the workflow's last stage is over); the
        job as Slurm then holds it."""
        shape = self._running(job_id)
        return self._keep(shape, shape.nodes[:1]) if len(shape.nodes) > 1 else shape

    def _keep(self, shape: JobShape, kept: Sequence[str]) -> JobShape:
        hostlist = self.slurm.compress(kept)
        self.run(["scontrol", "update", f"JobId={shape.job_id}", f"NodeList={hostlist}"])
        self._past_the_revocation()
        return self.job(shape.job_id)

    def _past_the_revocation(self) -> None:
        """Wait out the second the shrink was made in. Slurm revokes the job's credential on
        the nodes let go, stamped with the controller's whole second, and those nodes refuse
        any credential of the job from that second or before (``Job credential revoked``). An
        expansion right after a shrink can take the same nodes back, and a step launched on
        them within that second would fail."""
        now = self.clock()
        self.sleep(math.floor(now) + 1 + REVOCATION_MARGIN_S - now)

    def _running(self, job_id: str) -> JobShape:
        shape = self.job(job_id)
        if shape.state != "RUNNING":
            raise ResizeRefused(f"job: {job_id} is {shape.state or 'in no state'}, not RUNNING")
        return shape


def hostfile(nodes: Sequence[str]) -> str:
    """The job's host list, one node per line (E-HPC hands the application such a file)."""
    return "".join(f"{n}\n" for n in nodes)


def notify(run: Runner, job_id: str) -> None:
    """SIGUSR1 to the job's batch script, as E-HPC tells the application its hosts changed."""
    run(["scancel", "--batch", "--signal=USR1", job_id])
