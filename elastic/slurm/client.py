"""The Slurm elastic client: Slurm's power-save hooks, the PV loop, and graceful preemption.

Slurm sees every pool node; nodes outside its partition are powered down as far as it knows
(``State=CLOUD``). The client is the glue between Slurm and the manager:

- ``resume(hostlist)`` (ResumeProgram): AddNodes, then ``Provisioner.power_on`` and
  ``Provisioner.configure`` (the compute part of the playbooks), then wait for slurmd to
  register. A failure at any step marks the node DOWN at once with a reason naming the step,
  gives it back to the pool, and Slurm requeues the job that was waiting for it.
- ``suspend(hostlist)`` (SuspendProgram): ``Provisioner.power_off`` (stop slurmd, clean up,
  power down where the testbed can), then DeleteNodes.
- ``resume_failed(hostlist)`` (ResumeFailProgram): the nodes Slurm gave up on go back to the
  pool; they stay DOWN in Slurm with a reason.
- ``report_pv()``: the PV of the live queue with the configured policy, to SetResourceValues.
- ``notified(payload)`` (NotifyDeletePending): drain the nodes, reason
  ``ptc reclamation <id> deadline <UTC time>`` (a node still powering up for its job only once
  it is up: Slurm requeues the job of a node drained while it powers up); ``step()`` hands back
  each one as soon as it is idle, and ``requeue_lead`` seconds before the deadline requeues the
  jobs still on them
  (``scontrol requeue``). A job that cannot be requeued (an interactive srun/salloc job, or one
  Slurm refuses) is cancelled (``scancel``) and reported as not requeued: its work is lost.
  The jobs are reported to the manager (``/v1/reclamations/<id>/jobs``).
- a provider's notice (``elastic.sites.notice``: a node that drained itself on its spot
  interruption's notice), seen by ``sync_pool``: passed once to the manager, whose reclamation
  of that node, with the provider's deadline, then goes as any other.

Handing a node back = DeleteNodes, then ``POWER_DOWN_FORCE`` (Slurm runs SuspendProgram, whose
DeleteNodes then finds the node is no longer ours and moves on) and ``UNDRAIN`` so that Slurm
may resume it again later. The client keeps no state on disk: after a restart the manager's
next NotifyDeletePending (every minute) tells it again what is being reclaimed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from elastic import atomic
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.manager.client import ManagerClient
from elastic.manager.errors import Conflict, Forbidden
from elastic.manager.model import JobReport, Queue
from elastic.policies import Policy
from elastic.sacct import FINISHED_STATES
from elastic.sites import notice
from elastic.slurm.commands import REQUEUE_DELAY_S, Slurm, SlurmCommandError
from elastic.slurm.queue import compute_pv, parse_squeue
from elastic.slurm.resize import show_fields
from elastic.slurm_time import scontrol_moment

log = logging.getLogger(__name__)

# The Slurm reservations whose names start so are the client's: it makes, changes and removes
# them to hold nodes back from Slurm (a paused site's, a site the pool does not grow onto).
HOLD_PREFIX = "ptc-"

# A job requeued off a node whose site had no capacity: how many times, and how far apart, the
# client looks for Slurm to have requeued it (a power down requeues it, though not necessarily
# before scontrol returns) so that it may begin at once.
REQUEUE_LOOKS = 5
REQUEUE_LOOK_S = 0.5


class Provisioner(Protocol):
    """What the testbed does to a node. The lead's deploy code implements it (local testbed:
    start the node's container and rewire its LAN ports, then run the compute part of the
    playbooks with ``--limit``; CloudLab: power on and off are no-ops). Each method raises a
    PtcError whose message names the failed step (e.g. a DeployError naming the task)."""

    def power_on(self, nodes: Sequence[str]) -> None: ...

    def configure(self, nodes: Sequence[str]) -> None: ...

    def power_off(self, nodes: Sequence[str]) -> None: ...

    @property
    def powers(self) -> bool:
        """Whether the testbed powers the pool's machines (else ``running`` tells nothing)."""
        ...

    def running(self, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` whose machines are on; [] when the testbed powers nothing."""
        ...

    def lent(self, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` whose machines the testbed has lent to another experiment; []
        when it lends none."""
        ...

    def held_back(
        self,
        nodes: Sequence[str],
        states: Mapping[str, str] | None = None,
        demand: int = 0,
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        """Those of ``nodes`` (the pool, whose Slurm ``states`` are given, with ``demand``
        nodes asked for by waiting jobs, and ``asked`` the feature names their constraints
        name) that Slurm must not resume now (their site has no capacity, or is not where the
        pool should grow), by the name of the reservation that holds them (``ptc-...``); {}
        when none is."""
        ...

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        """Power off those of ``nodes`` that ``still`` keeps, asked when no resume can start
        one in between; returns them."""
        ...

    def check(self) -> str:
        """What powers the nodes, checked now (its credential accepted); in words."""
        ...

    # Whether it can mend a broken node (``renew`` and ``provision`` do something).
    repairs: bool

    def renew(self, nodes: Sequence[str]) -> bool:
        """A fresh disk from the image for each node, its machine running after: True; False
        when the testbed cannot give one (the nodes keep their disks)."""
        ...

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        """Make the nodes what ``ptc deploy`` made them; ``start``: then Slurm nodes, as a
        resume does."""
        ...


class NoProvisioner:
    """Nodes that are always up and already configured (a CloudLab pool with a full image)."""

    def power_on(self, nodes: Sequence[str]) -> None:
        pass

    def configure(self, nodes: Sequence[str]) -> None:
        pass

    def power_off(self, nodes: Sequence[str]) -> None:
        pass

    powers = False

    def running(self, nodes: Sequence[str]) -> list[str]:
        return []

    def lent(self, nodes: Sequence[str]) -> list[str]:
        return []

    def held_back(
        self,
        nodes: Sequence[str],
        states: Mapping[str, str] | None = None,
        demand: int = 0,
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        return {}

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        return []

    def check(self) -> str:
        return "nothing powers the pool's machines: they stay up"

    repairs = False

    def renew(self, nodes: Sequence[str]) -> bool:
        return False

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        pass


@dataclass(frozen=True)
class ClientConfig:
    partition: str = "slurm"  # the manager's partition name
    slurm_partition: str | None = None  # Slurm partition whose jobs count (None: all)
    # resume: wait this long for slurmd to register; 0: until Slurm gives up (ResumeTimeout,
    # then ResumeFailProgram), at most register_cap
    register_timeout: float = 0.0
    register_cap: float = 3600.0
    register_poll: float = 2.0
    requeue_lead: float = 2.0  # requeue this long before the deadline
    # A free node's machine that runs while Slurm holds the node powered down is powered off
    # only once it has been so this long: one coming up by itself (an instance whose slurmd is
    # about to register) shows so for a moment, and stopping its slurmd then fails its job.
    settle_grace: float = 30.0
    # Where the client keeps the Slurm partitions it put DOWN for protected mode, so that it
    # (and only it) puts them UP again, across restarts; None: in memory only.
    protected_file: Path | None = None


@dataclass
class Pending:
    reclamation: str
    nodes: set[str]
    deadline: float
    reason: str
    beneficiary: str | None = None  # the partition that gets the nodes; None: the pool
    drained: set[str] = field(default_factory=set)
    done: bool = False


@dataclass(frozen=True)
class HookResult:
    ready: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # node -> reason
    # seconds per step: manager (AddNodes), power_on, playbook, register, total
    timings: dict[str, float] = field(default_factory=dict)
    # when the resume began, by the client's clock: the steps' times count from here (the
    # report to the manager after them takes its own time, so the moment the result is
    # recorded is no measure of when they ran)
    started: float = 0.0


HELD_PREFIX = "ptc: held by partition "


def held_reason(partition: str) -> str:
    return f"{HELD_PREFIX}{partition}"


def _powered_up(state: str) -> bool:
    """A node Slurm counts as up (slurmd registered), neither powered down nor on the way up
    or down, nor DOWN: e.g. ``idle``, ``mixed``, ``allocated``, ``drained``."""
    return not any(mark in state for mark in "~#%*!") and not state.startswith(("down", "unk"))


def _short(err: Exception | str) -> str:
    text = " ".join(str(err).split())
    return text[:200]


def failures_by_node(err: PtcError, nodes: list[str]) -> dict[str, str]:
    """What failed on which of ``nodes``: a playbook's failed tasks (each names its task), a
    provisioner's per-node failures, or the whole error for every node."""
    failures = getattr(err, "failures", None)
    out: dict[str, str] = {}
    if isinstance(failures, dict):
        out = {n: _short(m) for n, m in failures.items() if n in nodes}
    elif failures:
        for f in failures:
            host, task, message = (getattr(f, k, "") for k in ("host", "task", "message"))
            if host in nodes and host not in out:
                kind = "unreachable" if getattr(f, "unreachable", False) else "failed"
                out[host] = _short(f"task '{task}' {kind}: {message}")
    return out or {n: _short(err) for n in nodes}


class SlurmElasticClient:
    def __init__(
        self,
        slurm: Slurm,
        manager: ManagerClient,
        policy: Policy,
        *,
        provisioner: Provisioner | None = None,
        config: ClientConfig | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        on_event: OnEvent | None = None,
    ) -> None:
        self.slurm = slurm
        self.manager = manager
        self.policy = policy
        self.provisioner = provisioner or NoProvisioner()
        self.config = config or ClientConfig()
        self.clock = clock
        self.sleep = sleep
        self.report = Reporter("slurm-elastic", on_event)
        self.pending: dict[str, Pending] = {}
        self._lock = threading.Lock()
        self._downed_here: set[str] = set()  # without protected_file
        # settle_power: since when each free node's machine was seen running while Slurm held
        # the node powered down
        self._resting_since: dict[str, float] = {}
        # nodes the repair loop is mending now: their machines are its to run (settle_power
        # leaves them alone)
        self.under_repair: set[str] = set()
        # the pool's Slurm states as the last sync read them (node -> sinfo's long state), for
        # the metrics: a scrape asks Slurm nothing
        self.pool_states: dict[str, str] = {}
        # nodes whose provider's notice was passed on to the manager, with its deadline
        self._noticed: dict[str, float] = {}

    @property
    def partition(self) -> str:
        return self.config.partition

    def held(self) -> list[str]:
        return sorted(n["name"] for n in self.manager.discover() if n["owner"] == self.partition)

    # -- power-save hooks ---------------------------------------------------------------
    def resume(self, hostlist: str) -> HookResult:
        nodes = self.slurm.expand(hostlist)
        self.report.begin(f"resume {hostlist}", total=len(nodes))
        failed: dict[str, str] = {}
        timings: dict[str, float] = {}
        started = self.clock()
        if (protected := self._protected()) is not None:
            # the partition's jobs wait while it is protected; a resume asked for before the
            # partition went DOWN is refused, and not counted against the nodes
            refused = {n: f"partition protected: {protected}" for n in nodes}
            self._fail(refused)
            self._report_resume(nodes, [], refused, {"total": 0.0}, called_off=nodes)
            self.report.end(f"resume: refused {nodes}, the partition is protected")
            return HookResult([], refused, {"total": 0.0}, started)
        taken: dict[str, str] = {}
        short: set[str] = set()  # nodes whose site had no room: not counted against them
        ready = self._add(nodes, failed, taken)
        timings["manager"] = self.clock() - started
        # A node fails at the step that failed it, not when the others are ready: its job is
        # requeued at once, and its reason is ours before Slurm's ResumeTimeout comes for it.
        self._fail(failed)
        self._taken(taken)
        failed.update(taken)
        for step, key, action in (
            ("power on", "power_on", self.provisioner.power_on),
            ("configure", "playbook", self.provisioner.configure),
        ):
            if not ready:
                break
            t0 = self.clock()
            try:
                action(ready)
            except PtcError as err:
                by_node = failures_by_node(err, ready)
                full = set(getattr(err, "capacity", ())) & set(by_node)
                now_failed = {n: f"{step} failed: {w}" for n, w in by_node.items() if n not in full}
                no_room = {n: f"{step}: {w}" for n, w in by_node.items() if n in full}
                self._fail(now_failed)
                self._no_capacity(no_room)
                failed.update(now_failed | no_room)
                short.update(no_room)
                ready = [n for n in ready if n not in failed]
            timings[key] = self.clock() - t0
        gave_up: dict[str, str] = {}
        if ready:
            t0 = self.clock()
            missing, gave_up = self._wait_registered(ready)
            timings["register"] = self.clock() - t0
            limit = self.config.register_timeout or self.config.register_cap
            late = {n: f"slurmd did not register within {limit:.0f} s" for n in missing}
            self._fail(late)
            failed.update(late)
            ready = [n for n in ready if n not in missing and n not in gave_up]
        called_off = []
        for node, state in gave_up.items():  # ResumeFailProgram's or SuspendProgram's business
            if state.startswith("down"):
                self.report.warning(f"{node}: Slurm gave up on the resume ({state})")
                failed[node] = f"Slurm gave up: {state}"
            else:
                self.report.warning(f"{node}: the resume was called off: powered down ({state})")
                failed[node] = f"called off: powered down ({state})"
                called_off.append(node)
        timings["total"] = self.clock() - started
        called_off += sorted(taken) + sorted(short)
        self._report_resume(nodes, ready, failed, timings, called_off=called_off)
        self.report.end(f"resume: ready {ready or 'none'}, failed {sorted(failed) or 'none'}")
        return HookResult(ready, failed, timings, started)

    def _report_resume(
        self,
        nodes: list[str],
        ready: list[str],
        failed: dict[str, str],
        timings: dict[str, float],
        called_off: Sequence[str] = (),
    ) -> None:
        """The resume's steps to the manager's event log, which also counts its failures
        towards protected mode; best effort: the resume is done."""
        try:
            self.manager.report_resume(
                self.partition,
                nodes,
                ready,
                {n: why[:300] for n, why in failed.items()},
                timings,
                called_off=called_off,
            )
        except PtcError as err:
            self.report.warning(f"the manager did not take the resume's report: {_short(err)}")

    def _protected(self) -> str | None:
        """Why the partition is in protected mode, or None. A manager that does not answer
        protects nothing: the resume's own calls to it will fail if it is away."""
        try:
            p = self.manager.protection(self.partition)
        except PtcError:
            return None
        if not p.get("protected"):
            return None
        since = datetime.fromtimestamp(float(p["since"]), UTC)
        return f"since {since:%Y-%m-%dT%H:%M:%SZ}: {p.get('reason') or 'no reason given'}"

    # -- protected mode -------------------------------------------------------------------
    def sync_protection(self) -> dict[str, list[str]]:
        """The manager's protected mode, applied to Slurm. While the partition is protected,
        the Slurm partitions of its jobs are DOWN: jobs are still queued, none starts, and the
        running ones go on. Once it ends, the partitions this client put DOWN are UP again;
        one that someone else put DOWN is left as it is. Returns {"down": [...], "up": [...]}."""
        protected = bool(self.manager.protection(self.partition).get("protected"))
        marked = self._protected_partitions()
        if not protected and not marked:
            return {"down": [], "up": []}  # the usual round: Slurm need not be asked
        states = {name: state for name, (state, _) in self._job_partitions().items()}
        downed: list[str] = []
        upped: list[str] = []
        if protected:
            for name, state in sorted(states.items()):
                if state == "UP":
                    self.slurm.set_partition_state(name, "DOWN")
                    downed.append(name)
            left = marked | set(downed)
        else:
            for name in sorted(marked):
                if states.get(name) == "DOWN":
                    self.slurm.set_partition_state(name, "UP")
                    upped.append(name)
            left = set()
        if left != marked:
            self._keep_protected_partitions(left)
        if downed:
            self.report.warning(f"protected mode: Slurm partition(s) {downed} DOWN")
        if upped:
            self.report.status(f"protected mode over: Slurm partition(s) {upped} UP")
        return {"down": downed, "up": upped}

    def _job_partitions(self) -> dict[str, tuple[str, list[str]]]:
        """The Slurm partitions whose jobs this client serves: the one it is set to, else
        every partition with a node of the pool."""
        found = self.slurm.partitions()
        wanted = self.config.slurm_partition
        if wanted is not None:
            return {k: v for k, v in found.items() if k == wanted}
        pool = {n["name"] for n in self.manager.discover()}
        return {k: v for k, v in found.items() if pool.intersection(v[1])}

    def _protected_partitions(self) -> set[str]:
        path = self.config.protected_file
        if path is None:
            return set(self._downed_here)
        try:
            names = json.loads(path.read_text())
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as err:
            raise PtcError(f"{path}: unreadable ({err}); remove it to start again") from err
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PtcError(f"{path}: not a list of partition names; remove it to start again")
        return set(names)

    def _keep_protected_partitions(self, names: set[str]) -> None:
        if self.config.protected_file is None:
            self._downed_here = set(names)
        else:
            text = json.dumps(sorted(names)) + "\n"
            atomic.write_text(self.config.protected_file, text, mode=0o600)

    def _add(self, nodes: list[str], failed: dict[str, str], taken: dict[str, str]) -> list[str]:
        """AddNodes for ``nodes``; those it refuses go to ``failed``, and those another
        partition took meanwhile (Slurm chose them while they were free) to ``taken``."""
        try:
            self.manager.add_nodes(self.partition, nodes=nodes)
            return nodes
        except (Conflict, NotFoundError, Forbidden):
            pass  # AddNodes is all or nothing: try the nodes one by one
        except PtcError as err:
            for node in nodes:
                failed[node] = f"manager: {_short(err)}"
            return []
        ready = []
        for node in nodes:
            try:
                self.manager.add_nodes(self.partition, nodes=[node])
                ready.append(node)
            except Conflict as err:  # for named nodes: held by another partition
                taken[node] = f"taken meanwhile: {_short(err)}"
            except PtcError as err:
                failed[node] = f"manager refused: {_short(err)}"
        return ready

    def _taken(self, taken: dict[str, str]) -> None:
        """Nodes another partition took between Slurm's choice and this resume: nothing is
        wrong with them, so not DOWN. Slurm powers them down again (their jobs requeued, to
        start elsewhere), and the pool's sync then keeps them drained for their holder."""
        for node, reason in sorted(taken.items()):
            self.report.warning(f"{node}: {reason}")
            try:
                self.slurm.power_down([node], f"ptc resume: {reason}"[:250])
            except SlurmCommandError as err:
                self.report.warning(f"{node}: could not power it down again: {err}")

    def _wait_registered(self, nodes: list[str]) -> tuple[list[str], dict[str, str]]:
        """Wait for slurmd on ``nodes``; (nodes still waiting at the client's own timeout,
        {node: state} of the nodes whose resume Slurm ended: DOWN and no longer powering up,
        after ResumeTimeout (ResumeFailProgram handles those), or powered down again before
        they registered (a forced power down, e.g. a reclamation's hand-back; SuspendProgram
        handles those))."""
        limit = self.config.register_timeout or self.config.register_cap
        deadline = self.clock() + limit
        waiting = set(nodes)
        gave_up: dict[str, str] = {}
        while True:
            try:
                states = self.slurm.node_states(sorted(waiting))
            except SlurmCommandError as err:
                self.report.warning(f"sinfo failed: {err}")
                states = {}
            for node, state in states.items():
                if "#" not in state and (state.startswith("down") or any(m in state for m in "~%")):
                    gave_up[node] = state
                    waiting.discard(node)
                # '#' powering up, '~' powered down, '*' not responding, '%' powering down
                elif not any(mark in state for mark in "#~*%") and not state.startswith("down"):
                    waiting.discard(node)
            if not waiting or self.clock() >= deadline:
                return sorted(waiting), gave_up
            self.sleep(self.config.register_poll)

    def _fail(self, failed: dict[str, str]) -> None:
        """DOWN in Slurm with the reason, at once (Slurm requeues the job that waited for the
        node), then powered down (SuspendProgram tidies the node; it stays DOWN with the reason
        until an administrator resumes it), and back to the pool. Best effort on each step: the
        node must not stay half-added. The model is ParallelCluster's _handle_failed_nodes."""
        if not failed:
            return
        for node, reason in sorted(failed.items()):
            self.report.warning(f"{node}: {reason}")
            text = f"ptc resume: {reason}"[:250]
            try:
                self.slurm.down([node], text)
                self.slurm.update_nodes([node], "POWER_DOWN", text)
            except SlurmCommandError as err:
                self.report.warning(f"{node}: could not mark DOWN and power down: {err}")
        self._give_back(sorted(failed))

    def _no_capacity(self, failed: dict[str, str]) -> None:
        """Nodes whose site had no room: the site's nodes are held back from Slurm first (so
        the requeued job goes to another site's), then each is powered down now, never DOWN
        (Slurm requeues the job that waited for it), and back to the pool. The requeued jobs
        then begin at once (see ``_begin_now``)."""
        if not failed:
            return
        try:
            self.sync_sites()
        except (PtcError, SlurmCommandError) as err:
            self.report.warning(f"could not hold the paused sites' nodes back: {err}")
        # asked before the power down: after it, the jobs hold the nodes no more
        waiting = self._jobs_on(sorted(failed))
        powered_down: set[str] = set()
        for node, reason in sorted(failed.items()):
            self.report.warning(f"{node}: {reason}")
            try:
                self.slurm.power_down([node], f"ptc resume: {reason}"[:250])
                powered_down.add(node)
            except SlurmCommandError as err:
                self.report.warning(f"{node}: could not power down: {err}")
        self._give_back(sorted(failed))
        self._begin_now(sorted(job for job, nodes in waiting.items() if nodes & powered_down))

    def _jobs_on(self, nodes: list[str]) -> dict[str, set[str]]:
        """{job id: those of ``nodes`` it holds}; {} when Slurm cannot tell (a warning)."""
        try:
            jobs = parse_squeue(self.slurm.jobs_on(nodes), self.slurm)
        except (PtcError, SlurmCommandError) as err:
            self.report.warning(f"jobs on {','.join(nodes)}: {err}")
            return {}
        return {job.job_id: set(job.nodes) & set(nodes) for job in jobs}

    def _begin_now(self, job_ids: list[str]) -> None:
        """Slurm 22.05 gives a job requeued off a powered-down node a begin time two minutes
        ahead, for its old nodes to clean up; a node whose site had no capacity never booted,
        so the job would only wait while other sites' nodes could take it. Each of ``job_ids``,
        once requeued (pending, its begin time ahead), begins in REQUEUE_DELAY_S (a node of
        another site it held may still be revoking its credentials). Only these jobs: another
        pending job's begin time (a user's ``--begin``) stands. Best effort: a failure is a
        warning, never the resume's."""
        left = list(job_ids)
        for look in range(REQUEUE_LOOKS):
            if not left:
                return
            if look:
                self.sleep(REQUEUE_LOOK_S)
            waiting = []
            for job_id in left:
                try:
                    fields = show_fields(self.slurm.show_job(job_id))
                except SlurmCommandError as err:
                    self.report.warning(f"job {job_id}: its state: {err}")
                    continue
                state = fields.get("JobState", "")
                if state in FINISHED_STATES:  # never requeued now: nothing to wait for
                    continue
                if state != "PENDING":  # not requeued yet (running, configuring, completing)
                    waiting.append(job_id)
                    continue
                if not self._later(fields.get("EligibleTime", ""), REQUEUE_DELAY_S):
                    continue  # eligible already, or all but
                try:
                    self.slurm.begin_soon(job_id)
                except SlurmCommandError as err:
                    self.report.warning(f"job {job_id}: could not make it begin sooner: {err}")
                    continue
                self.report.status(
                    f"job {job_id} begins in {REQUEUE_DELAY_S} s: its nodes' site had no capacity"
                )
            left = waiting
        for job_id in left:
            self.report.warning(
                f"job {job_id}: not requeued within {REQUEUE_LOOKS} looks; its begin time is "
                "left to Slurm"
            )

    def _later(self, when: str, margin: float) -> bool:
        """Whether Slurm's time ``when`` (as scontrol prints it) is more than ``margin``
        seconds ahead; False for ``Unknown``, ``None`` and the like."""
        moment = scontrol_moment(when)
        return moment is not None and moment > self.clock() + margin

    def sync_sites(self) -> dict[str, list[str]]:
        """The nodes the provisioner holds back, each set in a Slurm reservation of its own
        (``ptc-paused-SITE``: a site with no capacity; ``ptc-gated-SITE``: a site the pool
        does not grow onto now): Slurm places no job on them, so none is resumed. A
        reservation no longer wanted is changed or removed. The reservations as they should
        now be."""
        pool = sorted(self.pool_states) or sorted(n["name"] for n in self.manager.discover())
        states = dict(self.pool_states or self.slurm.node_states(pool))
        for node in self.slurm.dead_nodes(pool):  # sinfo's %T hides it when powered down
            states[node] = states.get(node, "") + "*"
        demand = self.slurm.pending_demand(self.config.slurm_partition)[1]
        asked = self.slurm.pending_features(self.config.slurm_partition)
        want = {
            name: nodes
            for name, nodes in self.provisioner.held_back(pool, states, demand, asked).items()
            if nodes
        }
        have = self.slurm.reservations(HOLD_PREFIX)
        for name, nodes in want.items():
            if name not in have:
                self.slurm.reserve(name, nodes)
                self.report.status(f"{name}: holding {','.join(nodes)} back")
            elif sorted(have[name]) != sorted(nodes):
                self.slurm.set_reservation_nodes(name, nodes)
                self.report.status(f"{name}: holding {','.join(nodes)} back")
        for name in sorted(set(have) - set(want)):
            self.slurm.delete_reservation(name)
            self.report.status(f"{name}: its nodes are let go")
        return want

    def _power_off_and_give_back(self, nodes: list[str], hostlist: str) -> list[str]:
        """Power off (best effort: a node that will not stop still leaves the partition); the
        seconds it took go with the release, into the manager's log."""
        started = self.clock()
        try:
            self.provisioner.power_off(nodes)
        except PtcError as err:
            self.report.warning(f"power off {hostlist}: {err}")
        return self._give_back(nodes, power_off=self.clock() - started)

    def _give_back(self, nodes: list[str], power_off: float | None = None) -> list[str]:
        """DeleteNodes for those of ``nodes`` we hold; nodes already gone are not an error. The
        manager refuses the partition's minimum (those stay ours). Returns the nodes released."""
        mine = set(self.held())
        ours = [n for n in nodes if n in mine]
        if not ours:
            return []
        try:
            return self.manager.delete_nodes(self.partition, ours, power_off=power_off)
        except (Conflict, Forbidden, NotFoundError, InputError) as err:
            if len(ours) == 1:
                self.report.warning(f"release {ours}: {err}")
                return []
        released = []  # DeleteNodes is all or nothing: the nodes one by one
        for index, node in enumerate(ours):  # the suspend's time counted once
            released += self._give_back([node], power_off if index == 0 else None)
        return released

    def suspend(self, hostlist: str) -> list[str]:
        nodes = self.slurm.expand(hostlist)
        released = self._power_off_and_give_back(nodes, hostlist)
        self.report.status(f"suspend {hostlist}: released {released or 'none (not ours)'}")
        return released

    def resume_failed(self, hostlist: str) -> list[str]:
        """ResumeFailProgram: Slurm gave up on the nodes (ResumeTimeout). DOWN with a reason
        saying so, unless the resume already gave its own (a failed step), then back to the
        pool."""
        nodes = self.slurm.expand(hostlist)
        try:
            reasons = self.slurm.node_reasons(nodes)
        except SlurmCommandError as err:
            self.report.warning(f"reasons of {hostlist}: {err}")
            reasons = {}
        fresh = [n for n in nodes if not reasons.get(n, ("", ""))[1].startswith("ptc resume:")]
        try:
            if fresh:
                self.slurm.down(fresh, "ptc resume: slurmd did not register (ResumeTimeout)")
        except SlurmCommandError as err:
            self.report.warning(f"mark DOWN {hostlist}: {err}")
        released = self._power_off_and_give_back(nodes, hostlist)
        self.report.status(f"resume-fail {hostlist}: DOWN, released {released or 'none'}")
        return released

    # -- the pool as Slurm sees it --------------------------------------------------------
    def sync_pool(self) -> dict[str, list[str]]:
        """Slurm may resume a powered-down node only if the node is free in the pool (§3.2:
        Slurm sees the whole hosting cluster, and nodes outside its partition are "off"). Nodes
        another partition holds are drained with ``ptc: held by partition X``; once free again,
        the drain is lifted. Only drains with that reason are touched, and never nodes of ours.
        Returns {"drained": [...], "undrained": [...]}."""
        owners = {n["name"]: n.get("owner") for n in self.manager.discover()}
        reasons = self.slurm.node_reasons(sorted(owners))
        self.pool_states = {node: state for node, (state, _) in reasons.items()}
        self._pass_on_notices(owners, reasons)
        drained, freed, adopted = [], [], []
        for node, owner in sorted(owners.items()):
            if node not in reasons:
                continue  # not a Slurm node
            state, reason = reasons[node]
            ours = reason.startswith(HELD_PREFIX)
            if owner not in (None, self.partition):
                # Drained unless someone else drained it already. A forced power down (a node
                # handed back) lifts the drain when Slurm carries it out: drain it again. Slurm
                # shows a DOWN node drained as DOWN: its reason says it is drained already.
                wanted = held_reason(str(owner))
                shown_down = state.startswith("down") and reason == wanted
                if ("drain" not in state and not shown_down) or (ours and reason != wanted):
                    self.slurm.drain([node], wanted)
                    drained.append(node)
            elif ours and ("drain" in state or state.startswith("down")):
                freed.append(node)  # Slurm shows DOWN over DRAIN: a DOWN one is returned
            elif owner is None and _powered_up(state):
                adopted.append(node)  # up in Slurm (e.g. an administrator resumed it)
        undrained = [n for n in freed if n not in self.lent_machines(freed)]
        down = [n for n in undrained if reasons[n][0].startswith("down")]
        if down:
            self.slurm.update_nodes(down, "RESUME")
        if rest := [n for n in undrained if n not in down]:
            self.slurm.undrain(rest)
        if adopted:
            try:
                self.manager.add_nodes(self.partition, nodes=adopted)
            except PtcError as err:
                self.report.warning(f"pool: adopting {adopted}: {err}")
                adopted = []
        if drained or undrained or adopted:
            self.report.status(
                f"pool: drained {drained or 'none'}, undrained {undrained or 'none'}, "
                f"adopted {adopted or 'none'}"
            )
        return {"drained": drained, "undrained": undrained, "adopted": adopted}

    def _pass_on_notices(
        self, owners: Mapping[str, str | None], reasons: Mapping[str, tuple[str, str]]
    ) -> None:
        """A node of ours that drained itself on its provider's notice (a spot interruption:
        elastic.sites.notice) is reclaimed with the provider's deadline: the manager notifies
        this client as for any reclamation, and the jobs there are requeued before the end
        rather than lost with the machine. Each notice is passed on once."""
        told: dict[tuple[str, float], list[str]] = {}
        shown: dict[str, float] = {}
        for node, (_, reason) in sorted(reasons.items()):
            given = notice.parse(reason)
            if given is None or owners.get(node) != self.partition:
                continue
            shown[node] = given.deadline
            if self._noticed.get(node) != given.deadline:
                told.setdefault((given.source, given.deadline), []).append(node)
        self._noticed = {n: d for n, d in self._noticed.items() if shown.get(n) == d}
        for (source, deadline), nodes in sorted(told.items()):
            try:
                taking = self.manager.notice(self.partition, nodes, deadline, source)
            except PtcError as err:
                self.report.warning(f"notice for {nodes} ({source}): {err}")
                continue
            self._noticed.update(dict.fromkeys(nodes, deadline))
            self.report.status(
                f"notice: {source} ends {nodes} at "
                f"{datetime.fromtimestamp(deadline, UTC):%H:%M:%S}; reclaimed by "
                f"{', '.join(str(r['id']) for r in taking) or 'none'}"
            )

    def lent_machines(self, nodes: list[str]) -> set[str]:
        """Those of ``nodes`` whose machines the testbed lent elsewhere (none when it cannot
        say, with a warning). Freed in the pool by mistake, they stay drained (Slurm would
        resume a machine that is not there) until the repair loop hands them to the partition
        holding lent machines."""
        if not nodes:
            return set()
        try:
            return set(self.provisioner.lent(nodes))
        except PtcError as err:
            self.report.warning(f"drift: which machines are lent: {err}")
            return set()

    def _resting(self, nodes: list[str]) -> list[str]:
        """Those of ``nodes`` Slurm holds powered down and is not powering up or down."""
        states = self.slurm.node_states(nodes)
        return [n for n in nodes if "~" in states.get(n, "") and not any(
            m in states.get(n, "") for m in "#%"
        )]  # fmt: skip

    def settle_power(self) -> list[str]:
        """Power off the free pool nodes Slurm holds powered down whose machines still run: a
        fresh deploy leaves the pool up, and a power off the testbed refused (a deploy holding
        the nodes) is done here once it may. Only free nodes: a node another partition holds
        is its user's to run; and only once seen so for ``settle_grace`` (a node coming up by
        itself shows so until its slurmd registers). Slurm's view is read again under the
        provisioner's power lock, so a resume that began in between is left alone."""
        free = sorted(
            n["name"]
            for n in self.manager.discover()
            if n.get("owner") is None and n["name"] not in self.under_repair
        )
        candidates = self.provisioner.running(self._resting(free)) if free else []
        now = self.clock()
        self._resting_since = {n: self._resting_since.get(n, now) for n in candidates}
        due = [n for n in candidates if now - self._resting_since[n] >= self.config.settle_grace]
        if not due:
            return []
        settled = self.provisioner.power_off_if(due, self._resting)
        for node in settled:
            self._resting_since.pop(node, None)
        if settled:
            self.report.status(f"power: {settled} off (free, powered down in Slurm)")
        return settled

    # -- PV loop --------------------------------------------------------------------------
    def report_pv(self) -> dict[str, float]:
        now = self.clock()
        held = self.held()
        vector = compute_pv(self.slurm, self.policy, self.config.slurm_partition, held, now)
        waiting, asked = self.slurm.pending_demand(self.config.slurm_partition)
        shown = dict(self.pool_states)  # every pool node's, as the last sync read them
        self.manager.set_values(
            self.partition,
            dict(vector.pv.values),
            policy=vector.pv.policy,
            at=now,
            jobs=vector.jobs,
            queue=Queue(shown, waiting, asked),
        )
        return dict(vector.pv.values)

    # -- graceful preemption --------------------------------------------------------------
    def notified(self, payload: dict[str, Any]) -> None:
        """NotifyDeletePending: remember the reclamation and drain its nodes (idempotent)."""
        rec_id = str(payload["reclamation"])
        nodes = {str(n) for n in payload["nodes"]}
        deadline = float(payload["deadline"])
        reason = str(payload.get("reason") or f"ptc reclamation {rec_id}")
        beneficiary = payload.get("beneficiary") or None
        with self._lock:
            pending = self.pending.get(rec_id)
            if pending is None:
                pending = self.pending[rec_id] = Pending(
                    rec_id,
                    nodes,
                    deadline,
                    reason,
                    None if beneficiary is None else str(beneficiary),
                )
                self.report.status(
                    f"reclamation {rec_id}: {sorted(nodes)} by "
                    f"{datetime.fromtimestamp(deadline, UTC):%H:%M:%S}"
                )
            else:
                pending.nodes = nodes  # the manager lists what is still outstanding
            todo = sorted(nodes - pending.drained)
            if todo:
                self._drain_up(pending, todo)

    def _drain_up(self, pending: Pending, nodes: list[str]) -> None:
        """Drain those of ``nodes`` that are not powering up. Slurm requeues at once the job of
        a node drained while it powers up for that job ("DRAIN/FAIL request for node ... which
        is allocated and being powered up. Requeuing jobs", Slurm 22.05), which would take the
        job's grace period away; such a node is drained by ``step`` once it is up. It is busy
        with the job meanwhile, so it is not handed back before the deadline either."""
        try:
            states = self.slurm.node_states(nodes)
        except SlurmCommandError as err:
            self.report.warning(f"reclamation {pending.reclamation}: states of {nodes}: {err}")
            return
        up = [n for n in nodes if "#" not in states.get(n, "#")]
        if up:
            self.slurm.drain(up, pending.reason)
            pending.drained |= set(up)

    def step(self) -> None:
        """Hand back idle drained nodes; at the deadline requeue and hand back the rest."""
        with self._lock:
            for rec_id, pending in list(self.pending.items()):
                self._step_one(pending)
                if pending.done:
                    del self.pending[rec_id]

    def _busy(self, nodes: list[str]) -> dict[str, list[str]]:
        """{node: job ids running there} for the busy ones among ``nodes``."""
        busy: dict[str, list[str]] = {}
        for job in parse_squeue(self.slurm.jobs_on(nodes), self.slurm):
            for node in job.nodes:
                if node in nodes:
                    busy.setdefault(node, []).append(job.job_id)
        return busy

    def _step_one(self, pending: Pending) -> None:
        mine = set(self.held())
        now = self.clock()
        if now >= pending.deadline - self.config.requeue_lead:
            # Requeue on every outstanding node, ours or already taken by the manager: the
            # jobs must not keep running on a node that has left the partition.
            nodes = sorted(pending.nodes)
            jobs = parse_squeue(self.slurm.jobs_on(nodes), self.slurm)
            report = [self._requeue(job.job_id, job.elapsed, len(job.nodes)) for job in jobs]
            if report:
                try:
                    self.manager.report_jobs(pending.reclamation, report)
                except PtcError as err:
                    self.report.warning(f"reclamation {pending.reclamation}: report: {err}")
            self._hand_back(nodes, pending, mine)
            pending.done = True
            return
        pending.nodes &= mine  # released some other way (SuspendProgram)
        nodes = sorted(pending.nodes)
        if not nodes:
            pending.done = True
            return
        if pending.nodes - pending.drained:  # powering up when notified: drain them once up
            self._drain_up(pending, sorted(pending.nodes - pending.drained))
        idle = [n for n in nodes if n not in self._busy(nodes)]
        if idle:
            self._hand_back(idle, pending, mine)
            if not pending.nodes:
                pending.done = True

    def _requeue(self, job_id: str, elapsed: float, node_count: int) -> JobReport:
        try:
            delay = self.slurm.requeue(job_id)
            self.report.status(f"job {job_id} requeued; it may start again in {delay} s")
            return JobReport(job_id=job_id, elapsed=elapsed, node_count=node_count, requeued=True)
        except SlurmCommandError as err:
            detail = _short(err)
        try:
            self.slurm.cancel(job_id)
            detail += "; cancelled"
        except SlurmCommandError as err:
            detail += f"; cancel failed: {_short(err)}"
        self.report.warning(f"job {job_id} could not be requeued: {detail}")
        return JobReport(
            job_id=job_id,
            elapsed=elapsed,
            node_count=node_count,
            requeued=False,
            detail=detail[:1000],
        )

    def _hand_back(self, nodes: list[str], pending: Pending, mine: set[str]) -> None:
        ours = [n for n in nodes if n in mine]
        if ours:
            try:
                self.manager.delete_nodes(self.partition, ours)
            except (Conflict, Forbidden, NotFoundError) as err:
                self.report.warning(f"reclamation {pending.reclamation}: release {ours}: {err}")
        try:
            self.slurm.power_down(nodes, pending.reason)
            if pending.beneficiary is None:
                self.slurm.undrain(nodes)
            else:  # held by another partition now: Slurm must not resume it
                self.slurm.drain(nodes, held_reason(pending.beneficiary))
        except SlurmCommandError as err:
            self.report.warning(f"reclamation {pending.reclamation}: power down {nodes}: {err}")
        pending.nodes -= set(nodes)
        self.report.status(f"reclamation {pending.reclamation}: handed back {nodes}")
