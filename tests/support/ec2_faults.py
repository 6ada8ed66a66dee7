"""TEST-ONLY fault injection: the failures moto's fake EC2 cannot produce, made on purpose.

moto's fake never runs out of capacity, boots an instance at once (it is ``running`` by the
next describe), stamps launch times with the wall clock, and has no spot market to take an
instance back. :class:`InjectedFaults` stands between an :class:`~.provider.Ec2Provider` and
the fake's client (it has the same calls) and, for the tests, makes:

- ``run_instances`` at a site fail with a capacity error (:meth:`InjectedFaults.no_capacity`),
  after a given number of launches there if asked, as AWS does when a zone fills up;
- instances look ``pending`` (booting) until a boot delay has passed on its clock
  (:meth:`InjectedFaults.boot_delay`);
- launch times follow its :class:`ManualClock`, which a test moves forward by hand, so
  instances of different ages exist without waiting;
- a spot interruption: the instance is terminated underneath the provider, and describes
  say why as EC2 does (``Server.SpotInstanceTermination``) (:meth:`InjectedFaults.interrupt_spot`).

Production code never makes one: it exists so the provider's handling of these cases is tested
against the fake. Only the instances launched through the wrapper get its clock and delays.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from elastic.sites.ec2 import records
from elastic.sites.ec2.clients import Ec2Client

SPOT_REASON = "Server.SpotInstanceTermination"


class ManualClock:
    """A clock that moves only when told (UTC)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (start or datetime.now(UTC)).replace(microsecond=0)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)


@dataclass
class _NoCapacity:
    code: str
    allowed: int  # launches still let through at the site before the error


class InjectedFaults:
    """TEST-ONLY: a fault-injecting stand-in for an EC2 client (see the module's docstring)."""

    def __init__(self, ec2: Ec2Client, clock: ManualClock | None = None) -> None:
        self.real = ec2
        self.clock = clock or ManualClock()
        self._full: dict[str, _NoCapacity] = {}
        self._delays: dict[str, float] = {}
        self._launched: dict[str, tuple[datetime, float]] = {}  # id -> (launch time, delay)
        self._interrupted: set[str] = set()

    # -- the faults ---------------------------------------------------------------------------

    def no_capacity(
        self, site: str, code: str = "InsufficientInstanceCapacity", after: int = 0
    ) -> None:
        """``run_instances`` at ``site`` fails with AWS's error ``code`` once ``after`` more
        instances have been launched there."""
        self._full[site] = _NoCapacity(code, after)

    def restore_capacity(self, site: str) -> None:
        self._full.pop(site, None)

    def boot_delay(self, site: str, seconds: float) -> None:
        """Instances launched at ``site`` from now on stay ``pending`` for ``seconds`` of the
        clock."""
        self._delays[site] = seconds

    def interrupt_spot(self, instance_id: str) -> None:
        """EC2 takes the instance back: it is terminated behind the provider's back, and later
        describes give the spot interruption as the reason."""
        self.real.terminate_instances(InstanceIds=[instance_id])
        self._interrupted.add(instance_id)

    # -- the client's calls -------------------------------------------------------------------

    def run_instances(self, **kwargs: Any) -> dict[str, Any]:
        site = _site_of(kwargs)
        if site is not None and (full := self._full.get(site)) is not None:
            if full.allowed <= 0:
                raise ClientError(
                    {
                        "Error": {
                            "Code": full.code,
                            "Message": f"injected fault: no {kwargs.get('InstanceType')} "
                            f"capacity at site {site} (the fake never runs out)",
                        }
                    },
                    "RunInstances",
                )
            full.allowed -= 1
        answer = self.real.run_instances(**kwargs)
        delay = self._delays.get(site or "", 0.0)
        for raw in answer.get("Instances", ()):
            self._launched[raw["InstanceId"]] = (self.clock.now(), delay)
            self._rewrite(raw)
        return answer

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]:
        answer = self.real.describe_instances(**kwargs)
        for reservation in answer.get("Reservations", ()):
            for raw in reservation.get("Instances", ()):
                self._rewrite(raw)
        return answer

    def terminate_instances(self, **kwargs: Any) -> dict[str, Any]:
        return self.real.terminate_instances(**kwargs)

    def create_launch_template(self, **kwargs: Any) -> dict[str, Any]:
        return self.real.create_launch_template(**kwargs)

    def describe_launch_templates(self, **kwargs: Any) -> dict[str, Any]:
        return self.real.describe_launch_templates(**kwargs)

    def delete_launch_template(self, **kwargs: Any) -> dict[str, Any]:
        return self.real.delete_launch_template(**kwargs)

    def _rewrite(self, raw: dict[str, Any]) -> None:
        instance_id = raw["InstanceId"]
        if instance_id in self._interrupted:
            raw["StateReason"] = {
                "Code": SPOT_REASON,
                "Message": f"{SPOT_REASON}: Spot instance termination (injected fault)",
            }
        if instance_id not in self._launched:
            return
        launched, delay = self._launched[instance_id]
        raw["LaunchTime"] = launched
        booting = self.clock.now() < launched + timedelta(seconds=delay)
        if booting and raw["State"]["Name"] == "running":
            raw["State"] = {"Code": 0, "Name": "pending"}


def _site_of(request: dict[str, Any]) -> str | None:
    for spec in request.get("TagSpecifications", ()):
        for tag in spec.get("Tags", ()):
            if tag["Key"] == records.SITE_TAG:
                return str(tag["Value"])
    return None
