"""An EC2 site as the power control of Slurm's hooks: one instance per Slurm node, by its name.

The controller's provisioner (``elastic.slurm.provision.PlaybookProvisioner``) asks a power
control to bring nodes up and down in the words of the local testbed: ``allocate`` and
``release`` (a node whose machine is given back at suspend and made anew at resume: EC2's
``terminate``), ``power on`` and ``power off`` (a machine kept, stopped and started: EC2's
``stop``), and ``nodes`` for each node's state (``running``, ``stopped``, or ``parked`` when it
holds no instance). :class:`Ec2Control` says the same of a site's instances, found by the tags
``ptc:cluster``, ``ptc:site`` and ``ptc:node``.

- **Bringing a node up** reuses the live instance its ``ptc:node`` tag names (a controller that
  restarted in the middle of a resume finds it), starts a stopped one, and launches one only
  when the node has none: no node ever has two. The instance's private address then becomes the
  Slurm node's (``on_address``: slurmctld must reach slurmd there).
- **The node joins by its user data** (``joins_by_user_data``): cloud-init runs the join script
  at first boot, so the provisioner neither reaches it over SSH nor runs a playbook on it; Slurm's
  registration within ResumeTimeout decides whether the resume worked.
- **A site without room** (EC2's capacity and limit codes) raises :class:`NoCapacity` naming
  the site and EC2's code, which pauses the site and sends the node back powered down. A refused
  or missing credential does too, with its own words: it is no fault of the node, and every other
  node of the site would fail the same way until someone mends the credential.

Nothing here imports ``elastic.slurm``: what the control needs from Slurm (setting a node's
address) is a function its caller passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from botocore.exceptions import BotoCoreError, ClientError

from elastic.errors import InputError, NoCapacity, NodeControlError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2.errors import CapacityError, Ec2Error, translate
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.records import Instance, InstanceState
from elastic.sites.ec2.userdata import JoinSpec

# The operations, in the provisioner's words: ``release`` is EC2's terminate (a new instance at
# each resume), ``power`` its stop (the instance and its disk kept).
OPERATIONS = ("release", "power")
# EC2's codes for a credential it does not take, or one allowed too little: the site cannot be
# used by anyone until a person mends it (``credentials``: boto3 found none at all).
CREDENTIAL_CODES = frozenset(
    {
        "credentials",
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "RequestExpired",
        "UnrecognizedClientException",
        "UnauthorizedOperation",
        "AccessDenied",
        "OptInRequired",
    }
)
# The HTTP-like statuses the provisioner reads on a NodeControlError: 503 no room now, 401 the
# credential, 502 any other failure of EC2 (none of them 409: that would be waited on).
_STATUS_CAPACITY = 503
_STATUS_CREDENTIALS = 401
_STATUS_FAILED = 502
# What each EC2 state is to the provisioner.
_STATE = {
    InstanceState.PENDING: "running",
    InstanceState.RUNNING: "running",
    InstanceState.STOPPING: "stopped",
    InstanceState.STOPPED: "stopped",
}
PARKED = "parked"  # no live instance: a resume launches one


class _StartStop(Protocol):
    """The calls of EC2's client for a site whose operation keeps instances (``stop``)."""

    def start_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def stop_instances(self, **kwargs: Any) -> dict[str, Any]: ...


SetAddress = Callable[[str, str], None]  # (node, private address)


class Ec2Control:
    """The power of ``site``'s nodes (``nodes``, their Slurm names) of ``cluster``.
    ``user_data(node)``: where that node fetches what it joins with; ``on_address(node, ip)``:
    called with each instance's private address once the node has one (the Slurm node's
    ``NodeAddr``)."""

    joins_by_user_data = True

    def __init__(
        self,
        provider: Ec2Provider,
        cluster: str,
        site: str,
        nodes: Sequence[str],
        user_data: Callable[[str], JoinSpec],
        *,
        on_address: SetAddress | None = None,
        on_event: OnEvent | None = None,
    ) -> None:
        provider.site(site)  # an unknown site is refused here, naming the known ones
        if not nodes:
            raise InputError(f"ec2 site {site}: no node")
        self.provider = provider
        self.cluster = cluster
        self.site = site
        self.site_nodes = tuple(nodes)
        self.user_data = user_data
        self.on_address = on_address
        self.on_event = on_event
        self.report = Reporter("ec2-control", on_event)

    @property
    def operations(self) -> tuple[str, ...]:
        return OPERATIONS

    def check(self) -> str:
        """The site answers with the credential in use; in words. NodeControlError otherwise."""
        found = self._describe()
        live = sum(1 for i in found if not i.state.gone)
        where = self.provider.settings.endpoint_url or f"region {self.provider.settings.region}"
        return (
            f"ec2 site {self.site} ({where}): credential accepted, {live} live instance(s) of "
            f"cluster {self.cluster}"
        )

    # -- the provisioner's calls -------------------------------------------------------------

    def nodes(self) -> dict[str, str]:
        """Each of the site's nodes: ``running`` (booting too), ``stopped`` or ``parked`` (no
        live instance)."""
        live = self._live(self._describe())
        return {n: _STATE[live[n].state] if n in live else PARKED for n in self.site_nodes}

    def hosts(self) -> dict[str, Any]:
        """No host keys: nothing reaches an instance over SSH, it joins by its user data."""
        return {}

    def allocate(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        """Each node has a running instance after: its live one, started if stopped, else a
        new one. The instances' ids by node."""
        return self._bring_up(nodes, request_id)

    def power_on(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._bring_up(nodes, request_id)

    def release(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        """Terminate the nodes' instances (a node without one is left as it is)."""
        live = self._live(self._describe(), nodes)
        targets = [live[n].instance_id for n in nodes if n in live]
        if targets:
            try:
                self.provider.terminate(self.cluster, targets, self.on_event)
            except Ec2Error as err:
                raise _failure(err, None) from err
        return {"ended": sorted(n for n in nodes if n in live)}

    def power_off(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        """Stop the nodes' running instances (their disks kept for the next start)."""
        live = self._live(self._describe(), nodes)
        targets = [live[n].instance_id for n in nodes if n in live and _running(live[n])]
        if targets:
            self._start_stop("stop", targets)
        return {"stopped": sorted(n for n in nodes if n in live)}

    def reload(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        raise NodeControlError(
            f"ec2 site {self.site}: no reload (a node gets a fresh disk from a new instance)",
            status=_STATUS_FAILED,
        )

    # -- inside ----------------------------------------------------------------------------

    def _bring_up(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        if stray := [n for n in nodes if n not in self.site_nodes]:
            raise NodeControlError(
                f"ec2 site {self.site}: {stray[0]} is not one of its nodes",
                status=_STATUS_FAILED,
                node=stray[0],
            )
        live = self._live(self._describe(), nodes)
        stopped = [live[n] for n in nodes if n in live and not _running(live[n])]
        if stopped:
            self._start_stop("start", [i.instance_id for i in stopped])
        missing = [n for n in nodes if n not in live]
        if reused := [n for n in nodes if n in live]:
            self.report.status(
                f"ec2 site {self.site}: {', '.join(reused)} have their instances already",
                nodes=reused,
            )
        for node in missing:  # one at a time: a capacity error leaves whole nodes behind
            try:
                (made,) = self.provider.launch(
                    self.cluster,
                    self.site,
                    1,
                    self.user_data(node),
                    self.on_event,
                    names=[node],
                )
            except Ec2Error as err:
                raise _failure(err, node) from err
            except InputError as err:  # a live instance appeared since the describe
                raise NodeControlError(
                    f"ec2 site {self.site}: {err}", status=_STATUS_FAILED, node=node
                ) from err
            live[node] = made
        if any(live[n].private_address is None for n in nodes):
            live |= self._live(self._describe(), nodes)
        for node in nodes:
            self._set_address(node, live[node])
        return {"instances": {n: live[n].instance_id for n in nodes}}

    def _set_address(self, node: str, instance: Instance) -> None:
        if instance.private_address is None:
            raise NodeControlError(
                f"ec2 site {self.site}: instance {instance.instance_id} of {node} has no "
                "private address",
                status=_STATUS_FAILED,
                node=node,
            )
        if self.on_address is None:
            return
        try:
            self.on_address(node, instance.private_address)
        except PtcError as err:
            raise NodeControlError(
                f"ec2 site {self.site}: {node}: setting its address "
                f"{instance.private_address}: {err}",
                status=_STATUS_FAILED,
                node=node,
            ) from err

    def _describe(self) -> tuple[Instance, ...]:
        try:
            return self.provider.describe(self.cluster, self.site)
        except Ec2Error as err:
            raise _failure(err, None) from err

    def _live(
        self, found: Sequence[Instance], nodes: Sequence[str] | None = None
    ) -> dict[str, Instance]:
        """Each node's live instance (not ending): a running one before a stopped one."""
        wanted = set(self.site_nodes if nodes is None else nodes)
        live: dict[str, Instance] = {}
        for instance in found:
            if instance.state.gone or instance.node not in wanted:
                continue
            if instance.node not in live or _running(instance):
                live[instance.node] = instance
        return live

    def _start_stop(self, verb: str, instance_ids: list[str]) -> None:
        client = cast(_StartStop, self.provider.ec2)
        call = client.start_instances if verb == "start" else client.stop_instances
        try:
            call(InstanceIds=instance_ids)
        except (BotoCoreError, ClientError) as err:
            raise _failure(translate(err, site=self.site, operation=verb), None) from err
        self.report.status(f"ec2 site {self.site}: {verb} {', '.join(instance_ids)}")


def _running(instance: Instance) -> bool:
    return instance.state in (InstanceState.PENDING, InstanceState.RUNNING)


def _failure(err: Ec2Error, node: str | None) -> NodeControlError:
    """The provisioner's error for EC2's: no room and a refused credential are the site's
    (NoCapacity: the site is paused, the node goes back powered down); the rest the node's."""
    if isinstance(err, CapacityError):
        return NoCapacity(
            f"no capacity: {err}",
            status=_STATUS_CAPACITY,
            step=err.operation,
        )
    if err.code in CREDENTIAL_CODES:
        return NoCapacity(
            f"the controller's AWS credential is refused or missing: {err} (mend it and "
            "deploy again with elastic_ec2_credentials_src)",
            status=_STATUS_CREDENTIALS,
            step=err.operation,
        )
    return NodeControlError(str(err), status=_STATUS_FAILED, node=node, step=err.operation)
