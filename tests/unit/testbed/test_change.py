"""Planning `ptc modify`: which nodes a re-rendered profile adds and removes, and what it may not change."""

from __future__ import annotations

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES

from elastic.errors import PtcError
from elastic.testbed import change, rspec
from elastic.testbed.render import render_profile
from elastic.testbed.topology import Topology


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
            render(osImage="urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"),
        )


def test_changing_link_bandwidth_is_refused_and_named() -> None:
    with pytest.raises(PtcError, match=r"link 'lan' would change bandwidth"):
        change.plan(render(), render(lanBandwidth="100000"))


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
