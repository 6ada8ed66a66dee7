"""What an EC2 provider reports about an instance, and the tags that make an instance ptc's.

Every instance ptc makes carries ``ptc:cluster`` and ``ptc:site``; one made by ``launch`` also
carries ``ptc:node``, its node name (and hostname). One made by a site's Auto Scaling group is
named at boot from its instance id (:func:`group_node_name`), since a group gives all its
instances the same tags. The tags are the truth: a pool that lost its records finds its
instances again by them (``reconcile``).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

CLUSTER_TAG = "ptc:cluster"
SITE_TAG = "ptc:site"
NODE_TAG = "ptc:node"
GROUP_TAG = "ptc:group"  # on the instances of a site's Auto Scaling group


class InstanceState(StrEnum):
    """EC2's instance states."""

    PENDING = "pending"
    RUNNING = "running"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"
    STOPPING = "stopping"
    STOPPED = "stopped"

    @property
    def gone(self) -> bool:
        """The instance is ending or ended: it will never run a node again."""
        return self in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED)


@dataclass(frozen=True)
class Instance:
    """One of ptc's instances as EC2 describes it."""

    instance_id: str
    node: str
    cluster: str
    site: str
    state: InstanceState
    launch_time: datetime
    private_address: str | None = None
    # Why it stopped or ended, in EC2's words (``Server.SpotInstanceTermination`` for a spot
    # interruption, ``Client.UserInitiatedShutdown`` for a termination ptc asked for).
    state_reason: str | None = None
    spot: bool = False
    group: str | None = None  # the Auto Scaling group that made it, if one did


def new_node_name(cluster: str, site: str) -> str:
    """A fresh node name: 48 random bits make two launches' names collide with odds of about
    one in 10^14 per pair, so no lookup of the names in use is needed (it would race anyway)."""
    return f"{cluster}-{site}-{secrets.token_hex(6)}"


def group_node_name(cluster: str, instance_id: str) -> str:
    """The name an Auto Scaling group's instance takes at boot (the user data computes the
    same from the instance metadata): unique, since instance ids are."""
    return f"{cluster}-{instance_id}"


def instance_tags(cluster: str, site: str, node: str | None = None) -> list[dict[str, str]]:
    tags = {CLUSTER_TAG: cluster, SITE_TAG: site} | ({NODE_TAG: node} if node else {})
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def from_description(raw: Mapping[str, Any]) -> Instance | None:
    """The record of one instance of DescribeInstances/RunInstances; ``None`` for an instance
    without ptc's cluster and site tags (not ours)."""
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags", ())}
    cluster, site = tags.get(CLUSTER_TAG), tags.get(SITE_TAG)
    if not cluster or not site:
        return None
    instance_id = str(raw["InstanceId"])
    reason = raw.get("StateReason", {}).get("Code")
    return Instance(
        instance_id=instance_id,
        node=tags.get(NODE_TAG) or group_node_name(cluster, instance_id),
        cluster=cluster,
        site=site,
        state=InstanceState(raw["State"]["Name"]),
        launch_time=raw["LaunchTime"],
        private_address=raw.get("PrivateIpAddress") or None,
        state_reason=str(reason) if reason else None,
        spot=raw.get("InstanceLifecycle") == "spot",
        group=tags.get(GROUP_TAG) or tags.get("aws:autoscaling:groupName"),
    )
