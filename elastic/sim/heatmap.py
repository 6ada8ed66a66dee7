"""Data for Fig. 5: PAP and PAP+ preemption vectors over time on a small partition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from elastic.policies import build_batch, make_policy
from elastic.sim.schedule import simulate
from elastic.sim.snapshots import node_jobs
from elastic.sim.traces import Trace

HEATMAP = "pv_heatmap.parquet"


@dataclass(frozen=True)
class HeatmapSpec:
    nodes: int = 10
    jobs: int = 200  # the first jobs of the workload: "a fraction of" it, as in the paper
    snapshots: int = 240
    interval: float = 300.0


def pv_heatmap(
    trace: Trace, submit: NDArray[np.float64], spec: HeatmapSpec, policies: tuple[str, ...]
) -> pd.DataFrame:
    """Long table (policy, snapshot, time_s, node, value, high) for ``spec.snapshots`` times."""
    fits = np.flatnonzero(trace.nodes <= spec.nodes)[: spec.jobs]
    part = trace.take(fits)
    schedule = simulate(submit[fits], part.runtime, part.requested, part.nodes, spec.nodes)
    t0 = float(schedule.submit.min())
    times = t0 + spec.interval * np.arange(spec.snapshots, dtype=np.float64)
    times = times[times < schedule.makespan]
    grid = node_jobs(schedule, times)
    batch = build_batch(times, grid, schedule.start, schedule.end, schedule.nodes, part.priority)
    frames = []
    for name in policies:
        values = make_policy(name).evaluate_batch(batch)
        snap, node = np.indices(values.shape)
        frames.append(
            pd.DataFrame(
                {
                    "policy": name,
                    "snapshot": snap.ravel(),
                    "time_s": times[snap.ravel()],
                    "node": node.ravel(),
                    "value": values.ravel(),
                    "high": (batch.priority > 1.0).ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
