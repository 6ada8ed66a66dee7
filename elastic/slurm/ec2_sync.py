"""Each ec2 site's instances against Slurm's nodes, on the client's timer (as slurm-gcp's
slurmsync and ParallelCluster's clustermgtd do).

Slurm's view says which instances should exist: a node of an ec2 site stands for an instance
unless Slurm holds it powered down. EC2's view, by ptc's tags (``elastic.sites.ec2.reconcile``),
says which do. Each round mends the two kinds of drift, each action an event:

- **an orphan**, an instance no node stands for (a resume whose controller died after the
  launch, a suspend whose terminate was lost, a node launched twice by hand), older than the
  grace period: terminated. A younger one is most likely a launch still in flight and is left;
- **a lost node**, one Slurm counts as up whose instance EC2 ended or no longer shows (a spot
  interruption, a click in the console): powered down at once with EC2's reason
  (``POWER_DOWN_FORCE``), so Slurm requeues its jobs and may resume it again, rather than
  waiting ``SlurmdTimeout`` to mark it DOWN. Nodes powering up or down are the hooks' business
  and left alone, as are those the repair loop is mending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from elastic.errors import InputError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2.control import Ec2Control
from elastic.sites.ec2.errors import Ec2Error
from elastic.sites.ec2.reconcile import reconcile
from elastic.sites.ec2.records import Instance
from elastic.slurm.commands import Slurm, SlurmCommandError

SYNC_INTERVAL_S = 60.0
# An instance younger than this that no node stands for is a launch in flight, not an orphan:
# longer than a resume takes from its RunInstances to Slurm showing the node powering up.
ORPHAN_GRACE_S = 300.0
REASON_PREFIX = "ptc ec2: "


@dataclass
class SyncReport:
    terminated: dict[str, list[str]] = field(default_factory=dict)  # site -> instance ids
    powered_down: dict[str, str] = field(default_factory=dict)  # node -> reason
    failed: dict[str, str] = field(default_factory=dict)  # site -> why the round skipped it


def ec2_controls(provisioner: object) -> list[Ec2Control]:
    """The ec2 sites' controls of the client's provisioner (a site dispatch's sites)."""
    found = []
    for _, site_provisioner in getattr(provisioner, "sites", ()):
        control = getattr(site_provisioner, "control", None)
        if isinstance(control, Ec2Control):
            found.append(control)
    return found


def _stands_for_an_instance(state: str) -> bool:
    """Slurm holds the node up or on its way up or down (not powered down and at rest)."""
    return "~" not in state or any(mark in state for mark in "#%")


def _up(state: str) -> bool:
    """Up in Slurm (DOWN included: a node whose slurmd went with its instance), and neither
    powered down nor on its way up or down."""
    return not any(mark in state for mark in "~#%")


class Ec2Sync:
    """One round over ``controls``' sites; ``busy()``: nodes to leave alone (under repair)."""

    def __init__(
        self,
        slurm: Slurm,
        controls: Sequence[Ec2Control],
        *,
        interval: float = SYNC_INTERVAL_S,
        grace_s: float = ORPHAN_GRACE_S,
        busy: Callable[[], Iterable[str]] = frozenset,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_event: OnEvent | None = None,
    ) -> None:
        for name, value in (("interval", interval), ("grace_s", grace_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InputError(f"ec2 sync: {name}: {value!r} is not seconds >= 0")
        self.slurm = slurm
        self.controls = tuple(controls)
        self.interval = float(interval)
        self.grace_s = float(grace_s)
        self.busy = busy
        self.now = now
        self.report = Reporter("ec2-sync", on_event)

    def round(self) -> SyncReport:
        done = SyncReport()
        for control in self.controls:
            try:
                self._site(control, done)
            except (PtcError, SlurmCommandError) as err:
                done.failed[control.site] = str(err)
                self.report.warning(f"ec2 site {control.site}: round skipped: {err}")
        return done

    def _site(self, control: Ec2Control, done: SyncReport) -> None:
        states = self.slurm.node_states(list(control.site_nodes))
        observed = control.provider.describe(control.cluster, control.site)
        wanted = [n for n in control.site_nodes if _stands_for_an_instance(states.get(n, "~"))]
        believed = {control.site: {n: _instance_of(n, observed) for n in wanted}}
        found = reconcile(believed, observed, grace_s=self.grace_s, now=self.now())
        if found.orphans:
            ids = [o.instance.instance_id for o in found.orphans]
            try:
                ended = control.provider.terminate(control.cluster, ids)
            except Ec2Error as err:
                done.failed[control.site] = str(err)
                self.report.warning(f"ec2 site {control.site}: orphans {ids} not ended: {err}")
            else:
                done.terminated[control.site] = [i.instance_id for i in ended]
                for orphan in found.orphans:
                    instance = orphan.instance
                    self.report.warning(
                        f"ec2 site {control.site}: orphan {instance.instance_id} "
                        f"({instance.node}, {orphan.age_s:.0f} s old, no node stands for it) "
                        "terminated",
                        site=control.site,
                        instance_id=instance.instance_id,
                        node=instance.node,
                        action="terminated",
                    )
        busy = set(self.busy())
        candidates = [
            n.node for n in found.lost if n.node not in busy and _up(states.get(n.node, "~"))
        ]
        # Slurm's view again, after EC2's: a suspend that ended an instance between the two
        # reads has the node powering down by now, and is no loss
        now_up = self.slurm.node_states(candidates) if candidates else {}
        for lost in found.lost:
            if lost.node not in candidates or not _up(now_up.get(lost.node, "~")):
                continue
            how = lost.why + (f", {lost.reason}" if lost.reason else "")
            where = f"instance {lost.instance_id}" if lost.instance_id else "no instance"
            reason = f"{REASON_PREFIX}{where} {how}"[:250]
            self.slurm.power_down([lost.node], reason)
            done.powered_down[lost.node] = reason
            self.report.warning(
                f"ec2 site {control.site}: {lost.node} lost ({where} {how}): powered down",
                site=control.site,
                node=lost.node,
                instance_id=lost.instance_id,
                action="powered-down",
            )


def _instance_of(node: str, observed: Sequence[Instance]) -> str:
    """The node's instance: its live one, else its latest, else none ("")."""
    mine = sorted(
        (i for i in observed if i.node == node),
        key=lambda i: (not i.state.gone, i.launch_time),
    )
    return mine[-1].instance_id if mine else ""
