"""First contact over OpenSSH, so that mitogen finds the host keys it checks.

An inventory whose keys are recorded at first contact (CloudLab and adopted experiments:
``StrictHostKeyChecking accept-new``) relies on OpenSSH to record a node's key the first time.
mitogen's strategy has no such mode: with host key checking on, it puts
``StrictHostKeyChecking yes`` ahead of the inventory's options, so a node never reached before
would be refused. Before a mitogen run, every host is reached once through the experiment's
ssh_config, which records the keys of new hosts and changes nothing else: a host whose key
changed is still refused, by this contact and then by the run, which names it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from elastic.errors import RemoteError, RemoteTimeout
from elastic.remote import ssh
from elastic.remote.select import Hosts

CONNECT_TIMEOUT = 10  # s: an unreachable node is left to the run, which reports it
MAX_PARALLEL = 16


def records_at_first_contact(ssh_config: Path) -> bool:
    """Whether the ssh_config takes a new host's key (``accept-new``) rather than pinning it."""
    try:
        text = ssh_config.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        words = line.replace("=", " ").split()
        if len(words) == 2 and [w.lower() for w in words] == [
            "stricthostkeychecking",
            "accept-new",
        ]:
            return True
    return False


def inventory_hosts(inventory: Path) -> list[str]:
    """Every host of a ptc YAML inventory, in order, once."""
    return list(Hosts.from_inventory(yaml.safe_load(inventory.read_text()) or {}).hosts)


def _reach(ssh_config: Path, host: str) -> None:
    # A host that cannot be reached, or whose key changed, is left to the run, which reports it.
    with contextlib.suppress(RemoteError, RemoteTimeout):
        ssh.execute(
            ssh_config, host, "true", timeout=CONNECT_TIMEOUT * 2, connect_timeout=CONNECT_TIMEOUT
        )


def make(ssh_config: Path, hosts: Iterable[str]) -> list[str]:
    """Reach each host once when the ssh_config records keys at first contact; the hosts
    reached (none when keys are pinned)."""
    if not records_at_first_contact(ssh_config):
        return []
    todo = list(hosts)
    if todo:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(todo))) as pool:
            list(pool.map(lambda h: _reach(ssh_config, h), todo))
    return todo
