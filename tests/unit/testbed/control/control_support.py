"""What the control service's tests share: experiments with manifests, and a fake of
``elastic.testbed.nodeops`` (the real one drives podman) that records every call."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from elastic import atomic
from elastic.errors import TestbedError
from elastic.events import OnEvent, Reporter
from elastic.profile import rspec
from elastic.profile.topology import Interface, Login, Node, Topology
from elastic.testbed import experiment as experiments
from elastic.testbed import known_hosts
from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.control import credential, service
from elastic.testbed.backends.local.control.app import Settings
from elastic.testbed.backends.local.control.journal import Journal
from elastic.testbed.backends.local.control.names import Resolver, home_nodes
from elastic.testbed.experiment import Experiment, State

DOMAIN = "ptc.local"


def make_experiment(name: str, nodes: Sequence[str] = ("head", "node-0", "node-1")) -> Experiment:
    exp = Experiment(name=name, testbed="local", profile="p", state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    manifest = Topology(
        nodes=[
            Node(
                client_id=n,
                component_id=f"urn:publicid:IDN+{DOMAIN}+node+{name}-{n}",
                sliver_id=f"urn:publicid:IDN+{DOMAIN}+sliver+{name}-{n}",
                interfaces=[Interface(f"{n}:if0", n, f"10.10.1.{i + 1}", "255.255.255.0")],
            )
            for i, n in enumerate(nodes)
        ],
        links=[],
    )
    atomic.write_bytes(exp.manifest_path, rspec.write_manifest(manifest))
    service.prepare(exp)
    return exp


class FakeNodeOps:
    """A fake of elastic.testbed.nodeops: node states in a dict, every call recorded. With
    ``gate`` set, an operation on a node of ``hold`` waits for it (to hold the node busy);
    ``fail`` makes the named node's operation fail at step ``start``."""

    def __init__(self, nodes: Sequence[str] = ("head", "node-0", "node-1")) -> None:
        self.state = dict.fromkeys(nodes, "running")
        self.calls: list[tuple[str, list[str]]] = []
        self.gate: threading.Event | None = None
        self.hold = set(nodes)  # the nodes whose operations wait for the gate
        self.entered = threading.Event()
        self.fail: str | None = None
        self.full = False  # the testbed has no free machine: allocations are refused
        self.kept: dict[str, Node] = {}  # released nodes, as the manifest had them

    def _do(self, action: str, nodes: Sequence[str], on_event: OnEvent | None, to: str) -> None:
        self.calls.append((action, list(nodes)))
        self.entered.set()
        if self.gate is not None and not self.hold.isdisjoint(nodes):
            assert self.gate.wait(30), "the test never opened the gate"
        report = Reporter("nodeops", on_event)
        for node in nodes:
            report.status(f"{node}: {action}", node=node, step="podman")
            if node == self.fail:
                err = TestbedError(f"node {node}: step start: the container did not start")
                err.node, err.step = node, "start"  # type: ignore[attr-defined]
                raise err
            self.state[node] = to

    def power_on(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("power_on", nodes, on_event, "running")

    def power_off(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("power_off", nodes, on_event, "exited")

    def reload(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("reload", nodes, on_event, "running")

    def release(
        self,
        exp: Experiment,
        nodes: Sequence[str],
        on_event: OnEvent | None = None,
        *,
        park: bool = False,
    ) -> None:
        self._do("release(park)" if park else "release", nodes, on_event, "parked")
        # as the testbed does: out of the manifest, recorded as released (and parked)
        loaded = experiments.load(exp.name)
        manifest = rspec.parse_manifest(loaded.manifest())
        self.kept |= {n.client_id: n for n in manifest.nodes if n.client_id in nodes}
        kept = [n for n in manifest.nodes if n.client_id not in nodes]
        atomic.write_bytes(
            loaded.manifest_path, rspec.write_manifest(replace(manifest, nodes=kept))
        )
        loaded.released = [*loaded.released, *nodes]
        if park:
            loaded.parked = [*loaded.parked, *nodes]
        loaded.save()

    def allocate(
        self,
        exp: Experiment,
        nodes: Sequence[str],
        like: str | None = None,
        on_event: OnEvent | None = None,
    ) -> None:
        if self.full:
            usage = capacity.Usage(machines=len(self.state), from_file=False, holdings=[])
            raise capacity.NoMachines(exp.name, len(nodes), usage)
        self._do("allocate", nodes, on_event, "running")
        # back in the manifest on a fresh disk: a new SSH port and new pinned host keys
        loaded = experiments.load(exp.name)
        manifest = rspec.parse_manifest(loaded.manifest())
        back = []
        for i, name in enumerate(nodes):
            port = 2300 + len(self.calls) * 10 + i
            back.append(replace(self.kept.pop(name), login=Login("127.0.0.1", port, "root")))
            known_hosts.pin(
                loaded.inventory_dir / "known_hosts", "127.0.0.1", port, [f"ssh-ed25519 NEW{name}"]
            )
        manifest = replace(manifest, nodes=[*manifest.nodes, *back])
        atomic.write_bytes(loaded.manifest_path, rspec.write_manifest(manifest))
        loaded.released = [n for n in loaded.released if n not in nodes]
        loaded.parked = [n for n in loaded.parked if n not in nodes]
        loaded.save()

    def states(self, exp: Experiment) -> dict[str, str]:
        return dict(self.state)


def settings_for(exp: Experiment, ops: FakeNodeOps) -> Settings:
    # other experiments are found in this PTC_HOME only: unit tests start no containers
    places = service.Places.of(exp)
    digest = credential.digest(credential.read(places.credential))
    return Settings(exp.name, digest, Journal(places.journal), ops, Resolver(home_nodes))


def secret(exp: Experiment) -> str:
    return credential.read(service.Places.of(exp).credential)
