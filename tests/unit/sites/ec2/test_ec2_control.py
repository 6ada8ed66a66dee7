"""An EC2 site behind Slurm's hooks: the power control over moto's server (a local fake of AWS),
and the site's provisioner, which neither reaches its nodes over SSH nor runs playbooks on them.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.ec2_faults import InjectedFaults

from elastic.errors import InputError, NoCapacity, NodeControlError, PtcError
from elastic.sites.ec2.clients import AutoScalingClient, Ec2Client
from elastic.sites.ec2.control import PARKED, Ec2Control
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.records import NODE_TAG
from elastic.sites.ec2.settings import Ec2Settings
from elastic.sites.ec2.userdata import JoinSpec
from elastic.slurm.commands import Slurm
from elastic.slurm.provision import Completed, PlaybookProvisioner, ProvisionFailed

NODES = ("ec2-0", "ec2-1", "ec2-2")


def _join(node: str) -> JoinSpec:
    return JoinSpec(munge_key="/etc/munge/munge.key", slurm_conf=f"/etc/ptc/{node}.conf")


class Addresses:
    """Slurm's side of a launch: each node's address as ``scontrol update`` would set it."""

    def __init__(self, fail: str | None = None) -> None:
        self.set: dict[str, str] = {}
        self.fail = fail

    def __call__(self, node: str, address: str) -> None:
        if node == self.fail:
            raise PtcError(f"scontrol update NodeName={node}: exit 1: Invalid node name")
        self.set[node] = address


def control(
    provider: Ec2Provider, cluster: str, addresses: Addresses, site: str = "east"
) -> Ec2Control:
    return Ec2Control(provider, cluster, site, NODES, _join, on_address=addresses)


def instances(ec2: Ec2Client, cluster: str) -> list[dict[str, Any]]:
    answer = ec2.describe_instances(Filters=[{"Name": "tag:ptc:cluster", "Values": [cluster]}])
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def node_of(raw: dict[str, Any]) -> str:
    return next(t["Value"] for t in raw["Tags"] if t["Key"] == NODE_TAG)


def live(ec2: Ec2Client, cluster: str) -> dict[str, str]:
    """node -> state of every instance not ending."""
    return {
        node_of(i): i["State"]["Name"]
        for i in instances(ec2, cluster)
        if i["State"]["Name"] not in ("terminated", "shutting-down")
    }


def test_a_resume_launches_one_instance_per_node_with_its_user_data_and_sets_its_address(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str
) -> None:
    addresses = Addresses()
    ctl = control(provider, cluster, addresses)
    assert ctl.nodes() == dict.fromkeys(NODES, PARKED)
    ctl.allocate(["ec2-0", "ec2-1"], "r1")
    found = {node_of(i): i for i in instances(ec2, cluster)}
    assert sorted(found) == ["ec2-0", "ec2-1"]
    for node, raw in found.items():
        assert addresses.set[node] == raw["PrivateIpAddress"]
        data = ec2.describe_instance_attribute(  # type: ignore[attr-defined]
            InstanceId=raw["InstanceId"], Attribute="userData"
        )
        script = base64.b64decode(data["UserData"]["Value"]).decode()
        assert f"node={node}\n" in script and f"/etc/ptc/{node}.conf" in script
    assert ctl.nodes() == {"ec2-0": "running", "ec2-1": "running", "ec2-2": PARKED}


def test_a_node_with_a_live_instance_gets_no_second_one(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str
) -> None:
    """A controller restarted mid-resume asks again: the instance its tag names is reused."""
    addresses = Addresses()
    ctl = control(provider, cluster, addresses)
    ctl.allocate(["ec2-0"], "r1")
    first = addresses.set["ec2-0"]
    addresses.set.clear()
    ctl.allocate(["ec2-0", "ec2-1"], "r2")
    assert sorted(node_of(i) for i in instances(ec2, cluster)) == ["ec2-0", "ec2-1"]
    assert addresses.set["ec2-0"] == first  # Slurm is told again, after a restart too


def test_release_terminates_and_the_next_resume_launches_anew(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str
) -> None:
    ctl = control(provider, cluster, Addresses())
    ctl.allocate(["ec2-0", "ec2-1"], "r1")
    ctl.release(["ec2-0", "ec2-2"], "r2")  # ec2-2 has none: nothing to end
    assert live(ec2, cluster) == {"ec2-1": "running"}
    assert ctl.nodes()["ec2-0"] == PARKED
    ctl.allocate(["ec2-0"], "r3")
    assert sorted(live(ec2, cluster)) == ["ec2-0", "ec2-1"]
    assert len([i for i in instances(ec2, cluster) if node_of(i) == "ec2-0"]) == 2


def test_the_stop_operation_keeps_the_instance_and_starts_it_again(
    settings: Ec2Settings, ec2: Ec2Client, autoscaling: AutoScalingClient, cluster: str
) -> None:
    provider = Ec2Provider(settings, ec2=ec2, autoscaling=autoscaling)
    ctl = control(provider, cluster, Addresses())
    ctl.power_on(["ec2-0"], "r1")
    (before,) = instances(ec2, cluster)
    ctl.power_off(["ec2-0"], "r2")
    assert ctl.nodes()["ec2-0"] == "stopped"
    ctl.power_on(["ec2-0"], "r3")
    (after,) = instances(ec2, cluster)
    assert after["InstanceId"] == before["InstanceId"]
    assert ctl.nodes()["ec2-0"] == "running"


def test_no_capacity_names_the_site_and_ec2_s_code_and_keeps_the_nodes_launched(
    provider: Ec2Provider, faults: InjectedFaults, ec2: Ec2Client, cluster: str
) -> None:
    faults.no_capacity("east", "InsufficientInstanceCapacity", after=1)
    ctl = control(provider, cluster, Addresses())
    with pytest.raises(NoCapacity, match=r"east.*InsufficientInstanceCapacity"):
        ctl.allocate(["ec2-0", "ec2-1"], "r1")
    assert live(ec2, cluster) == {"ec2-0": "running"}


def test_through_the_provisioner_no_capacity_fails_only_the_nodes_left_as_the_site_s(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, tmp_path: Path
) -> None:
    faults.no_capacity("east", "VcpuLimitExceeded", after=1)
    prov = provisioner(tmp_path, control(provider, cluster, Addresses()))
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["ec2-0", "ec2-1", "ec2-2"])
    assert sorted(caught.value.failures) == ["ec2-1", "ec2-2"]
    assert caught.value.capacity == {"ec2-1", "ec2-2"}
    assert "VcpuLimitExceeded" in caught.value.failures["ec2-1"]


class Refusing:
    """EC2 answering every call with a credential error (moto takes any signature)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __getattr__(self, name: str) -> Any:
        def refuse(**kwargs: Any) -> dict[str, Any]:
            error = {"Error": {"Code": self.code, "Message": "AWS was not able to validate"}}
            raise ClientError(error, name)  # type: ignore[arg-type]

        return refuse


def test_a_refused_credential_fails_the_nodes_as_the_site_s_not_a_crash(
    settings: Ec2Settings, autoscaling: AutoScalingClient, cluster: str, tmp_path: Path
) -> None:
    refusing: Any = Refusing("AuthFailure")
    provider = Ec2Provider(settings, ec2=refusing, autoscaling=autoscaling)
    ctl = control(provider, cluster, Addresses())
    with pytest.raises(NoCapacity, match=r"credential.*AuthFailure") as caught:
        ctl.allocate(["ec2-0"], "r1")
    assert caught.value.status == 401
    with pytest.raises(NodeControlError, match="AuthFailure"):
        ctl.check()
    prov = provisioner(tmp_path, ctl)
    with pytest.raises(ProvisionFailed) as failed:
        prov.power_on(["ec2-0", "ec2-1"])
    assert failed.value.capacity == {"ec2-0", "ec2-1"}  # the site is paused, nodes not DOWN
    assert "elastic_ec2_credentials_src" in failed.value.failures["ec2-0"]


def test_another_ec2_failure_is_the_node_s(
    settings: Ec2Settings, autoscaling: AutoScalingClient, cluster: str
) -> None:
    broken: Any = Refusing("InvalidAMIID.NotFound")
    ctl = control(Ec2Provider(settings, ec2=broken, autoscaling=autoscaling), cluster, Addresses())
    with pytest.raises(NodeControlError) as caught:
        ctl.allocate(["ec2-0"], "r1")
    assert not isinstance(caught.value, NoCapacity)
    assert "InvalidAMIID.NotFound" in str(caught.value)


def test_a_node_slurm_will_not_take_the_address_of_fails_naming_it(
    provider: Ec2Provider, cluster: str
) -> None:
    ctl = control(provider, cluster, Addresses(fail="ec2-1"))
    with pytest.raises(NodeControlError, match=r"ec2-1: setting its address") as caught:
        ctl.allocate(["ec2-0", "ec2-1"], "r1")
    assert caught.value.node == "ec2-1"


def test_a_node_of_another_site_and_an_unknown_site_are_refused(
    provider: Ec2Provider, cluster: str
) -> None:
    ctl = control(provider, cluster, Addresses())
    with pytest.raises(NodeControlError, match="node-9 is not one of its nodes"):
        ctl.allocate(["node-9"], "r1")
    with pytest.raises(InputError, match="unknown site 'north'"):
        control(provider, cluster, Addresses(), site="north")


class Recorder:
    """The provisioner's runner: nothing may run (no SSH, no playbook) for these nodes."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Completed:
        self.argvs.append(list(argv))
        return Completed(0, "")


def provisioner(
    tmp_path: Path, ctl: Ec2Control, operation: str = "release", run: Recorder | None = None
) -> PlaybookProvisioner:
    return PlaybookProvisioner(
        node_operation=operation,
        control=ctl,
        run=run or Recorder(),
        lock_file=tmp_path / "power.lock",
        known_hosts=tmp_path / "known_hosts",
        playbook_state_dir=tmp_path / "ansible",
    )


def test_the_site_s_nodes_join_by_user_data_no_ssh_nor_playbook(
    provider: Ec2Provider, ec2: Ec2Client, cluster: str, tmp_path: Path
) -> None:
    run = Recorder()
    prov = provisioner(tmp_path, control(provider, cluster, Addresses()), run=run)
    assert prov.joins_by_user_data
    prov.power_on(["ec2-0", "ec2-1"])
    prov.configure(["ec2-0", "ec2-1"])
    assert sorted(live(ec2, cluster)) == ["ec2-0", "ec2-1"]
    assert prov.running(list(NODES)) == ["ec2-0", "ec2-1"]
    prov.power_off(["ec2-0"])
    assert sorted(live(ec2, cluster)) == ["ec2-1"]
    assert prov.renew(["ec2-1"]) is True  # a fresh disk is a new instance
    prov.provision(["ec2-1"], start=True)
    assert run.argvs == []
    assert sorted(live(ec2, cluster)) == ["ec2-1"]


def test_a_control_that_does_not_join_by_user_data_still_reaches_its_nodes(
    tmp_path: Path,
) -> None:
    """The capability is the control's: a provisioner without it goes over SSH as before."""
    run = Recorder()
    prov = PlaybookProvisioner(node_operation="none", run=run)
    assert not prov.joins_by_user_data
    prov.power_on(["node-1"])
    assert run.argvs and "true" in run.argvs[0]


def test_slurm_takes_the_instance_s_address_and_keeps_the_node_s_hostname() -> None:
    seen: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        seen.append(list(argv))
        return ""

    Slurm(run).set_address("ec2-0", "10.0.3.7")
    assert seen == [
        ["scontrol", "update", "NodeName=ec2-0", "NodeAddr=10.0.3.7", "NodeHostname=ec2-0"]
    ]
