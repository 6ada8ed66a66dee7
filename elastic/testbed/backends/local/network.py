"""Experiment LANs as Linux bridges inside one network namespace per experiment.

Each LAN of the RSpec becomes a bridge in the namespace ``ptc-<experiment>``; each interface a veth
pair with one end on that bridge and the other, renamed ethN, inside the node's container. Because
every experiment has its own namespace, two experiments can use the same 10.10.1.0/24 without
seeing each other, and deleting the namespace removes every bridge and veth at once. An
interface the RSpec shapes takes a detour on its way to the bridge (``links``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from dataclasses import dataclass

from elastic.errors import TestbedError
from elastic.profile.topology import Topology


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
    ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    for index in range(lan_count):
        ip("-n", ns, "link", "add", f"lan{index}", "type", "bridge")
        ip("-n", ns, "link", "set", f"lan{index}", "up")


def tag(experiment: str, interface: str) -> str:
    """A short, stable name part for one interface's devices in the namespace."""
    return hashlib.sha1(f"{experiment}/{interface}".encode()).hexdigest()[:8]


def attach(experiment: str, wire: Wire, pid: int, bridge: bool = True) -> None:
    """Plug one interface of the container with init ``pid`` into its LAN's bridge.

    With ``bridge=False`` the namespace end stays off the bridge, for ``links`` to shape."""
    ns = namespace(experiment)
    t = tag(experiment, wire.interface)
    outer, inner = f"pv{t}", f"pi{t}"
    ip("link", "add", outer, "netns", ns, "type", "veth", "peer", "name", inner, "netns", str(pid))
    if bridge:
        ip("-n", ns, "link", "set", outer, "master", f"lan{wire.lan_index}", "up")
    nsenter(pid, "ip", "link", "set", inner, "name", wire.device)
    # The interface keeps its MAC address across power cycles, as a machine's NIC does: with a
    # new one, the other nodes' ARP caches would send to the old address until they expire.
    nsenter(pid, "ip", "link", "set", wire.device, "address", mac(experiment, wire.interface))
    if wire.address:
        nsenter(pid, "ip", "addr", "add", f"{wire.address}/{wire.prefixlen}", "dev", wire.device)
    nsenter(pid, "ip", "link", "set", wire.device, "up")


def mac(experiment: str, interface: str) -> str:
    """A stable, locally administered unicast MAC address for an experiment's interface."""
    digest = hashlib.sha256(f"{experiment}/{interface}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def delete_namespace(experiment: str) -> None:
    ns = namespace(experiment)
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if any(line.split()[0] == ns for line in proc.stdout.splitlines() if line.strip()):
        ip("netns", "delete", ns)


def namespace_exists(experiment: str) -> bool:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return any(
        line.split()[0] == namespace(experiment)
        for line in proc.stdout.splitlines()
        if line.strip()
    )


def ip(*args: str) -> None:
    """``ip ARGS``; a TestbedError with ip's message if it fails."""
    _check(["ip", *args])


def nsenter(pid: int, *cmd: str) -> None:
    """Run ``cmd`` in the network namespace of process ``pid`` (a node's init)."""
    _check(["nsenter", "-t", str(pid), "-n", *cmd])


def tc(ns: str, args: list[str]) -> None:
    _check(["tc", "-n", ns, *args])


def _check(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TestbedError(f"network set-up failed: `{' '.join(cmd)}`: {proc.stderr.strip()}")
