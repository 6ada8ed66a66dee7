"""The runs behind the Ch. 2 comparison: the thesis's setup, in file order and shuffled orders.

The thesis's setup (§2.4): the 1,120-job HTC trace submitted at once, 64 workers wanted on the
cheap site (price 1) and none on one costing twice as much, a pool started 48 + 16, the policy
every 30 minutes from 30 minutes in, EC billed per whole hour. The trace runs in its file order
and in shuffled orders (``numpy.random.default_rng(seed).permutation``, seeds 0, 1, ...), under
each policy, under FO with drained workers found every 300 s, and under longer boots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter, Steps
from elastic.policies import CloudSite, make_downscaling_policy
from elastic.sim.downscaling import (
    DEFAULT_BOOT_S,
    THESIS_INTERVAL_S,
    DownscalingSetup,
    SimJob,
    jobs_from_trace,
    simulate_downscaling,
)
from elastic.sim.downscaling_metrics import DownscalingRun
from elastic.sim.traces import load_condor_submit

POLICIES = ("OI", "FO", "AP-25", "AP-100")
FO_CHECKED = "FO-300s"
# The prototype's FO looks for drained idle workers six times per policy interval (300 s at
# the thesis's 30 minutes), not the moment a job ends as the simulator does by default.
CHECK_S = THESIS_INTERVAL_S / 6
FILE = "file"
COLUMNS = (
    "order",
    "shuffled",
    "boot_s",
    "policy",
    "convergence_h",
    "excess_cost",
    "discarded_min",
    "useful_min",
    "overhead_pct",
    "killed",
    "killed_elapsed_s",
    "makespan_h",
)


@dataclass(frozen=True)
class Ch2Settings:
    trace: Path
    orders: int = 20  # shuffled job orders besides the file's
    boots: tuple[float, ...] = (900.0, 1800.0)  # boot times tried besides the default
    boot_orders: int = 10  # shuffled orders run under each of those boots

    def __post_init__(self) -> None:
        if self.orders < 1 or self.boot_orders < 1:
            raise InputError("ch2 settings: fields 'orders' and 'boot_orders' must be >= 1")
        if self.boot_orders > self.orders:
            raise InputError("ch2 settings: field 'boot_orders' must not exceed 'orders'")
        if any(not (math.isfinite(b) and b > 0) for b in self.boots):
            raise InputError("ch2 settings: field 'boots' must hold times > 0")


def thesis_setup(boot_s: float = DEFAULT_BOOT_S, reap_s: float | None = None) -> DownscalingSetup:
    return DownscalingSetup(
        sites=(CloudSite("hotel", 1.0, 64), CloudSite("sierra", 2.0, 0)),
        initial={"hotel": 48, "sierra": 16},
        interval_s=THESIS_INTERVAL_S,
        boot_s=boot_s,
        billing_s=3600.0,
        reap_s=reap_s,
    )


def shuffled(jobs: Sequence[SimJob], seed: int) -> list[SimJob]:
    order = np.random.default_rng(seed).permutation(len(jobs))
    return [jobs[i] for i in order]


def measure(run: DownscalingRun) -> dict[str, float]:
    """One run's figures."""
    conv = run.convergence_s
    return {
        "convergence_h": math.nan if conv is None else conv / 3600,
        "excess_cost": run.excess_cost,
        "discarded_min": run.discarded_s / 60,
        "useful_min": run.total_work_s / 60,
        "overhead_pct": run.overhead_pct,
        "killed": float(len(run.killed)),
        "killed_elapsed_s": (
            float(np.mean([k.elapsed for k in run.killed])) if run.killed else math.nan
        ),
        "makespan_h": run.makespan_s / 3600,
    }


def run(settings: Ch2Settings, on_event: OnEvent | None = None) -> pd.DataFrame:
    """Every run of the comparison, one row each (columns ``COLUMNS``)."""
    jobs = jobs_from_trace(load_condor_submit(settings.trace))
    plans: list[tuple[str, bool, Sequence[SimJob], float, str]] = []
    for seed in (None, *range(settings.orders)):
        order: Sequence[SimJob] = jobs if seed is None else shuffled(jobs, seed)
        label = FILE if seed is None else str(seed)
        plans += [(label, seed is not None, order, DEFAULT_BOOT_S, p) for p in POLICIES]
        plans.append((label, seed is not None, order, DEFAULT_BOOT_S, FO_CHECKED))
    for boot in settings.boots:
        for seed in range(settings.boot_orders):
            order = shuffled(jobs, seed)
            plans += [(str(seed), True, order, boot, p) for p in POLICIES]
    steps = Steps(
        Reporter("ch2", on_event),
        f"thesis Ch. 2: {len(jobs)} jobs, {len(plans)} runs",
        len(plans),
    )
    rows: list[dict[str, object]] = []
    for label, is_shuffled, order, boot, policy in plans:
        checked = policy == FO_CHECKED
        setup = thesis_setup(boot, CHECK_S if checked else None)
        result = simulate_downscaling(
            order, setup, make_downscaling_policy("FO" if checked else policy)
        )
        rows.append(
            {
                "order": label,
                "shuffled": is_shuffled,
                "boot_s": boot,
                "policy": policy,
                **measure(result),
            }
        )
        steps.advance(f"{policy}, order {label}, boot {boot:g} s")
    steps.finish()
    return pd.DataFrame(rows, columns=list(COLUMNS))
