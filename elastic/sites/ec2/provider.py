"""Instances of a Slurm cluster on EC2 sites: launch, describe, terminate, by ptc's tags.

Each ``launch`` makes one instance per node, each with its own name (tag ``ptc:node`` and
hostname) and user data, so a node is known by name from its first second and a capacity
failure part-way leaves whole nodes behind (returned on the error) rather than nameless ones.
Every failing call becomes an :class:`Ec2Error` naming the site and the operation, and a
:class:`CapacityError` when the site has no room, so a caller can go on to another site.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from elastic.errors import InputError, NotFoundError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2 import records
from elastic.sites.ec2.clients import AutoScalingClient, Ec2Client, make_clients
from elastic.sites.ec2.errors import translate
from elastic.sites.ec2.records import Instance
from elastic.sites.ec2.settings import Ec2Settings, SiteSettings, check_name
from elastic.sites.ec2.userdata import JoinSpec

TERMINATE_BATCH = 1000  # TerminateInstances takes at most this many ids per call
MAX_LAUNCH = 1000  # a guard against a runaway request, far above any one pool's step
NODE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")  # one DNS label


class Ec2Provider:
    """The EC2 sites of one region. ``ec2``/``autoscaling``: clients to use instead of making
    boto3's from the settings (a test's fault-injecting wrapper)."""

    def __init__(
        self,
        settings: Ec2Settings,
        *,
        ec2: Ec2Client | None = None,
        autoscaling: AutoScalingClient | None = None,
    ) -> None:
        self.settings = settings
        if ec2 is None or autoscaling is None:
            made_ec2, made_autoscaling = make_clients(settings)
            ec2 = ec2 or made_ec2
            autoscaling = autoscaling or made_autoscaling
        self.ec2: Ec2Client = ec2
        self.autoscaling: AutoScalingClient = autoscaling

    def site(self, name: str) -> SiteSettings:
        """The site called ``name``; InputError naming the known ones otherwise."""
        return self.settings.site(name)

    def launch(
        self,
        cluster: str,
        site: str,
        count: int,
        user_data: JoinSpec,
        on_event: OnEvent | None = None,
        *,
        names: Sequence[str] | None = None,
    ) -> tuple[Instance, ...]:
        """``count`` new nodes of ``cluster`` at ``site``, booting (``pending``) or running.

        ``names``: the nodes' names, one per node, for nodes the cluster's ``slurm.conf``
        already lists (Slurm's power-save ``CLOUD`` nodes, which a ResumeProgram launches by
        name); without them each node gets a fresh name. A name that one of the cluster's live
        instances carries already is refused, naming it, before anything is launched.

        Raises CapacityError when the site has no room; ``launched`` on the error holds the
        nodes made before it (they are the caller's to keep or terminate)."""
        check_name(cluster, "cluster")
        spec = self.site(site)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(f"count: {count!r} is not a whole number of nodes >= 1")
        if count > MAX_LAUNCH:
            raise InputError(f"count: {count} is more than {MAX_LAUNCH} nodes at once")
        chosen = self._names(cluster, site, count, names)
        report = Reporter("ec2-launch", on_event)
        report.begin(f"{cluster}: {count} node(s) at {site}", total=count, site=site)
        made: list[Instance] = []
        for name in chosen:
            request = self._run_request(cluster, spec, name, user_data)
            try:
                answer = self.ec2.run_instances(**request)
            except (BotoCoreError, ClientError) as e:
                error = translate(e, site=site, operation="launch", launched=made)
                report.end(f"{cluster}: {error.code} at {site}", site=site, launched=len(made))
                raise error from e
            # The tags asked for are the instance's from its start, whether or not this answer
            # repeats them.
            raw = {"Tags": request["TagSpecifications"][0]["Tags"]} | answer["Instances"][0]
            instance = records.from_description(raw)
            assert instance is not None  # it carries the cluster and site tags
            made.append(instance)
            report.progress(len(made), count, instance.node, instance_id=instance.instance_id)
        report.end(f"{cluster}: {count} node(s) at {site}", site=site, launched=len(made))
        return tuple(made)

    def describe(self, cluster: str, site: str | None = None) -> tuple[Instance, ...]:
        """The instances tagged for ``cluster`` (at ``site`` only, if given), in every state
        EC2 still shows (terminated ones linger for about an hour), ordered by site and node."""
        check_name(cluster, "cluster")
        filters = [{"Name": f"tag:{records.CLUSTER_TAG}", "Values": [cluster]}]
        if site is not None:
            self.site(site)
            filters.append({"Name": f"tag:{records.SITE_TAG}", "Values": [site]})
        try:
            found = [
                instance
                for raw in self._pages(filters)
                if (instance := records.from_description(raw)) is not None
            ]
        except (BotoCoreError, ClientError) as e:
            raise translate(e, site=site or "*", operation="describe") from e
        return tuple(sorted(found, key=lambda i: (i.site, i.node, i.instance_id)))

    def terminate(
        self, cluster: str, targets: Sequence[str], on_event: OnEvent | None = None
    ) -> tuple[Instance, ...]:
        """End the instances named in ``targets`` (node names or instance ids) of ``cluster``.
        Every target must be one of the cluster's instances (NotFoundError naming the others,
        before anything ends); ones already ending are left alone. Returns those it ended."""
        check_name(cluster, "cluster")
        if not targets:
            raise InputError(f"terminate: name the nodes or instances of {cluster!r}")
        known = self.describe(cluster)
        by_key = {i.instance_id: i for i in known} | {i.node: i for i in known}
        if unknown := [t for t in dict.fromkeys(targets) if t not in by_key]:
            raise NotFoundError(
                f"terminate: cluster {cluster!r} has no node or instance "
                f"{', '.join(map(repr, unknown))}"
            )
        chosen = list({by_key[t].instance_id: by_key[t] for t in targets}.values())
        ending = [i for i in chosen if not i.state.gone]
        report = Reporter("ec2-terminate", on_event)
        report.begin(f"{cluster}: {len(ending)} instance(s)", total=len(ending))
        for start in range(0, len(ending), TERMINATE_BATCH):
            batch = ending[start : start + TERMINATE_BATCH]
            try:
                self.ec2.terminate_instances(InstanceIds=[i.instance_id for i in batch])
            except (BotoCoreError, ClientError) as e:
                sites = ",".join(sorted({i.site for i in batch}))
                raise translate(e, site=sites, operation="terminate") from e
            report.progress(start + len(batch), len(ending))
        report.end(f"{cluster}: {len(ending)} instance(s)", ended=[i.node for i in ending])
        return tuple(ending)

    def _names(self, cluster: str, site: str, count: int, names: Sequence[str] | None) -> list[str]:
        if names is None:
            return [records.new_node_name(cluster, site) for _ in range(count)]
        given = list(names)
        if len(given) != count:
            raise InputError(f"names: {len(given)} name(s) for count {count}")
        for i, name in enumerate(given):
            if not isinstance(name, str) or not NODE_NAME.match(name):
                raise InputError(
                    f"names[{i}]: {name!r} is not a hostname of letters, digits and dashes"
                )
        if twice := sorted({n for n in given if given.count(n) > 1}):
            raise InputError(f"names: {', '.join(twice)} given more than once")
        alive = {i.node for i in self.describe(cluster) if not i.state.gone}
        if taken := [n for n in given if n in alive]:
            raise InputError(
                f"names: cluster {cluster!r} has a live instance for {', '.join(taken)} already"
            )
        return given

    def _run_request(
        self, cluster: str, spec: SiteSettings, node: str, user_data: JoinSpec
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "ImageId": spec.image_id,
            "InstanceType": spec.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": user_data.render(cluster, spec.name, node),
            # A retried call with the same token makes no second instance (on AWS). The token
            # is this launch's own: a node name comes back when Slurm resumes the node again,
            # and AWS would answer a reused token with the first, long-terminated instance.
            "ClientToken": f"{node}-{secrets.token_hex(6)}"[-64:],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": records.instance_tags(cluster, spec.name, node)}
                for kind in ("instance", "volume")
            ],
            # IMDSv2 only: the metadata (and the user data) need a session token, which a
            # forwarded request from a compromised web service on the node cannot get.
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        }
        if spec.subnet_id:
            request["SubnetId"] = spec.subnet_id
        if spec.security_group_ids:
            request["SecurityGroupIds"] = list(spec.security_group_ids)
        if spec.key_name:
            request["KeyName"] = spec.key_name
        if spec.spot:
            request["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                },
            }
        return request

    def _pages(self, filters: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Every instance of DescribeInstances, page by page (by hand rather than boto3's
        paginator, so a wrapping client needs only the one call)."""
        request: dict[str, Any] = {"Filters": filters}
        while True:
            answer = self.ec2.describe_instances(**request)
            for reservation in answer.get("Reservations", ()):
                yield from reservation.get("Instances", ())
            token = answer.get("NextToken")
            if not token:
                return
            request["NextToken"] = token
