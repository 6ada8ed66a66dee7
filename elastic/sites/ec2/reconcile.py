"""What the pool believes against what EC2 has, by ptc's tags.

A pool keeps, per site, its nodes' names and instance ids. EC2's truth can drift from it: a
launch whose caller died leaves an instance no node stands for (an *orphan*, costing money for
nothing), and a spot interruption or someone's console click ends an instance under a node (a
*lost* node, which Slurm still counts on). An instance that is not yet anyone's but was launched
less than ``grace_s`` ago is *young*: most likely a launch still in flight, whose caller will
record it once ``launch`` returns, so it is left alone rather than called an orphan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.records import Instance

# What a pool believes: site -> node name -> instance id.
Belief = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class Orphan:
    """An instance with the cluster's tags, alive, old enough, that no node stands for."""

    instance: Instance
    age_s: float


@dataclass(frozen=True)
class LostNode:
    """A node the pool has whose instance is gone: ``missing`` (EC2 no longer shows it) or its
    state (``terminated``, ``shutting-down``), with EC2's reason when it gives one."""

    node: str
    site: str
    instance_id: str
    why: str
    reason: str | None = None


@dataclass(frozen=True)
class Reconciliation:
    orphans: tuple[Orphan, ...]
    lost: tuple[LostNode, ...]
    young: tuple[Instance, ...]  # unclaimed but within the grace period: left alone
    matched: tuple[str, ...]  # the nodes whose instance is alive (booting, running, stopped)
    terminated: tuple[str, ...] = ()  # orphans' instance ids ended on request


def reconcile(
    believed: Belief, observed: Sequence[Instance], *, grace_s: float, now: datetime
) -> Reconciliation:
    """Compare; nothing changes. ``observed``: ``describe(cluster)``; ``now``: aware UTC."""
    if isinstance(grace_s, bool) or not isinstance(grace_s, int | float) or not grace_s >= 0:
        raise InputError(f"grace_s: {grace_s!r} is not a number of seconds >= 0")
    if now.tzinfo is None:
        raise InputError("now: a time without a zone; give an aware UTC time")
    by_id = {i.instance_id: i for i in observed}
    claimed: set[str] = set()
    lost: list[LostNode] = []
    matched: list[str] = []
    for site, nodes in sorted(believed.items()):
        for node, instance_id in sorted(nodes.items()):
            claimed.add(instance_id)
            instance = by_id.get(instance_id)
            if instance is None:
                lost.append(LostNode(node, site, instance_id, "missing"))
            elif instance.state.gone:
                lost.append(
                    LostNode(node, site, instance_id, instance.state.value, instance.state_reason)
                )
            else:
                matched.append(node)
    orphans: list[Orphan] = []
    young: list[Instance] = []
    for instance in observed:
        if instance.instance_id in claimed or instance.state.gone:
            continue
        age = (now - instance.launch_time).total_seconds()
        if age < grace_s:
            young.append(instance)
        else:
            orphans.append(Orphan(instance, age))
    return Reconciliation(tuple(orphans), tuple(lost), tuple(young), tuple(matched))


def reconcile_cluster(
    provider: Ec2Provider,
    cluster: str,
    believed: Belief,
    *,
    grace_s: float,
    now: datetime | None = None,
    terminate_orphans: bool = False,
    on_event: OnEvent | None = None,
) -> Reconciliation:
    """:func:`reconcile` against the cluster's instances on EC2 now; with
    ``terminate_orphans``, the orphans found are terminated (young instances never are)."""
    found = reconcile(
        believed, provider.describe(cluster), grace_s=grace_s, now=now or datetime.now(UTC)
    )
    report = Reporter("ec2-reconcile", on_event)
    for orphan in found.orphans:
        report.warning(
            f"{cluster}: orphan {orphan.instance.instance_id} ({orphan.instance.node}) at "
            f"{orphan.instance.site}, {orphan.age_s:.0f}s old",
            instance_id=orphan.instance.instance_id,
        )
    for node in found.lost:
        report.warning(f"{cluster}: node {node.node} at {node.site} lost ({node.why})")
    if not terminate_orphans or not found.orphans:
        return found
    ended = provider.terminate(cluster, [o.instance.instance_id for o in found.orphans], on_event)
    return Reconciliation(
        found.orphans,
        found.lost,
        found.young,
        found.matched,
        tuple(i.instance_id for i in ended),
    )
