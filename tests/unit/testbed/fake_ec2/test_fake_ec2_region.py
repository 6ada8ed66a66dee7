"""The FAKE EC2 region's API through boto3, in this process, on loopback: EC2's refusals and
the injected capacity fault in front of moto, instances pending until realised, EC2's state
reasons when the region ends one. No machine is made."""

from __future__ import annotations

import ipaddress
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from elastic.testbed.backends.local.fake_ec2 import plan
from elastic.testbed.backends.local.fake_ec2.faults import Faults
from elastic.testbed.backends.local.fake_ec2.realiser import SPOT_ENDED
from elastic.testbed.backends.local.fake_ec2.region import Ids, Listener, Region, listen_in

KEY, SECRET = "AKIAFAKEFAKEFAKEFAKE", "the-regions-own-secret"
LAN = plan.Lan(0, "lan", ipaddress.IPv4Network("10.10.1.0/24"),
               frozenset({ipaddress.IPv4Address("10.10.1.1")}))  # fmt: skip


@dataclass
class Served:
    region: Region
    ids: Ids
    faults: Faults
    url: str

    def client(self, attempts: int = 1, key: str = KEY, secret: str = SECRET) -> Any:
        return boto3.client(
            "ec2",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
        )

    def launch(self, client: Any, node: str, **extra: Any) -> Any:
        args = {"ImageId": self.ids.image_id, "SubnetId": self.ids.subnet_id} | extra
        return client.run_instances(
            MinCount=1, MaxCount=1, InstanceType="c5.large",
            TagSpecifications=[{"ResourceType": "instance",
                                "Tags": [{"Key": "ptc:node", "Value": node}]}],
            **args,
        )["Instances"][0]  # fmt: skip


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    region = Region("us-east-1")
    ids = region.set_up(plan.plan(LAN))
    faults = Faults(tmp_path)
    # The same path as the head's: a socket made in a process's network namespace (ours).
    sock = listen_in(os.getpid(), "127.0.0.1", 0)
    listener = Listener(sock, region.wsgi(ids, faults, {KEY: SECRET}))
    try:
        yield Served(region, ids, faults, f"http://127.0.0.1:{listener.server.port}")
    finally:
        listener.close()


def code_and_status(err: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    answer = err.value.response
    return answer["Error"]["Code"], answer["ResponseMetadata"]["HTTPStatusCode"]


def test_an_instance_is_pending_in_the_subnet_until_realised_then_running(served: Served) -> None:
    client = served.client()
    launched = served.launch(client, "node-3")
    assert launched["State"]["Name"] == "pending"
    address = ipaddress.IPv4Address(launched["PrivateIpAddress"])
    assert address in plan.plan(LAN).subnet
    (mine,) = [s for s in served.region.seen() if s.instance_id == launched["InstanceId"]]
    assert (mine.node, mine.address, mine.subnet_id) == ("node-3", str(address),
                                                         served.ids.subnet_id)  # fmt: skip
    assert served.region.set_running(mine.instance_id)
    described = client.describe_instances(InstanceIds=[mine.instance_id])
    assert described["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"


def test_an_interrupted_instance_ends_with_ec2s_spot_reason(served: Served) -> None:
    client = served.client()
    instance_id = served.launch(client, "node-4")["InstanceId"]
    served.region.end(instance_id, SPOT_ENDED, by_service=True)
    (got,) = client.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"]
    assert got["State"]["Name"] == "terminated"
    assert got["StateReason"]["Code"] == "Server.SpotInstanceTermination"
    assert got["StateTransitionReason"].startswith("Service initiated (")
    assert not served.region.set_running(instance_id)


def test_a_capacity_fault_refuses_the_next_calls_as_ec2_does(served: Served) -> None:
    client = served.client()
    served.faults.set_capacity(2)
    for _ in range(2):
        with pytest.raises(ClientError) as refused:
            served.launch(client, "node-5")
        assert code_and_status(refused) == ("InsufficientInstanceCapacity", 500)
        assert "We currently do not have sufficient c5.large capacity in the Availability " \
               "Zone you requested (us-east-1a)" in str(refused.value)  # fmt: skip
    assert served.launch(client, "node-5")["State"]["Name"] == "pending"


def test_boto3s_retries_are_calls_of_their_own(served: Served) -> None:
    # EC2's 500 is retried by boto3: three refusals are used up by one launch of four attempts.
    served.faults.set_capacity(3)
    assert served.launch(served.client(attempts=4), "node-6")["State"]["Name"] == "pending"
    assert served.faults.read().capacity is None


def test_until_cleared_refuses_until_cleared(served: Served) -> None:
    client = served.client()
    served.faults.set_capacity(None)
    for _ in range(3):
        with pytest.raises(ClientError, match="InsufficientInstanceCapacity"):
            served.launch(client, "node-7")
    served.faults.clear_capacity()
    served.launch(client, "node-7")


def test_parameters_ec2_refuses_are_refused_before_capacity(served: Served) -> None:
    client = served.client()
    served.faults.set_capacity(1)
    with pytest.raises(ClientError) as refused:
        served.launch(client, "node-8", ImageId="ami-0abc1234def567890")
    assert code_and_status(refused) == ("InvalidAMIID.NotFound", 400)
    with pytest.raises(ClientError) as refused:
        client.run_instances(ImageId=served.ids.image_id, MinCount=1, MaxCount=1)
    assert code_and_status(refused) == ("VPCIdNotSpecified", 400)
    assert served.faults.read().capacity == 1  # neither took the fault


def test_mocks_control_endpoints_are_not_served(served: Served) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{served.url}/moto-api/reset", data=b"")
    assert refused.value.code == 403


def test_only_requests_signed_with_the_regions_key_pair_reach_moto(served: Served) -> None:
    for key, secret, expected in (
        (KEY, "not-the-secret", ("SignatureDoesNotMatch", 403)),
        ("AKIAANOTHERKEYANOTHE", SECRET, ("AuthFailure", 401)),
    ):
        with pytest.raises(ClientError) as refused:
            served.client(key=key, secret=secret).describe_instances()
        assert code_and_status(refused) == expected
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(served.url, data=b"Action=DescribeInstances&Version=2016-11-15")
    assert unsigned.value.code == 401
    assert served.client().describe_instances()["Reservations"] is not None
