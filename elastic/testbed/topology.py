"""The testbed-neutral model of an experiment's topology.

Request and manifest RSpecs both parse into these classes (``elastic.testbed.rspec``); every
backend (local containers, CloudLab) and the inventory builder read only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic.errors import InputError


@dataclass(frozen=True)
class Interface:
    client_id: str  # e.g. "head:if0"
    node: str  # client_id of the owning node
    ip: str | None = None
    netmask: str | None = None


@dataclass(frozen=True)
class Blockstore:
    name: str
    mount: str | None
    size_gb: float | None
    remote: bool = False  # a remote (dataset) blockstore attached over a link


@dataclass(frozen=True)
class ExecuteService:
    shell: str
    command: str


@dataclass(frozen=True)
class InstallService:
    url: str
    install_path: str


@dataclass(frozen=True)
class Login:
    """What a manifest's <login> element says: where to SSH to reach the node."""

    hostname: str
    port: int
    username: str


@dataclass
class Node:
    client_id: str
    sliver_type: str = "raw-pc"
    hardware_type: str | None = None
    disk_image: str | None = None
    component_manager_id: str | None = None
    interfaces: list[Interface] = field(default_factory=list)
    blockstores: list[Blockstore] = field(default_factory=list)
    execute: list[ExecuteService] = field(default_factory=list)
    install: list[InstallService] = field(default_factory=list)
    # Filled only in a manifest.
    component_id: str | None = None
    sliver_id: str | None = None
    login: Login | None = None


@dataclass
class Link:
    client_id: str
    interface_refs: list[str]
    kind: str = "lan"  # "lan" or "link"; both become one broadcast domain
    bandwidth_kbps: int | None = None


@dataclass
class Topology:
    nodes: list[Node]
    links: list[Link]
    parameters: dict[str, str] = field(default_factory=dict)

    def node(self, client_id: str) -> Node:
        for node in self.nodes:
            if node.client_id == client_id:
                return node
        known = ", ".join(n.client_id for n in self.nodes) or "none"

        raise InputError(f"unknown node {client_id!r} (nodes: {known})")

    def interface(self, client_id: str) -> Interface | None:
        for node in self.nodes:
            for iface in node.interfaces:
                if iface.client_id == client_id:
                    return iface
        return None
