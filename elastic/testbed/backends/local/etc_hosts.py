"""The local testbed's part of a node's /etc/hosts: every node by its LAN address.

CloudLab names experiment nodes in /etc/hosts; here the testbed writes those names between
markers of its own, so that `ptc modify` can rewrite them on running nodes without touching
other lines of the file. The experiment's file server is named there too (``fileserver``). The testbed is the only writer of node names: neither the profile's
startup script nor the roles write them.
"""

from __future__ import annotations

from elastic.profile.topology import Topology
from elastic.testbed.backends.local import fileserver
from elastic.testbed.backends.local.network import Wire

BASE = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\n"
BEGIN = "# BEGIN ptc testbed: experiment nodes by LAN address"
END = "# END ptc testbed"


def block(manifest: Topology, wires: list[Wire]) -> str:
    """The testbed's part of /etc/hosts, in markers so a modify can replace just this part."""
    lines = [BEGIN]
    named: set[str] = set()
    for wire in wires:
        if not wire.address:
            continue
        link = manifest.links[wire.lan_index].client_id
        names = [f"{wire.node}-{link}"]
        if wire.node not in named:  # the first LAN address carries the bare name
            names.append(wire.node)
            named.add(wire.node)
        lines.append(f"{wire.address}\t{' '.join(names)}")
    server = fileserver.address(manifest, wires)
    if server is not None:
        lines.append(f"{server.address}\t{fileserver.HOSTNAME}")
    return "\n".join([*lines, END]) + "\n"


def replace_block(current: str, new: str) -> str:
    """``current`` with its testbed block replaced by ``new``; other lines (Ansible's) stay."""
    lines = current.splitlines(keepends=True)
    try:
        begin = next(i for i, line in enumerate(lines) if line.rstrip("\n") == BEGIN)
        end = next(i for i in range(begin, len(lines)) if lines[i].rstrip("\n") == END)
    except StopIteration:
        return current + ("" if current.endswith("\n") or not current else "\n") + new
    return "".join(lines[:begin]) + new + "".join(lines[end + 1 :])
