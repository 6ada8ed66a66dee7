"""Auto Scaling groups per (cluster, site) and reconciliation by tag, against moto's server, a
local fake of AWS; ages and spot interruptions come from the test-only fault injector."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
from support.ec2_faults import SPOT_REASON, InjectedFaults

from elastic.errors import InputError, NotFoundError
from elastic.events import Event, Kind, collect
from elastic.sites.ec2 import autoscaling as groups
from elastic.sites.ec2.clients import Ec2Client
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.reconcile import reconcile_cluster
from elastic.sites.ec2.records import InstanceState, group_node_name
from elastic.sites.ec2.userdata import JoinSpec


def test_fake_group_desired_count_makes_and_ends_instances(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, join: JoinSpec
) -> None:
    made = groups.ensure_group(provider, cluster, "east", join, desired=2)
    assert (made.name, made.desired, made.min_size, made.max_size) == (
        f"ptc-{cluster}-east", 2, 0, 6,
    )  # fmt: skip
    assert len(made.instance_ids) == 2
    tagged = provider.describe(cluster, "east")
    assert {i.instance_id for i in tagged} == set(made.instance_ids)
    for instance in tagged:  # the group's tags reach its instances, which name themselves
        assert instance.group == made.name
        assert instance.node == group_node_name(cluster, instance.instance_id)
    grown = groups.set_desired(provider, cluster, "east", 5)
    assert grown.desired == 5 and len(grown.instance_ids) == 5
    assert set(made.instance_ids) <= set(grown.instance_ids)
    shrunk = groups.set_desired(provider, cluster, "east", 1)
    assert len(shrunk.instance_ids) == 1
    alive = [i for i in provider.describe(cluster, "east") if not i.state.gone]
    assert [i.instance_id for i in alive] == list(shrunk.instance_ids)


def template_data(ec2: Ec2Client, name: str) -> dict[str, Any]:
    versions = ec2.describe_launch_template_versions(  # type: ignore[attr-defined]
        LaunchTemplateName=name
    )["LaunchTemplateVersions"]
    data: dict[str, Any] = versions[-1]["LaunchTemplateData"]
    return data


def group_templates(ec2: Ec2Client, group: str) -> list[str]:
    answer = ec2.describe_launch_templates(Filters=[{"Name": "tag:ptc:group", "Values": [group]}])
    return [t["LaunchTemplateName"] for t in answer["LaunchTemplates"]]


def test_fake_group_launch_template_carries_the_sites_settings_and_user_data(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, join: JoinSpec
) -> None:
    made = groups.ensure_group(provider, cluster, "west", join)
    assert made.launch_template.startswith(f"ptc-{cluster}-west-")
    data = template_data(ec2, made.launch_template)
    assert (data["ImageId"], data["InstanceType"]) == ("ami-0fed9876cba543210", "m5.large")
    script = base64.b64decode(data["UserData"]).decode()
    assert "node=''\n" in script  # each instance names itself from its id
    assert f"cluster={cluster}\n" in script and "site=west\n" in script
    # The same settings again: the same template, nothing new.
    same = groups.ensure_group(provider, cluster, "west", join, desired=1)
    assert same.launch_template == made.launch_template and same.desired == 1
    # Other join settings: a new template for the group, the old one gone.
    other = JoinSpec(munge_key="/etc/ptc/munge.key", slurm_conf="/etc/ptc/slurm.conf")
    changed = groups.ensure_group(provider, cluster, "west", other, desired=2)
    assert changed.launch_template != made.launch_template and changed.desired == 2
    assert group_templates(ec2, made.name) == [changed.launch_template]
    script = base64.b64decode(template_data(ec2, changed.launch_template)["UserData"]).decode()
    assert "munge_key=/etc/ptc/munge.key\n" in script


def test_fake_group_remove_ends_the_chosen_instances_only(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    made = groups.ensure_group(provider, cluster, "east", join, desired=3)
    drained = made.instance_ids[1]
    after = groups.remove_instances(provider, cluster, "east", [drained])
    assert after.desired == 2 and drained not in after.instance_ids
    with pytest.raises(NotFoundError, match=r"has no instance 'i-nothere'"):
        groups.remove_instances(provider, cluster, "east", ["i-nothere"])


def test_fake_group_delete_ends_instances_and_is_safe_twice(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, join: JoinSpec
) -> None:
    groups.ensure_group(provider, cluster, "west", join, desired=2)
    groups.delete_group(provider, cluster, "west")
    assert groups.describe_group(provider, cluster, "west") is None
    assert group_templates(ec2, f"ptc-{cluster}-west") == []
    assert all(i.state.gone for i in provider.describe(cluster, "west"))
    groups.delete_group(provider, cluster, "west")  # nothing left: no error
    with pytest.raises(NotFoundError, match=r"no group 'ptc-.*-west'; ensure_group makes it"):
        groups.set_desired(provider, cluster, "west", 1)


def test_group_refuses_bad_counts_and_sites_naming_them(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    with pytest.raises(
        InputError, match=r"^desired: 7 is more than the max_nodes of site 'east' \(6\)"
    ):
        groups.ensure_group(provider, cluster, "east", join, desired=7)
    with pytest.raises(InputError, match=r"^desired: -1 is not a whole number"):
        groups.ensure_group(provider, cluster, "east", join, desired=-1)
    with pytest.raises(InputError, match=r"^site: unknown site 'north'"):
        groups.ensure_group(provider, cluster, "north", join)
    assert groups.describe_group(provider, cluster, "east") is None


def test_fake_reconcile_finds_orphan_and_lost_node_and_leaves_young_instance(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    kept, orphan, lost = provider.launch(cluster, "east", 3, join)  # "orphan": its record lost
    (interrupted,) = provider.launch(cluster, "cheap", 1, join)
    faults.clock.advance(3600)
    faults.boot_delay("west", 300)
    (young,) = provider.launch(cluster, "west", 1, join)  # in flight: not yet in the records
    provider.terminate(cluster, [lost.node])  # someone ended it behind the pool's back
    faults.interrupt_spot(interrupted.instance_id)
    faults.clock.advance(60)
    believed = {
        "east": {kept.node: kept.instance_id, lost.node: lost.instance_id},
        "cheap": {interrupted.node: interrupted.instance_id},
        "west": {f"{cluster}-west-gone": "i-0123456789abcdef0"},  # EC2 no longer shows it
    }
    events: list[Event] = []
    found = reconcile_cluster(
        provider, cluster, believed, grace_s=600, now=faults.clock.now(), on_event=collect(events)
    )
    assert [o.instance.instance_id for o in found.orphans] == [orphan.instance_id]
    assert found.orphans[0].age_s == 3660
    assert [(n.node, n.why, n.reason) for n in found.lost] == [
        (interrupted.node, "terminated", SPOT_REASON),
        (lost.node, "terminated", "Client.UserInitiatedShutdown"),
        (f"{cluster}-west-gone", "missing", None),
    ]
    assert [i.instance_id for i in found.young] == [young.instance_id]
    assert found.young[0].state is InstanceState.PENDING
    assert found.matched == (kept.node,)
    assert found.terminated == ()
    assert sum(e.kind is Kind.WARNING for e in events) == 4  # one orphan, three lost nodes
    assert {i.instance_id: i.state for i in provider.describe(cluster)}[
        orphan.instance_id
    ] is InstanceState.RUNNING  # only reported: nothing ended without being asked


def test_fake_reconcile_terminates_orphans_when_asked_never_young_ones(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    (old,) = provider.launch(cluster, "east", 1, join)
    faults.clock.advance(900)
    (young,) = provider.launch(cluster, "east", 1, join)
    found = reconcile_cluster(
        provider, cluster, {}, grace_s=600, now=faults.clock.now(), terminate_orphans=True
    )
    assert found.terminated == (old.instance_id,)
    states = {i.instance_id: i.state for i in provider.describe(cluster)}
    assert states == {
        old.instance_id: InstanceState.TERMINATED,
        young.instance_id: InstanceState.RUNNING,
    }
    # A grace period of zero makes the young one an orphan too: the period is what saved it.
    later = reconcile_cluster(
        provider, cluster, {}, grace_s=0, now=faults.clock.now() + timedelta(seconds=1)
    )
    assert [o.instance.instance_id for o in later.orphans] == [young.instance_id]
