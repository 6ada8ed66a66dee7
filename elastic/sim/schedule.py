"""FCFS with strict EASY backfilling on N identical nodes: a discrete-event simulation.

Conventions (they change results, so they are fixed here and tested):

- Events are job arrivals and job completions. At equal timestamps completions come first,
  then arrivals; among completions, the job that started first (then the earlier arrival)
  goes first; arrivals keep FCFS order (submit time, then trace order). Every single event is
  followed by one scheduling pass, so a pass may see a job that ends at the same timestamp
  as still running (its completion is the next event).
- Jobs end at their actual runtime; reservations use the *estimate*, max(requested, runtime)
  (Slurm would have killed a job at its limit, so a log's runtime shows the limit was at
  least that long). A job whose runtime equals its request frees its nodes at that time like
  any other completion; until its completion event is handled it counts as running, and its
  nodes count as free at any shadow time at or after its end.
- A pass starts queued jobs in FCFS order while the head fits. If the head does not fit, it
  gets a reservation at the shadow time: the earliest estimated end of a running job at which
  enough nodes are free, counting *every* running job that ends by then, ties included.
  ``extra`` is the number of nodes free at the shadow time beyond what the head needs. A
  queued job behind the head then starts at once if it fits in the free nodes and either
  ends, by its estimate, no later than the shadow time, or needs no more than ``extra`` nodes
  (which it then uses up). Jobs are tried in FCFS order, so of two candidates the earlier one
  goes first. Backfilled jobs can therefore never delay the head's reservation.
- ``bf_max_job_test`` (Slurm's parameter of the same name) bounds how many queued jobs a pass
  looks at: the head and the ``bf_max_job_test - 1`` jobs behind it. ``None`` (the default,
  the paper's EASY) looks at the whole queue. When backfilled jobs leave those places, the
  jobs moving into them are looked at in the same pass (Slurm instead counts the jobs it has
  started against the limit), so at the end of every pass no job among the first
  ``bf_max_job_test`` could start.
- A job takes the lowest-numbered free nodes.

How it runs fast: the scheduling loop counts free nodes and keeps running jobs' estimated ends
aggregated per end time, so the shadow time and ``extra`` cost one walk over distinct end
times, ties included by construction. Free nodes are kept as sorted intervals, so a job's
lowest-numbered free nodes are the first intervals, not one heap operation per node. Queued
jobs sit in arrival order in two arrays (size, estimate) that a backfill scan reads in
vectorised chunks, or in plain Python when the stretch to read is short (with jobs arriving
at their submit times it usually is, and a numpy call costs more than reading a few hundred
list entries). Jobs of the same size and estimate (a *kind*) are startable together or
not at all, so the scan can instead ask every kind that fits for its earliest queued job,
one vectorised read over kinds rather than over the queue; with the whole trace queued at
t = 0 (batch arrival) that is what keeps a pass from reading thousands of jobs. Both ways
find the same job (tests force each). After a pass nothing in the window can start, and an
arrival changes nothing for the jobs already queued (free nodes, shadow and ``extra`` stay,
time only moves towards the shadow), so an arrival only tests itself.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError

_GONE = np.iinfo(np.int64).max  # q_size of a job that is not queued: never fits
_FIRST_CHUNK = 64
_PYTHON_SCAN = 256  # a queue stretch this short is read in plain Python, not through numpy


@dataclass(frozen=True)
class Schedule:
    """Start/end per job (trace order) and the nodes it ran on, as intervals, CSR style:
    job j used nodes ``[iv_lo[k], iv_hi[k])`` for ``k`` in ``iv_ptr[j]:iv_ptr[j + 1]``."""

    n_nodes: int
    submit: NDArray[np.float64]
    start: NDArray[np.float64]
    end: NDArray[np.float64]
    nodes: NDArray[np.int64]
    iv_ptr: NDArray[np.int64]
    iv_lo: NDArray[np.int64]
    iv_hi: NDArray[np.int64]

    def nodes_of(self, job: int) -> NDArray[np.int64]:
        lo, hi = int(self.iv_ptr[job]), int(self.iv_ptr[job + 1])
        parts = [np.arange(a, b) for a, b in zip(self.iv_lo[lo:hi], self.iv_hi[lo:hi], strict=True)]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    @cached_property
    def alloc_ptr(self) -> NDArray[np.int64]:
        """Node-by-node CSR: job j used ``alloc_nodes[alloc_ptr[j]:alloc_ptr[j + 1]]``."""
        ptr = np.zeros(self.nodes.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.nodes, out=ptr[1:])
        return ptr

    @cached_property
    def alloc_nodes(self) -> NDArray[np.int64]:
        lengths = self.iv_hi - self.iv_lo
        total = int(lengths.sum())
        # node = interval start + offset within the interval, for every interval at once
        first = np.repeat(np.cumsum(lengths) - lengths, lengths)
        nodes: NDArray[np.int64] = np.repeat(self.iv_lo, lengths) - first
        nodes += np.arange(total, dtype=np.int64)
        return nodes

    @cached_property
    def jobs_by_node(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(jobs, bounds): node n ran ``jobs[bounds[n]:bounds[n + 1]]``, in order of start, one
        after the other (jobs of zero length left out)."""
        counts = np.diff(self.alloc_ptr)
        owner = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
        node = self.alloc_nodes
        ran = self.end[owner] > self.start[owner]
        owner, node = owner[ran], node[ran]
        order = np.lexsort((self.start[owner], node))
        owner, node = owner[order], node[order]
        bounds = np.searchsorted(node, np.arange(self.n_nodes + 1)).astype(np.int64)
        return owner, bounds

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
    bf_max_job_test: int | None = None,
    _scan: str = "auto",
) -> Schedule:
    n = int(submit.shape[0])
    _validate(submit, runtime, requested, nodes, n_nodes, bf_max_job_test)
    submit = np.asarray(submit, dtype=np.float64)
    runtime = np.asarray(runtime, dtype=np.float64)
    nodes = np.asarray(nodes, dtype=np.int64)
    estimate = np.maximum(np.asarray(requested, dtype=np.float64), runtime)
    order = np.argsort(submit, kind="stable")
    sim = _Sim(submit[order], runtime[order], estimate[order], nodes[order], n_nodes, _scan)
    sim.run(n if bf_max_job_test is None else bf_max_job_test)
    start = np.empty(n)
    start[order] = sim.start
    ivs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for pos, job in enumerate(order.tolist()):
        ivs[job] = sim.allocation[pos]
    counts = np.fromiter((len(v) for v in ivs), dtype=np.int64, count=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    flat = np.asarray([iv for v in ivs for iv in v], dtype=np.int64).reshape(-1, 2)
    return Schedule(
        n_nodes=n_nodes,
        submit=submit,
        start=start,
        end=start + runtime,
        nodes=nodes,
        iv_ptr=ptr,
        iv_lo=np.ascontiguousarray(flat[:, 0]),
        iv_hi=np.ascontiguousarray(flat[:, 1]),
    )


def _validate(
    submit: NDArray[np.float64],
    runtime: NDArray[np.float64],
    requested: NDArray[np.float64],
    nodes: NDArray[np.int64],
    n_nodes: int,
    max_test: int | None,
) -> None:
    if n_nodes < 1:
        raise InputError(f"--nodes must be >= 1, got {n_nodes}")
    if max_test is not None and max_test < 1:
        raise InputError(f"--bf-max-job-test must be >= 1 (or unset: no limit), got {max_test}")
    if not (submit.shape == runtime.shape == requested.shape == nodes.shape):
        raise InputError("trace columns have different lengths")
    arrays = {"submit": submit, "runtime": runtime, "requested": requested}
    for name, values in arrays.items():
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            raise InputError(f"job #{int(np.argmax(bad))}: {name} must be a finite number >= 0")
    too_big = (nodes < 1) | (nodes > n_nodes)
    if too_big.any():
        j = int(np.argmax(too_big))
        raise InputError(f"job #{j} needs {int(nodes[j])} nodes; the partition has {n_nodes}")


class _Sim:
    """Works on arrival positions: job p is the p-th to arrive (FCFS order)."""

    def __init__(
        self,
        arrival: NDArray[np.float64],
        runtime: NDArray[np.float64],
        estimate: NDArray[np.float64],
        nodes: NDArray[np.int64],
        n_nodes: int,
        scan: str = "auto",
    ) -> None:
        self.n = int(arrival.shape[0])
        self.scan = scan  # "auto"; tests force "python", "queue" or "kinds" to compare them
        self.arrival = arrival.tolist()
        self.runtime = runtime.tolist()
        self.estimate = estimate.tolist()
        self.size = nodes.tolist()
        self.q_size = np.full(self.n, _GONE, dtype=np.int64)  # size while queued
        self.is_queued = [False] * self.n
        self.q_est = estimate
        self.start = np.full(self.n, np.nan)
        self.allocation: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        self.free_iv: list[tuple[int, int]] = [(0, n_nodes)]  # sorted, disjoint, merged
        self.free = n_nodes
        self.est_end = [0.0] * self.n
        self.end_nodes: dict[float, int] = {}  # estimated end -> nodes of running jobs
        self.end_times: list[float] = []  # sorted keys of end_nodes
        self.completions: list[tuple[float, int, int]] = []  # (end, start seq, position)
        self.started = 0
        self.queued = 0
        self.sizes_queued: list[int] = []  # min-heap, lazily cleaned with count_by_size
        self.count_by_size = [0] * (n_nodes + 1)
        self.head = 0  # no queued job before this position
        self.arrived = 0
        self.now = 0.0
        self.shadow = 0.0
        self.extra = 0
        self.reserved = False  # shadow/extra hold for the current head and free nodes
        self._index_kinds(nodes, estimate, n_nodes)

    def _index_kinds(
        self, nodes: NDArray[np.int64], estimate: NDArray[np.float64], n_nodes: int
    ) -> None:
        """Jobs of one *kind* (same size, same estimate) are all startable or none is, so the
        earliest queued job of each kind is all a backfill scan needs to look at. Kinds are
        sorted by size, so the kinds that fit in F free nodes are the first ``fit[F]``."""
        by_kind = np.lexsort((estimate, nodes))  # stable: positions ascend within a kind
        k_nodes, k_est = nodes[by_kind], estimate[by_kind]
        new = np.ones(self.n, dtype=bool)
        new[1:] = (k_nodes[1:] != k_nodes[:-1]) | (k_est[1:] != k_est[:-1])
        first_slot = np.flatnonzero(new)
        kind_sorted = np.cumsum(new) - 1
        kind = np.empty(self.n, dtype=np.int64)
        kind[by_kind] = kind_sorted
        slot = np.empty(self.n, dtype=np.int64)
        slot[by_kind] = np.arange(self.n, dtype=np.int64)
        self.kind = kind.tolist()
        self.slot = slot.tolist()  # where a position sits in kind order
        self.by_kind = by_kind.tolist()
        self.kind_end = [*first_slot[1:].tolist(), self.n]  # past the last slot of a kind
        self.k_size = k_nodes[first_slot]
        self.k_est = k_est[first_slot]
        self.k_first = np.full(first_slot.shape[0], self.n, dtype=np.int64)  # n: none queued
        self.fit = np.searchsorted(self.k_size, np.arange(n_nodes + 1), side="right").tolist()

    def run(self, max_test: int) -> None:
        arrival, completions = self.arrival, self.completions
        n, pop = self.n, heapq.heappop
        while self.arrived < n or completions:
            a = self.arrived
            if completions and (a >= n or completions[0][0] <= arrival[a]):
                self.now, _, p = pop(completions)
                self._finish(p)
                if self.queued:
                    self._pass(max_test)
            else:
                self.now = arrival[a]
                self.arrived = a + 1
                self._enqueue(a)
                if self.queued == 1:
                    self._pass(max_test)  # a new head
                elif self.free > 0 and self.queued <= max_test:
                    self._try_arrival(a)

    def _enqueue(self, p: int) -> None:
        size = self.size[p]
        self.q_size[p] = size
        self.is_queued[p] = True
        self.queued += 1
        if self.count_by_size[size] == 0:
            heapq.heappush(self.sizes_queued, size)
        self.count_by_size[size] += 1
        kind = self.kind[p]
        if self.k_first[kind] == self.n:
            self.k_first[kind] = p

    def _smallest_queued(self) -> int:
        heap, count = self.sizes_queued, self.count_by_size
        while count[heap[0]] == 0:
            heapq.heappop(heap)
        return heap[0]

    def _try_arrival(self, p: int) -> None:
        """The pass after an arrival behind a blocked head: only the new job can start."""
        size = self.size[p]
        if size > self.free:
            return
        if not self.reserved:
            self._reserve()
        if self.now + self.estimate[p] <= self.shadow:
            self._launch(p)
        elif size <= self.extra:
            self._launch(p)
            self.extra -= size

    def _finish(self, p: int) -> None:
        size = self.size[p]
        self.free += size
        end = self.est_end[p]
        left = self.end_nodes[end] - size
        if left:
            self.end_nodes[end] = left
        else:
            del self.end_nodes[end]
            times = self.end_times
            del times[bisect_left(times, end)]
        self.reserved = False
        self._release(self.allocation[p])

    def _launch(self, p: int) -> None:
        size = self.size[p]
        self.free -= size
        self.q_size[p] = _GONE
        is_queued = self.is_queued
        is_queued[p] = False
        self.queued -= 1
        self.count_by_size[size] -= 1
        kind = self.kind[p]
        if self.k_first[kind] == p:  # the next queued job of this kind, if it has arrived
            by_kind, arrived, nxt = self.by_kind, self.arrived, self.n
            for i in range(self.slot[p] + 1, self.kind_end[kind]):
                q = by_kind[i]
                if q >= arrived:
                    break
                if is_queued[q]:
                    nxt = q
                    break
            self.k_first[kind] = nxt
        now = self.now
        self.start[p] = now
        end = now + self.estimate[p]
        self.est_end[p] = end
        if end in self.end_nodes:
            self.end_nodes[end] += size
        else:
            self.end_nodes[end] = size
            insort(self.end_times, end)
        heapq.heappush(self.completions, (now + self.runtime[p], self.started, p))
        self.started += 1
        self.allocation[p] = self._take(size)

    def _pass(self, max_test: int) -> None:
        size, is_queued = self.size, self.is_queued
        head = self.head
        while True:
            while head < self.arrived and not is_queued[head]:
                head += 1
            self.head = head
            if head == self.arrived:
                return  # nothing queued
            if size[head] > self.free:
                break
            self._launch(head)
            self.reserved = False
        if self.free == 0 or self.queued < 2 or self._smallest_queued() > self.free:
            return
        self._reserve()
        if max_test >= self.queued:
            self._scan_all(head + 1)
        else:
            self._scan_window(head, max_test)

    def _reserve(self) -> None:
        need = self.size[self.head]
        available = self.free
        for end in self.end_times:  # one entry per distinct end: ties are counted together
            available += self.end_nodes[end]
            if available >= need:
                self.shadow, self.extra, self.reserved = end, available - need, True
                return
        raise AssertionError("head job larger than the partition")  # excluded by _validate

    def _scan_all(self, lo: int) -> None:
        """Backfill behind the head, the earliest startable job first, until none can start.

        Each start only lowers ``free`` and ``extra``, so a job passed over stays unstartable
        for the rest of the pass. The next job is found either by reading the queue from
        ``lo`` on (in plain Python when the stretch is short, else in vectorised chunks) or by
        asking each kind that fits for its earliest queued job, whichever has fewer entries
        to read; all give the same job."""
        q_size, q_est, estimate, size = self.q_size, self.q_est, self.estimate, self.size
        is_queued = self.is_queued
        k_first, k_est, fit = self.k_first, self.k_est, self.fit
        hi, chunk, now, shadow, none = self.arrived, _FIRST_CHUNK, self.now, self.shadow, self.n
        while lo < hi and self.free > 0:
            free, extra = self.free, self.extra
            if self._smallest_queued() > free:
                return
            kinds = fit[free]
            if self.scan == "python" or (self.scan == "auto" and hi - lo <= _PYTHON_SCAN):
                for p in range(lo, hi):
                    fits = is_queued[p] and size[p] <= free
                    if fits and (now + estimate[p] <= shadow or size[p] <= extra):
                        break
                else:
                    return
            elif self.scan == "kinds" or (self.scan == "auto" and kinds < hi - lo):
                sure = fit[min(extra, free)] if extra > 0 else 0  # fit now and spare at shadow
                p = int(k_first[:sure].min()) if sure else none
                if sure < kinds:
                    early = now + k_est[sure:kinds] <= shadow
                    p = min(p, int(np.where(early, k_first[sure:kinds], none).min()))
                if p == none:
                    return
            else:
                top = min(hi, lo + chunk)
                sizes = q_size[lo:top]
                ok = (sizes <= free) & ((now + q_est[lo:top] <= shadow) | (sizes <= extra))
                i = int(ok.argmax())
                if not ok[i]:
                    lo, chunk = top, chunk * 4
                    continue
                p = lo + i
            self._launch(p)
            if now + estimate[p] > shadow:
                self.extra -= size[p]
            lo = p + 1

    def _scan_window(self, head: int, max_test: int) -> None:
        """Backfill among the ``max_test - 1`` queued jobs behind the head, again until the
        jobs that move into the window after a start cannot start either."""
        now, shadow = self.now, self.shadow
        launched = True
        while launched and self.free > 0:
            launched = False
            waiting = np.flatnonzero(self.q_size[head + 1 : self.arrived] != _GONE)
            window = waiting[: max_test - 1] + head + 1
            if window.size == 0:
                return
            sizes = self.q_size[window]
            fits_by_shadow = now + self.q_est[window] <= shadow
            while self.free > 0:
                ok = (sizes <= self.free) & (fits_by_shadow | (sizes <= self.extra))
                i = int(ok.argmax())
                if not ok[i]:
                    break
                p = int(window[i])
                self._launch(p)
                launched = True
                sizes[i] = _GONE
                if not fits_by_shadow[i]:
                    self.extra -= self.size[p]

    def _take(self, count: int) -> list[tuple[int, int]]:
        """The ``count`` lowest-numbered free nodes, as intervals."""
        free_iv = self.free_iv
        used: list[tuple[int, int]] = []
        i = 0
        while count:
            lo, hi = free_iv[i]
            if hi - lo <= count:
                used.append((lo, hi))
                count -= hi - lo
                i += 1
            else:
                used.append((lo, lo + count))
                free_iv[i] = (lo + count, hi)
                count = 0
        del free_iv[:i]
        return used

    def _release(self, intervals: list[tuple[int, int]]) -> None:
        free_iv = self.free_iv
        for lo, hi in intervals:
            i = bisect_left(free_iv, (lo, hi))
            if i > 0 and free_iv[i - 1][1] == lo:
                i -= 1
                lo = free_iv[i][0]
                del free_iv[i]
            if i < len(free_iv) and free_iv[i][0] == hi:
                hi = free_iv[i][1]
                del free_iv[i]
            free_iv.insert(i, (lo, hi))
