"""A discrete-event simulation of multi-cloud rebalancing under a downscaling policy (thesis ch. 2).

An HTC pool: single-node jobs wait in one FIFO queue and go to idle workers (a pull model, as
HTCondor's). Workers live on sites with prices and desired counts; the pool starts in an
undesired state. Every ``interval_s`` (first at ``first_run_s``) the policy reads the pool and
rebalances: terminated busy workers put their job back at the head of the queue (its elapsed
time is discarded work), drained workers finish their job and leave once idle, and n-preserving
upscaling launches replacements that boot for ``boot_s`` before they take jobs.

Event conventions, fixed because they change results:

- t = 0 is the start: the initial workers are up and idle, the policy clock starts;
- at equal times: job completions, then boots, then arrivals, then drained-worker checks, then
  the policy; one dispatch pass follows every single event, so the policy sees a worker that
  finished a job at t already running the next queued job;
- jobs killed together go back to the queue head in the order the policy terminated them;
- the run stops once every job is done and the pool has reached the desired state (or at
  ``horizon_s``).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from elastic.errors import InputError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.policies import (
    CloudSite,
    DownscalingPolicy,
    Pool,
    PoolWorker,
    Rebalance,
    RunningJob,
    WorkerState,
    retire_drained,
)
from elastic.sim.downscaling_metrics import (
    DownscalingRun,
    InstanceRecord,
    KilledJob,
    PoolSample,
    excess_cost,
)
from elastic.sim.traces import Trace

# The thesis does not say how long a replacement takes to boot and join the pool. Its AP-100
# runs terminate every excess worker at the first policy run (0.5 h) and converge at about
# 0.6 h, so launching, booting the ~1 GB image and contextualising took about 6 minutes.
DEFAULT_BOOT_S = 360.0
THESIS_INTERVAL_S = 1800.0
DEFAULT_HORIZON_S = 30 * 86400.0


@dataclass(frozen=True)
class SimJob:
    job_id: str
    runtime: float
    requested: float  # the walltime request AP's progress is measured against
    submit: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.runtime) and self.runtime >= 0):
            raise InputError(f"job {self.job_id}: runtime {self.runtime} must be >= 0")
        if not (math.isfinite(self.requested) and self.requested > 0):
            raise InputError(f"job {self.job_id}: requested time {self.requested} must be > 0")
        if not (math.isfinite(self.submit) and self.submit >= 0):
            raise InputError(f"job {self.job_id}: submit time {self.submit} must be >= 0")


@dataclass(frozen=True)
class DownscalingSetup:
    """Sites in preference order, and how many workers each runs at t = 0."""

    sites: tuple[CloudSite, ...]
    initial: Mapping[str, int] = field(default_factory=dict)
    interval_s: float = THESIS_INTERVAL_S
    first_run_s: float | None = None  # None: one interval after the start (the thesis's)
    boot_s: float = DEFAULT_BOOT_S
    billing_s: float = 3600.0  # EC's accounting unit (0: per second)
    reap_s: float | None = None  # how often drained idle workers are found; None: at once
    horizon_s: float = DEFAULT_HORIZON_S

    def __post_init__(self) -> None:
        Pool(self.sites)  # validates the sites
        names = {s.name for s in self.sites}
        for site, count in self.initial.items():
            if site not in names:
                raise InputError(f"initial: site {site!r} is not a known site")
            if count < 0:
                raise InputError(f"initial: count {count} for site {site} must be >= 0")
        for name in ("interval_s", "reap_s"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(f"{name}: {value} must be > 0")
        for name in ("boot_s", "billing_s", "first_run_s", "horizon_s"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise InputError(f"{name}: {value} must be >= 0")


def jobs_from_trace(trace: Trace) -> tuple[SimJob, ...]:
    """One job per trace row: its runtime, walltime request and submit time."""
    return tuple(
        SimJob(str(j), float(r), float(q), float(s))
        for j, r, q, s in zip(
            trace.job_id, trace.runtime, trace.requested, trace.submit, strict=True
        )
    )


class _Kind(IntEnum):  # the value orders events at equal times
    FINISH = 0
    BOOT = 1
    ARRIVE = 2
    REAP = 3
    POLICY = 4


@dataclass
class _Instance:
    index: int
    instance_id: str
    site: str
    launched: float
    state: WorkerState
    job: int | None = None
    started: float = 0.0
    epoch: int = 0  # bumped on every change of job, so a stale completion is ignored
    terminated: float | None = None
    rebalanced: bool = False


class _Engine:
    def __init__(
        self,
        jobs: Sequence[SimJob],
        setup: DownscalingSetup,
        policy: DownscalingPolicy,
        report: Reporter,
    ) -> None:
        self.jobs = jobs
        self.setup = setup
        self.policy = policy
        self.report = report
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.instances: list[_Instance] = []
        self.by_id: dict[str, _Instance] = {}
        self.idle: deque[_Instance] = deque()
        self.queue: deque[int] = deque()
        self.done = 0
        self.running = 0
        self.last_completion: float | None = None
        self.killed: list[KilledJob] = []
        self.timeline: list[PoolSample] = []
        self.converged: float | None = None
        self.step = max(1, len(jobs) // 20)

    # -- events

    def push(self, time: float, kind: _Kind, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, int(kind), self.seq, a, b))

    def launch(self, site: str, now: float, booted: bool) -> None:
        index = len(self.instances)
        inst = _Instance(
            index,
            f"{site}-{index}",
            site,
            now,
            WorkerState.IDLE if booted else WorkerState.BOOTING,
        )
        self.instances.append(inst)
        self.by_id[inst.instance_id] = inst
        if booted:
            self.idle.append(inst)
        else:
            self.push(now + self.setup.boot_s, _Kind.BOOT, index)

    def run(self) -> float:
        setup = self.setup
        for site in setup.sites:
            for _ in range(setup.initial.get(site.name, 0)):
                self.launch(site.name, 0.0, booted=True)
        for index in sorted(range(len(self.jobs)), key=lambda i: self.jobs[i].submit):
            self.push(self.jobs[index].submit, _Kind.ARRIVE, index)
        first = setup.interval_s if setup.first_run_s is None else setup.first_run_s
        self.push(first, _Kind.POLICY)
        if setup.reap_s is not None:
            self.push(setup.reap_s, _Kind.REAP)
        now = 0.0
        self.observe(now)
        while self.heap and not self.finished():
            now = self.heap[0][0]
            if now > setup.horizon_s:
                return setup.horizon_s
            while self.heap and self.heap[0][0] == now:
                _, kind, _, a, b = heapq.heappop(self.heap)
                self.handle(_Kind(kind), now, a, b)
                self.dispatch(now)
            self.observe(now)
        return now

    def finished(self) -> bool:
        return self.done == len(self.jobs) and self.converged is not None

    def handle(self, kind: _Kind, now: float, a: int, b: int) -> None:
        if kind is _Kind.FINISH:
            self.finish(self.instances[a], b, now)
        elif kind is _Kind.BOOT:
            inst = self.instances[a]
            if inst.state is WorkerState.BOOTING and inst.terminated is None:
                inst.state = WorkerState.IDLE
                self.idle.append(inst)
        elif kind is _Kind.ARRIVE:
            self.queue.append(a)
        elif kind is _Kind.REAP:
            self.apply(retire_drained(self.pool(now)), now)
            assert self.setup.reap_s is not None
            self.push(now + self.setup.reap_s, _Kind.REAP)
        else:
            decision = self.apply(self.policy.decide(self.pool(now)), now)
            if decision.terminate or decision.drain:
                self.report.status(
                    f"t={now:.0f}s {self.policy.name}: terminate {len(decision.terminate)}, "
                    f"drain {len(decision.drain)}, launch {dict(decision.launch)}",
                    time=now,
                )
            self.push(now + self.setup.interval_s, _Kind.POLICY)

    def finish(self, inst: _Instance, epoch: int, now: float) -> None:
        if inst.epoch != epoch or inst.job is None:
            return  # the worker was terminated under this job
        inst.job = None
        inst.epoch += 1
        self.running -= 1
        self.done += 1
        self.last_completion = now
        if self.done % self.step == 0 or self.done == len(self.jobs):
            self.report.progress(self.done, len(self.jobs), time=now)
        if inst.state is WorkerState.DRAINING:
            if self.setup.reap_s is None:
                self.apply(retire_drained(self.pool(now)), now)
        else:
            inst.state = WorkerState.IDLE
            self.idle.append(inst)

    def dispatch(self, now: float) -> None:
        while self.queue and self.idle:
            inst = self.idle.popleft()
            if inst.state is not WorkerState.IDLE or inst.terminated is not None:
                continue  # terminated or drained while it waited
            index = self.queue.popleft()
            inst.state, inst.job, inst.started = WorkerState.BUSY, index, now
            inst.epoch += 1
            self.running += 1
            self.push(now + self.jobs[index].runtime, _Kind.FINISH, inst.index, inst.epoch)

    # -- the policy's view and its decisions

    def live(self) -> list[_Instance]:
        return [i for i in self.instances if i.terminated is None]

    def pool(self, now: float) -> Pool:
        workers = []
        for inst in self.live():
            job = None
            if inst.job is not None:
                spec = self.jobs[inst.job]
                job = RunningJob(spec.job_id, now - inst.started, spec.requested)
            workers.append(PoolWorker(inst.instance_id, inst.site, inst.state, job, inst.launched))
        return Pool(self.setup.sites, tuple(workers))

    def apply(self, decision: Rebalance, now: float) -> Rebalance:
        requeue: list[int] = []
        for wid in decision.terminate:
            inst = self.by_id.get(wid)
            if inst is None or inst.terminated is not None:
                raise PtcError(f"policy {self.policy.name}: terminates unknown worker {wid!r}")
            if inst.job is not None:
                spec = self.jobs[inst.job]
                elapsed = now - inst.started
                self.killed.append(KilledJob(now, spec.job_id, wid, elapsed, spec.requested))
                requeue.append(inst.job)
                self.running -= 1
            inst.job, inst.epoch = None, inst.epoch + 1
            inst.terminated, inst.rebalanced = now, True
        self.queue.extendleft(reversed(requeue))
        idle_drained = False
        for wid in decision.drain:
            inst = self.by_id.get(wid)
            if inst is None or inst.terminated is not None:
                raise PtcError(f"policy {self.policy.name}: drains unknown worker {wid!r}")
            inst.state = WorkerState.DRAINING
            idle_drained |= inst.job is None
        for site, count in decision.launch.items():
            for _ in range(count):
                self.launch(site, now, booted=False)
        if idle_drained and self.setup.reap_s is None:
            self.apply(retire_drained(self.pool(now)), now)
        return decision

    # -- observation

    def observe(self, now: float) -> None:
        live = {s.name: 0 for s in self.setup.sites}
        booting = dict(live)
        for inst in self.live():
            if inst.state is WorkerState.BOOTING:
                booting[inst.site] += 1
            else:
                live[inst.site] += 1
        if self.converged is None and all(
            live[s.name] == s.desired and booting[s.name] == 0 for s in self.setup.sites
        ):
            self.converged = now
        sample = PoolSample(now, live, booting, self.running, len(self.queue), self.done)
        if self.timeline and _same(self.timeline[-1], sample):
            return
        self.timeline.append(sample)


def _same(a: PoolSample, b: PoolSample) -> bool:
    return (a.live, a.booting, a.running_jobs, a.queued_jobs, a.done_jobs) == (
        b.live,
        b.booting,
        b.running_jobs,
        b.queued_jobs,
        b.done_jobs,
    )


def simulate_downscaling(
    jobs: Sequence[SimJob],
    setup: DownscalingSetup,
    policy: DownscalingPolicy,
    on_event: OnEvent | None = None,
) -> DownscalingRun:
    """Run ``jobs`` on the pool of ``setup`` rebalanced by ``policy``; see the module docstring."""
    ids = [j.job_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise InputError("jobs: duplicate job ids")
    report = Reporter("downscaling", on_event)
    report.begin(f"{policy.name}: {len(jobs)} jobs", total=len(jobs))
    engine = _Engine(jobs, setup, policy, report)
    end = engine.run()
    records = tuple(
        InstanceRecord(i.instance_id, i.site, i.launched, i.terminated, i.rebalanced)
        for i in engine.instances
    )
    first_submit = min((j.submit for j in jobs), default=0.0)
    makespan = 0.0 if engine.last_completion is None else engine.last_completion - first_submit
    result = DownscalingRun(
        policy=policy.name,
        jobs=len(jobs),
        total_work_s=sum(j.runtime for j in jobs),
        makespan_s=makespan,
        convergence_s=engine.converged,
        end_s=end,
        excess_cost=excess_cost(records, setup.sites, end, setup.billing_s),
        discarded_s=sum(k.elapsed for k in engine.killed),
        killed=tuple(engine.killed),
        instances=records,
        timeline=tuple(engine.timeline),
    )
    report.end(
        f"{policy.name}: makespan {result.makespan_s:.0f}s, EC {result.excess_cost:g}",
        makespan_s=result.makespan_s,
        convergence_s=result.convergence_s,
        excess_cost=result.excess_cost,
        discarded_s=result.discarded_s,
    )
    return result
