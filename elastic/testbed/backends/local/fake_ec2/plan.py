"""Where a FAKE EC2 region's instances go on the experiment's LAN: a VPC that is the LAN, and a
subnet of it that no node of the experiment (nor its file server) uses, so every private
address moto gives an instance is free on the LAN. Pure: no testbed, no moto."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elastic.errors import InputError

# The subnet's size: the largest block first (room for every machine the testbed has, with
# EC2's five reserved addresses), down to EC2's smallest subnet.
LARGEST_PREFIX = 26
SMALLEST_PREFIX = 28
# EC2's own bounds on a VPC's block.
VPC_PREFIXES = range(16, 29)


@dataclass(frozen=True)
class Lan:
    """One of the experiment's LANs as the region sees it."""

    index: int  # its bridge (lanN) in the experiment's namespace
    name: str  # the RSpec link's client_id
    network: ipaddress.IPv4Network
    used: frozenset[ipaddress.IPv4Address]  # the nodes' and the file server's addresses


@dataclass(frozen=True)
class Plan:
    lan_index: int
    lan: str
    vpc: ipaddress.IPv4Network
    subnet: ipaddress.IPv4Network

    @property
    def prefixlen(self) -> int:
        """The prefix an instance's interface gets: the LAN's, so it reaches every node."""
        return self.vpc.prefixlen if self.vpc.prefixlen >= 16 else self.subnet.prefixlen

    def as_json(self) -> dict[str, object]:
        return {
            "lan_index": self.lan_index,
            "lan": self.lan,
            "vpc": str(self.vpc),
            "subnet": str(self.subnet),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Plan:
        return cls(
            int(str(data["lan_index"])),
            str(data["lan"]),
            ipaddress.IPv4Network(str(data["vpc"])),
            ipaddress.IPv4Network(str(data["subnet"])),
        )


def free_block(
    network: ipaddress.IPv4Network, used: Iterable[ipaddress.IPv4Address]
) -> ipaddress.IPv4Network | None:
    """The highest aligned block of ``network`` holding no used address, the largest size
    first (``LARGEST_PREFIX`` down to ``SMALLEST_PREFIX``). Highest, because the testbed gives
    nodes the lowest addresses and a LAN grows upwards from them."""
    taken = set(used)
    for prefix in range(max(LARGEST_PREFIX, network.prefixlen + 1), SMALLEST_PREFIX + 1):
        for block in reversed(list(network.subnets(new_prefix=prefix))):
            if not any(a in block for a in taken):
                return block
    return None


def choose_lan(lans: Sequence[Lan], node: str, on: str | None, node_lans: Sequence[int]) -> Lan:
    """The LAN named ``on``, else the first LAN ``node`` is on; refused naming what is wrong."""
    if on is not None:
        named = [lan for lan in lans if lan.name == on]
        if not named:
            names = ", ".join(lan.name for lan in lans) or "none"
            raise InputError(f"--lan: the experiment has no LAN {on!r} (its LANs: {names})")
        if named[0].index not in node_lans:
            raise InputError(f"--lan: node {node!r} is not on LAN {on!r}")
        return named[0]
    for lan in lans:
        if lan.index in node_lans:
            return lan
    raise InputError(
        f"node {node!r} is on no addressed LAN of the experiment: the region's instances join "
        "the API node's LAN"
    )


def plan(lan: Lan) -> Plan:
    """The region's VPC (the LAN, within EC2's bounds) and its subnet (a free block)."""
    if lan.network.prefixlen > SMALLEST_PREFIX:
        raise InputError(
            f"LAN {lan.name} ({lan.network}) is too small for a subnet of EC2's (at least a "
            f"/{SMALLEST_PREFIX}): give the LAN a larger netmask"
        )
    subnet = free_block(lan.network, lan.used)
    if subnet is None:
        raise InputError(
            f"LAN {lan.name} ({lan.network}): no block of {2 ** (32 - SMALLEST_PREFIX)} "
            "addresses is free of the experiment's nodes for the region's subnet"
        )
    vpc = lan.network
    if vpc.prefixlen < VPC_PREFIXES.start:
        vpc = subnet.supernet(new_prefix=VPC_PREFIXES.start)
    return Plan(lan.index, lan.name, vpc, subnet)
