"""Every run of every job in a period, from Slurm's accounting.

``sacct -a -D -X --truncate -S SINCE -E UNTIL`` with times as epoch seconds: ``-D`` keeps each
run of a requeued job (the runs before the last one end ``REQUEUED``), ``-X`` the allocation
alone (no steps), and ``--truncate`` cuts a run that began before the period at its start, so
its ``ElapsedRaw`` is the part inside the period. A run's node-time is ``ElapsedRaw x NNodes``,
Slurm's own figures. An array's tasks are jobs of their own (``12_3``); lines of runs that never
started (pending tasks, ``12_[4-9]``) carry no node-time and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic import sacct

FIELDS = (
    "JobID",
    "JobIDRaw",
    "User",
    "Partition",
    "State",
    "Start",
    "End",
    "ElapsedRaw",
    "NNodes",
    "NodeList",
)


@dataclass(frozen=True)
class Run:
    """One run of a job (one line of sacct -D -X)."""

    job_id: str  # as sacct prints it: 12, or an array's task 12_3
    raw_id: str  # JobIDRaw: the task's own number
    user: str
    partition: str
    state: str  # COMPLETED, REQUEUED, RUNNING, ...
    start: float  # within the period (--truncate)
    end: float | None  # None while it runs
    elapsed_s: int  # ElapsedRaw: seconds of this run within the period
    nodes: int  # NNodes: nodes it was allocated
    nodelist: str  # Slurm's hostlist of those nodes

    @property
    def node_s(self) -> int:
        """Node-seconds of this run: ElapsedRaw x NNodes."""
        return self.elapsed_s * self.nodes


def command(since: str, until: str) -> str:
    """The sacct command for the runs between two times sacct reads (``period.iso``)."""
    return sacct.command(FIELDS, "-a", "-D", "-X", "--truncate", "-S", since, "-E", until)


def parse_runs(text: str) -> list[Run]:
    """The runs that started, in sacct's order."""
    runs = []
    for row in sacct.parse(text, FIELDS):
        start = sacct.epoch(row["Start"])
        if start is None or row["NodeList"] in ("", "None assigned"):
            continue  # never ran: pending, or cancelled while pending
        runs.append(
            Run(
                job_id=row["JobID"],
                raw_id=row["JobIDRaw"],
                user=row["User"],
                partition=row["Partition"],
                state=sacct.state(row["State"]),
                start=start,
                end=sacct.epoch(row["End"]),
                elapsed_s=sacct.count(row["ElapsedRaw"], "ElapsedRaw"),
                nodes=sacct.count(row["NNodes"], "NNodes"),
                nodelist=row["NodeList"],
            )
        )
    return runs
