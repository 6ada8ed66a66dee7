"""Walker's MyCluster simulation: job proxies on 16 batch clusters, with and without migration.

MyCluster builds a personal cluster by submitting *job proxies* (batch jobs of S CPUs that, once
running, run the user's small jobs) to many sites. The slides' simulation compares static
placement with migrating pending proxies by the liability-adjusted throughput rule
(``elastic.policies.growth``); they report about 410K user jobs without and 460K with
migration in 600 ticks (+12%, CDF over 1000 runs).

What the slides fix (their table): 16 clusters, job proxy size S = 32 CPUs, proxy runtime
4 ticks, user job size 4 CPUs and mean runtime 1 tick, each cluster's expected queue wait T_W
in [2, 20] ticks and normalised FLOPS F in [1, 3], 600 ticks. A pending proxy is dispatched
in a tick with probability

    E(J) = exp(-(T_W - T_P))              if T_P <  T_W
    E(J) = 1/e + 1/(N_R + 2)              if T_P >= T_W

with T_P the proxy's pending time and N_R the number of running jobs.

Where the slides are silent, this module chooses (every choice is a parameter of
:class:`MyClusterConfig`):

- N_R is the number of this user's proxies running at that cluster at the start of the tick
  (a cluster that already runs many of the user's proxies is slower to start another, as a
  fair-share scheduler is).
- T_W and F are drawn once per cluster per run, uniformly (real-valued) in their ranges; they
  do not change during a run.
- Initial distribution: 6 proxies per cluster, all pending at tick 0 (the slides' real-world
  experiment starts with 6 proxies of 32 CPUs at each site; the simulation slide gives no
  number).
- A proxy runs ``proxy_runtime`` = 4 ticks, counting the tick it starts; then it ends and
  MyCluster resubmits it at once to the same cluster, pending with T_P = 0. So the pool keeps
  its size; only migration moves proxies.
- User jobs: an endless backlog (a large ensemble), so every slot of a running proxy is busy.
  A proxy of S CPUs has S / 4 = 8 slots; a job's runtime is exponential with mean 1 tick at
  F = 1 and 1/F ticks on a cluster of speed F, so a busy slot completes Poisson(F) jobs per
  tick and a cluster completes Poisson(8 * F * R) jobs per tick. Jobs cut short when a proxy
  ends are not counted (with exponential runtimes this is what the Poisson count does).
- Throughput = user jobs completed in 600 ticks over all clusters.
- Tick order: dispatch draws for pending proxies; running proxies (the just-dispatched ones
  too) do a tick's work; proxies that have run 4 ticks end and are resubmitted; proxies still
  pending age by one tick. R(t) counts the proxies that ran in tick t (those in their last
  tick too), P(t) the others. Then the pool may grow and migration runs, on the history up
  to and including this tick.
- Migration (``migration="liability"``) runs every tick (``migrate_every``) and makes at most
  ``moves_per_round`` = 1 move: the source is the cluster with the lowest T among those with
  pending proxies; the target is the one ``place_by_score`` (the ``liability_adjusted``
  growth rule) picks among the others with room; the move happens only if, after it, the
  target's T still exceeds the source's (the moved proxy is pending at the target, adding
  S * F to its liability, and leaves the source's). Otherwise nothing moves: proxies do not
  ping-pong between near-equal sites. The proxy moved is the source's most recently queued
  pending one (least sunk wait); at the target it is a new submission, T_P = 0.
- ``migration="all-running"`` is MyCluster's older rule, for comparison: the youngest pending
  proxy of the cluster with the most pending ones moves to a cluster whose proxies all run
  (P = 0, R >= 1; the first listed if several), one move per round.
- Growth (optional, off by default): every ``growth_every`` ticks ``growth_k`` new proxies are
  submitted, placed by a growth policy (``cheapest_first`` or ``liability_adjusted``) over the
  clusters' prices (uniform in ``price_range`` per node-tick, drawn per run, independent of
  speed and wait) and free room (``capacity`` proxies per cluster, running + pending).
  Cost counts running proxy-ticks times the cluster's price; pending proxies cost nothing.

Randomness: ``numpy.random.default_rng`` on a ``SeedSequence(seed)`` spawned in two: one stream
draws the clusters (so runs with and without migration see the same clusters), the other the
dispatches and job completions. A seed gives the same run every time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from elastic.errors import InputError
from elastic.policies.growth import (
    DEFAULT_WINDOW,
    GROWTH_POLICIES,
    SiteState,
    check_window,
    liability_adjusted,
    place_by_score,
    throughput_scores,
)

MIGRATIONS = ("none", "all-running", "liability")
UNLIMITED = 1 << 40  # room of a cluster without a capacity limit


@dataclass(frozen=True)
class MyClusterConfig:
    """The slides' parameters (their table) and this module's choices (see the module doc)."""

    sites: int = 16
    proxy_size: int = 32
    proxy_runtime: int = 4
    job_size: int = 4
    job_runtime: float = 1.0
    wait_range: tuple[float, float] = (2.0, 20.0)
    flops_range: tuple[float, float] = (1.0, 3.0)
    ticks: int = 600
    proxies_per_site: int = 6
    migration: str = "none"
    window: int = DEFAULT_WINDOW
    migrate_every: int = 1
    moves_per_round: int = 1
    capacity: int | None = None
    price_range: tuple[float, float] = (0.5, 1.5)
    growth_policy: str = "cheapest_first"
    growth_every: int = 0
    growth_k: int = 0

    def __post_init__(self) -> None:
        for name in ("sites", "proxy_size", "proxy_runtime", "job_size", "ticks"):
            _positive_int(name, getattr(self, name))
        for name in ("proxies_per_site", "growth_every", "growth_k"):
            _positive_int(name, getattr(self, name), minimum=0)
        _positive_int("migrate_every", self.migrate_every)
        _positive_int("moves_per_round", self.moves_per_round)
        check_window(self.window)
        if self.capacity is not None:
            _positive_int("capacity", self.capacity, minimum=0)
        if self.proxy_size % self.job_size:
            raise InputError("mycluster config: field 'job_size' must divide 'proxy_size'")
        if not (math.isfinite(self.job_runtime) and self.job_runtime > 0):
            raise InputError("mycluster config: field 'job_runtime' must be a finite number > 0")
        for name in ("wait_range", "flops_range", "price_range"):
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
                raise InputError(f"mycluster config: field {name!r} must be 0 <= low <= high")
        if self.flops_range[0] <= 0:
            raise InputError("mycluster config: field 'flops_range' must be > 0")
        if self.migration not in MIGRATIONS:
            raise InputError(
                f"mycluster config: field 'migration' is {self.migration!r}; "
                f"choose from {', '.join(MIGRATIONS)}"
            )
        if self.growth_policy not in GROWTH_POLICIES:
            raise InputError(
                f"mycluster config: field 'growth_policy' is {self.growth_policy!r}; "
                f"choose from {', '.join(GROWTH_POLICIES)}"
            )


def _positive_int(name: str, value: object, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"mycluster config: field {name!r} must be an integer >= {minimum}")


@dataclass(frozen=True)
class Clusters:
    """The clusters of one run: speed F, expected queue wait T_W (ticks), price per node-tick."""

    flops: NDArray[np.float64]
    wait: NDArray[np.float64]
    price: NDArray[np.float64]

    def __post_init__(self) -> None:
        n = len(self.flops)
        if len(self.wait) != n or len(self.price) != n:
            raise InputError("clusters: fields 'flops', 'wait' and 'price' differ in length")
        if n == 0 or np.any(self.flops <= 0) or np.any(self.wait < 0) or np.any(self.price < 0):
            raise InputError("clusters: 'flops' must be > 0, 'wait' and 'price' >= 0")


@dataclass(frozen=True)
class MyClusterRun:
    """One simulated run. ``running``/``pending`` are (clusters, ticks) counts of proxies."""

    seed: int
    config: MyClusterConfig
    clusters: Clusters
    completed: int
    jobs_per_tick: NDArray[np.int64]
    running: NDArray[np.int64]
    pending: NDArray[np.int64]
    migrations: int
    cost: float
    proxies: int
    moves: list[tuple[int, int, int]] = field(default_factory=list)  # (tick, from, to)


def draw_clusters(config: MyClusterConfig, rng: np.random.Generator) -> Clusters:
    n = config.sites
    return Clusters(
        flops=rng.uniform(*config.flops_range, n),
        wait=rng.uniform(*config.wait_range, n),
        price=rng.uniform(*config.price_range, n),
    )


def dispatch_probability(
    pending_time: ArrayLike, wait: ArrayLike, running: ArrayLike
) -> NDArray[np.float64]:
    """The slides' E(J): chance a pending proxy starts this tick."""
    tp = np.asarray(pending_time, dtype=np.float64)
    tw = np.asarray(wait, dtype=np.float64)
    nr = np.asarray(running, dtype=np.float64)
    early = np.exp(-np.maximum(tw - tp, 0.0))
    late = 1.0 / math.e + 1.0 / (nr + 2.0)
    return np.asarray(np.where(tp < tw, early, late), dtype=np.float64)


def simulate(
    config: MyClusterConfig,
    seed: int,
    *,
    clusters: Clusters | None = None,
    initial: Sequence[int] | None = None,
) -> MyClusterRun:
    """One run of ``config.ticks`` ticks. ``clusters``/``initial`` (proxies per cluster)
    replace the drawn clusters and the even initial spread, for constructed cases."""
    site_seq, run_seq = np.random.SeedSequence(seed).spawn(2)
    drawn = draw_clusters(config, np.random.default_rng(site_seq))
    cl = clusters if clusters is not None else drawn
    n = len(cl.flops)
    if initial is None:
        initial = [config.proxies_per_site] * n
    if len(initial) != n or any(c < 0 for c in initial):
        raise InputError(f"mycluster: field 'initial' needs {n} counts >= 0")
    return _Engine(config, cl, np.asarray(initial, dtype=np.int64), seed, run_seq).run()


class _Engine:
    """The state of one run: one entry per proxy (its cluster, running?, T_P, ticks left)."""

    def __init__(
        self,
        config: MyClusterConfig,
        clusters: Clusters,
        initial: NDArray[np.int64],
        seed: int,
        seq: np.random.SeedSequence,
    ) -> None:
        self.cfg = config
        self.cl = clusters
        self.seed = seed
        self.rng = np.random.default_rng(seq)
        self.n = len(clusters.flops)
        self.site = np.repeat(np.arange(self.n, dtype=np.int64), initial)
        self.running = np.zeros(len(self.site), dtype=bool)
        self.tp = np.zeros(len(self.site), dtype=np.int64)
        self.left = np.zeros(len(self.site), dtype=np.int64)
        self.step = config.proxy_size * clusters.flops  # S * F: one proxy's share of tau
        self.slots = config.proxy_size // config.job_size
        self.R = np.zeros((self.n, config.ticks), dtype=np.int64)
        self.P = np.zeros((self.n, config.ticks), dtype=np.int64)
        self.jobs = np.zeros(config.ticks, dtype=np.int64)
        self.moves: list[tuple[int, int, int]] = []
        self.cost = 0.0

    def counts(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        held = np.bincount(self.site, minlength=self.n)
        r = np.bincount(self.site, weights=self.running, minlength=self.n).astype(np.int64)
        return r, held - r

    def room(self) -> NDArray[np.int64]:
        if self.cfg.capacity is None:
            return np.full(self.n, UNLIMITED, dtype=np.int64)
        held = np.bincount(self.site, minlength=self.n)
        return np.maximum(self.cfg.capacity - held, 0).astype(np.int64)

    def tick(self, t: int) -> None:
        cfg = self.cfg
        nr = np.bincount(self.site, weights=self.running, minlength=self.n)
        pending = ~self.running
        chance = dispatch_probability(self.tp, self.cl.wait[self.site], nr[self.site])
        go = pending & (self.rng.random(len(self.site)) < chance)
        self.running |= go
        self.left[go] = cfg.proxy_runtime
        nr = np.bincount(self.site, weights=self.running, minlength=self.n)
        rate = self.slots * self.cl.flops * nr / cfg.job_runtime
        self.jobs[t] = int(self.rng.poisson(rate).sum())
        self.cost += float(np.dot(nr, self.cl.price))
        # R(t): proxies that ran this tick (their last one included); P(t): the rest.
        held = np.bincount(self.site, minlength=self.n)
        self.R[:, t] = nr
        self.P[:, t] = held - self.R[:, t]
        self.left[self.running] -= 1
        done = self.running & (self.left <= 0)
        self.running[done] = False
        self.tp[done] = 0
        self.tp[pending & ~go] += 1

    def grow(self, t: int) -> None:
        cfg = self.cfg
        lo = max(0, t + 1 - cfg.window)
        room = self.room()
        sites = [
            SiteState(
                name=str(i),
                price=float(self.cl.price[i]),
                free=int(min(room[i], UNLIMITED)),
                running=int(self.R[i, t]),
                pending=int(self.P[i, t]),
                size=cfg.proxy_size,
                flops=float(self.cl.flops[i]),
                history=tuple(
                    (int(self.R[i, j]), int(self.P[i, j])) for j in range(t - 1, lo - 1, -1)
                ),
            )
            for i in range(self.n)
        ]
        if cfg.growth_policy == "liability_adjusted":
            placed = liability_adjusted(sites, cfg.growth_k, cfg.window)
        else:
            placed = GROWTH_POLICIES[cfg.growth_policy](sites, cfg.growth_k)
        new = np.array([int(name) for name in placed.order], dtype=np.int64)
        self.site = np.concatenate([self.site, new])
        self.running = np.concatenate([self.running, np.zeros(len(new), dtype=bool)])
        self.tp = np.concatenate([self.tp, np.zeros(len(new), dtype=np.int64)])
        self.left = np.concatenate([self.left, np.zeros(len(new), dtype=np.int64)])

    def youngest_pending(self, at: int) -> int:
        candidates = np.flatnonzero((self.site == at) & ~self.running)
        return int(candidates[np.argmin(self.tp[candidates])])

    def move(self, t: int, src: int, dst: int) -> None:
        proxy = self.youngest_pending(src)
        self.site[proxy] = dst
        self.tp[proxy] = 0
        self.moves.append((t, src, dst))

    def migrate_liability(self, t: int) -> None:
        cfg = self.cfg
        scores = throughput_scores(
            self.R[:, : t + 1], self.P[:, : t + 1], cfg.proxy_size, self.cl.flops, cfg.window
        )
        _, pending = self.counts()
        for _ in range(cfg.moves_per_round):
            sources = np.flatnonzero(pending > 0)
            if sources.size == 0:
                return
            src = int(sources[np.argmin(scores[sources])])
            room = self.room()
            room[src] = 0
            order, _ = place_by_score(scores, self.step, room, self.cl.price, 1)
            if not order:
                return
            dst = order[0]
            if scores[dst] - self.step[dst] <= scores[src] + self.step[src]:
                return
            self.move(t, src, dst)
            scores[src] += self.step[src]
            scores[dst] -= self.step[dst]
            pending[src] -= 1
            pending[dst] += 1

    def migrate_all_running(self, t: int) -> None:
        running, pending = self.counts()
        for _ in range(self.cfg.moves_per_round):
            room = self.room()
            targets = np.flatnonzero((pending == 0) & (running > 0) & (room > 0))
            if targets.size == 0 or not np.any(pending > 0):
                return
            src = int(np.argmax(pending))
            dst = int(targets[0])
            self.move(t, src, dst)
            pending[src] -= 1
            pending[dst] += 1

    def run(self) -> MyClusterRun:
        cfg = self.cfg
        for t in range(cfg.ticks):
            self.tick(t)
            if cfg.growth_every and cfg.growth_k and (t + 1) % cfg.growth_every == 0:
                self.grow(t)
            if (t + 1) % cfg.migrate_every == 0:
                if cfg.migration == "liability":
                    self.migrate_liability(t)
                elif cfg.migration == "all-running":
                    self.migrate_all_running(t)
        return MyClusterRun(
            seed=self.seed,
            config=cfg,
            clusters=self.cl,
            completed=int(self.jobs.sum()),
            jobs_per_tick=self.jobs,
            running=self.R,
            pending=self.P,
            migrations=len(self.moves),
            cost=self.cost,
            proxies=len(self.site),
            moves=self.moves,
        )
