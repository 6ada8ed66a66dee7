"""The local testbed's wiring plan and /etc/hosts, decided before any container exists."""

from __future__ import annotations

from elastic.profile.topology import Interface, Link, Node, Topology
from elastic.testbed.backends.local import etc_hosts, network


def two_lans() -> Topology:
    def node(name: str, *ifaces: tuple[str, str]) -> Node:
        return Node(
            name,
            interfaces=[Interface(f"{name}:{i}", name, ip, "255.255.255.0") for i, ip in ifaces],
        )

    return Topology(
        nodes=[
            node("gw", ("if0", "10.10.1.1"), ("if1", "10.10.2.1")),
            node("a", ("if0", "10.10.1.2")),
            node("b", ("if0", "10.10.2.2")),
            node("lonely", ("if0", "10.10.3.9")),  # on no link
        ],
        links=[
            Link("lan-a", ["gw:if0", "a:if0"]),
            Link.shaped("lan-b", ["gw:if1", "b:if0"], bandwidth_kbps=10000),
        ],
    )


def test_each_interface_on_a_link_becomes_a_wire_on_that_lan() -> None:
    wires = network.plan(two_lans())
    got = {(w.node, w.device, w.lan_index, w.address, w.prefixlen) for w in wires}
    assert got == {
        ("gw", "eth1", 0, "10.10.1.1", 24),
        ("gw", "eth2", 1, "10.10.2.1", 24),
        ("a", "eth1", 0, "10.10.1.2", 24),
        ("b", "eth1", 1, "10.10.2.2", 24),
    }


def test_interfaces_on_no_link_are_not_wired() -> None:
    assert all(w.node != "lonely" for w in network.plan(two_lans()))


def test_etc_hosts_gives_the_bare_name_to_the_first_lan_address() -> None:
    topo = two_lans()
    hosts = etc_hosts.block(topo, network.plan(topo))
    lines = {
        line.split("\t")[0]: line.split("\t")[1].split()
        for line in hosts.splitlines()
        if "\t" in line
    }
    assert lines["10.10.1.1"] == ["gw-lan-a", "gw"]
    assert lines["10.10.2.1"] == ["gw-lan-b"]
    assert lines["10.10.2.2"] == ["b-lan-b", "b"]
    assert "10.10.3.9" not in lines


def test_namespaces_are_per_experiment() -> None:
    assert network.namespace("one") != network.namespace("two")
