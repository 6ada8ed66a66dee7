"""The runs behind the Part-Time Cloud comparison: sweeps of every policy and grace period.

Each run is the paper's evaluation (§4): a workload queued at once, FCFS with EASY backfilling on
N nodes, a snapshot at every completion and every 30 s, the P lowest-valued nodes preempted in
each. HTC (ten shuffled copies of the 1,120-job trace, the paper's own) runs once per seed, the
seed drawing the copies and the 1% of high-priority jobs. The paper's PEREGRINE trace is not
public: KTH-SP2 and the NREL Eagle sample stand in, in their logs' order and, for Eagle,
shuffled orders too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter, Steps
from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.traces import Trace
from elastic.sim.traces.stats import trace_stats
from elastic.sim.workload import WorkloadSpec, prepare

# Eagle's three rare partitions, about 1% of the filtered jobs: its stand-in for bigmem.
EAGLE_RULE = ("queue=partition00[479]:10",)
HIGH_FRACTION = 0.01
LOG = "log"
RUN_COLUMNS = (
    "workload",
    "order",
    "jobs",
    "node_hours",
    "runtime_mean",
    "runtime_min",
    "runtime_q25",
    "runtime_q50",
    "runtime_q75",
    "runtime_max",
    "nodes_mean",
    "nodes_max",
    "single_node_share",
    "samples",
    "same_lifo_pap",
    "lifo_equals_pap",
    "pap_plus_high",
    "pap_plus_default",
    "pap_plus_all",
    "high_wide_share",
)
MEDIAN_COLUMNS = ("workload", "order", "policy", "gp_s", "median_h")


@dataclass(frozen=True)
class PtcSettings:
    htc: Path
    kth: Path
    eagle: Path
    seeds: int = 10  # HTC seeds, and Eagle's shuffled orders
    kth_orders: int = 0  # KTH-SP2's shuffled orders besides its log's (each takes tens of s)
    nodes: int = 20
    preempt: int = 10
    pap_plus_gp: float = 60.0  # the paper's Fig. 6 names no grace period

    def __post_init__(self) -> None:
        if self.seeds < 1 or self.kth_orders < 0:
            raise InputError("ptc settings: 'seeds' must be >= 1 and 'kth_orders' >= 0")
        if not 0 < self.preempt <= self.nodes:
            raise InputError("ptc settings: 'preempt' must be within 1..'nodes'")


@dataclass(frozen=True)
class PtcRuns:
    runs: pd.DataFrame  # one row per run: RUN_COLUMNS
    medians: pd.DataFrame  # one row per run, policy and GP: MEDIAN_COLUMNS


def sweep(trace: Trace, settings: PtcSettings, keep: bool) -> SweepResult:
    schedule = simulate(
        np.zeros(len(trace)), trace.runtime, trace.requested, trace.nodes, settings.nodes
    )
    config = SweepConfig(preempt=settings.preempt, keep_selections=keep)
    return run_sweep(schedule, trace.priority, config)


def pap_plus_change(result: SweepResult, gp: float) -> tuple[float, float, float]:
    """PAP+ against PAP: the relative change in cumulative WC of high, default and all jobs."""
    a, b = result.policies.index("PAP"), result.policies.index("PAP+")
    g = result.grace_periods.index(gp)
    high = [float(result.wc_high[k, g].sum()) for k in (a, b)]
    every = [float(result.wc[k, g].sum()) for k in (a, b)]
    default = [e - h for e, h in zip(every, high, strict=True)]
    return tuple(  # type: ignore[return-value]
        (new - old) / old if old > 0 else float("nan") for old, new in (high, default, every)
    )


def high_wide_share(trace: Trace, settings: PtcSettings) -> float:
    """The high class's node-hours in jobs wider than N - P, which no vector can spare."""
    high = trace.priority > 1.0
    node_hours = trace.runtime * trace.nodes
    wide = trace.nodes > settings.nodes - settings.preempt
    total = float(node_hours[high].sum())
    return float(node_hours[high & wide].sum()) / total if total > 0 else float("nan")


def measure(
    workload: str, order: str, trace: Trace, result: SweepResult, settings: PtcSettings
) -> tuple[dict[str, object], list[dict[str, object]]]:
    stats = trace_stats(trace)
    p, q = result.policies.index("LIFO"), result.policies.index("PAP")
    same = float("nan")
    if result.selections:
        same = float((result.selections["LIFO"] == result.selections["PAP"]).all(axis=1).mean())
    high, default, every = pap_plus_change(result, settings.pap_plus_gp)
    run = {
        "workload": workload,
        "order": order,
        "jobs": stats.jobs,
        "node_hours": stats.node_hours,
        "runtime_mean": stats.runtime.mean,
        "runtime_min": stats.runtime.min,
        "runtime_q25": stats.runtime.q25,
        "runtime_q50": stats.runtime.q50,
        "runtime_q75": stats.runtime.q75,
        "runtime_max": stats.runtime.max,
        "nodes_mean": stats.node_count.mean,
        "nodes_max": stats.node_count.max,
        "single_node_share": float(np.mean(trace.nodes == 1)),
        "samples": result.samples,
        "same_lifo_pap": same,
        "lifo_equals_pap": bool(np.array_equal(result.wc[p], result.wc[q])),
        "pap_plus_high": high,
        "pap_plus_default": default,
        "pap_plus_all": every,
        "high_wide_share": high_wide_share(trace, settings),
    }
    medians = [
        {
            "workload": workload,
            "order": order,
            "policy": policy,
            "gp_s": gp_s,
            "median_h": float(np.median(result.wc[k, g])) / 3600,
        }
        for k, policy in enumerate(result.policies)
        for g, gp_s in enumerate(result.grace_periods)
    ]
    return run, medians


def _shuffled(trace: Trace, seed: int) -> Trace:
    return trace.take(np.random.default_rng(seed).permutation(len(trace)))


def run(settings: PtcSettings, on_event: OnEvent | None = None) -> PtcRuns:
    n = settings.nodes
    plans: list[tuple[str, str, WorkloadSpec, int | None]] = []
    for seed in range(settings.seeds):
        spec = WorkloadSpec(settings.htc, n, high_fraction=HIGH_FRACTION, seed=seed)
        plans.append(("HTC", str(seed), spec, None))
    kth = WorkloadSpec(settings.kth, n, high_fraction=HIGH_FRACTION)
    plans += [("KTH-SP2", LOG, kth, None)]
    plans += [("KTH-SP2", str(s), kth, s) for s in range(settings.kth_orders)]
    eagle = WorkloadSpec(settings.eagle, n, priority_rules=EAGLE_RULE)
    plans += [("Eagle", LOG, eagle, None)]
    plans += [("Eagle", str(s), eagle, s) for s in range(settings.seeds)]
    steps = Steps(
        Reporter("part-time-cloud", on_event), f"Part-Time Cloud: {len(plans)} sweeps", len(plans)
    )
    runs: list[dict[str, object]] = []
    medians: list[dict[str, object]] = []
    for workload, order, spec, shuffle in plans:
        trace, _ = prepare(spec)
        if shuffle is not None:
            trace = _shuffled(trace, shuffle)
        result = sweep(trace, settings, keep=workload != "HTC")
        row, rows = measure(workload, order, trace, result, settings)
        runs.append(row)
        medians += rows
        steps.advance(f"{workload}, order {order}: {len(trace):,} jobs, {result.samples:,} samples")
    steps.finish()
    return PtcRuns(
        pd.DataFrame(runs, columns=list(RUN_COLUMNS)),
        pd.DataFrame(medians, columns=list(MEDIAN_COLUMNS)),
    )
