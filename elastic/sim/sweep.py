"""Every snapshot x every policy x every grace period: preempt the P lowest nodes, count WC.

Snapshots are processed in chunks of (S_chunk, N) arrays, so memory stays bounded by the
chunk plus the results themselves (two float64 per policy x GP x snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.policies import (
    POLICY_NAMES,
    build_batch,
    make_policy,
    select_batch,
    wasted_batch,
)
from elastic.sim.schedule import Schedule
from elastic.sim.snapshots import node_jobs, snapshot_times

# §4.2: 60 s, the AWS spot notice (120 s), 20 and 30 min, then 1 h to 6 h hourly.
PAPER_GRACE_PERIODS: tuple[float, ...] = (
    60.0,
    120.0,
    1200.0,
    1800.0,
    *(3600.0 * h for h in range(1, 7)),
)


@dataclass(frozen=True)
class SweepConfig:
    policies: tuple[str, ...] = POLICY_NAMES
    grace_periods: tuple[float, ...] = PAPER_GRACE_PERIODS
    preempt: int = 10
    interval: float = 30.0
    seed: int = 0
    chunk: int = 32_768
    keep_selections: bool = False

    def __post_init__(self) -> None:
        if not self.policies:
            raise InputError("no policy to evaluate")
        if not self.grace_periods:
            raise InputError("no grace period to evaluate")
        if any(gp < 0 for gp in self.grace_periods):
            raise InputError("grace periods must be >= 0 seconds")
        if self.preempt < 0:
            raise InputError(f"--preempt must be >= 0, got {self.preempt}")


@dataclass
class SweepResult:
    policies: tuple[str, ...]
    grace_periods: tuple[float, ...]
    times: NDArray[np.float64]  # (S,)
    idle: NDArray[np.int64]  # (S,) idle nodes per snapshot
    wc: NDArray[np.float64]  # (policies, GPs, S), node-seconds
    wc_high: NDArray[np.float64]  # same shape: the part lost by high-priority jobs
    selections: dict[str, NDArray[np.int16]] = field(default_factory=dict)  # (S, P), sorted

    @property
    def samples(self) -> int:
        return int(self.times.shape[0])


def run_sweep(
    schedule: Schedule,
    priority: NDArray[np.float64],
    config: SweepConfig,
    *,
    on_event: OnEvent | None = None,
) -> SweepResult:
    """Events (topic ``sweep``): begin (total = chunks), progress per chunk, end."""
    if config.preempt > schedule.n_nodes:
        raise InputError(f"--preempt {config.preempt} exceeds --nodes {schedule.n_nodes}")
    policies = tuple(make_policy(name, config.seed) for name in config.policies)
    names = tuple(p.name for p in policies)
    if len(set(names)) != len(names):
        raise InputError(f"policy listed twice in {', '.join(config.policies)}")
    times = snapshot_times(schedule, config.interval)
    n_snap = int(times.shape[0])
    shape = (len(policies), len(config.grace_periods), n_snap)
    result = SweepResult(
        policies=names,
        grace_periods=tuple(float(g) for g in config.grace_periods),
        times=times,
        idle=np.zeros(n_snap, dtype=np.int64),
        wc=np.empty(shape),
        wc_high=np.empty(shape),
    )
    if config.keep_selections:
        result.selections = {
            name: np.empty((n_snap, config.preempt), dtype=np.int16) for name in names
        }
    chunks = range(0, n_snap, config.chunk)
    report = Reporter("sweep", on_event)
    report.begin(f"{n_snap:,} snapshots", total=len(chunks), snapshots=n_snap)
    for done, lo in enumerate(chunks, start=1):
        hi = min(lo + config.chunk, n_snap)
        grid = node_jobs(schedule, times[lo:hi])
        batch = build_batch(
            times[lo:hi], grid, schedule.start, schedule.end, schedule.nodes, priority
        )
        result.idle[lo:hi] = (grid < 0).sum(axis=1)
        for p, policy in enumerate(policies):
            chosen = select_batch(policy.evaluate_batch(batch), config.preempt)
            total, high = wasted_batch(batch, chosen, result.grace_periods)
            result.wc[p, :, lo:hi] = total
            result.wc_high[p, :, lo:hi] = high
            if config.keep_selections:
                result.selections[policy.name][lo:hi] = np.sort(chosen, axis=1)
        report.progress(done, len(chunks))
    report.end(f"{n_snap:,} snapshots x {len(names)} policies x {len(config.grace_periods)} GPs")
    return result
