"""The paper's HTC findings (§4.3) on the real HTC trace: a regression test of the results."""

from __future__ import annotations

import numpy as np
import pytest
from tracedata import trace_file

from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.workload import WorkloadSpec, arrivals, prepare


@pytest.fixture(scope="module")
def htc() -> SweepResult:
    trace, _ = prepare(WorkloadSpec(trace_file("htc-condor"), max_nodes=20))
    assert len(trace) == 11_200
    schedule = simulate(arrivals(trace, "batch"), trace.runtime, trace.requested, trace.nodes, 20)
    config = SweepConfig(grace_periods=(60.0, 120.0, 1200.0, 1800.0), preempt=10)
    return run_sweep(schedule, trace.priority, config)


def median(result: SweepResult, policy: str, gp: float) -> float:
    p, g = result.policies.index(policy), result.grace_periods.index(gp)
    return float(np.median(result.wc[p, g]))


@pytest.mark.parametrize("gp", [60.0, 120.0])
def test_lifo_wastes_far_less_than_fifo_and_random(htc: SweepResult, gp: float) -> None:
    lifo = median(htc, "LIFO", gp)
    assert lifo < 0.5 * median(htc, "FIFO", gp)
    assert lifo < 0.5 * median(htc, "RANDOM", gp)


def test_short_grace_periods_do_no_worse_for_lifo(htc: SweepResult) -> None:
    short = max(median(htc, "LIFO", 60.0), median(htc, "LIFO", 120.0))
    assert short <= min(median(htc, "LIFO", 1200.0), median(htc, "LIFO", 1800.0))


def test_pap_is_lifo_on_a_single_node_workload(htc: SweepResult) -> None:
    p, q = htc.policies.index("PAP"), htc.policies.index("LIFO")
    assert np.array_equal(htc.wc[p], htc.wc[q])
