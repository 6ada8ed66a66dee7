"""Multi-cloud rebalancing (Duplyakin's thesis, ch. 2): downscaling policies and n-preserving upscaling.

A :class:`Pool` is a multi-site worker pool at one instant: every site's price and desired
count, every live worker's site, state and running job. A policy reads it and returns a
:class:`Rebalance`: which workers to terminate now, which to drain (mark offline: they finish
their job, take no new one, and are terminated once idle), and how many replacements to launch
where. Excess on a site is its live worker count minus its desired count.

- OI (opportunistic-idle) terminates excess workers only when they hold no job.
- FO (force-offline) terminates jobless excess workers and drains busy ones (highest progress
  first: those will be free soonest), never killing a job.
- AP-X (aggressive, threshold X%) terminates jobless excess workers first, then busy ones in
  increasing job progress (elapsed / requested time), sparing any at or above X%.

Every decision ends with n-preserving upscaling: after the terminations, replacements are
launched, one at a time on the site with the largest deficit, until the pool holds n = the sum
of desired counts again (Phantom's ``n_preserving`` over an ordered cloud list).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from elastic.errors import InputError


class WorkerState(StrEnum):
    BOOTING = "booting"  # launched, not yet in the worker pool
    IDLE = "idle"
    BUSY = "busy"
    DRAINING = "draining"  # offline: finishes its job (if any), then leaves


@dataclass(frozen=True)
class CloudSite:
    """One cloud; ``capacity`` caps its live workers (None: unlimited). Price per node-hour."""

    name: str
    price: float
    desired: int
    capacity: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InputError("site name: must not be empty")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise InputError(f"site {self.name}: price {self.price} must be a number >= 0")
        if self.desired < 0:
            raise InputError(f"site {self.name}: desired count {self.desired} must be >= 0")
        if self.capacity is not None and self.capacity < 0:
            raise InputError(f"site {self.name}: capacity {self.capacity} must be >= 0")


@dataclass(frozen=True)
class RunningJob:
    """A job on a worker. Times in seconds; ``requested`` is its walltime request."""

    job_id: str
    elapsed: float
    requested: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.elapsed) and self.elapsed >= 0):
            raise InputError(f"job {self.job_id}: elapsed {self.elapsed} must be >= 0")
        if not (math.isfinite(self.requested) and self.requested > 0):
            raise InputError(f"job {self.job_id}: requested time {self.requested} must be > 0")

    @property
    def progress(self) -> float:
        return self.elapsed / self.requested


@dataclass(frozen=True)
class PoolWorker:
    worker_id: str
    site: str
    state: WorkerState
    job: RunningJob | None = None
    launched: float = 0.0

    def __post_init__(self) -> None:
        if not self.worker_id:
            raise InputError("worker id: must not be empty")
        if not math.isfinite(self.launched):
            raise InputError(f"worker {self.worker_id}: launch time {self.launched} is not finite")
        if self.state is WorkerState.BUSY and self.job is None:
            raise InputError(f"worker {self.worker_id}: state busy needs a job")
        if self.state in (WorkerState.IDLE, WorkerState.BOOTING) and self.job is not None:
            raise InputError(f"worker {self.worker_id}: state {self.state.value} has a job")

    @property
    def jobless(self) -> bool:
        return self.job is None


@dataclass(frozen=True)
class Pool:
    """Sites in preference order (earlier wins ties) and the live workers on them."""

    sites: tuple[CloudSite, ...]
    workers: tuple[PoolWorker, ...] = ()

    def __post_init__(self) -> None:
        names = [s.name for s in self.sites]
        if not names:
            raise InputError("sites: a pool needs at least one site")
        if len(set(names)) != len(names):
            raise InputError(f"sites: duplicate site names in {names}")
        ids = [w.worker_id for w in self.workers]
        if len(set(ids)) != len(ids):
            raise InputError("workers: duplicate worker ids")
        for w in self.workers:
            if w.site not in names:
                raise InputError(f"worker {w.worker_id}: site {w.site!r} is not a known site")

    @property
    def target(self) -> int:
        """n: the total number of workers the request asks for."""
        return sum(s.desired for s in self.sites)

    def on_site(self, site: str) -> list[PoolWorker]:
        return [w for w in self.workers if w.site == site]

    def excess(self, site: CloudSite) -> int:
        """Live workers beyond the desired count (negative: a deficit)."""
        return len(self.on_site(site.name)) - site.desired

    def by_excess(self) -> list[CloudSite]:
        """Sites with excess, most excess first (the thesis's order), then preference order."""
        over = [s for s in self.sites if self.excess(s) > 0]
        return sorted(over, key=lambda s: -self.excess(s))


@dataclass(frozen=True)
class Rebalance:
    """What to do now: terminate, drain, and launch ``{site: count}`` replacements."""

    terminate: tuple[str, ...] = ()
    drain: tuple[str, ...] = ()
    launch: Mapping[str, int] = field(default_factory=dict)


class DownscalingPolicy(Protocol):
    @property
    def name(self) -> str: ...

    def decide(self, pool: Pool) -> Rebalance: ...


def upscale(pool: Pool, terminated: Collection[str] = ()) -> dict[str, int]:
    """n-preserving: replacements per site so the pool is back to n once ``terminated`` are gone.

    Each replacement goes to the site with room and the largest deficit (desired minus live,
    counting booting and draining workers); ties go to the earlier site. With no room left
    anywhere fewer are launched.
    """
    known = {w.worker_id for w in pool.workers}
    unknown = sorted(set(terminated) - known)
    if unknown:
        raise InputError(f"terminated: unknown worker ids {unknown}")
    gone = set(terminated)
    count = {s.name: 0 for s in pool.sites}
    for w in pool.workers:
        if w.worker_id not in gone:
            count[w.site] += 1
    launch: dict[str, int] = {}
    for _ in range(pool.target - sum(count.values())):
        room = [s for s in pool.sites if s.capacity is None or count[s.name] < s.capacity]
        if not room:
            break
        best = max(room, key=lambda s: s.desired - count[s.name])  # max keeps the first of ties
        count[best.name] += 1
        launch[best.name] = launch.get(best.name, 0) + 1
    return launch


def _finish(pool: Pool, terminate: list[str], drain: Collection[str] = ()) -> Rebalance:
    return Rebalance(tuple(terminate), tuple(drain), upscale(pool, terminate))


@dataclass(frozen=True)
class OpportunisticIdle:
    """OI: terminate jobless excess workers; leave busy ones alone."""

    name: str = "OI"

    def decide(self, pool: Pool) -> Rebalance:
        terminate: list[str] = []
        for site in pool.by_excess():
            jobless = [w.worker_id for w in pool.on_site(site.name) if w.jobless]
            terminate += jobless[: pool.excess(site)]
        return _finish(pool, terminate)


@dataclass(frozen=True)
class ForceOffline:
    """FO: terminate jobless excess workers, drain busy ones until the excess is covered."""

    name: str = "FO"

    def decide(self, pool: Pool) -> Rebalance:
        terminate: list[str] = []
        drain: list[str] = []
        # Drained workers left idle are finished whatever the excess: they were marked to go.
        terminate += [
            w.worker_id for w in pool.workers if w.state is WorkerState.DRAINING and w.jobless
        ]
        for site in pool.by_excess():
            workers = pool.on_site(site.name)
            left = pool.excess(site) - sum(w.state is WorkerState.DRAINING for w in workers)
            if left <= 0:
                continue
            jobless = [
                w.worker_id for w in workers if w.jobless and w.state is not WorkerState.DRAINING
            ]
            terminate += jobless[:left]
            left -= len(jobless[:left])
            busy = [w for w in workers if w.state is WorkerState.BUSY]
            busy.sort(key=lambda w: -_progress(w))  # nearest to done first: it leaves soonest
            drain += [w.worker_id for w in busy[:left]]
        return _finish(pool, terminate, drain)


@dataclass(frozen=True)
class Aggressive:
    """AP-X: terminate jobless excess workers, then busy ones below X% progress, least first."""

    threshold_pct: float
    name: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.threshold_pct) and 0 <= self.threshold_pct <= 100):
            raise InputError(f"threshold_pct: {self.threshold_pct} must be within 0-100")
        if not self.name:
            object.__setattr__(self, "name", f"AP-{self.threshold_pct:g}")

    def decide(self, pool: Pool) -> Rebalance:
        limit = self.threshold_pct / 100.0
        terminate: list[str] = []
        for site in pool.by_excess():
            workers = pool.on_site(site.name)
            jobless = [w for w in workers if w.jobless]
            busy = sorted((w for w in workers if not w.jobless), key=_progress)
            ranked = jobless + [w for w in busy if _progress(w) < limit]
            terminate += [w.worker_id for w in ranked[: pool.excess(site)]]
        return _finish(pool, terminate)


def retire_drained(pool: Pool) -> Rebalance:
    """Terminate drained workers that have gone idle, and replace them (FO between its runs)."""
    gone = [w.worker_id for w in pool.workers if w.state is WorkerState.DRAINING and w.jobless]
    return _finish(pool, gone)


# The policy of a rebalancing round nobody chose one for (the thesis's best trade-off of cost
# and discarded work); the elastic role's elastic_rebalance_policy is held to it by a test.
DEFAULT_DOWNSCALING_POLICY = ForceOffline.name


def _progress(worker: PoolWorker) -> float:
    return 0.0 if worker.job is None else worker.job.progress


_AP = re.compile(r"^AP-(\d+(?:\.\d+)?)$", re.IGNORECASE)


def make_downscaling_policy(name: str) -> DownscalingPolicy:
    """``OI``, ``FO`` or ``AP-X`` with X a percentage in 0-100 (``AP-25``, ``AP-100``)."""
    key = name.strip().upper()
    if key == "OI":
        return OpportunisticIdle()
    if key == "FO":
        return ForceOffline()
    match = _AP.match(key)
    if match:
        return Aggressive(float(match.group(1)))
    raise InputError(f"policy: {name!r} is not OI, FO or AP-X (X a percentage, e.g. AP-25)")
