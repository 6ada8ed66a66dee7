"""When the simulator looks at the partition (§4), and which job each node runs then.

Snapshot times are every job completion plus every ``interval`` seconds from the first
arrival, up to the last completion; a time that is both is one snapshot. A snapshot shows the
state once every event at that timestamp has been handled: a job that ends at t is gone, a job
that starts at t is running with elapsed 0. Zero-length jobs never appear.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError
from elastic.sim.schedule import Schedule


def snapshot_times(schedule: Schedule, interval: float) -> NDArray[np.float64]:
    if not interval > 0:
        raise InputError(f"--interval must be > 0 seconds, got {interval}")
    if schedule.end.size == 0:
        return np.zeros(0)
    t0 = float(schedule.submit.min())
    steps = int(np.floor((schedule.makespan - t0) / interval))
    grid = t0 + interval * np.arange(steps + 1, dtype=np.float64)
    return np.unique(np.concatenate([grid, schedule.end]))


def node_jobs(schedule: Schedule, times: NDArray[np.float64]) -> NDArray[np.int64]:
    """(S, N): the job running on each node at each time, -1 if idle."""
    out = np.full((schedule.n_nodes, times.shape[0]), -1, dtype=np.int64)  # node-major: rows
    owner, bounds = schedule.jobs_by_node
    start, end = schedule.start, schedule.end
    for n in range(schedule.n_nodes):
        jobs = owner[bounds[n] : bounds[n + 1]]
        if jobs.size == 0:
            continue
        last = np.searchsorted(start[jobs], times, side="right") - 1
        safe = np.maximum(last, 0)
        running = (last >= 0) & (end[jobs[safe]] > times)
        out[n] = np.where(running, jobs[safe], -1)
    return np.ascontiguousarray(out.T)
