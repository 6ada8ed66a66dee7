"""FAKE, for tests only: a bridge that makes the instances of moto's EC2 (a local fake of AWS)
real nodes of the local testbed.

moto records instances but boots nothing. For each instance of a cluster that moto shows
running, the bridge does what EC2 and cloud-init would do on AWS: it starts the machine of the
local-testbed node the instance's ``ptc:node`` tag names (the node's kept disk stands in for the
image), puts the files the join names on it (standing in for a root-only volume the image
mounts), and runs the instance's own user data on it as root, read back from moto. For an
instance moto shows ending or ended, it stops the node's machine.

The node's disk outlives the instance here, unlike an instance's root volume; so when an
instance ends, the bridge takes back what its user data left behind for the next boot (slurmd
enabled, and the staged files), and the node is as its pool had it.

While an instance runs, the bridge holds the experiment's power (no power off), so that the
elastic partition's loop, which stops the machines of free pool nodes, leaves it to the bridge.
A hold covers the whole experiment: an ended instance's machine stops once no other instance
of the bridge runs (its slurmd is stopped at once).
"""

from __future__ import annotations

import base64
import contextlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from elastic.remote import ssh as seam
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.records import InstanceState
from elastic.testbed import nodeops, power_hold
from elastic.testbed.experiment import Experiment

TIMEOUT_S = 300


@dataclass
class FakeEc2Bridge:
    """``cluster``: the ``ptc:cluster`` tag of the instances to realise; ``files``: each file the
    join names (an absolute path on the node) and its contents, staged root-only before the
    user data runs."""

    provider: Ec2Provider
    cluster: str
    experiment: Experiment
    files: Mapping[str, bytes]
    realised: dict[str, str] = field(default_factory=dict)  # node -> instance id
    to_stop: list[str] = field(default_factory=list)  # ended, machine still running
    _holds: dict[str, contextlib.ExitStack] = field(default_factory=dict)

    def sync(self) -> list[str]:
        """Realise what moto shows now; what changed, as ``"realised NODE"``/``"ended NODE"``."""
        changed: list[str] = []
        for instance in self.provider.describe(self.cluster):
            node, known = instance.node, self.realised.get(instance.node)
            if instance.state is InstanceState.RUNNING and known != instance.instance_id:
                self._boot(node, instance.instance_id)
                changed.append(f"realised {node}")
            elif instance.state.gone and known == instance.instance_id:
                self._end(node)
                changed.append(f"ended {node}")
        self._stop_ended()
        return changed

    def close(self) -> None:
        """Let go of every hold; the machines of instances ended since are stopped, the others
        are left as they are. Call it after the last ``sync``."""
        for stack in self._holds.values():
            stack.close()
        self._holds.clear()
        self._stop_ended()

    def _stop_ended(self) -> None:
        """Stop the machines of ended instances once no instance of the bridge holds power."""
        if self.to_stop and not self._holds:
            nodeops.power_off(self.experiment, self.to_stop)
            self.to_stop.clear()

    def _boot(self, node: str, instance_id: str) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(power_hold.hold(self.experiment, f"fake EC2 instance {instance_id}"))
        self._holds[node] = stack
        nodeops.power_on(self.experiment, [node])
        for path, data in self.files.items():
            where = PurePosixPath(path)
            self._run(
                node,
                f"install -d -m 0700 {shlex.quote(str(where.parent))} && umask 077 && "
                f"cat > {shlex.quote(path)}",
                stdin=data,
            )
        answer = self.provider.ec2.describe_instance_attribute(  # type: ignore[attr-defined]
            InstanceId=instance_id, Attribute="userData"
        )
        script = base64.b64decode(answer["UserData"]["Value"])
        self._run(node, "bash -s", stdin=script)
        self.realised[node] = instance_id

    def _end(self, node: str) -> None:
        staged = " ".join(shlex.quote(p) for p in self.files)
        self._run(node, f"systemctl disable --now slurmd && rm -f {staged}")
        self.realised.pop(node)
        hold = self._holds.pop(node, None)
        if hold is not None:
            hold.close()
        self.to_stop.append(node)

    def _run(self, node: str, command: str, stdin: bytes | None = None) -> None:
        done = seam.execute(
            self.experiment.dir / "inventory" / "ssh_config",
            node,
            command,
            timeout=TIMEOUT_S,
            stdin=stdin,
            label=f"fake EC2 bridge: {command.split()[0]} on {node}",
        )
        seam.check(done, label=f"fake EC2 bridge on {node}")
