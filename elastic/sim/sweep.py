"""Every snapshot x every policy x every grace period: preempt the P lowest nodes, count WC.

Snapshots are processed in chunks of (S_chunk, N) arrays, so memory stays bounded by the
chunk plus the results themselves (two float64 per policy x GP x snapshot).

Wasted cycles are counted by ``wasted_by_job``, the simulator's form of
``elastic.policies.wasted_batch``: the same per-job terms, (elapsed + GP) x node count for each
distinct preempted job with at least GP left, but gathered once per policy for every GP from
per-job arrays and summed per snapshot in ascending job order. Sums of the same terms in
another order can differ in the last bit, so the two agree exactly when the terms are whole
numbers (every trace ptc ships: times in whole seconds) and to rounding otherwise
(``tests/unit/sim/test_sim_sweep.py``).
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


HIGH_PRIORITY_ABOVE = 1.0  # jobs above this priority make up the high-priority part of WC


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
        wc_high=np.zeros(shape),  # untouched pages cost nothing when no job is high-priority
    )
    if config.keep_selections:
        result.selections = {
            name: np.empty((n_snap, config.preempt), dtype=np.int16) for name in names
        }
    chunks = range(0, n_snap, config.chunk)
    node_count = schedule.nodes.astype(np.float64)
    is_high = np.asarray(priority) > HIGH_PRIORITY_ABOVE
    any_high = bool(is_high.any())
    report = Reporter("sweep", on_event)
    report.begin(f"{n_snap:,} snapshots", total=len(chunks), snapshots=n_snap)
    for done, lo in enumerate(chunks, start=1):
        hi = min(lo + config.chunk, n_snap)
        grid = node_jobs(schedule, times[lo:hi])
        batch = build_batch(
            times[lo:hi], grid, schedule.start, schedule.end, schedule.nodes, priority
        )
        result.idle[lo:hi] = (grid < 0).sum(axis=1)
        offsets = np.arange(hi - lo, dtype=np.int64)[:, None] * schedule.n_nodes
        for p, policy in enumerate(policies):
            chosen = select_batch(policy.evaluate_batch(batch), config.preempt)
            jobs = grid.ravel()[chosen + offsets]
            total, high = wasted_by_job(
                times[lo:hi], jobs, schedule, node_count, is_high, result.grace_periods
            )
            result.wc[p, :, lo:hi] = total
            if any_high:
                result.wc_high[p, :, lo:hi] = high
            if config.keep_selections:
                result.selections[policy.name][lo:hi] = np.sort(chosen, axis=1)
        report.progress(done, len(chunks))
    report.end(f"{n_snap:,} snapshots x {len(names)} policies x {len(config.grace_periods)} GPs")
    return result


def wasted_by_job(
    times: NDArray[np.float64],
    jobs: NDArray[np.int64],
    schedule: Schedule,
    node_count: NDArray[np.float64],
    is_high: NDArray[np.bool_],
    grace_periods: tuple[float, ...],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """WC of preempting the nodes running ``jobs`` (S, P; -1 idle) at ``times``, for every GP:
    (total, high-priority part), each (GPs, S). A job counts once however many of its nodes
    are taken; its terms are summed per snapshot in ascending job order."""
    n_snap, n_gp = int(jobs.shape[0]), len(grace_periods)
    if jobs.shape[1] == 0:
        return np.zeros((n_gp, n_snap)), np.zeros((n_gp, n_snap))
    ordered = np.sort(jobs, axis=1)
    keep = ordered >= 0
    keep[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]  # a parallel job is lost once
    flat = np.flatnonzero(keep)
    rows = flat // jobs.shape[1]
    job = ordered.ravel()[flat]
    t = times[rows]
    elapsed = t - schedule.start[job]
    remaining = schedule.end[job] - t
    size = node_count[job]
    high = is_high[job]
    any_high = bool(high.any())
    rows_high = rows[high]
    total = np.empty((n_gp, n_snap))
    high_part = np.zeros((n_gp, n_snap))
    for g, gp in enumerate(grace_periods):
        lost = np.where(remaining >= gp, (elapsed + gp) * size, 0.0)
        total[g] = np.bincount(rows, weights=lost, minlength=n_snap)
        if any_high:
            high_part[g] = np.bincount(rows_high, weights=lost[high], minlength=n_snap)
    return total, high_part
