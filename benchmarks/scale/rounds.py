"""The client's round, a reclamation and the store at a size, with Slurm's answers emulated.

Queues of 10,000 and 100,000 running jobs cannot run on this machine, so the round reads a
queue built from the trace: job i of the queue is trace job i's size (clipped to the pool) on
consecutive pool nodes, its elapsed and remaining times from the trace's runtime. The runner
answers ``squeue`` with that text in the client's own format and ``scontrol show hostnames``
from the table the queue was built with (nothing here parses a hostlist). Everything after the
runner is ptc's: ``parse_squeue``, the policy, ``SlurmElasticClient.report_pv``, the manager's
HTTP API and its store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elastic.sim.traces.model import Trace
from elastic.slurm.commands import SQUEUE_FORMAT, Runner, SlurmCommandError


def hms(seconds: float) -> str:
    s = int(max(0.0, seconds))
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


@dataclass(frozen=True)
class EmulatedQueue:
    running: str  # squeue's answer for the running jobs
    pending: str  # squeue's %D answer for the waiting ones
    hostlists: dict[str, list[str]]  # what scontrol show hostnames says of each
    node_entries: int  # sum of the running jobs' node counts
    running_jobs: int


def emulated_queue(trace: Trace, names: Sequence[str], jobs: int) -> EmulatedQueue:
    """``jobs`` jobs from ``trace`` in its order: each runs on consecutive free nodes of
    ``names`` while it fits (a node runs one job: the policies' model), the rest wait."""
    assert SQUEUE_FORMAT.count("|") == 8  # the lines below follow the client's format
    sizes = np.clip(trace.nodes, 1, len(names))
    runtime = np.nan_to_num(trace.runtime, nan=600.0)
    lines: list[str] = []
    waiting: list[str] = []
    table: dict[str, list[str]] = {}
    cursor, entries, n = 0, 0, len(names)
    for i in range(jobs):
        t = i % len(trace)
        size = int(sizes[t])
        if cursor + size > n:
            waiting.append(f"{size}")
            continue
        if size == 1:
            nodelist = names[cursor]
        else:
            nodelist = f"emu[{names[cursor][3:]}-{names[cursor + size - 1][3:]}]"
            table[nodelist] = list(names[cursor : cursor + size])
        cursor += size
        entries += size
        elapsed = float(runtime[t]) / 2
        lines.append(
            f"{100000 + i}|elastic|u{trace.user[t] or 0}|normal|RUNNING|{hms(elapsed)}"
            f"|{hms(elapsed)}|{nodelist}|job{t}"
        )
    running = "\n".join(lines) + "\n" if lines else ""
    return EmulatedQueue(running, "\n".join(waiting) + "\n", table, entries, len(lines))


def emulated_runner(queue: EmulatedQueue) -> Runner:
    def run(argv: Sequence[str]) -> str:
        args = list(argv)
        if args[:3] == ["scontrol", "show", "hostnames"]:
            return "\n".join(queue.hostlists[args[3]]) + "\n"
        if args[0] == "squeue" and "--states=PENDING" in args:
            return queue.pending
        if args[0] == "squeue":
            return queue.running
        raise SlurmCommandError(args, 1, "not emulated")

    return run


def timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0
