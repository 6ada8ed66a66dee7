"""One round of multi-site rebalancing on a live Slurm pool (Duplyakin's thesis, Ch. 2).

The round reads the pool from Slurm (``sinfo`` for node states, ``squeue`` for the jobs,
``scontrol show node`` for when each node's slurmd started), asks a downscaling policy (OI, FO,
AP-X of ``elastic.policies``) what to do, and does it through Slurm:

- **terminate** a node: drain it (so nothing new lands there), requeue its job when it has one
  (the job's work so far is discarded), and power it down now;
- **drain** a node (FO): it finishes its job and takes no new one; a later round powers it down
  once idle;
- **launch** on a site: undrain nodes this rebalancing drained there earlier. A powered-down
  node that is not drained needs nothing: Slurm's power saving starts it when a job waits.

A node stays drained (reason ``ptc-rebalance: ...``) while its site is at or above its desired
count, so Slurm does not start it again for the requeued jobs. Nodes drained for any other
reason (an administrator, a loan to another experiment) are not the rebalancing's: they are
left out of the pool.

Live workers are the nodes that are up or coming up; powered-down nodes cost nothing. The
excess cost of a terminated node is its site's price times its time up, since its slurmd
started, in whole hours rounded up (§2.3). A job without a time limit counts as having made no
progress (AP-X ranks it first), as the prototype ranks jobs whose walltime it does not know.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from elastic.errors import InputError
from elastic.events import Kind, OnEvent, Reporter
from elastic.manager.model import JobRecord
from elastic.policies import (
    DownscalingPolicy,
    Pool,
    PoolWorker,
    RunningJob,
    WorkerState,
)
from elastic.slurm.commands import Slurm
from elastic.slurm.queue import parse_squeue
from elastic.slurm.sites import SiteNodes
from elastic.slurm_time import scontrol_moment

REASON = "ptc-rebalance"
# Requested time given to a job with no limit: its progress is as good as 0.
_NO_LIMIT_S = 365 * 86400.0
# How long a round waits for Slurm to start powering a terminated node down.
POWER_DOWN_WAIT_S = 30.0
_SLURMD_START = re.compile(r"\bNodeName=(\S+).*?\bSlurmdStartTime=(\S+)")


@dataclass(frozen=True)
class NodeView:
    name: str
    site: str
    state: str  # sinfo's long state, lower case, with Slurm's suffix (~ # % *)
    reason: str
    job: JobRecord | None
    up_since: float | None  # slurmd's start, seconds since the epoch

    @property
    def live(self) -> bool:
        """Up or coming up, and the rebalancing's to manage."""
        if self.state.endswith(("~", "%")) or self.state.startswith(("down", "fail")):
            return False
        return not (self.drained and not self.ours)

    @property
    def drained(self) -> bool:
        return self.state.startswith(("drain", "drng"))

    @property
    def ours(self) -> bool:
        return self.reason.startswith(REASON)


@dataclass(frozen=True)
class Reclamation:
    """A node the round terminated, with what it cost and what it threw away."""

    node: str
    site: str
    job_id: str | None
    discarded_s: float  # the job's elapsed time times its node count, once per job
    up_s: float
    excess_cost: float  # price x hours up, rounded up


@dataclass(frozen=True)
class RoundReport:
    time: float
    policy: str
    live_before: Mapping[str, int]
    terminated: tuple[Reclamation, ...] = ()
    drained: tuple[str, ...] = ()
    undrained: tuple[str, ...] = ()
    launch: Mapping[str, int] = field(default_factory=dict)
    requeued: tuple[str, ...] = ()

    @property
    def excess_cost(self) -> float:
        return sum(r.excess_cost for r in self.terminated)

    @property
    def discarded_s(self) -> float:
        return sum(r.discarded_s for r in self.terminated)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["excess_cost"] = self.excess_cost
        out["discarded_s"] = self.discarded_s
        return out


def observe(slurm: Slurm, sites: Sequence[SiteNodes], now: float) -> list[NodeView]:
    every = [n for s in sites for n in s.nodes]
    site_of = {n: s.site.name for s in sites for n in s.nodes}
    states = slurm.node_reasons(every)
    missing = sorted(set(every) - set(states))
    if missing:
        raise InputError(f"sites: {', '.join(missing)} are not Slurm nodes (sinfo shows none)")
    jobs = parse_squeue(slurm.jobs_on(every), slurm)
    job_on = {node: job for job in jobs for node in job.nodes}
    started = slurmd_start_times(slurm.show_nodes(every))
    return [
        NodeView(n, site_of[n], states[n][0], states[n][1], job_on.get(n), started.get(n))
        for n in every
    ]


def slurmd_start_times(text: str) -> dict[str, float]:
    """``scontrol show node -o``: one node a line; ``None``/``Unknown`` times are left out."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = _SLURMD_START.search(line)
        if match and (moment := scontrol_moment(match.group(2))) is not None:
            found[match.group(1)] = moment
    return found


def keep_drained(
    slurm: Slurm,
    nodes: Mapping[str, str],
    sleep: Callable[[float], None],
    timeout_s: float = POWER_DOWN_WAIT_S,
) -> list[str]:
    """Drain ``{node: site}`` again once Slurm has begun powering them down.

    A forced power down clears the node's DRAIN flag as it starts, and a powered-down node that
    is not drained is one Slurm resumes for the next waiting job: the requeued one, on the site
    it was taken off. A drain set once the node shows powering down (``%``) or down (``~``)
    lasts. Returns the nodes that never showed it within ``timeout_s`` (drained all the same).
    """
    waited = 0.0
    pending = sorted(nodes)
    while pending and waited < timeout_s:
        states = slurm.node_states(pending)
        pending = [n for n in pending if not states.get(n, "").endswith(("%", "~"))]
        if pending:
            sleep(0.5)
            waited += 0.5
    for node, site in sorted(nodes.items()):
        slurm.drain([node], f"{REASON}: site {site} above its desired count")
    return pending


def build_pool(sites: Sequence[SiteNodes], views: Iterable[NodeView]) -> Pool:
    workers = []
    for view in views:
        if not view.live:
            continue
        job = None
        if view.job is not None:
            elapsed = view.job.elapsed
            left = view.job.remaining
            requested = elapsed + left if left is not None else _NO_LIMIT_S
            job = RunningJob(view.job.job_id, elapsed, max(requested, 1e-9))
        if view.drained and view.ours:
            state = WorkerState.DRAINING
        elif job is not None:
            state = WorkerState.BUSY
        elif view.state.endswith("#"):
            state = WorkerState.BOOTING
        else:
            state = WorkerState.IDLE
        workers.append(PoolWorker(view.name, view.site, state, job, launched=view.up_since or 0.0))
    return Pool(tuple(s.site for s in sites), tuple(workers))


def run_round(
    slurm: Slurm,
    sites: Sequence[SiteNodes],
    policy: DownscalingPolicy,
    now: float,
    on_event: OnEvent | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RoundReport:
    report = Reporter("rebalance", on_event)
    views = observe(slurm, sites, now)
    by_name = {v.name: v for v in views}
    pool = build_pool(sites, views)
    live = {s.site.name: len(pool.on_site(s.site.name)) for s in sites}
    decision = policy.decide(pool)
    price = {s.site.name: s.site.price for s in sites}
    report.begin(f"{policy.name}: live {live}", total=len(decision.terminate))

    requeued: list[str] = []
    reclaimed: list[Reclamation] = []
    for done, name in enumerate(decision.terminate, 1):
        view = by_name[name]
        slurm.drain([name], f"{REASON}: site {view.site} above its desired count")
        discarded = 0.0
        job_id = view.job.job_id if view.job else None
        if view.job is not None and job_id not in requeued:
            slurm.requeue(view.job.job_id)
            requeued.append(view.job.job_id)
            discarded = view.job.elapsed * len(view.job.nodes)
        slurm.power_down([name], f"{REASON}: site {view.site} above its desired count")
        up = max(0.0, now - view.up_since) if view.up_since is not None else 0.0
        cost = price[view.site] * max(1, math.ceil(up / 3600.0))
        reclaimed.append(Reclamation(name, view.site, job_id, discarded, up, cost))
        report.progress(
            done, len(decision.terminate), f"terminated {name} ({view.site}), job {job_id}"
        )
    if reclaimed:
        late = keep_drained(slurm, {r.node: r.site for r in reclaimed}, sleep)
        if late:
            report.warning(f"{', '.join(late)}: not powering down yet; drained again all the same")

    drained = [n for n in decision.drain if not by_name[n].drained]
    if drained:
        slurm.drain(drained, f"{REASON}: draining, site above its desired count")

    undrained: list[str] = []
    for site, count in decision.launch.items():
        mine = [v.name for v in views if v.site == site and v.drained and v.ours and not v.live]
        if mine[:count]:
            slurm.undrain(mine[:count])
            undrained += mine[:count]

    result = RoundReport(
        time=now,
        policy=policy.name,
        live_before=live,
        terminated=tuple(reclaimed),
        drained=tuple(drained),
        undrained=tuple(undrained),
        launch=dict(decision.launch),
        requeued=tuple(requeued),
    )
    report.emit(
        Kind.END,
        f"{policy.name}: terminated {len(reclaimed)}, drained {len(drained)}, "
        f"excess cost {result.excess_cost:g}, discarded {result.discarded_s:.0f} s",
        data=result.to_json(),
    )
    return result
