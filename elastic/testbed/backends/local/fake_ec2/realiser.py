"""The realiser: what moto shows of the region's instances, made real on the local testbed.

``decide`` is pure: from the instances as described and the machines held, the actions to take
now. ``Realiser`` takes them, once a tick, against the region (``region.Region``) and the
testbed (``machines``).

- An instance pending or running without a machine gets one (``Create``), named by its
  ``ptc:node`` tag, at its private address. One that cannot be realised (no or a bad
  ``ptc:node``, a name the experiment or another instance holds, outside the region's subnet)
  is ended with EC2's reason for a failed launch (``Refuse``).
- Once its machine is up and the boot delay since its launch has passed, its metadata service
  answers, it is ``running`` and its user data runs (``Boot``), as cloud-init's final stage
  would.
- An instance stopping, stopped, shutting down or terminated, or gone, loses its machine
  (``Remove``): its disk goes with it, as an instance's root volume does.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from elastic.errors import TestbedError
from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.fake_ec2 import machines
from elastic.testbed.backends.local.fake_ec2.faults import Faults, Interrupt
from elastic.testbed.backends.local.fake_ec2.plan import Plan
from elastic.testbed.experiment import Experiment

log = logging.getLogger("ptc.fake-ec2")

LIVE = ("pending", "running")
NODE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
# EC2's own state reasons.
LAUNCH_FAILED = ("Server.InternalError", "Server.InternalError: Internal error on launch")
NO_CAPACITY = ("Server.InsufficientInstanceCapacity", "Server.InsufficientInstanceCapacity: "
               "Insufficient capacity to satisfy instance request")  # fmt: skip
SPOT_ENDED = ("Server.SpotInstanceTermination",
              "Server.SpotInstanceTermination: Spot instance termination")  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One instance as the region describes it."""

    instance_id: str
    state: str
    node: str | None  # its ptc:node tag
    address: str | None
    subnet_id: str | None
    launched: float  # the epoch


@dataclass
class Held:
    """A machine the realiser holds for an instance."""

    instance_id: str
    node: str
    address: str
    launched: float
    booted: bool = False  # running, its user data started
    noticed: bool = False  # an interruption notice is on the machine


@dataclass(frozen=True)
class Create:
    instance: Seen


@dataclass(frozen=True)
class Boot:
    instance_id: str


@dataclass(frozen=True)
class Remove:
    instance_id: str
    node: str


@dataclass(frozen=True)
class Refuse:
    instance_id: str
    why: str


Action = Create | Boot | Remove | Refuse


def decide(
    seen: Iterable[Seen],
    held: dict[str, Held],
    *,
    subnet_id: str,
    reserved: Iterable[str],
    now: float,
    boot_delay: float,
) -> list[Action]:
    """The actions that bring the machines in line with the instances. ``held``: by instance
    id; ``reserved``: the experiment's node names, which no instance may take."""
    instances = sorted(seen, key=lambda s: (s.launched, s.instance_id))
    live = {s.instance_id: s for s in instances if s.state in LIVE}
    actions: list[Action] = [
        Remove(h.instance_id, h.node) for h in held.values() if h.instance_id not in live
    ]
    taken = set(reserved)
    names = {h.node: h.instance_id for h in held.values() if h.instance_id in live}
    for s in live.values():
        if s.instance_id in held:
            continue
        why = _unrealisable(s, subnet_id, taken, names)
        if why:
            actions.append(Refuse(s.instance_id, why))
            continue
        assert s.node is not None
        names[s.node] = s.instance_id
        actions.append(Create(s))
    for h in held.values():
        if h.instance_id in live and not h.booted and now >= h.launched + boot_delay:
            actions.append(Boot(h.instance_id))
    return actions


def _unrealisable(s: Seen, subnet_id: str, taken: set[str], names: dict[str, str]) -> str | None:
    if not s.node:
        return "it has no ptc:node tag (the Slurm node it is)"
    if not NODE_NAME.match(s.node):
        return f"its ptc:node {s.node!r} is no node name (lowercase letters, digits, dashes)"
    if s.node in taken:
        return f"its ptc:node {s.node!r} is a node of the experiment"
    if s.node in names:
        return f"its ptc:node {s.node!r} is instance {names[s.node]}'s"
    if s.subnet_id != subnet_id or not s.address:
        return f"it is not in the region's subnet {subnet_id} (it is in {s.subnet_id or 'none'})"
    return None


class Instances(Protocol):
    """What the realiser needs of the region."""

    def seen(self) -> list[Seen]: ...
    def user_data(self, instance_id: str) -> bytes: ...
    def set_running(self, instance_id: str) -> bool: ...
    def end(self, instance_id: str, reason: tuple[str, str], by_service: bool) -> None: ...


@dataclass
class Realiser:
    exp: Experiment
    region: Instances
    plan: Plan
    subnet_id: str
    image_ref: str
    faults: Faults
    boot_delay: float
    reserved: Sequence[str]
    held: dict[str, Held] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        seen = self.region.seen()
        for action in decide(seen, self.held, subnet_id=self.subnet_id, reserved=self.reserved,
                             now=now, boot_delay=self.boot_delay):  # fmt: skip
            try:
                self._do(action)
            except Exception as err:  # one instance's failure ends that instance only
                log.error("%s: %s", action, err)
                self._fail(
                    action.instance.instance_id if isinstance(action, Create)
                    else action.instance_id,
                    err,
                )  # fmt: skip
        self._interrupts(time.time())

    def _do(self, action: Action) -> None:
        if isinstance(action, Refuse):
            log.warning("instance %s not realised: %s", action.instance_id, action.why)
            self.region.end(action.instance_id, LAUNCH_FAILED, True)
        elif isinstance(action, Create):
            self._create(action.instance)
        elif isinstance(action, Boot):
            self._boot(self.held[action.instance_id])
        else:
            log.info("instance %s ended: removing %s", action.instance_id, action.node)
            machines.remove(self.exp, action.node)
            self.held.pop(action.instance_id, None)

    def _create(self, s: Seen) -> None:
        assert s.node is not None and s.address is not None
        started = time.monotonic()
        spec = machines.Spec(s.node, s.instance_id, s.address, self.plan.prefixlen,
                             self.plan.lan_index)  # fmt: skip
        try:
            machines.create(self.exp, spec, self.image_ref)
        except capacity.NoMachines as err:
            log.warning("instance %s: the testbed has no free machine: %s", s.instance_id, err)
            self.region.end(s.instance_id, NO_CAPACITY, True)
            return
        self.held[s.instance_id] = Held(s.instance_id, s.node, s.address, s.launched)
        self.timings[s.instance_id] = {"machine_s": time.monotonic() - started}
        log.info("instance %s: machine %s up at %s in %.1f s", s.instance_id, s.node, s.address,
                 time.monotonic() - started)  # fmt: skip

    def _boot(self, h: Held) -> None:
        started = time.monotonic()
        machines.wait_booted(self.exp, h.node)
        machines.write_metadata(self.exp, h.node, {
            "instance-id": h.instance_id, "local-ipv4": h.address, "hostname": h.node,
        })  # fmt: skip
        # Before the user data, which asks it for the instance's id as on EC2.
        machines.start_imds(self.exp, h.node)
        if not self.region.set_running(h.instance_id):
            return  # ended meanwhile: the next tick removes it
        script = self.region.user_data(h.instance_id)
        ran = machines.run_user_data(self.exp, h.node, script) if script else False
        h.booted = True
        self.timings.setdefault(h.instance_id, {})["boot_s"] = time.monotonic() - started
        log.info("instance %s: running; user data %s", h.instance_id,
                 "started" if ran else "none run")  # fmt: skip

    def _fail(self, instance_id: str, err: Exception) -> None:
        try:
            self.region.end(instance_id, LAUNCH_FAILED, True)
        except Exception as again:  # the region may have lost it too: nothing more to end
            log.error("instance %s: ending it failed too: %s", instance_id, again)
        h = self.held.pop(instance_id, None)
        if h is not None:
            try:
                machines.remove(self.exp, h.node)
            except TestbedError as gone:
                log.error("instance %s: removing %s failed: %s", instance_id, h.node, gone)

    def _interrupts(self, now: float) -> None:
        for asked in self.faults.read().interrupts:
            h = next((h for h in self.held.values() if h.node == asked.node), None)
            if h is None:
                log.warning("interrupt: no instance of the region is node %s", asked.node)
                self.faults.done(asked.node)
                continue
            if not h.noticed and asked.notice_s > 0:
                self._notice(h, asked)
            if now >= asked.due:
                log.info("instance %s (%s): spot interruption", h.instance_id, h.node)
                self.region.end(h.instance_id, SPOT_ENDED, True)
                self.faults.done(asked.node)

    def _notice(self, h: Held, asked: Interrupt) -> None:
        """What EC2's metadata service shows an instance two minutes before it reclaims it."""
        when = datetime.fromtimestamp(asked.due, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        machines.write_metadata(self.exp, h.node, {
            "spot/instance-action": f'{{"action": "terminate", "time": "{when}"}}',
            "spot/termination-time": when,
        })  # fmt: skip
        h.noticed = True

    def remove_all(self) -> None:
        for node in machines.held(self.exp):
            machines.remove(self.exp, node)
        self.held.clear()

    def describe(self) -> list[dict[str, object]]:
        return [
            {"node": h.node, "instance_id": h.instance_id, "address": h.address,
             "phase": "running" if h.booted else "booting",
             **self.timings.get(h.instance_id, {})}
            for h in sorted(self.held.values(), key=lambda h: h.node)
        ]  # fmt: skip
