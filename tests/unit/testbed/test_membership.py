"""What release and allocate change against an experiment's profile (``membership``)."""

from __future__ import annotations

import pytest

from elastic.errors import InputError
from elastic.profile.topology import Interface, Link, LinkProperty, Node, Topology
from elastic.testbed import membership


def lan(
    *members: tuple[str, str], netmask: str = "255.255.255.0", shaped: bool = False
) -> Topology:
    nodes = [Node(n, disk_image="img", interfaces=[Interface(f"{n}:if0", n, ip, netmask)])
             for n, ip in members]  # fmt: skip
    refs = [f"{n}:if0" for n, _ in members]
    link = Link.shaped("lan", refs, latency_ms=5.0) if shaped else Link("lan", refs)
    return Topology(nodes=nodes, links=[link])


def test_a_copy_takes_the_lowest_free_address_and_the_originals_shaping() -> None:
    topology = lan(("head", "10.10.1.1"), ("node-0", "10.10.1.2"), shaped=True)
    used = lan(("node-1", "10.10.1.3"))  # a released node's address stays its own
    grown = membership.with_copies(topology, "node-0", ["lent-0", "lent-1"], used)
    lent0, lent1 = grown.node("lent-0"), grown.node("lent-1")
    assert [i.ip for i in lent0.interfaces] == ["10.10.1.4"]
    assert [i.ip for i in lent1.interfaces] == ["10.10.1.5"]
    assert lent0.interfaces[0].client_id == "lent-0:if0" and lent0.disk_image == "img"
    [link] = grown.links
    assert link.interface_refs[-2:] == ["lent-0:if0", "lent-1:if0"]
    assert LinkProperty("lent-0:if0", "lan", None, 5.0, None) in link.properties
    assert [n.client_id for n in topology.nodes] == ["head", "node-0"], "the input is kept"


def test_a_full_subnet_is_refused_naming_it() -> None:
    topology = lan(("a", "10.0.0.1"), ("b", "10.0.0.2"), netmask="255.255.255.252")
    with pytest.raises(InputError, match=r"subnet 10.0.0.0/30 of 'b:if0' has no free address"):
        membership.with_copies(topology, "b", ["c"], topology)


def test_the_request_drops_released_nodes_and_keeps_copies_from_the_manifest() -> None:
    rendered = lan(("head", "10.10.1.1"), ("node-0", "10.10.1.2"), ("node-1", "10.10.1.3"))
    manifest = membership.with_copies(
        membership.without(rendered, ["node-1"]), "node-0", ["lent-0"], rendered
    )
    request = membership.request(rendered, ["node-1"], ["lent-0"], manifest)
    assert [n.client_id for n in request.nodes] == ["head", "node-0", "lent-0"]
    assert request.links[0].interface_refs == ["head:if0", "node-0:if0", "lent-0:if0"]
    with pytest.raises(InputError, match=r"the profile now makes a node named 'node-1'"):
        membership.request(rendered, [], ["node-1"], manifest)
