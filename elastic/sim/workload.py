"""From a trace file to the simulator's input: load, filter, replicate, prioritise, arrive."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError
from elastic.policies import PriorityRule
from elastic.sim.traces import (
    FilterStep,
    Trace,
    first_jobs,
    load_trace,
    mark_random_fraction,
    paper_filters,
    shuffled_copies,
    trace_kind,
)
from elastic.sim.traces.filters import DAY_S

Arrival = Literal["batch", "submit"]
HTC_COPIES = 10  # §4: the HTC workload is ten shuffled copies of the 1,120-job trace


@dataclass(frozen=True)
class WorkloadSpec:
    path: Path
    max_nodes: int
    max_runtime: float = DAY_S
    htc_copies: int | None = None  # None: 10 for HTCondor submit files, 1 otherwise
    seed: int = 0
    limit_jobs: int | None = None
    priority_rules: tuple[str, ...] = ()
    high_fraction: float = 0.0
    high_priority: float = 10.0
    swf_processors: str = "requested"  # SWF: field 8 (requested) or 5 (allocated) first


def prepare(spec: WorkloadSpec) -> tuple[Trace, list[FilterStep]]:
    trace = load_trace(spec.path, spec.swf_processors)
    copies = spec.htc_copies
    if copies is None:
        copies = HTC_COPIES if trace_kind(spec.path) == "condor" else 1
    trace, steps = paper_filters(trace, spec.max_nodes, spec.max_runtime)
    if copies != 1:
        trace = shuffled_copies(trace, copies, spec.seed)
    trace = first_jobs(trace, spec.limit_jobs)
    rule = PriorityRule.parse(spec.priority_rules)
    if rule.clauses:
        trace = trace.with_priority(
            np.asarray(rule.apply(trace.string_columns(), len(trace)), dtype=np.float64)
        )
    if spec.high_fraction > 0:
        trace = mark_random_fraction(trace, spec.high_fraction, spec.high_priority, spec.seed)
    return trace, steps


def arrivals(trace: Trace, mode: str) -> NDArray[np.float64]:
    """Batch: the whole trace is queued at t = 0, in trace order (§4). Submit: the trace's own
    submit times, shifted so the first arrival is at t = 0."""
    if mode == "batch":
        return np.zeros(len(trace))
    if mode == "submit":
        shifted: NDArray[np.float64] = trace.submit - trace.submit.min()
        return shifted
    raise InputError(f"--arrival must be 'batch' or 'submit', got {mode!r}")
