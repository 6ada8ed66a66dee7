"""FCFS + EASY backfilling on hand-checkable traces, and properties on random ones."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from elastic.errors import InputError
from elastic.sim.schedule import Schedule, simulate
from elastic.sim.snapshots import node_jobs, snapshot_times
from elastic.sim.sweep import SweepConfig, run_sweep


def run(
    jobs: list[tuple[float, float, float, int]], n_nodes: int, max_test: int | None = None
) -> Schedule:
    """jobs: (submit, runtime, requested, nodes)."""
    cols = list(zip(*jobs, strict=True))
    return simulate(
        np.asarray(cols[0], dtype=np.float64),
        np.asarray(cols[1], dtype=np.float64),
        np.asarray(cols[2], dtype=np.float64),
        np.asarray(cols[3], dtype=np.int64),
        n_nodes,
        bf_max_job_test=max_test,
    )


def test_fcfs_without_backfill_opportunity() -> None:
    s = run([(0, 10, 10, 2), (0, 5, 5, 2), (0, 1, 1, 1)], n_nodes=2)
    assert s.start.tolist() == [0, 10, 15]
    assert s.end.tolist() == [10, 15, 16]


def test_backfill_never_delays_the_head_reservation() -> None:
    # 4 nodes. A holds 2 until t=100. Head B needs all 4: reserved at t=100.
    # D (2 nodes, requests 200 s) fits in the free nodes now but would still hold them at
    # t=100: it must not start before B. C (2 nodes, requests 50 s) ends before t=100:
    # it is backfilled at t=3 even though it is behind D in the queue.
    s = run(
        [(0, 100, 100, 2), (1, 10, 10, 4), (2, 200, 200, 2), (3, 50, 50, 2)],
        n_nodes=4,
    )
    assert s.start[0] == 0
    assert s.start[3] == 3  # C backfilled
    assert s.start[1] == 100  # B starts exactly at its reservation
    assert s.start[2] == 110  # D after B, not before it


def test_backfill_may_use_nodes_the_head_does_not_need() -> None:
    # 5 nodes. A holds 3 until t=100; head B needs 4 -> at t=100 one node is spare.
    # C (1 node, long) may take that spare node; D (1 node, long) may not: none left.
    s = run(
        [(0, 100, 100, 3), (1, 10, 10, 4), (2, 1000, 1000, 1), (3, 1000, 1000, 1)],
        n_nodes=5,
    )
    assert s.start[2] == 2
    assert s.start[1] == 100
    assert s.start[3] == 110  # after B ends, not at t=3 (that would delay B)


def test_reservation_uses_requested_time_and_jobs_end_at_runtime() -> None:
    # A requests 1000 s but ends at 10. C (req 500) fits before A's *estimated* end, so it
    # backfills; B then starts at 10, when A actually ends, though C still runs.
    s = run([(0, 10, 1000, 1), (1, 5, 5, 2), (2, 500, 500, 1)], n_nodes=2)
    assert s.start[2] == 2
    assert s.end[0] == 10
    assert s.start[1] == 502  # B needs both nodes: after C


def test_underestimated_requests_do_not_break_reservations() -> None:
    # A's request (5 s) is shorter than its runtime (100 s): treated as 100 s.
    s = run([(0, 100, 5, 1), (1, 10, 10, 2), (2, 50, 50, 1)], n_nodes=2)
    assert s.start[1] == 100
    assert s.start[2] == 2  # ends at 52 < 100: backfilled


def test_completion_before_arrival_at_equal_time() -> None:
    # The arrival at t=10 finds the node A just freed.
    s = run([(0, 10, 10, 1), (10, 5, 5, 1)], n_nodes=1)
    assert s.start[1] == 10


def test_testing_only_the_head_is_plain_fcfs() -> None:
    s = run([(0, 100, 100, 1), (1, 10, 10, 2), (2, 5, 5, 1)], n_nodes=2, max_test=1)
    assert s.start.tolist() == [0, 100, 110]


def test_jobs_take_lowest_free_nodes() -> None:
    s = run([(0, 10, 10, 1), (0, 20, 20, 2), (5, 1, 1, 1)], n_nodes=4)
    assert s.nodes_of(0).tolist() == [0]
    assert s.nodes_of(1).tolist() == [1, 2]
    assert s.nodes_of(2).tolist() == [3]


def test_job_larger_than_partition_is_an_error() -> None:
    with pytest.raises(InputError, match="needs 3 nodes; the partition has 2"):
        run([(0, 1, 1, 3)], n_nodes=2)


def test_snapshots_every_completion_and_interval() -> None:
    s = run([(0, 45, 45, 1), (0, 70, 70, 1)], n_nodes=2)
    times = snapshot_times(s, 30.0)
    assert times.tolist() == [0, 30, 45, 60, 70]
    grid = node_jobs(s, times)
    # at t=45 job 0 has just ended; at t=70 everything has
    assert grid.tolist() == [[0, 1], [0, 1], [-1, 1], [-1, 1], [-1, -1]]


def test_snapshot_shows_a_job_starting_when_another_ends() -> None:
    s = run([(0, 10, 10, 1), (0, 10, 10, 1)], n_nodes=1)
    grid = node_jobs(s, np.asarray([0.0, 5.0, 10.0, 20.0]))
    assert grid[:, 0].tolist() == [0, 0, 1, -1]


def test_sweep_hand_checked_wasted_cycles() -> None:
    # Submit-mode arrivals: job 0 at t=0 (100 s), job 1 at t=30 (300 s); at t=60 they have
    # run 60 s and 30 s. LIFO releases job 1: 270 s left > GP, WC = (30 + 60) * 1 = 90.
    # FIFO releases job 0: 40 s left < GP = 60, WC = 0.
    s = run([(0, 100, 100, 1), (30, 300, 300, 1)], n_nodes=2)
    config = SweepConfig(policies=("FIFO", "LIFO"), grace_periods=(60.0,), preempt=1)
    result = run_sweep(s, np.ones(2), config)
    at = int(np.flatnonzero(result.times == 60.0)[0])
    assert result.wc[0, 0, at] == 0.0
    assert result.wc[1, 0, at] == 90.0


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[tuple[float, float, float, int]], int]:
    n_nodes = draw(st.integers(1, 6))
    count = draw(st.integers(1, 25))
    jobs = []
    for _ in range(count):
        submit = float(draw(st.integers(0, 200)))
        runtime = float(draw(st.integers(0, 120)))
        requested = float(draw(st.integers(0, 240)))
        jobs.append((submit, runtime, requested, draw(st.integers(1, n_nodes))))
    return jobs, n_nodes


def _busy_intervals(s: Schedule) -> dict[int, list[tuple[float, float]]]:
    per_node: dict[int, list[tuple[float, float]]] = {}
    for j in range(s.start.shape[0]):
        for node in s.nodes_of(j).tolist():
            per_node.setdefault(node, []).append((float(s.start[j]), float(s.end[j])))
    return per_node


@given(case=traces(), max_test=st.sampled_from([1, 2, 4, None]))
@settings(max_examples=150, deadline=None)
def test_schedule_properties(
    case: tuple[list[tuple[float, float, float, int]], int], max_test: int | None
) -> None:
    jobs, n_nodes = case
    s = run(jobs, n_nodes, max_test)
    submit = np.asarray([j[0] for j in jobs])
    assert (s.start >= submit).all()  # no job starts before it is submitted
    assert np.isfinite(s.start).all()  # every job runs
    for j, job in enumerate(jobs):
        nodes = s.nodes_of(j)
        assert len(set(nodes.tolist())) == job[3] == nodes.size
        assert ((nodes >= 0) & (nodes < n_nodes)).all()
    for intervals in _busy_intervals(s).values():  # no node runs two jobs at once
        ordered = sorted(i for i in intervals if i[1] > i[0])
        for (_, end), (start, _) in itertools.pairwise(ordered):
            assert start >= end
    times = snapshot_times(s, 7.0)
    grid = node_jobs(s, times)
    _check_grid(s, times, grid)
    result = run_sweep(s, np.ones(len(jobs)), SweepConfig(preempt=min(2, n_nodes), chunk=4))
    assert (result.wc >= 0).all()  # WC is never negative


def _check_grid(s: Schedule, times: NDArray[np.float64], grid: NDArray[np.int64]) -> None:
    for row, t in enumerate(times.tolist()):
        for node in range(s.n_nodes):
            job = int(grid[row, node])
            running = [
                j
                for j in range(s.start.shape[0])
                if node in s.nodes_of(j).tolist() and s.start[j] <= t < s.end[j]
            ]
            assert running == ([job] if job >= 0 else [])
