"""Every test profile of another shape renders and validates, with the expected structure."""

from __future__ import annotations

import pytest
from testbed_support import TEST_PROFILES

from elastic.profile import rspec
from elastic.profile.render import render_profile


def render(name: str) -> rspec.Topology:
    t = rspec.parse_request(render_profile(TEST_PROFILES / name, {}))
    rspec.validate(t)
    return t


def test_single_node() -> None:
    t = render("single_node.py")
    assert [n.client_id for n in t.nodes] == ["solo"]
    assert t.links == []
    assert t.nodes[0].execute[0].command == "echo hello > /tmp/hello"


def test_multi_lan() -> None:
    t = render("multi_lan.py")
    assert [lk.client_id for lk in t.links] == ["lan-0", "lan-1", "lan-2"]
    assert [i.ip for i in t.node("router").interfaces] == ["10.20.0.1", "10.20.1.1"]
    assert t.links[2].interface_refs == ["n2-0:if0", "n2-1:if0"]


def test_point_to_point() -> None:
    t = render("point_to_point.py")
    assert [(lk.client_id, lk.kind, lk.bandwidth_kbps) for lk in t.links] == [
        ("link-ab", "link", 100000),
        ("link-bc", "link", 100000),
    ]
    assert t.node("b").interfaces[1].netmask == "255.255.255.252"


def test_blockstores_local_and_remote() -> None:
    t = render("blockstores.py")
    (local,) = t.node("storage-user").blockstores
    assert (local.name, local.mount, local.size_gb, local.remote) == (
        "scratch",
        "/data",
        30.0,
        False,
    )
    remote_node = t.node("dataset")
    assert remote_node.sliver_type == "emulab-blockstore"
    (remote,) = remote_node.blockstores
    assert (remote.mount, remote.size_gb, remote.remote) == ("/dataset", 100.0, True)
    assert t.links[0].interface_refs == ["storage-user:if0", "dataset:if0"]


def test_xen_vms() -> None:
    t = render("xen_vms.py")
    assert [(n.client_id, n.sliver_type) for n in t.nodes] == [
        ("vm-0", "emulab-xen"),
        ("vm-1", "emulab-xen"),
    ]


def test_two_lans_are_separate_subnets() -> None:
    t = render("two_lans.py")
    assert [n.client_id for n in t.nodes] == ["head", "a-0", "a-1", "b-0", "b-1"]
    subnets = {}
    for link in t.links:
        ips = {t.interface(ref).ip for ref in link.interface_refs}  # type: ignore[union-attr]
        subnets[link.client_id] = {ip.rsplit(".", 1)[0] for ip in ips if ip}
    assert subnets == {"lan-a": {"10.10.1"}, "lan-b": {"10.10.2"}}
    assert [i.ip for i in t.node("head").interfaces] == ["10.10.1.1", "10.10.2.1"]


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in TEST_PROFILES.glob("*.py") if not p.name.startswith("broken_")),
)
def test_every_shape_round_trips_through_a_manifest(name: str) -> None:
    t = render(name)
    assert rspec.parse_manifest(rspec.write_manifest(t)) == t
