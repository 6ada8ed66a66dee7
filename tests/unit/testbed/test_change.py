"""Planning `ptc modify`: which nodes a re-rendered profile adds and removes, and what it may not change."""

from __future__ import annotations

from dataclasses import replace

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES

from elastic.errors import PtcError
from elastic.profile import rspec
from elastic.profile.render import render_profile, render_request
from elastic.profile.topology import Topology
from elastic.testbed import change


def render(**params: str) -> Topology:
    return rspec.parse_request(render_profile(SLURM_PROFILE, params))


def test_growing_adds_exactly_the_new_compute_nodes() -> None:
    planned = change.plan(render(computeNodeCount="2"), render(computeNodeCount="4"))
    assert [n.client_id for n in planned.added] == ["node-2", "node-3"]
    assert planned.removed == []
    assert [i.ip for n in planned.added for i in n.interfaces] == ["10.10.1.4", "10.10.1.5"]
    assert planned.describe() == "add node-2, node-3"


def test_shrinking_removes_the_highest_compute_nodes() -> None:
    planned = change.plan(render(computeNodeCount="3"), render(computeNodeCount="1"))
    assert planned.added == []
    assert [n.client_id for n in planned.removed] == ["node-1", "node-2"]


def test_same_parameters_change_nothing() -> None:
    assert change.plan(render(), render()).empty


def test_changing_a_running_node_is_refused_and_named() -> None:
    with pytest.raises(PtcError, match=r"node 'head' would change \(disk image"):
        change.plan(
            render(),
            render(osImage="urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"),
        )


def test_changing_link_bandwidth_is_refused_and_named() -> None:
    with pytest.raises(
        PtcError,
        match=r"link 'lan' would change \(shaping head:if1 -> lan: unshaped -> 100000 kbps\)",
    ):
        change.plan(render(), render(lanBandwidth="100000"))


def shaped(**params: object) -> Topology:
    return render_request(TEST_PROFILES / "shaped_pair.py", params).topology


def test_changing_latency_of_one_direction_is_refused_and_named() -> None:
    # shaped_pair: towards a:if0 50000 kbps and 20 ms; the other way 20000 kbps, 5 ms, 1 % loss
    with pytest.raises(PtcError) as info:
        change.plan(shaped(), shaped(latency=30))
    assert "link 'shaped' would change (shaping b:if0 -> a:if0: 50000 kbps, 20 ms -> " in str(
        info.value
    )
    assert "30 ms" in str(info.value)
    with pytest.raises(
        PtcError, match=r"shaping a:if0 -> shaped: 50000 kbps, 20 ms -> 50000 kbps, 1 ms\)"
    ):
        change.plan(shaped(lan=True), shaped(lan=True, latency=1))
    assert change.plan(shaped(lan=True), shaped(lan=True)).empty


def test_loss_and_link_extensions_are_compared() -> None:
    old, new = shaped(), shaped()
    new.links[0].properties = [
        replace(p, packet_loss=None) if p.packet_loss else p for p in new.links[0].properties
    ]
    with pytest.raises(
        PtcError, match=r"a:if0 -> b:if0: 20000 kbps, 5 ms, loss 0.01 -> 20000 kbps, 5 ms\)"
    ):
        change.plan(old, new)
    new = shaped()
    new.links[0].features.append("jumbo-frames")
    with pytest.raises(
        PtcError, match=r"link 'shaped' would change \(extensions none -> jumbo-frames"
    ):
        change.plan(old, new)


def test_shaping_of_added_and_removed_members_is_theirs() -> None:
    # Growing a shaped LAN adds the new member's properties; that is no change of the others'.
    grown = change.plan(
        render(lanBandwidth="100000"), render(lanBandwidth="100000", computeNodeCount="3")
    )
    assert [n.client_id for n in grown.added] == ["node-2"]
    shrunk = change.plan(
        render(lanBandwidth="100000", computeNodeCount="3"), render(lanBandwidth="100000")
    )
    assert [n.client_id for n in shrunk.removed] == ["node-2"]


def test_a_node_extension_change_is_refused() -> None:
    old, new = render(), render()
    new.node("node-0").features.append("vnc")
    with pytest.raises(PtcError, match=r"node 'node-0' would change \(extensions none -> vnc"):
        change.plan(old, new)


def test_a_different_set_of_lans_is_refused() -> None:
    two_lans = rspec.parse_request(render_profile(TEST_PROFILES / "two_lans.py", {}))
    with pytest.raises(PtcError, match=r"link '.+' would be (new|gone)"):
        change.plan(render(), two_lans)


def test_moving_a_node_to_another_address_is_refused() -> None:
    manifest, request = render(), render()
    iface = request.node("node-1").interfaces[0]
    request.node("node-1").interfaces[0] = type(iface)(
        iface.client_id, iface.node, "10.10.1.99", iface.netmask
    )
    with pytest.raises(PtcError, match=r"node 'node-1' would change \(interfaces"):
        change.plan(manifest, request)
