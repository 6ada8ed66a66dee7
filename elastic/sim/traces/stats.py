"""Table 1 of the paper: job count, node-hours, runtime and node-count distributions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.sim.traces.model import Trace


@dataclass(frozen=True)
class Distribution:
    mean: float
    min: float
    q25: float
    q50: float
    q75: float
    max: float

    @classmethod
    def of(cls, values: NDArray[np.float64]) -> Distribution:
        # Linear interpolation between order statistics (numpy's and pandas' default), which is
        # what gives Table 1's 134.25 s third quartile for HTC.
        q25, q50, q75 = (float(v) for v in np.percentile(values, [25, 50, 75]))
        return cls(float(values.mean()), float(values.min()), q25, q50, q75, float(values.max()))


@dataclass(frozen=True)
class TraceStats:
    jobs: int
    node_hours: float
    runtime: Distribution
    node_count: Distribution


def trace_stats(trace: Trace) -> TraceStats:
    runtime = trace.runtime.astype(np.float64)
    nodes = trace.nodes.astype(np.float64)
    return TraceStats(
        jobs=len(trace),
        node_hours=float((runtime * nodes).sum() / 3600.0),
        runtime=Distribution.of(runtime),
        node_count=Distribution.of(nodes),
    )
