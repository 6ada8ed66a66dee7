"""What can go wrong on an EC2 site, by kind, each naming the site and the operation.

``elastic.errors`` has no class for "the cloud has no room": a :class:`CapacityError` is the one
failure after which a caller should try another site (the same request may well succeed there),
while any other :class:`Ec2Error` (a bad image, a refused permission) would fail the same way
everywhere and should be shown to a person.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from elastic.errors import TestbedError

if TYPE_CHECKING:
    from elastic.sites.ec2.records import Instance

# AWS's words for "no room now": the on-demand and spot capacity errors of RunInstances, the
# account's limits (another site, another region or another instance type may still have room),
# and a spot request's status when it cannot be fulfilled.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacity",
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",
        "capacity-not-available",
        "capacity-oversubscribed",
    }
)


class Ec2Error(TestbedError):
    """An EC2 or Auto Scaling call on ``site`` failed during ``operation``; ``code`` is AWS's
    error code (or ``connection``/``credentials`` when no answer came). ``launched`` holds the
    instances a launch had already made before it failed: they are real and running."""

    def __init__(
        self,
        message: str,
        *,
        site: str,
        operation: str,
        code: str,
        launched: Sequence[Instance] = (),
    ) -> None:
        super().__init__(message)
        self.site = site
        self.operation = operation
        self.code = code
        self.launched = tuple(launched)


class CapacityError(Ec2Error):
    """The site has no room (or the account no quota) for the instances asked: try another."""


def translate(
    error: Exception, *, site: str, operation: str, launched: Sequence[Instance] = ()
) -> Ec2Error:
    """The typed error for what boto3 raised; credentials never appear in the message (boto3's
    own messages do not carry them, and only the code and AWS's message are kept)."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        code = str(detail.get("Code", "Unknown"))
        text = str(detail.get("Message", ""))
    elif isinstance(error, NoCredentialsError):
        code = "credentials"
        text = "no AWS credentials: set them in the environment or a profile (boto3's chain)"
    elif isinstance(error, EndpointConnectionError):
        code, text = "connection", str(error)
    else:  # another botocore failure (a timeout, a malformed answer)
        code, text = type(error).__name__, str(error)
    kind = CapacityError if code in CAPACITY_CODES else Ec2Error
    message = f"ec2 site {site!r}: {operation} failed: {code}: {text}".rstrip(": ")
    return kind(message, site=site, operation=operation, code=code, launched=launched)
