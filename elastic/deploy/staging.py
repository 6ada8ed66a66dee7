"""Staging a node addition: keep a running node out of the inventory until it "joins".

The local testbed cannot add a container to a running experiment, so the integration test and
the deploy benchmark start the extra node up front and drop it from hosts.yml here; `ptc
inventory` (lifecycle.write_inventory) puts it back, which is when Ansible first sees it.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from elastic import atomic
from elastic.errors import PtcError


def drop_host(hosts_yml: Path, node: str) -> None:
    """Remove ``node`` from the inventory's hosts and from every group."""
    inventory = yaml.safe_load(hosts_yml.read_text())
    hosts = inventory["all"]["hosts"]
    if node not in hosts:
        raise PtcError(f"{hosts_yml}: no host {node!r} to drop")
    del hosts[node]
    for group in inventory["all"].get("children", {}).values():
        (group.get("hosts") or {}).pop(node, None)
    atomic.write_text(hosts_yml, yaml.safe_dump(inventory, sort_keys=False))
