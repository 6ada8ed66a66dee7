"""The EC2 provider against moto's server, a local fake of AWS: launch, describe, terminate,
typed errors, the faults the fake cannot make (injected: no capacity, slow boots, spot
interruptions) and the fallback from a full site to the next."""

from __future__ import annotations

import base64

import pytest
from support.ec2_faults import SPOT_REASON, InjectedFaults
from support.moto_server import free_port

from elastic.errors import InputError, NotFoundError
from elastic.events import Event, Kind, collect
from elastic.sites.ec2.clients import Ec2Client
from elastic.sites.ec2.errors import CapacityError, Ec2Error
from elastic.sites.ec2.fallback import launch_with_fallback
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.records import InstanceState
from elastic.sites.ec2.settings import Ec2Settings, SiteSettings
from elastic.sites.ec2.userdata import JoinSpec


def tags_of(ec2: Ec2Client, instance_id: str) -> dict[str, str]:
    raw = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in raw["Tags"]}


def user_data_of(ec2: Ec2Client, instance_id: str) -> str:
    answer = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")  # type: ignore[attr-defined]
    return base64.b64decode(answer["UserData"]["Value"]).decode()


def test_fake_launch_tags_each_node_and_gives_it_its_own_user_data(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, join: JoinSpec
) -> None:
    events: list[Event] = []
    made = provider.launch(cluster, "east", 3, join, on_event=collect(events))
    assert len(made) == 3
    assert len({i.node for i in made}) == 3 and len({i.instance_id for i in made}) == 3
    for instance in made:
        assert instance.node.startswith(f"{cluster}-east-")
        assert tags_of(ec2, instance.instance_id) == {
            "ptc:cluster": cluster,
            "ptc:site": "east",
            "ptc:node": instance.node,
        }
        script = user_data_of(ec2, instance.instance_id)
        assert script.startswith("#!/bin/bash\n")
        assert f"node={instance.node}\n" in script
        assert "munge_key=s3://ptc-secrets/demo/munge.key\n" in script
        assert instance.private_address  # the fake gives one at launch, as AWS does
    raw = ec2.describe_instances(InstanceIds=[made[0].instance_id])["Reservations"][0]
    instance_raw = raw["Instances"][0]
    assert instance_raw["ImageId"] == "ami-0abc1234def567890"
    assert instance_raw["InstanceType"] == "t3.micro"
    assert instance_raw["KeyName"] == "ptc-admin"
    assert [e.kind for e in events] == [
        Kind.BEGIN,
        Kind.PROGRESS,
        Kind.PROGRESS,
        Kind.PROGRESS,
        Kind.END,
    ]


def test_fake_describe_filters_by_cluster_and_site(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    east = provider.launch(cluster, "east", 2, join)
    west = provider.launch(cluster, "west", 1, join)
    other = provider.launch(f"{cluster}x", "east", 1, join)
    everything = provider.describe(cluster)
    assert {i.instance_id for i in everything} == {i.instance_id for i in (*east, *west)}
    assert {i.instance_id for i in provider.describe(cluster, "west")} == {west[0].instance_id}
    assert {i.instance_id for i in provider.describe(f"{cluster}x")} == {other[0].instance_id}
    record = next(i for i in everything if i.instance_id == west[0].instance_id)
    assert record.site == "west" and record.cluster == cluster and record.node == west[0].node
    assert record.state is InstanceState.RUNNING and record.private_address
    assert record.launch_time.tzinfo is not None


def test_fake_describe_refuses_an_unknown_site(provider: Ec2Provider, cluster: str) -> None:
    with pytest.raises(
        InputError, match=r"site: unknown site 'north' \(known: east, west, cheap\)"
    ):
        provider.describe(cluster, "north")


def test_fake_terminate_by_node_name_and_by_instance_id(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    a, b, c = provider.launch(cluster, "east", 3, join)
    ended = provider.terminate(cluster, [a.node, b.instance_id])
    assert {i.instance_id for i in ended} == {a.instance_id, b.instance_id}
    states = {i.instance_id: i.state for i in provider.describe(cluster)}
    assert states == {
        a.instance_id: InstanceState.TERMINATED,
        b.instance_id: InstanceState.TERMINATED,
        c.instance_id: InstanceState.RUNNING,
    }
    # Ending an ended one again does nothing.
    assert provider.terminate(cluster, [a.node]) == ()


def test_fake_terminate_refuses_what_is_not_the_clusters_before_ending_anything(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    (mine,) = provider.launch(cluster, "east", 1, join)
    (theirs,) = provider.launch(f"{cluster}y", "east", 1, join)
    with pytest.raises(NotFoundError, match=rf"no node or instance '{theirs.instance_id}'"):
        provider.terminate(cluster, [mine.node, theirs.instance_id])
    assert provider.describe(cluster)[0].state is InstanceState.RUNNING
    assert provider.describe(f"{cluster}y")[0].state is InstanceState.RUNNING


def test_fake_launch_refuses_bad_requests_naming_the_field(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    with pytest.raises(InputError, match=r"^count: 0 is not a whole number of nodes >= 1"):
        provider.launch(cluster, "east", 0, join)
    with pytest.raises(InputError, match=r"^site: unknown site 'mars'"):
        provider.launch(cluster, "mars", 1, join)
    with pytest.raises(InputError, match=r"^cluster: 'Bad_Name'"):
        provider.launch("Bad_Name", "east", 1, join)
    assert provider.describe(cluster) == ()


def test_fake_launch_by_name_makes_slurm_s_own_nodes_and_a_name_comes_back_after_its_end(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, join: JoinSpec
) -> None:
    """A ResumeProgram launches the nodes slurm.conf lists, by their names; a node resumed
    again after its instance ended gets a new instance under the same name."""
    first = provider.launch(cluster, "east", 2, join, names=["node-2", "node-3"])
    assert [i.node for i in first] == ["node-2", "node-3"]
    assert "node=node-3" in user_data_of(ec2, first[1].instance_id)
    assert tags_of(ec2, first[1].instance_id)["ptc:node"] == "node-3"
    with pytest.raises(InputError, match=r"^names: cluster .* has a live instance for node-3"):
        provider.launch(cluster, "east", 1, join, names=["node-3"])
    provider.terminate(cluster, ["node-3"])
    (again,) = provider.launch(cluster, "east", 1, join, names=["node-3"])
    assert again.instance_id != first[1].instance_id
    states = {i.instance_id: i.state for i in provider.describe(cluster)}
    assert states[again.instance_id] is InstanceState.RUNNING
    assert states[first[1].instance_id] is InstanceState.TERMINATED


def test_fake_launch_by_name_refuses_bad_names_before_launching(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    with pytest.raises(InputError, match=r"^names: 1 name\(s\) for count 2"):
        provider.launch(cluster, "east", 2, join, names=["node-0"])
    with pytest.raises(InputError, match=r"^names\[1\]: 'node 1' is not a hostname"):
        provider.launch(cluster, "east", 2, join, names=["node-0", "node 1"])
    with pytest.raises(InputError, match=r"^names: node-0 given more than once"):
        provider.launch(cluster, "east", 2, join, names=["node-0", "node-0"])
    assert provider.describe(cluster) == ()


def test_injected_capacity_error_is_typed_and_names_the_site(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.no_capacity("west", after=1)  # room for one more node, then none
    with pytest.raises(CapacityError) as caught:
        provider.launch(cluster, "west", 3, join)
    error = caught.value
    assert error.site == "west" and error.operation == "launch"
    assert error.code == "InsufficientInstanceCapacity"
    assert "ec2 site 'west': launch failed: InsufficientInstanceCapacity" in str(error)
    # The node made before the error is real, and on the error for the caller to keep.
    assert [i.site for i in error.launched] == ["west"]
    assert [i.instance_id for i in provider.describe(cluster)] == [error.launched[0].instance_id]


@pytest.mark.parametrize("code", ["InstanceLimitExceeded", "capacity-not-available"])
def test_injected_quota_and_spot_errors_are_capacity_errors(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec, code: str
) -> None:
    faults.no_capacity("cheap", code=code)
    with pytest.raises(CapacityError, match=rf"'cheap': launch failed: {code}"):
        provider.launch(cluster, "cheap", 1, join)


def test_other_aws_errors_are_ec2_errors_not_capacity(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.no_capacity("east", code="UnauthorizedOperation")
    with pytest.raises(Ec2Error) as caught:
        provider.launch(cluster, "east", 1, join)
    assert not isinstance(caught.value, CapacityError)
    assert caught.value.site == "east" and caught.value.code == "UnauthorizedOperation"


def test_injected_boot_delay_shows_pending_until_it_passes(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.boot_delay("east", 90)
    (booting,) = provider.launch(cluster, "east", 1, join)
    assert booting.state is InstanceState.PENDING
    faults.clock.advance(60)
    assert provider.describe(cluster)[0].state is InstanceState.PENDING
    faults.clock.advance(31)
    assert provider.describe(cluster)[0].state is InstanceState.RUNNING


def test_injected_spot_interruption_ends_the_instance_with_aws_reason(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    spot, kept = provider.launch(cluster, "cheap", 2, join)
    assert spot.spot and kept.spot
    faults.interrupt_spot(spot.instance_id)
    after = {i.instance_id: i for i in provider.describe(cluster)}
    assert after[spot.instance_id].state is InstanceState.TERMINATED
    assert after[spot.instance_id].state_reason == SPOT_REASON
    assert after[kept.instance_id].state is InstanceState.RUNNING


def test_unreachable_endpoint_is_an_ec2_error_naming_site_and_operation(
    cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "not-a-real-secret-but-must-stay-unsaid"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)  # boto3's chain finds it; ptc never
    closed = Ec2Settings(
        region="us-east-1",
        endpoint_url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
        sites={"east": SiteSettings("east", "ami-0abc1234def567890", "t3.micro", 0.01)},
    )
    assert secret not in repr(closed)
    with pytest.raises(Ec2Error) as caught:
        Ec2Provider(closed).describe(cluster, "east")
    assert caught.value.site == "east" and caught.value.operation == "describe"
    assert caught.value.code == "connection"
    assert secret not in str(caught.value)


def test_fallback_moves_to_the_next_site_on_a_capacity_error(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.no_capacity("cheap", code="capacity-not-available", after=1)
    faults.no_capacity("east")
    events: list[Event] = []
    placed = launch_with_fallback(
        provider, cluster, ["cheap", "east", "west"], 4, join, on_event=collect(events)
    )
    assert [placed.count_at(s) for s in ("cheap", "east", "west")] == [1, 0, 3]
    assert [(e.site, e.code) for e in placed.full] == [
        ("cheap", "capacity-not-available"),
        ("east", "InsufficientInstanceCapacity"),
    ]
    on_aws = {i.instance_id: i.site for i in provider.describe(cluster)}
    assert on_aws == {i.instance_id: i.site for i in placed.instances}
    assert any("cheap: no room (capacity-not-available)" in e.message for e in events)


def test_fallback_stops_at_the_first_site_with_room(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.no_capacity("west")  # never reached
    placed = launch_with_fallback(provider, cluster, ["east", "west"], 2, join)
    assert placed.count_at("east") == 2 and placed.full == ()


def test_fallback_with_no_room_anywhere_keeps_every_node_made_on_the_error(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, join: JoinSpec
) -> None:
    faults.no_capacity("east", after=2)
    faults.no_capacity("west", code="InstanceLimitExceeded")
    with pytest.raises(CapacityError) as caught:
        launch_with_fallback(provider, cluster, ["east", "west"], 5, join)
    error = caught.value
    assert error.site == "east,west"
    assert "no room for 3 of 5 node(s) (east: InsufficientInstanceCapacity; west: " in str(error)
    assert sorted(i.instance_id for i in error.launched) == sorted(
        i.instance_id for i in provider.describe(cluster)
    )
    assert len(error.launched) == 2


def test_fallback_refuses_an_unknown_site_before_launching(
    provider: Ec2Provider, cluster: str, join: JoinSpec
) -> None:
    with pytest.raises(InputError, match=r"^site: unknown site 'moon'"):
        launch_with_fallback(provider, cluster, ["east", "moon"], 1, join)
    with pytest.raises(InputError, match=r"^sites: name at least one site"):
        launch_with_fallback(provider, cluster, [], 1, join)
    assert provider.describe(cluster) == ()
