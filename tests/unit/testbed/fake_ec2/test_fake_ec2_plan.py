"""The FAKE EC2 region's subnet: a block of the experiment's LAN that no node uses."""

from __future__ import annotations

import ipaddress

import pytest

from elastic.errors import InputError
from elastic.testbed.backends.local.fake_ec2 import plan

A = ipaddress.IPv4Address
NET = ipaddress.IPv4Network


def lan(network: str, *used: str, name: str = "lan", index: int = 0) -> plan.Lan:
    return plan.Lan(index, name, NET(network), frozenset(A(u) for u in used))


def test_the_subnet_is_the_highest_free_block_and_holds_no_node_or_file_server() -> None:
    # head .1, two nodes, the configuration server's .201, the file server's .254
    found = plan.plan(lan("10.10.1.0/24", "10.10.1.1", "10.10.1.2", "10.10.1.3",
                          "10.10.1.201", "10.10.1.254"))  # fmt: skip
    assert found.subnet == NET("10.10.1.128/26")
    assert found.vpc == NET("10.10.1.0/24")
    assert found.prefixlen == 24  # an instance reaches every node of the LAN
    assert (found.lan, found.lan_index) == ("lan", 0)


def test_a_crowded_lan_gets_a_smaller_block_and_a_full_one_is_refused() -> None:
    used = [f"10.10.1.{i}" for i in range(1, 255) if not 224 <= i < 240]
    assert plan.plan(lan("10.10.1.0/24", *used)).subnet == NET("10.10.1.224/28")
    with pytest.raises(InputError, match=r"LAN lan \(10.10.1.0/24\): no block of 16 addresses"):
        plan.plan(lan("10.10.1.0/24", *used, "10.10.1.230"))


def test_a_lan_too_small_for_an_ec2_subnet_is_refused_naming_it() -> None:
    with pytest.raises(InputError, match=r"LAN tiny \(10.0.0.0/29\) is too small"):
        plan.plan(lan("10.0.0.0/29", name="tiny"))


def test_a_lan_wider_than_a_vpc_gets_a_vpc_of_ec2s_largest_size() -> None:
    found = plan.plan(lan("10.0.0.0/8", "10.0.0.1"))
    assert found.vpc.prefixlen == 16 and found.subnet.subnet_of(found.vpc)


def test_the_lan_is_the_api_nodes_first_or_the_one_named() -> None:
    lans = [lan("10.10.1.0/24", index=0, name="a"), lan("10.10.2.0/24", index=1, name="b")]
    assert plan.choose_lan(lans, "head", None, [1, 0]).name == "a"
    assert plan.choose_lan(lans, "head", "b", [0, 1]).name == "b"
    with pytest.raises(InputError, match="no LAN 'c' \\(its LANs: a, b\\)"):
        plan.choose_lan(lans, "head", "c", [0, 1])
    with pytest.raises(InputError, match="node 'head' is not on LAN 'b'"):
        plan.choose_lan(lans, "head", "b", [0])
    with pytest.raises(InputError, match="node 'solo' is on no addressed LAN"):
        plan.choose_lan(lans, "solo", None, [])


def test_a_plan_reads_back_as_written() -> None:
    found = plan.plan(lan("10.10.1.0/24", "10.10.1.1"))
    assert plan.Plan.from_json(found.as_json()) == found
