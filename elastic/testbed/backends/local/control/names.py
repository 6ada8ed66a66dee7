"""Which node a name in a request means: one of this experiment's, another's, or none.

A request may name a node by its client_id or by any name the testbed gives it: the
testbed-wide ``EXP-NODE`` (the last part of its component URN), its component or sliver URN,
or, on the local testbed, its container ``ptc-EXP-NODE``. Client ids repeat across experiments
(every cluster has a ``head``), so only the testbed-wide names can point at another
experiment's node, and those are refused as such."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from elastic.errors import NotFoundError, PtcError, TestbedError
from elastic.profile import rspec
from elastic.profile.topology import Node
from elastic.testbed import backends
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import DOMAIN as LOCAL_DOMAIN
from elastic.testbed.backends.local import podman
from elastic.testbed.experiment import Experiment


class UnknownNode(NotFoundError):
    def __init__(self, name: str, experiment: str, known: Sequence[str]) -> None:
        super().__init__(
            f"node {name!r} is unknown to the testbed; experiment {experiment!r} has "
            f"{', '.join(known) or 'no nodes'}"
        )
        self.node = name


class NotParked(PtcError):
    """An allocate names a node the experiment did not park: one it holds (409), or one
    released another way, by its user or lent to another experiment (403)."""

    def __init__(self, name: str, experiment: str, status: int, why: str) -> None:
        super().__init__(f"node {name!r} of {experiment!r} {why}; only parked nodes come back")
        self.node = name
        self.status = status


class ForeignNode(PtcError):
    def __init__(self, name: str, experiment: str) -> None:
        super().__init__(
            f"node {name!r} belongs to another experiment; this credential acts only on the "
            f"nodes of {experiment!r}"
        )
        self.node = name


def testbed_names(experiment: str, testbed: str, node: Node) -> set[str]:
    """Every name but the client_id under which the testbed knows ``node``."""
    names = {f"{experiment}-{node.client_id}"}
    for urn in (node.component_id, node.sliver_id):
        if urn:
            names |= {urn, urn.rsplit("+", 1)[-1]}
    if backends.capabilities(testbed).host_machines:
        names.add(podman.container_name(experiment, node.client_id))
    return names


def _local_names(experiment: str, node: str) -> set[str]:
    short = f"{experiment}-{node}"
    return {
        short,
        f"ptc-{short}",
        f"urn:publicid:IDN+{LOCAL_DOMAIN}+node+{short}",
        f"urn:publicid:IDN+{LOCAL_DOMAIN}+sliver+{short}",
    }


def other_nodes(own: str) -> dict[str, str]:
    """Testbed-wide node name -> experiment, for every experiment but ``own``: those of this
    PTC_HOME from their manifests, and every node container on the machine from its labels."""
    return home_nodes(own) | container_nodes(own)


def home_nodes(own: str) -> dict[str, str]:
    """Testbed-wide node name -> experiment, from the manifests of this PTC_HOME but ``own``."""
    found: dict[str, str] = {}
    for name in experiments.known():
        if name == own:
            continue
        try:
            exp = experiments.load(name)
            nodes = rspec.parse_manifest(exp.manifest()).nodes
        except PtcError:
            continue  # an experiment still being made has no manifest yet
        for node in nodes:
            found |= dict.fromkeys(testbed_names(name, exp.testbed, node), name)
    return found


def container_nodes(own: str) -> dict[str, str]:
    """Testbed-wide node name -> experiment, from the labels of every node container on this
    machine but ``own``'s (experiments of other PTC_HOMEs included)."""
    found: dict[str, str] = {}
    try:
        proc = podman.run(
            "ps", "-a", "--filter", f"label={podman.NODE_LABEL}", "--format", "json", check=False
        )
        containers = json.loads(proc.stdout or "[]") if proc.returncode == 0 else []
    except (TestbedError, ValueError):
        containers = []
    for info in containers:
        labels = info.get("Labels") or {}
        owner, client_id = labels.get(podman.EXPERIMENT_LABEL), labels.get(podman.NODE_LABEL)
        if isinstance(owner, str) and isinstance(client_id, str) and owner != own:
            found |= dict.fromkeys(_local_names(owner, client_id), owner)
    return found


class Resolver:
    """Maps the names of a request to this experiment's client_ids, or refuses the first name
    that is another experiment's (``ForeignNode``) or nobody's (``UnknownNode``)."""

    def __init__(self, others: Callable[[str], dict[str, str]] = other_nodes) -> None:
        self._others = others

    def resolve(self, exp: Experiment, names: Iterable[str]) -> list[str]:
        manifest = rspec.parse_manifest(exp.manifest())
        ours: dict[str, str] = {}
        for node in manifest.nodes:
            ours |= dict.fromkeys(testbed_names(exp.name, exp.testbed, node), node.client_id)
            ours[node.client_id] = node.client_id
        others: dict[str, str] | None = None
        resolved: list[str] = []
        for name in names:
            if name in ours:
                if ours[name] not in resolved:
                    resolved.append(ours[name])
                continue
            if others is None:
                others = self._others(exp.name)
            if name in others:
                raise ForeignNode(name, exp.name)
            raise UnknownNode(name, exp.name, [n.client_id for n in manifest.nodes])
        return resolved

    def resolve_any(self, exp: Experiment, names: Iterable[str]) -> list[str]:
        """The client_ids of nodes the experiment holds or released, by any of their names;
        another experiment's or nobody's is refused."""
        return self._resolve_released(exp, names, parked_only=False)

    def resolve_parked(self, exp: Experiment, names: Iterable[str]) -> list[str]:
        """The client_ids of parked nodes, named by client_id or by a testbed-wide name; a
        node held, released another way, another experiment's or nobody's is refused."""
        return self._resolve_released(exp, names, parked_only=True)

    def _resolve_released(
        self, exp: Experiment, names: Iterable[str], parked_only: bool
    ) -> list[str]:
        manifest = rspec.parse_manifest(exp.manifest())
        held = {n.client_id for n in manifest.nodes}
        ours = {
            alias: node.client_id
            for node in manifest.nodes
            for alias in {node.client_id, *testbed_names(exp.name, exp.testbed, node)}
        } | {
            alias: node for node in exp.released for alias in {node, *_local_names(exp.name, node)}
        }
        resolved: list[str] = []
        for name in names:
            node = ours.get(name)
            if node is None:
                if name in self._others(exp.name):
                    raise ForeignNode(name, exp.name)
                raise UnknownNode(name, exp.name, sorted(held | set(exp.released)))
            if not parked_only:
                if node not in resolved:
                    resolved.append(node)
                continue
            if node in held:
                raise NotParked(node, exp.name, 409, "is held by the experiment, not parked")
            if node not in exp.parked:
                raise NotParked(node, exp.name, 403, "was released by its user or lent, not parked")
            if node not in resolved:
                resolved.append(node)
        return resolved
