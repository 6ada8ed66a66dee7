"""Many snapshots of one N-node partition as (S, N) arrays: the simulator's hot path.

Row s, column n describes the job on node n at ``times[s]``; idle cells hold 0 (job -1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.policies.model import JobInfo, Snapshot


@dataclass(frozen=True)
class SnapshotBatch:
    times: NDArray[np.float64]  # (S,)
    job: NDArray[np.int64]  # (S, N), -1 = idle
    elapsed: NDArray[np.float64]  # (S, N)
    remaining: NDArray[np.float64]  # (S, N)
    node_count: NDArray[np.float64]  # (S, N)
    priority: NDArray[np.float64]  # (S, N)

    @property
    def busy(self) -> NDArray[np.bool_]:
        return self.job >= 0

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.job.shape
        return int(rows), int(cols)

    def snapshot(self, row: int, node_names: tuple[str, ...] | None = None) -> Snapshot:
        """The scalar view of one row (used by tests and to draw single PVs)."""
        n_nodes = self.shape[1]
        names = node_names or tuple(f"n{i:03d}" for i in range(n_nodes))
        jobs: dict[int, list[int]] = {}
        for col in range(n_nodes):
            job = int(self.job[row, col])
            if job >= 0:
                jobs.setdefault(job, []).append(col)
        infos = tuple(
            JobInfo(
                job_id=str(job),
                nodes=tuple(names[c] for c in cols),
                elapsed=float(self.elapsed[row, cols[0]]),
                priority=float(self.priority[row, cols[0]]),
                remaining=float(self.remaining[row, cols[0]]),
            )
            for job, cols in jobs.items()
        )
        return Snapshot(time=float(self.times[row]), nodes=names, jobs=infos)


def build_batch(
    times: NDArray[np.float64],
    node_job: NDArray[np.int64],
    start: NDArray[np.float64],
    end: NDArray[np.float64],
    nodes: NDArray[np.int64],
    priority: NDArray[np.float64],
) -> SnapshotBatch:
    """Gather per-job attributes onto the (S, N) grid given which job runs where."""
    busy = node_job >= 0
    safe = np.where(busy, node_job, 0)
    t = times[:, None]
    zero = np.zeros(node_job.shape)
    return SnapshotBatch(
        times=times,
        job=node_job,
        elapsed=np.where(busy, t - start[safe], zero),
        remaining=np.where(busy, end[safe] - t, zero),
        node_count=np.where(busy, nodes[safe].astype(np.float64), zero),
        priority=np.where(busy, priority[safe], zero),
    )
