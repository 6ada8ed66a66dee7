"""What a rebalancing run measured (thesis §2.3): excess cost, discarded work, convergence, makespan.

Excess cost is the thesis's EC = sum over sites r, over excess instances i of r, of
c_r * p_r(t_i - l_i): c_r the site's price per node-hour, p_r its time accounting (here the
lifetime rounded up to whole billing units, an hour by default, expressed in hours), t_i and
l_i the instance's termination and launch times. The excess instances of a site are the ones
rebalancing terminated there, plus, when a run stops with a site still above its desired
count, that many of its newest instances, charged up to the stop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elastic.errors import InputError
from elastic.policies import CloudSite

# Float sums of event times can land a hair past a billing boundary (3600.0000000001 s);
# that must not cost a whole extra unit.
_SLACK_S = 1e-6


@dataclass(frozen=True)
class InstanceRecord:
    """One instance's life. ``terminated`` None: still live when the run stopped."""

    instance_id: str
    site: str
    launched: float
    terminated: float | None = None
    rebalanced: bool = False  # terminated by the downscaling policy


@dataclass(frozen=True)
class KilledJob:
    """A job whose worker was terminated under it: ``elapsed`` seconds of work are discarded."""

    time: float
    job_id: str
    instance_id: str
    elapsed: float
    requested: float


@dataclass(frozen=True)
class PoolSample:
    """The pool after everything that happened at ``time``."""

    time: float
    live: Mapping[str, int]  # booted workers per site (idle, busy or draining)
    booting: Mapping[str, int]
    running_jobs: int
    queued_jobs: int
    done_jobs: int


@dataclass(frozen=True)
class DownscalingRun:
    """One simulated workload under one policy; times in seconds from the first submission."""

    policy: str
    jobs: int
    total_work_s: float  # sum of the jobs' runtimes: the useful work
    makespan_s: float  # workload execution time: first submission to last completion
    convergence_s: float | None  # None: the desired state was never reached
    end_s: float
    excess_cost: float
    discarded_s: float
    killed: tuple[KilledJob, ...]
    instances: tuple[InstanceRecord, ...]
    timeline: tuple[PoolSample, ...]

    @property
    def overhead_pct(self) -> float:
        """Discarded work as a percent of the useful work."""
        return 100.0 * self.discarded_s / self.total_work_s if self.total_work_s > 0 else 0.0

    @property
    def rebalanced(self) -> int:
        return sum(r.rebalanced for r in self.instances)


def billed_hours(seconds: float, billing_s: float) -> float:
    """p_r: a lifetime in hours, rounded up to whole ``billing_s`` units (0: exact)."""
    if billing_s < 0:
        raise InputError(f"billing_s: {billing_s} must be >= 0")
    if seconds < 0:
        raise InputError(f"lifetime: {seconds} s is negative")
    if billing_s == 0:
        return seconds / 3600.0
    units = math.ceil(max(0.0, seconds - _SLACK_S) / billing_s)
    return units * billing_s / 3600.0


def excess_instances(
    records: Sequence[InstanceRecord], sites: Sequence[CloudSite], end: float
) -> list[tuple[InstanceRecord, float]]:
    """The excess instances, each with the time its charge stops."""
    known = {s.name: s for s in sites}
    out: list[tuple[InstanceRecord, float]] = []
    for r in records:
        if r.site not in known:
            raise InputError(f"instance {r.instance_id}: site {r.site!r} is not a known site")
        if r.rebalanced:
            if r.terminated is None:
                raise InputError(f"instance {r.instance_id}: rebalanced but never terminated")
            out.append((r, r.terminated))
    for site in sites:
        live = [r for r in records if r.site == site.name and r.terminated is None]
        extra = len(live) - site.desired
        if extra > 0:
            newest = sorted(live, key=lambda r: r.launched)[-extra:]
            out += [(r, end) for r in newest]
    return out


def excess_cost(
    records: Sequence[InstanceRecord],
    sites: Sequence[CloudSite],
    end: float,
    billing_s: float = 3600.0,
) -> float:
    """EC (see the module docstring), in price units."""
    price = {s.name: s.price for s in sites}
    return sum(
        price[r.site] * billed_hours(stop - r.launched, billing_s)
        for r, stop in excess_instances(records, sites, end)
    )
