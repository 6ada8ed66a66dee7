"""Data for Fig. 5: preemption vectors over time on a small partition running the workload.

As in the paper, the whole workload runs on a 10-node partition and a short window of the
simulation is shown. The figure exists to show how PAP+ raises high-priority jobs above the
others, so the window is the one with the most snapshots in which high- and default-priority
jobs run side by side (else the most high-priority node-time, else the first window).
"""

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
    snapshots: int = 240
    interval: float = 300.0


def pv_heatmap(
    trace: Trace, submit: NDArray[np.float64], spec: HeatmapSpec, policies: tuple[str, ...]
) -> pd.DataFrame:
    """Long table (policy, snapshot, time_s, node, value, high), ``spec.snapshots`` times."""
    fits = np.flatnonzero(trace.nodes <= spec.nodes)
    columns = ("policy", "snapshot", "time_s", "node", "value", "high")
    if fits.size == 0:
        return pd.DataFrame(columns=list(columns))
    part = trace.take(fits)
    schedule = simulate(submit[fits], part.runtime, part.requested, part.nodes, spec.nodes)
    t0 = float(schedule.submit.min())
    steps = int((schedule.makespan - t0) // spec.interval) + 1
    times = t0 + spec.interval * np.arange(steps, dtype=np.float64)
    grid = node_jobs(schedule, times)
    high = np.where(grid >= 0, part.priority[np.maximum(grid, 0)] > 1.0, False)
    default = (grid >= 0) & ~high
    together = np.asarray(high.any(axis=1) & default.any(axis=1), dtype=np.int64)
    weight = together if together.any() else np.asarray(high.sum(axis=1), dtype=np.int64)
    lo = _busiest_window(weight, spec.snapshots)
    window = slice(lo, lo + spec.snapshots)
    times, grid, high = times[window], grid[window], high[window]
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
                    "high": high.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _busiest_window(weight: NDArray[np.int64], width: int) -> int:
    """Start of the ``width``-long window with the largest total weight (earliest on ties)."""
    if weight.size <= width:
        return 0
    totals = np.convolve(weight, np.ones(width, dtype=np.int64), mode="valid")
    return int(np.argmax(totals))
