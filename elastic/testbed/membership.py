"""Which nodes an experiment holds beyond and below what its profile makes.

`ptc node release` takes a node out of a running experiment and `ptc node allocate` brings
one in: a released profile node, or a new node copied from one of the experiment's nodes. A
later re-render of the profile (`ptc modify`, `ptc replace`) must keep those moves, so the
experiment records them (``Experiment.released``, ``Experiment.clones``) and ``request`` here
applies them to the profile's request. A copy's spec is the one its manifest node has, so the
manifest stays the only description of what runs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterable
from dataclasses import replace

from elastic.errors import InputError
from elastic.profile.topology import Interface, Link, LinkProperty, Node, Topology

_HOSTNAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


def request(
    rendered: Topology, released: Collection[str], clones: Iterable[str], source: Topology
) -> Topology:
    """The profile's request ``rendered`` without the ``released`` nodes and with ``clones``,
    each as ``source`` (the manifest) describes it, on the LANs it is on there."""
    profile_nodes = {n.client_id for n in rendered.nodes}
    clones = list(clones)
    if clash := [c for c in clones if c in profile_nodes]:
        raise InputError(
            f"the profile now makes a node named {', '.join(map(repr, clash))}, the name of a "
            "node allocated as a copy: release that node first"
        )
    copies = [_as_request(source.node(c)) for c in clones]
    links = {lk.client_id: lk for lk in source.links}
    wanted = [
        replace(
            link,
            interface_refs=[*link.interface_refs, *_refs_of(copies, links.get(link.client_id))],
            properties=[*link.properties, *_properties_of(copies, links.get(link.client_id))],
        )
        for link in rendered.links
    ]
    grown = replace(rendered, nodes=[*rendered.nodes, *copies], links=wanted)
    return without(grown, released)


def without(topology: Topology, nodes: Collection[str]) -> Topology:
    """``topology`` with ``nodes`` and their interfaces gone from every link."""
    gone = {i.client_id for n in topology.nodes if n.client_id in nodes for i in n.interfaces}
    return replace(
        topology,
        nodes=[n for n in topology.nodes if n.client_id not in nodes],
        links=[
            replace(
                link,
                interface_refs=[r for r in link.interface_refs if r not in gone],
                properties=[
                    p for p in link.properties if p.source_id not in gone and p.dest_id not in gone
                ],
            )
            for link in topology.links
        ],
    )


def with_copies(topology: Topology, like: str, names: Iterable[str], used: Topology) -> Topology:
    """``topology`` with a copy of its node ``like`` under each of ``names``: same image,
    hardware, blockstores and Execute services, an interface on each of ``like``'s LANs with
    the lowest free address of that LAN's subnet (none that a node of ``used`` or
    ``topology`` has), shaped as ``like``'s interface is."""
    original = _as_request(topology.node(like))
    taken = {i.ip for t in (topology, used) for n in t.nodes for i in n.interfaces if i.ip}
    copies: list[Node] = []
    for name in names:
        if not _HOSTNAME.match(name):
            raise InputError(
                f"node name {name!r} is invalid: use 1-31 lowercase letters, digits and dashes, "
                "starting with a letter"
            )
        interfaces = []
        for iface in original.interfaces:
            suffix = iface.client_id.split(":", 1)[1] if ":" in iface.client_id else iface.client_id
            address = _free_address(iface, taken, name) if iface.ip else None
            if address:
                taken.add(address)
            interfaces.append(Interface(f"{name}:{suffix}", name, address, iface.netmask))
        copies.append(replace(original, client_id=name, interfaces=interfaces))
    pairs = [
        (old.client_id, new.client_id)
        for copy in copies
        for old, new in zip(original.interfaces, copy.interfaces, strict=True)
    ]
    links = []
    for link in topology.links:
        refs, props = list(link.interface_refs), list(link.properties)
        for old_id, new_id in pairs:
            if old_id in link.interface_refs:
                refs.append(new_id)
                props += [_renamed(p, old_id, new_id) for p in link.properties
                          if old_id in (p.source_id, p.dest_id)]  # fmt: skip
        links.append(replace(link, interface_refs=refs, properties=props))
    return replace(topology, nodes=[*topology.nodes, *copies], links=links)


def _as_request(node: Node) -> Node:
    """A manifest node as a request names it: no place on the testbed, no login."""
    return replace(
        node,
        interfaces=list(node.interfaces),
        component_manager_id=None,
        component_id=None,
        sliver_id=None,
        login=None,
        other_logins=[],
    )


def _refs_of(copies: list[Node], link: Link | None) -> list[str]:
    if link is None:
        return []
    mine = {i.client_id for n in copies for i in n.interfaces}
    return [r for r in link.interface_refs if r in mine]


def _properties_of(copies: list[Node], link: Link | None) -> list[LinkProperty]:
    if link is None:
        return []
    mine = {i.client_id for n in copies for i in n.interfaces}
    return [p for p in link.properties if p.source_id in mine or p.dest_id in mine]


def _renamed(prop: LinkProperty, old: str, new: str) -> LinkProperty:
    return replace(
        prop,
        source_id=new if prop.source_id == old else prop.source_id,
        dest_id=new if prop.dest_id == old else prop.dest_id,
    )


def _free_address(iface: Interface, taken: set[str], name: str) -> str:
    network = ipaddress.IPv4Interface(f"{iface.ip}/{iface.netmask or '255.255.255.0'}").network
    for host in network.hosts():
        if str(host) not in taken:
            return str(host)
    raise InputError(
        f"node {name!r}: the subnet {network} of {iface.client_id!r} has no free address left"
    )
