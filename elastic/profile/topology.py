"""The testbed-neutral model of an experiment's topology.

Request and manifest RSpecs both parse into these classes (``elastic.profile.rspec``); every
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
    size_gb: float | None  # 0 means "all the free space" (CloudLab), None "not given"
    remote: bool = False  # a remote (dataset) blockstore attached over a link
    dataset: str | None = None  # URN of the dataset a remote blockstore attaches


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
    # The manifest's other <login>s: a portal manifest lists one per project member.
    other_logins: list[Login] = field(default_factory=list)
    # Portal extensions the request asks of the node: "vnc", "root-keys",
    # "ansible-role:NAME" (a Docker container shows as sliver_type "emulab-docker").
    features: list[str] = field(default_factory=list)

    @property
    def logins(self) -> list[Login]:
        """Every <login> of the node, the one ptc uses first."""
        return ([self.login] if self.login else []) + self.other_logins

    def login_for(self, user: str) -> Login | None:
        return next((lg for lg in self.logins if lg.username == user), None)


@dataclass(frozen=True)
class LinkProperty:
    """One ``<property>`` of a link: how the traffic from ``source_id`` to ``dest_id`` is shaped.

    geni-lib writes one per direction of a point-to-point link (interface to interface, with the
    settings of the *destination* interface) and one per member of a LAN (interface to the
    LAN's client_id). None means "not shaped" for that figure.
    """

    source_id: str
    dest_id: str
    capacity_kbps: int | None = None
    latency_ms: float | None = None
    packet_loss: float | None = None  # a fraction, 0 <= loss < 1

    @property
    def shaped(self) -> bool:
        return any(v is not None for v in (self.capacity_kbps, self.latency_ms, self.packet_loss))


@dataclass
class Link:
    client_id: str
    interface_refs: list[str]
    kind: str = "lan"  # "lan" or "link"; both become one broadcast domain
    properties: list[LinkProperty] = field(default_factory=list)
    # Portal extensions: "jumbo-frames", "shared-vlan:NAME" (create or join).
    features: list[str] = field(default_factory=list)

    @classmethod
    def shaped(
        cls,
        client_id: str,
        interface_refs: list[str],
        kind: str = "lan",
        bandwidth_kbps: int | None = None,
        latency_ms: float | None = None,
        packet_loss: float | None = None,
    ) -> Link:
        """A link shaped the same way on every interface, with the properties geni-lib writes."""
        link = cls(client_id, list(interface_refs), kind)
        if any(v is not None for v in (bandwidth_kbps, latency_ms, packet_loss)):
            link.properties = [
                LinkProperty(src, dst, bandwidth_kbps, latency_ms, packet_loss)
                for src, dst in link.directions()
            ]
        return link

    def directions(self) -> list[tuple[str, str]]:
        """The (source, destination) pairs geni-lib shapes: member to LAN, or each direction."""
        if self.kind == "lan":
            return [(ref, self.client_id) for ref in self.interface_refs]
        return [(a, b) for a in self.interface_refs for b in self.interface_refs if a != b]

    @property
    def bandwidth_kbps(self) -> int | None:
        """The highest capacity any property of the link sets (None: bandwidth not shaped)."""
        caps = [p.capacity_kbps for p in self.properties if p.capacity_kbps is not None]
        return max(caps) if caps else None

    def properties_from(self, interface: str) -> list[LinkProperty]:
        return [p for p in self.properties if p.source_id == interface and p.shaped]

    def properties_to(self, interface: str) -> list[LinkProperty]:
        return [p for p in self.properties if p.dest_id == interface and p.shaped]


@dataclass
class Topology:
    nodes: list[Node]
    links: list[Link]
    parameters: dict[str, str] = field(default_factory=dict)
    # Request-wide portal extensions: "disable-root-keys", "ansible-role:NAME".
    features: list[str] = field(default_factory=list)

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
