"""A FAKE EC2 region (``ptc fake-ec2``) on a real experiment: an instance launched through
boto3 on the head becomes a fresh machine of the testbed at its private address, runs its user
data, answers the head, and goes when it is terminated; a capacity fault is refused as EC2
refuses it.

One undeployed experiment (``ptc up`` only): a head alone on its LAN. The API calls are made on
the head, with the head's own boto3 (Debian's, in the prepared image) and the credentials the
region put where the head reads them, so the path is the one a Slurm hook on the controller
takes."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_ec2_api import call
from naming import experiment_name
from remote import containers, ssh, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("fec2")
NODE = "burst-0"
BOOT_DELAY_S = 5
MARK = "/root/user-data-ran"
# What an instance's programs run to read their metadata on EC2 (IMDSv2: a token first).
IMDS = (
    "t=$(curl -fsS -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "
    "http://169.254.169.254/latest/api/token) && "
    'curl -fsS -m 5 -H "X-aws-ec2-metadata-token: $t" http://169.254.169.254/latest/meta-data/'
)


def machine(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", "exec", f"ptc-{NAME}-{NODE}", "sh", "-c", command],
                          capture_output=True, text=True, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def region(
    experiment_factory: Callable[..., Path], ptc: Any
) -> Iterator[tuple[Path, dict[str, Any]]]:
    expdir = experiment_factory(NAME, "profiles/tests/head_on_lan.py")
    started = ptc("fake-ec2", "start", NAME, "--boot-delay", str(BOOT_DELAY_S))
    assert started.returncode == 0, started.stderr
    assert "FAKE EC2" in started.stdout and "http://127.0.0.1:4566" in started.stdout
    report = json.loads((expdir / "fake-ec2" / "status.json").read_text())
    assert report["ids"]["subnet_id"] in started.stdout
    assert report["ids"]["image_id"] in started.stdout
    yield expdir, report
    stopped = ptc("fake-ec2", "stop", NAME)
    assert stopped.returncode == 0, stopped.stderr


def test_an_instance_becomes_a_machine_at_its_address_runs_its_user_data_and_goes(
    region: tuple[Path, dict[str, Any]],
) -> None:
    expdir, report = region
    secret = (expdir / "fake-ec2" / "credentials").read_text()
    assert (expdir / "fake-ec2" / "credentials").stat().st_mode & 0o777 == 0o600
    asked = time.monotonic()
    (launched,) = call(
        expdir, "run_instances",
        ImageId=report["ids"]["image_id"], SubnetId=report["ids"]["subnet_id"],
        InstanceType="c5.large", MinCount=1, MaxCount=1,
        UserData=f"#!/bin/sh\necho ran as $(id -un) on $(hostname) > {MARK}\n",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "ptc:cluster", "Value": NAME}, {"Key": "ptc:node", "Value": NODE}]}],
    )["Instances"]  # fmt: skip
    instance_id, address = launched["InstanceId"], launched["PrivateIpAddress"]
    assert launched["State"]["Name"] == "pending"

    def state() -> str:
        (r,) = call(expdir, "describe_instances", InstanceIds=[instance_id])["Reservations"]
        return str(r["Instances"][0]["State"]["Name"])

    wait_for(f"{instance_id} running", lambda: state() == "running", timeout=120)
    running_s = time.monotonic() - asked
    ran = wait_for("the user data's file", lambda: machine(f"cat {MARK}").stdout, timeout=60)
    assert ran.strip() == f"ran as root on {NODE}"
    # Its metadata service answers inside it over HTTP as EC2's does, and only with a token.
    asked_id = machine(IMDS + "instance-id")
    assert asked_id.returncode == 0 and asked_id.stdout == instance_id, asked_id
    tokenless = "curl -fsS -m 5 http://169.254.169.254/latest/meta-data/instance-id"
    assert "401" in machine(tokenless).stderr
    # The head reaches it at the instance's private address, on the LAN.
    answered = ssh(expdir, "head", f"timeout 5 bash -c '</dev/tcp/{address}/22' && echo open")
    assert answered.stdout.strip() == "open"
    print(f"launch to running {running_s:.1f} s, to answering {time.monotonic() - asked:.1f} s")
    assert machine("ip -o -4 addr show dev eth0").stdout.split()[3].split("/")[0] == address
    # The instance reaches neither the API (only the head's loopback serves it) nor the host.
    for where in ("127.0.0.1", "10.10.1.1"):
        assert machine(f"timeout 3 bash -c '</dev/tcp/{where}/4566'").returncode != 0, where
    assert machine("ip -o link show | grep -v ' lo:\\| eth0@'").stdout == ""
    log = machine("cat /var/log/cloud-init-output.log; cat /var/lib/cloud/instance/boot-finished")
    assert log.stdout.strip().endswith("0"), log
    # The secret is on no command line of the host, and never printed.
    key = next(ln.split("=", 1)[1].strip() for ln in secret.splitlines() if "secret" in ln)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert key not in ps.stdout

    ended = call(expdir, "terminate_instances", InstanceIds=[instance_id])
    assert ended["TerminatingInstances"][0]["InstanceId"] == instance_id
    gone = time.monotonic()
    wait_for(f"{NODE}'s machine gone", lambda: f"ptc-{NAME}-{NODE}" not in containers(NAME),
             timeout=60)  # fmt: skip
    print(f"terminate to machine gone {time.monotonic() - gone:.1f} s")
    assert state() == "terminated"


def test_a_capacity_fault_is_refused_as_insufficient_instance_capacity(
    region: tuple[Path, dict[str, Any]], ptc: Any
) -> None:
    expdir, report = region
    injected = ptc("fake-ec2", "fault", "capacity", NAME, "--count", "1")
    assert injected.returncode == 0, injected.stderr
    launch = {
        "ImageId": report["ids"]["image_id"], "SubnetId": report["ids"]["subnet_id"],
        "InstanceType": "c5.large", "MinCount": 1, "MaxCount": 1,
    }  # fmt: skip
    refused = call(expdir, "run_instances", **launch)
    assert refused == {"Error": "InsufficientInstanceCapacity", "Status": 500}
    # A user of the head without the key pair is refused before moto sees the request.
    unsigned = ssh(expdir, "head", "python3 -c \"import urllib.request as u; "
                   "u.urlopen('http://127.0.0.1:4566', data=b'Action=DescribeInstances')\"",
                   check=False)  # fmt: skip
    assert unsigned.returncode != 0 and "401" in unsigned.stderr, unsigned.stderr
    status = ptc("fake-ec2", "status", NAME)
    assert status.returncode == 0 and "fault:" not in status.stdout, status.stdout


def test_a_spot_interruption_gives_notice_then_ends_the_instance_with_ec2s_reason(
    region: tuple[Path, dict[str, Any]], ptc: Any
) -> None:
    expdir, report = region
    node = "burst-1"
    (launched,) = call(
        expdir, "run_instances",
        ImageId=report["ids"]["image_id"], SubnetId=report["ids"]["subnet_id"],
        InstanceType="c5.large", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": "ptc:node", "Value": node}]}],
    )["Instances"]  # fmt: skip
    instance_id = launched["InstanceId"]

    def described() -> dict[str, Any]:
        (r,) = call(expdir, "describe_instances", InstanceIds=[instance_id])["Reservations"]
        return dict(r["Instances"][0])

    wait_for(f"{instance_id} running", lambda: described()["State"]["Name"] == "running",
             timeout=120)  # fmt: skip
    asked = ptc("fake-ec2", "fault", "interrupt", NAME, node, "--notice", "6")
    assert asked.returncode == 0, asked.stderr
    # Read as the node's notice watcher reads it: from the metadata service (404 until then).
    metadata = IMDS + "spot/instance-action"
    notice = wait_for(
        "the notice from the machine's metadata service",
        lambda: subprocess.run(["podman", "exec", f"ptc-{NAME}-{node}", "sh", "-c", metadata],
                               capture_output=True, text=True, check=False).stdout,
        timeout=5, poll=0.5,
    )  # fmt: skip
    assert json.loads(notice)["action"] == "terminate"
    assert described()["State"]["Name"] == "running"  # the notice comes first
    wait_for(f"{node}'s machine gone", lambda: f"ptc-{NAME}-{node}" not in containers(NAME),
             timeout=60)  # fmt: skip
    ended = described()
    assert ended["State"]["Name"] == "terminated"
    assert ended["StateReason"]["Code"] == "Server.SpotInstanceTermination"
