"""FCFS with EASY backfilling on N identical nodes: a discrete-event simulation.

Conventions (they change results, so they are fixed here and tested):

- Events are job arrivals and job completions. At equal timestamps completions come first,
  then arrivals; among completions, the job that started first (then the lower index) goes
  first; arrivals keep FCFS order (submit time, then trace order). Every single event is
  followed by one scheduling pass.
- A pass starts queued jobs in FCFS order while the head fits. If the head does not fit, it
  gets a reservation at the shadow time: the earliest moment at which, by the *estimated*
  end times of running jobs (start + requested), enough nodes are free. The next
  ``backfill_depth`` queued jobs are then tried in order; one may start now if it fits in the
  free nodes and either ends (by its request) no later than the shadow time, or uses only the
  nodes the head will not need at the shadow time. Backfilled jobs can therefore never delay
  the head's reservation. The bounded depth is what Slurm does too (bf_max_job_test); it
  keeps a pass O(depth) even with a whole trace queued at t = 0.
- Jobs end at their actual runtime. An estimate shorter than the runtime is raised to the
  runtime (Slurm would have killed the job at its limit, so the log's runtime shows the limit
  was effectively at least that long).
- A job takes the lowest-numbered free nodes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.errors import PtcError

DEFAULT_BACKFILL_DEPTH = 500
_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Schedule:
    """Start/end per job (trace order) and the nodes it ran on, CSR style:
    job j used ``alloc_nodes[alloc_ptr[j]:alloc_ptr[j + 1]]``."""

    n_nodes: int
    submit: NDArray[np.float64]
    start: NDArray[np.float64]
    end: NDArray[np.float64]
    nodes: NDArray[np.int64]
    alloc_ptr: NDArray[np.int64]
    alloc_nodes: NDArray[np.int64]

    def nodes_of(self, job: int) -> NDArray[np.int64]:
        return self.alloc_nodes[self.alloc_ptr[job] : self.alloc_ptr[job + 1]]

    @property
    def makespan(self) -> float:
        return float(self.end.max()) if self.end.size else 0.0


def simulate(
    submit: NDArray[np.float64],
    runtime: NDArray[np.float64],
    requested: NDArray[np.float64],
    nodes: NDArray[np.int64],
    n_nodes: int,
    *,
    backfill_depth: int = DEFAULT_BACKFILL_DEPTH,
) -> Schedule:
    n = int(submit.shape[0])
    _validate(submit, runtime, requested, nodes, n_nodes, backfill_depth)
    estimate = np.maximum(requested, runtime)
    sim = _Sim(submit, runtime, estimate, nodes.astype(np.int64), n_nodes, backfill_depth)
    sim.run()
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nodes, out=ptr[1:])
    flat = np.empty(int(ptr[-1]), dtype=np.int64)
    for job, used in enumerate(sim.allocation):
        flat[ptr[job] : ptr[job + 1]] = used
    return Schedule(
        n_nodes=n_nodes,
        submit=submit.astype(np.float64),
        start=sim.start,
        end=sim.start + runtime,
        nodes=nodes.astype(np.int64),
        alloc_ptr=ptr,
        alloc_nodes=flat,
    )


def _validate(
    submit: NDArray[np.float64],
    runtime: NDArray[np.float64],
    requested: NDArray[np.float64],
    nodes: NDArray[np.int64],
    n_nodes: int,
    depth: int,
) -> None:
    if n_nodes < 1:
        raise PtcError(f"--nodes must be >= 1, got {n_nodes}")
    if depth < 0:
        raise PtcError(f"backfill depth must be >= 0, got {depth}")
    if not (submit.shape == runtime.shape == requested.shape == nodes.shape):
        raise PtcError("trace columns have different lengths")
    arrays = {"submit": submit, "runtime": runtime, "requested": requested}
    for name, values in arrays.items():
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            raise PtcError(f"job #{int(np.argmax(bad))}: {name} must be a finite number >= 0")
    too_big = (nodes < 1) | (nodes > n_nodes)
    if too_big.any():
        j = int(np.argmax(too_big))
        raise PtcError(f"job #{j} needs {int(nodes[j])} nodes; the partition has {n_nodes}")


class _Sim:
    def __init__(
        self,
        submit: NDArray[np.float64],
        runtime: NDArray[np.float64],
        estimate: NDArray[np.float64],
        nodes: NDArray[np.int64],
        n_nodes: int,
        depth: int,
    ) -> None:
        self.n = int(submit.shape[0])
        self.submit = submit
        self.runtime = runtime.tolist()
        self.estimate_np = estimate
        self.estimate = estimate.tolist()
        self.nodes_np = nodes
        self.nodes = nodes.tolist()
        self.depth = depth
        self.start = np.full(self.n, np.nan)
        self.allocation: list[list[int]] = [[] for _ in range(self.n)]
        self.free_nodes = list(range(n_nodes))  # a heap: lowest-numbered first
        self.free = n_nodes
        self.pending: list[int] = []
        self.running: dict[int, tuple[float, int]] = {}  # job -> (estimated end, nodes)
        self.completions: list[tuple[float, int, int]] = []  # (end, start seq, job)
        self.started = 0
        self.now = 0.0
        self.settled = True  # the last pass left no queued job it looked at startable

    def run(self) -> None:
        order = np.argsort(self.submit, kind="stable").tolist()
        arrivals = self.submit[order].tolist()
        a = 0
        inf = float("inf")
        while a < self.n or self.completions:
            next_arrival = arrivals[a] if a < self.n else inf
            if self.completions and self.completions[0][0] <= next_arrival:
                self.now, _, job = heapq.heappop(self.completions)
                self._finish(job)
                self._schedule()
            else:
                self.now = next_arrival
                self.pending.append(order[a])
                a += 1
                # A job queued behind the backfill window, or on a full partition, cannot
                # start, and if the last pass backfilled nothing, no queued job it saw can
                # start either: skip the pass. A pass that backfilled pulled jobs into the
                # window that it never tried, so the next arrival still gets its pass.
                behind = len(self.pending) > self.depth + 1
                if self.free > 0 and not (behind and self.settled):
                    self._schedule()

    def _finish(self, job: int) -> None:
        del self.running[job]
        for node in self.allocation[job]:
            heapq.heappush(self.free_nodes, node)
        self.free += self.nodes[job]

    def _launch(self, job: int) -> None:
        count = self.nodes[job]
        used = [heapq.heappop(self.free_nodes) for _ in range(count)]
        self.allocation[job] = used
        self.free -= count
        self.start[job] = self.now
        self.running[job] = (self.now + self.estimate[job], count)
        heapq.heappush(self.completions, (self.now + self.runtime[job], self.started, job))
        self.started += 1

    def _schedule(self) -> None:
        self.settled = True
        pending = self.pending
        taken = 0
        while taken < len(pending) and self.nodes[pending[taken]] <= self.free:
            self._launch(pending[taken])
            taken += 1
        if taken:
            del pending[:taken]
        if len(pending) < 2 or self.free == 0 or self.depth == 0:
            return
        shadow, extra = self._reservation(self.nodes[pending[0]])
        window = pending[1 : 1 + self.depth]
        idx = np.asarray(window, dtype=np.int64)
        size = self.nodes_np[idx].copy()
        fits_before_shadow = self.now + self.estimate_np[idx] <= shadow
        launched: set[int] = set()
        free = self.free
        while free > 0:
            ok = (size <= free) & (fits_before_shadow | (size <= extra))
            pick = int(np.argmax(ok))
            if not ok[pick]:
                break
            job = window[pick]
            self._launch(job)
            launched.add(job)
            free = self.free
            if not fits_before_shadow[pick]:
                extra -= int(size[pick])
            size[pick] = _NEVER
        if launched:
            pending[1 : 1 + self.depth] = [j for j in window if j not in launched]
            self.settled = False

    def _reservation(self, need: int) -> tuple[float, int]:
        """Shadow time for a head job needing ``need`` nodes, and the nodes spare then."""
        available = self.free
        for estimated_end, count in sorted(self.running.values()):
            available += count
            if available >= need:
                return estimated_end, available - need
        raise AssertionError("head job larger than the partition")  # excluded by _validate
