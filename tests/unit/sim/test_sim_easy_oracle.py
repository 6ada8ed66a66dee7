"""The scheduler checked against the *definition* of FCFS + strict EASY backfilling.

This is not a second scheduler: nothing here decides when a job starts. ``check_strict_easy``
takes a finished schedule and, at every event time t (every submit and every end), looks at
the state once all events at t are handled, and checks the rules EASY is defined by:

1. the machine is never overfilled (busy nodes <= N);
2. the head of the FCFS queue does not fit in the free nodes (else FCFS would start it);
3. the head's reservation is never delayed: it starts no later than the shadow time computed
   at t, the earliest estimated end (start + max(requested, runtime)) of running jobs at which
   enough nodes are free, counting *every* job that ends by then (ties included);
4. no queued job within the backfill window is left waiting although EASY would start it:
   it fits in the free nodes, and it either ends (by its estimate) by the shadow time or needs
   no more than the nodes spare at the shadow time ("extra").

A schedule that passes is strict EASY (up to the per-event pass convention, which only decides
*which* of several legal schedules comes out). The hand-checked traces below have running jobs
that end at exactly the shadow time, which is where a walk that stops at the first job after
which the head fits gets "extra" too low.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.sim.schedule import Schedule, simulate


@dataclass(frozen=True)
class Job:
    submit: float
    runtime: float
    requested: float
    nodes: int


def schedule_of(jobs: list[Job], n_nodes: int, max_test: int | None = None) -> Schedule:
    return simulate(
        np.asarray([j.submit for j in jobs], dtype=np.float64),
        np.asarray([j.runtime for j in jobs], dtype=np.float64),
        np.asarray([j.requested for j in jobs], dtype=np.float64),
        np.asarray([j.nodes for j in jobs], dtype=np.int64),
        n_nodes,
        bf_max_job_test=max_test,
    )


def strict_reservation(free: int, running: list[tuple[float, int]], need: int) -> tuple[float, int]:
    """Shadow time and spare nodes then, from (estimated end, nodes) of the running jobs."""
    available = free
    ends = sorted(running)
    for i, (end, count) in enumerate(ends):
        available += count
        if available >= need:
            # every other job ending at the same moment frees its nodes then too
            available += sum(c for e, c in ends[i + 1 :] if e == end)
            return end, available - need
    raise AssertionError(f"head needs {need} nodes; the machine cannot free that many")


def check_strict_easy(
    jobs: list[Job], n_nodes: int, s: Schedule, max_test: int | None = None
) -> None:
    n = len(jobs)
    start, end = s.start.tolist(), s.end.tolist()
    estimate = [max(j.requested, j.runtime) for j in jobs]
    fcfs = sorted(range(n), key=lambda j: (jobs[j].submit, j))
    times = sorted({j.submit for j in jobs} | set(end))
    for t in times:
        running = [j for j in range(n) if start[j] <= t < end[j]]
        busy = sum(jobs[j].nodes for j in running)
        assert busy <= n_nodes, f"t={t}: {busy} nodes busy on {n_nodes}"
        free = n_nodes - busy
        queue = [j for j in fcfs if jobs[j].submit <= t < start[j]]
        if not queue:
            continue
        head = queue[0]
        assert jobs[head].nodes > free, (
            f"t={t}: head job {head} needs {jobs[head].nodes} nodes, {free} are free, "
            f"yet it waits until {start[head]}"
        )
        shadow, extra = strict_reservation(
            free, [(start[j] + estimate[j], jobs[j].nodes) for j in running], jobs[head].nodes
        )
        assert start[head] <= shadow, (
            f"t={t}: head job {head} reserved for {shadow} but starts at {start[head]}"
        )
        for j in queue[1:max_test]:  # the head and max_test - 1 behind it; None: all
            size = jobs[j].nodes
            startable = size <= free and (t + estimate[j] <= shadow or size <= extra)
            assert not startable, (
                f"t={t}: job {j} ({size} nodes, estimate {estimate[j]}) could be backfilled "
                f"(free {free}, shadow {shadow}, extra {extra}) but waits until {start[j]}"
            )


def test_issue_example_tie_at_the_shadow_time() -> None:
    # N = 16. Three 4-node jobs from t = 0, requested ends 100, 100 and 300. A 7-node head
    # arrives at t = 1: shadow time 100, when 4 (free) + 4 + 4 = 12 nodes are free, so
    # extra = 12 - 7 = 5. The 3-node job with a 400 s request arriving at t = 2 fits in the
    # 4 free nodes and in the 5 spare ones: strict EASY starts it at once.
    jobs = [
        Job(0, 100, 100, 4),
        Job(0, 100, 100, 4),
        Job(0, 300, 300, 4),
        Job(1, 10, 10, 7),
        Job(2, 400, 400, 3),
    ]
    s = schedule_of(jobs, 16)
    check_strict_easy(jobs, 16, s)
    assert s.start.tolist() == [0, 0, 0, 100, 2]


def test_tie_counts_only_jobs_ending_exactly_then() -> None:
    # As above, but the second job's request ends at 101: at the shadow time (100) only
    # 4 + 4 = 8 nodes are free, extra = 1, and the 3-node, 400 s job must wait. It starts when
    # the head's reservation no longer stands in the way: the head starts at 100 (A ends, the
    # second job has 4 nodes left to run until 101; 4 + 4 free >= 7), ends at 110; at 101
    # the second job has freed its nodes: 16 - 4 (C) - 7 (head) = 5 free, so it starts at 101.
    jobs = [
        Job(0, 100, 100, 4),
        Job(0, 101, 101, 4),
        Job(0, 300, 300, 4),
        Job(1, 10, 10, 7),
        Job(2, 400, 400, 3),
    ]
    s = schedule_of(jobs, 16)
    check_strict_easy(jobs, 16, s)
    assert s.start.tolist() == [0, 0, 0, 100, 101]


def test_tie_where_extra_is_used_up_by_a_second_backfill() -> None:
    # N = 10. A and B (3 nodes each) end, by request, at 50. The 6-node head arrives at t = 1:
    # 4 nodes free, shadow 50, when 4 + 3 + 3 = 10 are free, so extra = 4 (a walk that stops
    # at A says 7 - 6 = 1). X (2 nodes, 500 s) at t = 2 takes 2 spare nodes (extra 4 -> 2);
    # Y (2 nodes, 500 s) at t = 3 takes the other 2 (extra -> 0); Z (1 node) at t = 4 finds
    # no free node. The head starts at 50 on A's and B's nodes, Z when the head ends.
    jobs = [
        Job(0, 50, 50, 3),
        Job(0, 50, 50, 3),
        Job(1, 10, 10, 6),
        Job(2, 500, 500, 2),
        Job(3, 500, 500, 2),
        Job(4, 500, 500, 1),
    ]
    s = schedule_of(jobs, 10)
    check_strict_easy(jobs, 10, s)
    assert s.start.tolist() == [0, 0, 50, 2, 3, 60]


def test_job_ending_exactly_at_its_request_frees_its_nodes_at_that_time() -> None:
    # A job whose runtime equals its request ends at its estimated end like any job: its
    # completion at t = 100 is handled before the arrival at t = 100, which finds its nodes.
    jobs = [Job(0, 100, 100, 2), Job(0, 50, 50, 2), Job(100, 10, 10, 4)]
    s = schedule_of(jobs, 4)
    check_strict_easy(jobs, 4, s)
    assert s.start.tolist() == [0, 0, 100]


SUBMITS = st.one_of(st.sampled_from([0, 0, 0, 10, 50]), st.integers(0, 200))
# Few distinct requests make ties at the shadow time common.
REQUESTS = st.one_of(st.sampled_from([50, 100, 100, 150]), st.integers(0, 240))


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[Job], int]:
    n_nodes = draw(st.integers(1, 12))
    count = draw(st.integers(1, 30))
    jobs = []
    for _ in range(count):
        requested = float(draw(REQUESTS))
        exact = draw(st.booleans())
        runtime = requested if exact else float(draw(st.integers(0, 120)))
        jobs.append(Job(float(draw(SUBMITS)), runtime, requested, draw(st.integers(1, n_nodes))))
    return jobs, n_nodes


@given(case=traces(), max_test=st.sampled_from([1, 2, 3, 6, None]))
@settings(max_examples=600, deadline=None)
def test_every_schedule_is_strict_easy(case: tuple[list[Job], int], max_test: int | None) -> None:
    jobs, n_nodes = case
    check_strict_easy(jobs, n_nodes, schedule_of(jobs, n_nodes, max_test), max_test)


@pytest.mark.parametrize("max_test", [1, 50, None])
def test_batch_mode_is_strict_easy(max_test: int | None) -> None:
    rng = np.random.default_rng(7)
    requested = rng.choice([60.0, 120.0, 600.0, 3600.0], 300)
    runtime = np.where(rng.random(300) < 0.5, requested, np.floor(requested * rng.random(300)))
    nodes = rng.integers(1, 17, 300)
    jobs = [
        Job(0.0, float(r), float(q), int(k))
        for r, q, k in zip(runtime, requested, nodes, strict=True)
    ]
    check_strict_easy(jobs, 16, schedule_of(jobs, 16, max_test), max_test)
