"""Where to grow a pool: the sites that get k new nodes, by price or by MyCluster's rule.

A pool that must grow by k nodes has candidate sites (clouds, partitions, batch clusters), each
with a price per node-hour, a free capacity (how many more nodes it can take now) and counts of
this pool's nodes running and pending there. Two policies place the k nodes:

``cheapest_first``
    The cheapest site with free capacity takes as many nodes as it can; the rest fall through to
    the next cheapest. Ties go to the site listed first.

``liability_adjusted``
    Walker's MyCluster rule (job proxy migration across TeraGrid sites): send work to the site
    with the highest liability-adjusted throughput T, which keeps it away from sites where many
    of the pool's nodes are still pending. For a site at tick t, with R running and P pending
    nodes (MyCluster's job proxies) of S CPUs each and F the normalised FLOPS rate of its
    processors:

    - capability ``C(t) = R(t) * S * F`` (CPUs running, speed-weighted),
    - liability ``L(t) = P(t) * S * F`` (CPUs asked for but still queued),
    - ``tau(t) = C(t) - L(t)``,
    - ``T(t) = sum over n = 1..k of tau(t - n + 1) / n``: tau now plus the past ticks with
      harmonic weights 1, 1/2, 1/3, ... so recent history filters out noise.

    The slides leave the length k of the sum open; here it is ``window``, default
    ``DEFAULT_WINDOW`` = 8 ticks. Why 8: a job proxy in the slides' simulation runs 4 ticks, so 8
    ticks span two proxy lifetimes, enough that one lucky or unlucky dispatch does not decide;
    and the weight of the oldest term (1/8) is small, so a site that recovers is not punished
    for long. ``benchmarks/mycluster.py`` sweeps the window (on seeds other than the reported
    ones) and prints how much it matters. A site whose history is shorter than the window sums
    the ticks it has (missing ticks count as nothing, not as zero throughput averaged in).

    Nodes are placed one at a time: the site with free capacity and the highest T takes the
    next node, which then counts as pending there (``P + 1``), lowering that site's tau now,
    and with it T, by ``S * F``. So k nodes spread over sites as their liability grows, rather
    than all landing on the site that led before the first one was placed. Ties go to the
    cheaper site, then to the one listed first. Price plays no other part: the rule is
    MyCluster's, which knew no prices.

``all_running_first``
    MyCluster's older dynamic rule, kept to show the slides' counter-example: send nodes to a
    site none of whose nodes are pending (all running), whatever its history. A site with one
    running node and a poor record wins over a site with ten running and two pending.

Every policy returns a :class:`Placement`; nodes that fit nowhere are ``unplaced``. The array
functions (:func:`throughput_scores`, :func:`place_by_score`) are the same arithmetic the
simulator (``elastic.sim.mycluster``) runs on numpy arrays, so both paths share one rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from elastic.errors import InputError

DEFAULT_WINDOW = 8

Sample = tuple[int, int]  # (running, pending) at one past tick


def _count(owner: str, field: str, value: object, minimum: int = 0) -> int:
    # bool is an int to Python, never a count to a person.
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{owner}: field {field!r} must be an integer >= {minimum}, not {value!r}")
    return int(value)


def _number(owner: str, field: str, value: object, *, positive: bool) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    number = float(value) if ok else math.nan  # type: ignore[arg-type]
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise InputError(f"{owner}: field {field!r} must be a finite number {bound}, not {value!r}")
    return number


@dataclass(frozen=True)
class SiteState:
    """One candidate site when the pool must grow.

    ``running``/``pending`` are R(t) and P(t): the pool's nodes (job proxies) at the site now.
    ``history`` holds (running, pending) at t-1, t-2, ... newest first; T reads as much of it
    as its window allows. ``size`` is S (CPUs per node), ``flops`` is F (normalised speed).
    """

    name: str
    price: float
    free: int
    running: int = 0
    pending: int = 0
    size: int = 1
    flops: float = 1.0
    history: tuple[Sample, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"site: field 'name' must be a non-empty string, not {self.name!r}")
        owner = f"site {self.name!r}"
        _number(owner, "price", self.price, positive=False)
        _count(owner, "free", self.free)
        _count(owner, "running", self.running)
        _count(owner, "pending", self.pending)
        _count(owner, "size", self.size, minimum=1)
        _number(owner, "flops", self.flops, positive=True)
        if not isinstance(self.history, tuple):
            raise InputError(f"{owner}: field 'history' must be a tuple of (running, pending)")
        for age, sample in enumerate(self.history, start=1):
            where = f"history[{age - 1}] (t-{age})"
            if not isinstance(sample, tuple) or len(sample) != 2:
                raise InputError(f"{owner}: field {where!r} must be a (running, pending) pair")
            _count(owner, f"{where} running", sample[0])
            _count(owner, f"{where} pending", sample[1])

    @property
    def capability(self) -> float:
        """C(t) = R(t) * S * F."""
        return capability(self.running, self.size, self.flops)

    @property
    def liability(self) -> float:
        """L(t) = P(t) * S * F."""
        return liability(self.pending, self.size, self.flops)

    @property
    def adjusted(self) -> float:
        """tau(t) = C(t) - L(t)."""
        return self.capability - self.liability

    def taus(self) -> list[float]:
        """tau(t), tau(t-1), ... newest first, as far back as the history goes."""
        samples = [(self.running, self.pending), *self.history]
        return [float((r - p) * self.size * self.flops) for r, p in samples]

    def throughput(self, window: int = DEFAULT_WINDOW) -> float:
        """T(t) over ``window`` ticks (fewer if the history is shorter)."""
        return liability_adjusted_throughput(self.taus(), window)


@dataclass(frozen=True)
class Placement:
    """Where k new nodes go: ``order`` names the site of each placed node, in placing order."""

    policy: str
    order: tuple[str, ...]
    unplaced: int = 0

    @property
    def counts(self) -> Mapping[str, int]:
        """Nodes per site, sites in the order they were first chosen."""
        out: dict[str, int] = {}
        for name in self.order:
            out[name] = out.get(name, 0) + 1
        return out


def capability(running: int, size: int, flops: float) -> float:
    """C = R * S * F."""
    return float(running * size * flops)


def liability(pending: int, size: int, flops: float) -> float:
    """L = P * S * F."""
    return float(pending * size * flops)


def check_window(window: object) -> int:
    """The window k of T, refused unless a whole number of ticks >= 1."""
    return _count("liability-adjusted throughput", "window", window, minimum=1)


def harmonic_weights(window: int) -> NDArray[np.float64]:
    """1, 1/2, ..., 1/window: the weight of tau(t), tau(t-1), ..., tau(t-window+1)."""
    return 1.0 / np.arange(1, check_window(window) + 1, dtype=np.float64)


def liability_adjusted_throughput(taus: Sequence[float], window: int = DEFAULT_WINDOW) -> float:
    """T(t) = sum_{n=1..window} tau(t-n+1) / n, ``taus`` newest first (tau(t) first)."""
    weights = harmonic_weights(window)
    used = min(len(taus), len(weights))
    return float(np.dot(np.asarray(taus[:used], dtype=np.float64), weights[:used]))


def throughput_scores(
    running: ArrayLike,
    pending: ArrayLike,
    size: ArrayLike,
    flops: ArrayLike,
    window: int = DEFAULT_WINDOW,
) -> NDArray[np.float64]:
    """T(t) of many sites at once; ``running``/``pending`` are (sites, ticks), newest column last.

    ``size`` and ``flops`` are per site (or one value for all). Only the last ``window``
    columns are read; fewer columns mean a shorter sum, as for :meth:`SiteState.throughput`.
    """
    r = np.asarray(running, dtype=np.float64)
    p = np.asarray(pending, dtype=np.float64)
    if r.ndim != 2 or r.shape != p.shape:
        raise InputError("running/pending: must be (sites, ticks) arrays of one shape")
    weights = harmonic_weights(window)
    used = min(r.shape[1], len(weights))
    scale = np.asarray(size, dtype=np.float64) * np.asarray(flops, dtype=np.float64)
    if used == 0:
        return np.zeros(r.shape[0])
    # Columns newest last; weights newest first.
    recent = (r[:, -used:] - p[:, -used:])[:, ::-1]
    return np.asarray((recent @ weights[:used]) * scale, dtype=np.float64)


def place_by_score(
    scores: ArrayLike,
    step: ArrayLike,
    free: ArrayLike,
    price: ArrayLike,
    k: int,
) -> tuple[list[int], int]:
    """Greedy placement: each node to the site with free capacity and the highest score.

    A placed node is pending at its site, so that site's score drops by ``step`` (S * F for
    T). Ties go to the lower price, then the lower index. Returns (site index of each node,
    nodes that found no free site).
    """
    score = np.array(scores, dtype=np.float64)
    drop = np.broadcast_to(np.asarray(step, dtype=np.float64), score.shape)
    room = np.array(free, dtype=np.int64)
    cost = np.broadcast_to(np.asarray(price, dtype=np.float64), score.shape)
    order: list[int] = []
    for placed in range(k):
        open_ = np.flatnonzero(room > 0)
        if open_.size == 0:
            return order, k - placed
        # lexsort: last key first; highest score, then cheapest, then first listed.
        best = open_[np.lexsort((open_, cost[open_], -score[open_]))[0]]
        order.append(int(best))
        score[best] -= drop[best]
        room[best] -= 1
    return order, 0


def _check_request(sites: Sequence[SiteState], k: object) -> int:
    count = _count("growth request", "k", k)
    if not sites:
        raise InputError("growth request: field 'sites' is empty")
    seen: set[str] = set()
    for site in sites:
        if not isinstance(site, SiteState):
            raise InputError(f"growth request: field 'sites' holds {site!r}, not a SiteState")
        if site.name in seen:
            raise InputError(f"growth request: field 'sites' names site {site.name!r} twice")
        seen.add(site.name)
    return count


def cheapest_first(sites: Sequence[SiteState], k: int) -> Placement:
    """The cheapest site with room takes what it can; the rest fall through to the next."""
    count = _check_request(sites, k)
    order: list[str] = []
    ranked = sorted(range(len(sites)), key=lambda i: (sites[i].price, i))
    for i in ranked:
        take = min(sites[i].free, count - len(order))
        order += [sites[i].name] * take
    return Placement("cheapest_first", tuple(order), count - len(order))


def liability_adjusted(
    sites: Sequence[SiteState], k: int, window: int = DEFAULT_WINDOW
) -> Placement:
    """MyCluster's rule: each node to the site with room and the highest T (see module doc)."""
    count = _check_request(sites, k)
    scores = [s.throughput(check_window(window)) for s in sites]
    index, unplaced = place_by_score(
        scores,
        [s.size * s.flops for s in sites],
        [s.free for s in sites],
        [s.price for s in sites],
        count,
    )
    return Placement("liability_adjusted", tuple(sites[i].name for i in index), unplaced)


def all_running_first(sites: Sequence[SiteState], k: int) -> Placement:
    """MyCluster's older rule: nodes go to sites with nothing pending, history ignored.

    Each node goes to the site with room and the fewest pending nodes (a placed node is
    pending there); ties go to the site listed first. Price and speed play no part.
    """
    count = _check_request(sites, k)
    index, unplaced = place_by_score(
        [-float(s.pending) for s in sites],
        1.0,
        [s.free for s in sites],
        0.0,
        count,
    )
    return Placement("all_running_first", tuple(sites[i].name for i in index), unplaced)


GROWTH_POLICIES: Mapping[str, Callable[[Sequence[SiteState], int], Placement]] = {
    "cheapest_first": cheapest_first,
    "liability_adjusted": liability_adjusted,
    "all_running_first": all_running_first,
}
