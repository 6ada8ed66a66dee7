"""The repair loop: the controller mends the pool's broken nodes by itself.

Every ``interval`` the loop reads the partition's nodes from Slurm and finds those it knows how
to mend (:func:`cause_of`): a node the health check drained (reason ``ptc-health: ...``), one a
resume left DOWN (``ptc resume: ...``: it did not boot, its playbook failed, its slurmd never
registered), one whose slurmd does not answer, and one whose last repair failed. A node must be
seen so in ``after`` rounds in a row (a health check that passes again lifts its own drain).
Drift between Slurm and the machines is mended in the same rounds: a node whose machine the
testbed stopped while Slurm counted it up is powered down in Slurm (its jobs requeued), a node
the pool lists whose machine the testbed lent to another experiment is handed to the partition
that holds lent machines (the ``lender``), and a free node's machine that runs while Slurm holds
it powered down is the client's ``settle_power``'s to stop.

A repair, each step an event (``elastic.manager.repairs`` keeps the record):

1. **claim** the node in the manager's store, for ``lease`` seconds: two controllers' loops never
   mend one node at once, a node whose repairs keep failing backs off, and none starts while the
   partition is in protected mode;
2. **drain**: Slurm keeps it out of jobs, with ``ptc repair: <cause>`` as the reason;
3. **reload**: a fresh disk from the image, when the node control can give one;
4. **configure**: the node's part of the deploy; a node Slurm held up also gets slurmd
   started, one Slurm held powered down has its machine powered off again;
5. **return**: Slurm takes the node back (RESUME), and the claim ends.

A step that fails leaves the node DOWN with ``ptc repair failed: <step>: <why>``; the manager
backs its next repair off and counts the failure towards protected mode. A node DOWN only
because a resume was refused while the partition was protected needs no mending: once the
protection ends, it is returned.

The repairs run in threads of their own: the client's other loops go on meanwhile.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from elastic.errors import PtcError
from elastic.events import OnEvent, Reporter
from elastic.manager.client import ManagerClient
from elastic.slurm.client import SlurmElasticClient, failures_by_node
from elastic.slurm.commands import SlurmCommandError

HEALTH_PREFIX = "ptc-health:"
REPAIR_PREFIX = "ptc repair: "
FAILED_PREFIX = "ptc repair failed: "
RESUME_PREFIX = "ptc resume: "
# A resume the partition's protected mode refused: nothing is wrong with the node.
REFUSED_PREFIX = "ptc resume: partition protected"
NOT_RESPONDING = "Not responding"


@dataclass(frozen=True)
class Cause:
    """Why a node needs the loop: ``mend`` (reload and configure), ``power down`` (its machine
    is gone: Slurm is told) or only ``return``."""

    kind: str  # "mend" | "power down" | "return"
    why: str


def cause_of(state: str, reason: str) -> Cause | None:
    """What the loop does about a node in this Slurm ``state`` (sinfo's long word, with its
    suffixes) with this ``reason``; None: not its business (healthy, busy draining its jobs,
    on its way up or down, or set aside by someone else for a reason it does not know)."""
    if any(mark in state for mark in "#%"):
        return None  # Slurm is powering it up or down: its own hooks have it
    down = state.startswith("down")
    if reason.startswith(REFUSED_PREFIX):
        return Cause("return", "its resume was refused while the partition was protected")
    out_of_service = "drained" in state or down  # a draining node still runs jobs: it waits
    if reason.startswith(HEALTH_PREFIX) and out_of_service:
        return Cause("mend", f"health check: {reason[len(HEALTH_PREFIX) :].strip()}")
    # Slurm may power a failed repair's node down, drained rather than DOWN, and a repair cut
    # short (its controller died) leaves its own reason: either way the node waits for a repair
    if reason.startswith(FAILED_PREFIX) and out_of_service:
        return Cause("mend", f"its last repair failed: {reason[len(FAILED_PREFIX) :]}")
    if reason.startswith(REPAIR_PREFIX) and out_of_service:
        return Cause("mend", f"its repair was cut short: {reason[len(REPAIR_PREFIX) :]}")
    if state.endswith("*") and "~" not in state:
        # slurmd does not answer (munge or slurmd dead, the machine hung): Slurm's own DOWN
        # comes only after SlurmdTimeout, and not at all for a powered-up cloud node
        return Cause("mend", "not responding")
    if not down:
        return None
    if reason.startswith(RESUME_PREFIX):
        return Cause("mend", f"resume failed: {reason[len(RESUME_PREFIX) :]}")
    if reason.startswith(NOT_RESPONDING):
        return Cause("mend", "not responding")
    return None


# Drift: Slurm counts on a node whose machine the testbed has stopped (it crashed, someone
# stopped it). Slurm would find out only at SlurmdTimeout, and not at all for a CLOUD node.
LOST = Cause("power down", "its machine is off while Slurm counted it up")
# Drift: Slurm holds a powered-down node as not responding (seen after slurmctld restarts):
# no job can have it and nothing resumes it, so it is lost to the pool until powered down anew.
DEAF = Cause("power down", "Slurm holds it powered down and not responding: no job may have it")
# Drift: the pool lists a node as free (or ours) whose machine the testbed lent to another
# experiment: Slurm could resume it, and the resume would fail. The lender holds it instead.
LENT = Cause("hand over", "its machine is lent to another experiment")


@dataclass(frozen=True)
class Lender:
    """The reference partition that holds the machines the testbed lends, with a client of the
    manager holding that partition's token."""

    partition: str
    manager: ManagerClient


@dataclass(frozen=True)
class RepairConfig:
    interval: float = 60.0  # seconds between rounds (0: no repair loop)
    after: int = 2  # rounds in a row a node must be seen broken
    lease: float = 1800.0  # the claim's length: longer than any repair takes
    workers: int = 4  # repairs at once
    # The controller's host, not its process: one Slurm client runs per host, and when it dies
    # its unit's processes die with it, so a restarted client takes its own claims back at once
    # instead of waiting out their lease. Another controller still waits for the lease.
    holder: str = field(default_factory=socket.gethostname)


class RepairLoop:
    """One controller's repair loop over its partition's pool (see the module's text).
    ``client``: the partition's ``SlurmElasticClient`` (its Slurm, manager and provisioner)."""

    def __init__(
        self,
        client: SlurmElasticClient,
        config: RepairConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_event: OnEvent | None = None,
        lender: Lender | None = None,
    ) -> None:
        self.client = client
        self.config = config or RepairConfig()
        self.lender = lender
        self.clock = clock
        self.report = Reporter("slurm-repair", on_event)
        self._seen: dict[str, tuple[Cause, int]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, self.config.workers), thread_name_prefix="repair"
        )
        self._running: list[Future[None]] = []

    def round(self) -> list[str]:
        """Find the broken nodes and start repairing those seen so long enough (claimed in the
        manager first); the nodes whose repairs started. Returns at once: they run in threads,
        the nodes of one round together (one playbook run for all)."""
        client = self.client
        # Nodes under repair when the round begins are left out of it: Slurm's view read below
        # may predate a repair that ends meanwhile, and would show its node broken still.
        with self._lock:
            busy = set(client.under_repair)
        pool = {n["name"]: n.get("owner") for n in client.manager.discover()}
        mine = sorted(n for n, owner in pool.items() if owner in (None, client.partition))
        reasons = client.slurm.node_reasons(mine) if mine else {}
        stopped = self._stopped_under_slurm(reasons)
        lent = self._lent(reasons)
        deaf = self._deaf(reasons)
        seen: dict[str, tuple[Cause, int]] = {}
        for node, (state, reason) in sorted(reasons.items()):
            cause = (
                LOST
                if node in stopped
                else LENT
                if node in lent
                else DEAF
                if node in deaf
                else cause_of(state, reason)
            )
            if cause is None or node in busy:
                continue
            before = self._seen.get(node)
            count = before[1] + 1 if before and before[0] == cause else 1
            seen[node] = (cause, count)
        self._seen = seen
        batches: dict[bool, dict[str, tuple[Cause, str]]] = {True: {}, False: {}}
        for node, (cause, count) in sorted(seen.items()):
            with self._lock:
                if node in client.under_repair:
                    continue
            if cause.kind == "return":
                self._return_refused(node)
            elif cause.kind == "power down" and count >= self.config.after:
                self._power_down_lost(node, cause)
            elif cause.kind == "hand over" and count >= self.config.after:
                self._hand_over(node, cause, pool.get(node))
            elif cause.kind == "mend" and (
                count >= self.config.after
                and client.provisioner.repairs
                and self._claim(node, cause)
            ):
                state = reasons[node][0]
                batches["~" in state][node] = (cause, state)
        self._running = [f for f in self._running if not f.done()]
        for powered_down, batch in batches.items():
            if batch:
                self._running.append(self._pool.submit(self._repair, batch, powered_down))
        return sorted([*batches[True], *batches[False]])

    def _stopped_under_slurm(self, reasons: dict[str, tuple[str, str]]) -> set[str]:
        """Nodes Slurm counts as up (not powered down, nor on the way up or down, nor DOWN)
        whose machines the testbed has stopped: drift, when the testbed powers the pool."""
        provisioner = self.client.provisioner
        up = [
            n
            for n, (state, _) in reasons.items()
            if not any(mark in state for mark in "~#%") and not state.startswith("down")
        ]
        if not up or not provisioner.powers:
            return set()
        try:
            return set(up) - set(provisioner.running(up))
        except PtcError as err:
            self.report.warning(f"drift: the machines' power: {err}")
            return set()

    def _deaf(self, reasons: dict[str, tuple[str, str]]) -> set[str]:
        """Nodes Slurm holds idle and powered down (not on the way up or down, nor DOWN or
        drained, which the loop mends for their own cause) and not responding."""
        resting = [
            n
            for n, (state, _) in reasons.items()
            if state.endswith("~") and state.rstrip("~") in ("idle", "reserved")
        ]
        try:
            return self.client.slurm.dead_nodes(resting)
        except SlurmCommandError as err:
            self.report.warning(f"drift: the nodes not responding: {err}")
            return set()

    def _lent(self, reasons: dict[str, tuple[str, str]]) -> set[str]:
        """Nodes Slurm holds powered down whose machines the testbed lent elsewhere (one Slurm
        counts up is powered down first: its machine is not running)."""
        if self.lender is None:
            return set()
        down = [n for n, (state, _) in reasons.items() if "~" in state and "#" not in state]
        return self.client.lent_machines(down)

    def _hand_over(self, node: str, cause: Cause, owner: str | None) -> None:
        """A lent machine's node, free in the pool or still ours: the lender holds it (as a
        lend would have left it), a claimed repair with the reason; Slurm's partition then
        shows it held by the lender."""
        client, lender = self.client, self.lender
        assert lender is not None
        if not self._claim(node, cause):
            return
        started = self.clock()
        error = ""
        try:
            if owner == client.partition:
                client.manager.delete_nodes(client.partition, [node])
            lender.manager.add_nodes(lender.partition, nodes=[node])
        except PtcError as err:
            error = f"hand over: {' '.join(str(err).split())}"[:300]
        with self._lock:
            client.under_repair.discard(node)
        timings = {} if error else {"hand over": round(self.clock() - started, 3)}
        try:
            client.manager.end_repair(client.partition, node, self.config.holder, error, timings)
        except PtcError as err:
            self.report.warning(f"{node}: the manager did not take the repair's end: {err}")
        self.report.status(
            f"{node}: {cause.why}: " + (error or f"held by partition {lender.partition}")
        )

    def _power_down_lost(self, node: str, cause: Cause) -> None:
        """A node whose machine stopped under Slurm: Slurm powers it down at once (its jobs,
        dead with the machine, are requeued), a claimed repair with the reason, no playbook."""
        client = self.client
        if not self._claim(node, cause):
            return
        error = ""
        try:
            client.slurm.power_down([node], f"{REPAIR_PREFIX}{cause.why}"[:250])
        except SlurmCommandError as err:
            error = f"power down: {' '.join(str(err).split())}"[:300]
        with self._lock:
            client.under_repair.discard(node)
        try:
            client.manager.end_repair(client.partition, node, self.config.holder, error, {})
        except PtcError as err:
            self.report.warning(f"{node}: the manager did not take the repair's end: {err}")
        self.report.status(f"{node}: {cause.why}: " + (error or "powered down in Slurm"))

    def _return_refused(self, node: str) -> None:
        """A node DOWN only because protected mode refused its resume: back, once it ended."""
        client = self.client
        try:
            if client.manager.protection(client.partition).get("protected"):
                return
            client.slurm.update_nodes([node], "RESUME")
        except PtcError as err:
            self.report.warning(f"{node}: return after protected mode: {err}")
            return
        self.report.status(f"{node}: returned (protected mode is over)")

    def _claim(self, node: str, cause: Cause) -> bool:
        client = self.client
        try:
            refused = client.manager.claim_repair(
                client.partition, node, self.config.holder, cause.why, self.config.lease
            )
        except PtcError as err:
            self.report.warning(f"{node}: claim to repair: {err}")
            return False
        if refused:
            return False
        with self._lock:
            client.under_repair.add(node)
        self._seen.pop(node, None)
        return True

    def _repair(self, batch: dict[str, tuple[Cause, str]], powered_down: bool) -> None:
        """Mend the claimed nodes together; a node that fails a step leaves the others to go
        on. ``powered_down``: Slurm holds them powered down, and they end so."""
        client = self.client
        left = sorted(batch)
        errors: dict[str, str] = {}
        timings: dict[str, float] = {}
        causes = "; ".join(sorted({cause.why for cause, _ in batch.values()}))
        self.report.begin(f"repair {', '.join(left)}: {causes}")

        def step(name: str, action: Callable[[list[str]], object]) -> None:
            nonlocal left
            if not left:
                return
            t0 = self.clock()
            try:
                action(left)
            except (PtcError, SlurmCommandError) as err:
                # the nodes it names (a playbook's failed hosts), else every node
                if isinstance(err, PtcError):
                    why = failures_by_node(err, left)
                else:
                    why = dict.fromkeys(left, " ".join(str(err).split()))
                for node, text in why.items():
                    errors[node] = f"{name}: {text}"[:300]
                left = [n for n in left if n not in errors]
            timings[name] = timings.get(name, 0.0) + self.clock() - t0

        def drain(nodes: list[str]) -> None:
            for node in nodes:  # DOWN stays DOWN (not resumed meanwhile); else drained
                cause, state = batch[node]
                kind = "DOWN" if state.startswith("down") else "DRAIN"
                client.slurm.update_nodes([node], kind, f"{REPAIR_PREFIX}{cause.why}"[:250])

        renewed: list[bool] = []
        step("drain", drain)
        step("reload", lambda nodes: renewed.append(client.provisioner.renew(nodes)))
        if left:
            disk = "fresh disks" if any(renewed) else "their own disks (no fresh one offered)"
            self.report.status(f"repair {', '.join(left)}: {disk}, now configuring")
        step("configure", lambda nodes: client.provisioner.provision(nodes, start=not powered_down))
        if powered_down:
            step("configure", client.provisioner.power_off)

        def give_back(nodes: list[str]) -> None:
            client.slurm.update_nodes(nodes, "RESUME")
            if powered_down and (deaf := sorted(client.slurm.dead_nodes(nodes))):
                # Slurm keeps a failed resume's "not responding" through RESUME of a powered-down
                # node, and gives such a node to no job; a forced power down clears it
                client.slurm.update_nodes(deaf, "POWER_DOWN_FORCE")

        step("return", give_back)
        for node, error in sorted(errors.items()):
            self._failed(node, error, powered_down)
        with self._lock:
            client.under_repair.difference_update(batch)
        for node in sorted(batch):
            try:
                client.manager.end_repair(
                    client.partition, node, self.config.holder, errors.get(node, ""), timings
                )
            except PtcError as err:
                self.report.warning(f"{node}: the manager did not take the repair's end: {err}")
        done = [n for n in sorted(batch) if n not in errors]
        self.report.end(
            f"repair: back in service {done or 'none'}"
            + (
                f"; failed {', '.join(f'{n} at {e}' for n, e in sorted(errors.items()))}"
                if errors
                else ""
            )
        )

    def _failed(self, node: str, error: str, powered_down: bool) -> None:
        """DOWN with the failed step's reason; a node that was powered down has its machine
        powered off again (best effort), so none runs without Slurm wanting it."""
        client = self.client
        try:
            client.slurm.down([node], f"{FAILED_PREFIX}{error}"[:250])
        except SlurmCommandError as err:
            self.report.warning(f"{node}: could not mark DOWN: {err}")
        if powered_down:
            try:
                client.provisioner.power_off([node])
            except PtcError as err:
                self.report.warning(f"{node}: power off after a failed repair: {err}")

    def wait(self) -> None:
        """Wait for the repairs under way to end."""
        wait(list(self._running))
