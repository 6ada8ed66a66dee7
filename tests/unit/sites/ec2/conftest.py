"""Fixtures of the EC2 provider's tests: moto's server (a local fake of AWS) on a loopback port
for each test module, fake credentials, settings with three sites, and a provider whose EC2
client goes through the test-only fault injector."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import boto3
import pytest
from support.ec2_faults import InjectedFaults, ManualClock
from support.moto_server import FAKE_CREDENTIALS, moto_server

from elastic.sites.ec2.clients import AutoScalingClient, Ec2Client
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.settings import Ec2Settings
from elastic.sites.ec2.userdata import JoinSpec

REGION = "us-east-1"
SITES = {
    "east": {"image_id": "ami-0abc1234def567890", "instance_type": "t3.micro",
             "price_per_node_hour": 0.0104, "key_name": "ptc-admin", "max_nodes": 6},
    "west": {"image_id": "ami-0fed9876cba543210", "instance_type": "m5.large",
             "price_per_node_hour": 0.096},
    "cheap": {"image_id": "ami-0abc1234def567890", "instance_type": "t3.micro",
              "price_per_node_hour": 0.0031, "spot": True},
}  # fmt: skip


@pytest.fixture(scope="module")
def fake_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of moto's server, a fake of AWS, on loopback; one per test module."""
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with moto_server(log, warm=("ec2", "autoscaling")) as url:
        yield url


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def settings(fake_aws: str) -> Ec2Settings:
    return Ec2Settings.from_mapping({"region": REGION, "endpoint_url": fake_aws, "sites": SITES})


@pytest.fixture
def join() -> JoinSpec:
    """Where the nodes fetch the munge key (with their role) and slurm.conf (from the image)."""
    return JoinSpec(munge_key="s3://ptc-secrets/demo/munge.key", slurm_conf="/etc/ptc/slurm.conf")


@pytest.fixture
def cluster() -> str:
    """A cluster name of its own for each test: the fake's state outlives a test."""
    return f"c{secrets.token_hex(4)}"


def _session() -> boto3.session.Session:
    # The fake's credentials given outright: these clients live for the module, longer than
    # any one test's environment.
    return boto3.session.Session(
        region_name=REGION,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture(scope="module")
def ec2(fake_aws: str) -> Ec2Client:
    """boto3's own EC2 client on the fake (the provider's, and to look behind its back)."""
    client: Ec2Client = _session().client("ec2", endpoint_url=fake_aws)
    return client


@pytest.fixture(scope="module")
def autoscaling(fake_aws: str) -> AutoScalingClient:
    client: AutoScalingClient = _session().client("autoscaling", endpoint_url=fake_aws)
    return client


@pytest.fixture
def faults(ec2: Ec2Client) -> InjectedFaults:
    return InjectedFaults(ec2, ManualClock())


@pytest.fixture
def provider(
    settings: Ec2Settings, faults: InjectedFaults, autoscaling: AutoScalingClient
) -> Ec2Provider:
    return Ec2Provider(settings, ec2=faults, autoscaling=autoscaling)
