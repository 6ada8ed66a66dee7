"""Experiment LANs as Linux bridges inside one network namespace per experiment.

Each LAN of the RSpec becomes a bridge in the namespace ``ptc-<experiment>``; each interface a veth
pair with one end on that bridge and the other, renamed ethN, inside the node's container. Because
every experiment has its own namespace, two experiments can use the same 10.10.1.0/24 without
seeing each other, and deleting the namespace removes every bridge and veth at once.
"""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from dataclasses import dataclass

from elastic.errors import TestbedError
from elastic.testbed.topology import Topology


@dataclass(frozen=True)
class Wire:
    """One node interface: where it plugs in and what the node sees."""

    node: str
    interface: str  # the RSpec interface client_id
    lan_index: int
    device: str  # name inside the node, eth1, eth2, ...
    address: str | None
    prefixlen: int | None


def namespace(experiment: str) -> str:
    return f"ptc-{experiment}"


def plan(topology: Topology) -> list[Wire]:
    """Decide every wire before touching the kernel, so a bad RSpec fails before anything exists."""
    lan_of: dict[str, int] = {}
    for index, link in enumerate(topology.links):
        for ref in link.interface_refs:
            lan_of[ref] = index
    wires: list[Wire] = []
    for node in topology.nodes:
        n = 1  # eth0 is the control network, as on CloudLab
        for iface in node.interfaces:
            if iface.client_id not in lan_of:
                continue  # an interface on no link carries no traffic
            prefixlen = None
            if iface.ip:
                netmask = iface.netmask or "255.255.255.0"
                prefixlen = ipaddress.IPv4Network(f"0.0.0.0/{netmask}").prefixlen
            wires.append(
                Wire(
                    node.client_id,
                    iface.client_id,
                    lan_of[iface.client_id],
                    f"eth{n}",
                    iface.ip,
                    prefixlen,
                )
            )
            n += 1
    return wires


def create_namespace(experiment: str, lan_count: int) -> None:
    ns = namespace(experiment)
    _ip("netns", "add", ns)
    _ip("-n", ns, "link", "set", "lo", "up")
    for index in range(lan_count):
        _ip("-n", ns, "link", "add", f"lan{index}", "type", "bridge")
        _ip("-n", ns, "link", "set", f"lan{index}", "up")


def attach(experiment: str, wire: Wire, pid: int) -> None:
    """Plug one interface of the container with init ``pid`` into its LAN's bridge."""
    ns = namespace(experiment)
    tag = hashlib.sha1(f"{experiment}/{wire.interface}".encode()).hexdigest()[:8]
    outer, inner = f"pv{tag}", f"pi{tag}"
    _ip("link", "add", outer, "netns", ns, "type", "veth", "peer", "name", inner, "netns", str(pid))
    _ip("-n", ns, "link", "set", outer, "master", f"lan{wire.lan_index}", "up")
    _nsenter(pid, "ip", "link", "set", inner, "name", wire.device)
    if wire.address:
        _nsenter(pid, "ip", "addr", "add", f"{wire.address}/{wire.prefixlen}", "dev", wire.device)
    _nsenter(pid, "ip", "link", "set", wire.device, "up")


def delete_namespace(experiment: str) -> None:
    ns = namespace(experiment)
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if any(line.split()[0] == ns for line in proc.stdout.splitlines() if line.strip()):
        _ip("netns", "delete", ns)


def namespace_exists(experiment: str) -> bool:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return any(
        line.split()[0] == namespace(experiment)
        for line in proc.stdout.splitlines()
        if line.strip()
    )


def _ip(*args: str) -> None:
    _check(["ip", *args])


def _nsenter(pid: int, *cmd: str) -> None:
    _check(["nsenter", "-t", str(pid), "-n", *cmd])


def _check(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TestbedError(f"network set-up failed: `{' '.join(cmd)}`: {proc.stderr.strip()}")


def shape(experiment: str, wires: list[Wire], kbps: int) -> None:
    """Limit a LAN to the RSpec's bandwidth: a token bucket on each port of its bridge."""
    ns = namespace(experiment)
    for wire in wires:
        tag = hashlib.sha1(f"{experiment}/{wire.interface}".encode()).hexdigest()[:8]
        _check(
            [
                "tc",
                "-n",
                ns,
                "qdisc",
                "replace",
                "dev",
                f"pv{tag}",
                "root",
                "tbf",
                "rate",
                f"{kbps}kbit",
                "burst",
                "64kb",
                "latency",
                "50ms",
            ]
        )
