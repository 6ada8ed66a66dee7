"""One Auto Scaling group per (cluster, site): a desired count that AWS keeps, replacing
instances that fail, the role the Phantom service plays in Duplyakin's thesis (chapter 2) for
multi-cloud elastic clusters. A pool sets the count; AWS makes and ends the instances.

The group (``ptc-CLUSTER-SITE``) launches from a launch template (that name and a digest of its
content) with the site's image, type and network, ptc's tags (propagated to every instance) and the user data of
:class:`JoinSpec` with no node name: a group gives all its instances the same user data, so each
names itself from its instance id at boot (``records.group_node_name``). Without a subnet, the
group uses the region's first availability zone.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from elastic.errors import InputError, NotFoundError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2 import records
from elastic.sites.ec2.errors import translate
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.settings import SiteSettings, check_name
from elastic.sites.ec2.userdata import JoinSpec


@dataclass(frozen=True)
class Group:
    """A site's Auto Scaling group as AWS describes it."""

    name: str
    cluster: str
    site: str
    desired: int
    min_size: int
    max_size: int
    instance_ids: tuple[str, ...]
    launch_template: str


def group_name(cluster: str, site: str) -> str:
    return f"ptc-{cluster}-{site}"


def ensure_group(
    provider: Ec2Provider,
    cluster: str,
    site: str,
    user_data: JoinSpec,
    desired: int = 0,
    on_event: OnEvent | None = None,
) -> Group:
    """The group of ``cluster`` at ``site``, made or brought up to date, holding ``desired``
    instances. Its launch template is named by a digest of its content: unchanged settings and
    user data reuse it; changed ones make a new template, point the group at it and delete the
    old one (instances made from it run on). One template per content, never new versions of
    one, keeps the group's template immutable and the call idempotent."""
    spec = _site(provider, cluster, site)
    _check_desired(desired, spec)
    name = group_name(cluster, site)
    report = Reporter("ec2-group", on_event)
    report.begin(f"{name}: {desired} instance(s)", site=site)
    data = _template_data(cluster, spec, user_data)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    template_name = f"{name}-{digest}"
    try:
        templates = _templates(provider, name)
        if template_name not in templates:
            provider.ec2.create_launch_template(
                LaunchTemplateName=template_name,
                LaunchTemplateData=data,
                TagSpecifications=[
                    {"ResourceType": "launch-template", "Tags": _tags(name, cluster, site)}
                ],
            )
        template = {"LaunchTemplateName": template_name, "Version": "$Latest"}
        if _describe(provider, name) is None:
            placement: dict[str, Any] = (
                {"VPCZoneIdentifier": spec.subnet_id}
                if spec.subnet_id
                else {"AvailabilityZones": [f"{provider.settings.region}a"]}
            )
            provider.autoscaling.create_auto_scaling_group(
                AutoScalingGroupName=name,
                LaunchTemplate=template,
                MinSize=0,
                MaxSize=spec.max_nodes,
                DesiredCapacity=desired,
                Tags=_group_tags(name, cluster, site),
                **placement,
            )
        else:
            provider.autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=name,
                LaunchTemplate=template,
                MinSize=0,
                MaxSize=spec.max_nodes,
                DesiredCapacity=desired,
            )
        for old in templates - {template_name}:
            provider.ec2.delete_launch_template(LaunchTemplateName=old)
        group = _describe(provider, name)
    except (BotoCoreError, ClientError) as e:
        raise translate(e, site=site, operation="group create") from e
    if group is None:  # made a moment ago and already gone: someone else deleted it
        raise NotFoundError(f"site {site!r}: group {name!r} vanished as it was made")
    report.end(f"{name}: {group.desired} instance(s)", site=site)
    return group


def set_desired(provider: Ec2Provider, cluster: str, site: str, desired: int) -> Group:
    """The group keeps ``desired`` instances from now on; AWS picks which end when it shrinks
    (to end chosen, drained nodes, use :func:`remove_instances`)."""
    spec = _site(provider, cluster, site)
    _check_desired(desired, spec)
    name = group_name(cluster, site)
    try:
        if _describe(provider, name) is None:
            raise NotFoundError(f"site {site!r}: no group {name!r}; ensure_group makes it")
        provider.autoscaling.set_desired_capacity(
            AutoScalingGroupName=name, DesiredCapacity=desired, HonorCooldown=False
        )
        group = _describe(provider, name)
    except (BotoCoreError, ClientError) as e:
        raise translate(e, site=site, operation="group scale") from e
    if group is None:
        raise NotFoundError(f"site {site!r}: group {name!r} was deleted while scaling")
    return group


def remove_instances(
    provider: Ec2Provider, cluster: str, site: str, instance_ids: Sequence[str]
) -> Group:
    """End these instances of the group (nodes the pool drained) and lower its count by as
    many, so AWS does not replace them. An id not in the group is refused, before any ends."""
    _site(provider, cluster, site)
    name = group_name(cluster, site)
    try:
        group = _describe(provider, name)
        if group is None:
            raise NotFoundError(f"site {site!r}: no group {name!r}")
        if stray := [i for i in instance_ids if i not in group.instance_ids]:
            raise NotFoundError(f"site {site!r}: group {name!r} has no instance {stray[0]!r}")
        for instance_id in dict.fromkeys(instance_ids):
            provider.autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
            )
        after = _describe(provider, name)
    except (BotoCoreError, ClientError) as e:
        raise translate(e, site=site, operation="group remove") from e
    if after is None:
        raise NotFoundError(f"site {site!r}: group {name!r} was deleted while removing")
    return after


def describe_group(provider: Ec2Provider, cluster: str, site: str) -> Group | None:
    """The group of ``cluster`` at ``site``, or ``None`` when there is none."""
    _site(provider, cluster, site)
    try:
        return _describe(provider, group_name(cluster, site))
    except (BotoCoreError, ClientError) as e:
        raise translate(e, site=site, operation="group describe") from e


def delete_group(provider: Ec2Provider, cluster: str, site: str) -> None:
    """Delete the group, ending its instances, and its launch template; safe to call twice."""
    _site(provider, cluster, site)
    name = group_name(cluster, site)
    try:
        if _describe(provider, name) is not None:
            provider.autoscaling.delete_auto_scaling_group(
                AutoScalingGroupName=name, ForceDelete=True
            )
        for template in _templates(provider, name):
            provider.ec2.delete_launch_template(LaunchTemplateName=template)
    except (BotoCoreError, ClientError) as e:
        raise translate(e, site=site, operation="group delete") from e


def _describe(provider: Ec2Provider, name: str) -> Group | None:
    answer = provider.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    for raw in answer.get("AutoScalingGroups", ()):
        if raw.get("Status") == "Delete in progress":
            return None
        tags = {t["Key"]: t["Value"] for t in raw.get("Tags", ())}
        return Group(
            name=name,
            cluster=tags.get(records.CLUSTER_TAG, ""),
            site=tags.get(records.SITE_TAG, ""),
            desired=int(raw["DesiredCapacity"]),
            min_size=int(raw["MinSize"]),
            max_size=int(raw["MaxSize"]),
            instance_ids=tuple(sorted(i["InstanceId"] for i in raw.get("Instances", ()))),
            launch_template=str(raw.get("LaunchTemplate", {}).get("LaunchTemplateName", "")),
        )
    return None


def _templates(provider: Ec2Provider, name: str) -> set[str]:
    """The names of the launch templates made for group ``name`` (tagged with it)."""
    found: set[str] = set()
    request: dict[str, Any] = {"Filters": [{"Name": f"tag:{records.GROUP_TAG}", "Values": [name]}]}
    while True:
        answer = provider.ec2.describe_launch_templates(**request)
        found |= {t["LaunchTemplateName"] for t in answer.get("LaunchTemplates", ())}
        if not answer.get("NextToken"):
            return found
        request["NextToken"] = answer["NextToken"]


def _template_data(cluster: str, spec: SiteSettings, user_data: JoinSpec) -> dict[str, Any]:
    tags = _tags(group_name(cluster, spec.name), cluster, spec.name)
    data: dict[str, Any] = {
        "ImageId": spec.image_id,
        "InstanceType": spec.instance_type,
        # A launch template takes the user data base64-encoded (RunInstances encodes it itself).
        "UserData": base64.b64encode(user_data.render(cluster, spec.name).encode()).decode(),
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume")
        ],
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
    }
    if spec.security_group_ids:
        data["SecurityGroupIds"] = list(spec.security_group_ids)
    if spec.key_name:
        data["KeyName"] = spec.key_name
    if spec.spot:
        data["InstanceMarketOptions"] = {"MarketType": "spot"}
    return data


def _tags(name: str, cluster: str, site: str) -> list[dict[str, Any]]:
    return [*records.instance_tags(cluster, site), {"Key": records.GROUP_TAG, "Value": name}]


def _group_tags(name: str, cluster: str, site: str) -> list[dict[str, Any]]:
    return [
        tag | {"PropagateAtLaunch": True, "ResourceId": name, "ResourceType": "auto-scaling-group"}
        for tag in _tags(name, cluster, site)
    ]


def _site(provider: Ec2Provider, cluster: str, site: str) -> SiteSettings:
    check_name(cluster, "cluster")
    return provider.site(site)


def _check_desired(desired: int, spec: SiteSettings) -> None:
    if isinstance(desired, bool) or not isinstance(desired, int) or desired < 0:
        raise InputError(f"desired: {desired!r} is not a whole number of instances >= 0")
    if desired > spec.max_nodes:
        raise InputError(
            f"desired: {desired} is more than the max_nodes of site {spec.name!r} ({spec.max_nodes})"
        )
