"""The sweep's wasted cycles (``wasted_by_job``) against the policies' ``wasted_batch``.

``run_sweep`` counts WC from per-job arrays instead of the (S, N) grids ``wasted_batch`` reads.
The terms are the same; only the order of the per-snapshot sum may differ, so the results
are equal bit for bit when the terms are whole numbers (traces in whole seconds, as every
trace ptc ships) and equal to rounding otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from elastic.policies import build_batch, make_policy, select_batch, wasted_batch
from elastic.sim.schedule import Schedule, simulate
from elastic.sim.snapshots import node_jobs, snapshot_times
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep

GPS = (0.0, 7.0, 30.0, 120.0)


def reference_sweep(
    schedule: Schedule, priority: NDArray[np.float64], config: SweepConfig
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The sweep as the policies' batch functions compute it, over the whole (S, N) grid."""
    times = snapshot_times(schedule, config.interval)
    grid = node_jobs(schedule, times)
    batch = build_batch(times, grid, schedule.start, schedule.end, schedule.nodes, priority)
    shape = (len(config.policies), len(config.grace_periods), times.shape[0])
    wc, high = np.empty(shape), np.empty(shape)
    for p, name in enumerate(config.policies):
        chosen = select_batch(make_policy(name, config.seed).evaluate_batch(batch), config.preempt)
        wc[p], high[p] = wasted_batch(batch, chosen, config.grace_periods)
    return wc, high


@st.composite
def cases(draw: st.DrawFn, whole: bool) -> tuple[Schedule, NDArray[np.float64], SweepConfig]:
    n_nodes = draw(st.integers(1, 8))
    count = draw(st.integers(1, 40))
    seconds = st.integers(0, 300) if whole else st.floats(0.0, 300.0, allow_subnormal=False)
    submit = np.asarray([float(draw(seconds)) for _ in range(count)])
    runtime = np.asarray([float(draw(seconds)) for _ in range(count)])
    requested = np.asarray([float(draw(seconds)) for _ in range(count)])
    nodes = np.asarray([draw(st.integers(1, n_nodes)) for _ in range(count)], dtype=np.int64)
    priority = np.asarray([draw(st.sampled_from([1.0, 1.0, 10.0])) for _ in range(count)])
    schedule = simulate(submit, runtime, requested, nodes, n_nodes)
    config = SweepConfig(
        grace_periods=GPS,
        preempt=draw(st.integers(0, n_nodes)),
        interval=draw(st.sampled_from([7.0, 30.0])),
        seed=draw(st.integers(0, 3)),
        chunk=draw(st.sampled_from([3, 64])),
    )
    return schedule, priority, config


def _sweep(case: tuple[Schedule, NDArray[np.float64], SweepConfig]) -> SweepResult:
    schedule, priority, config = case
    return run_sweep(schedule, priority, config)


@given(case=cases(whole=True))
@settings(max_examples=80, deadline=None)
def test_sweep_equals_wasted_batch_bit_for_bit_on_whole_seconds(
    case: tuple[Schedule, NDArray[np.float64], SweepConfig],
) -> None:
    wc, high = reference_sweep(*case)
    result = _sweep(case)
    assert np.array_equal(result.wc, wc)
    assert np.array_equal(result.wc_high, high)


@given(case=cases(whole=False))
@settings(max_examples=80, deadline=None)
def test_sweep_equals_wasted_batch_to_rounding(
    case: tuple[Schedule, NDArray[np.float64], SweepConfig],
) -> None:
    wc, high = reference_sweep(*case)
    result = _sweep(case)
    assert result.wc == pytest.approx(wc, rel=1e-12, abs=1e-9)
    assert result.wc_high == pytest.approx(high, rel=1e-12, abs=1e-9)


def test_high_priority_part_of_a_hand_checked_snapshot() -> None:
    # Two 1-node jobs from t=0 on 2 nodes; job 1 is high-priority. At t=30 both have run
    # 30 s and have 70 s left; preempting both with GP=60 loses (30 + 60) * 1 each.
    schedule = simulate(np.zeros(2), np.full(2, 100.0), np.full(2, 100.0), np.ones(2, np.int64), 2)
    config = SweepConfig(policies=("LIFO",), grace_periods=(60.0,), preempt=2, interval=30.0)
    result = run_sweep(schedule, np.asarray([1.0, 10.0]), config)
    at = int(np.flatnonzero(result.times == 30.0)[0])
    assert result.wc[0, 0, at] == 180.0
    assert result.wc_high[0, 0, at] == 90.0
