"""The EC2 and Auto Scaling clients a provider talks through, as the calls it makes.

The protocols name only the calls ptc uses, so a wrapper (the test-only ``InjectedFaults``)
can stand between the provider and boto3's client. Clients are made from the settings' region
and endpoint; credentials come from boto3's ordinary chain, never from ptc.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from elastic.sites.ec2.settings import Ec2Settings


class Ec2Client(Protocol):
    def run_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def terminate_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def create_launch_template(self, **kwargs: Any) -> dict[str, Any]: ...

    def describe_launch_templates(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_launch_template(self, **kwargs: Any) -> dict[str, Any]: ...


class AutoScalingClient(Protocol):
    def create_auto_scaling_group(self, **kwargs: Any) -> dict[str, Any]: ...

    def update_auto_scaling_group(self, **kwargs: Any) -> dict[str, Any]: ...

    def set_desired_capacity(self, **kwargs: Any) -> dict[str, Any]: ...

    def describe_auto_scaling_groups(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_auto_scaling_group(self, **kwargs: Any) -> dict[str, Any]: ...

    def terminate_instance_in_auto_scaling_group(self, **kwargs: Any) -> dict[str, Any]: ...


def make_clients(settings: Ec2Settings) -> tuple[Ec2Client, AutoScalingClient]:
    """boto3's clients for the settings' region and endpoint, with boto3's standard retries
    (throttling and transient errors)."""
    import boto3
    from botocore.config import Config

    config = Config(region_name=settings.region, retries={"mode": "standard", "max_attempts": 4})
    session = boto3.session.Session(region_name=settings.region)
    ec2 = session.client("ec2", endpoint_url=settings.endpoint_url, config=config)
    autoscaling = session.client("autoscaling", endpoint_url=settings.endpoint_url, config=config)
    return cast(Ec2Client, ec2), cast(AutoScalingClient, autoscaling)
