"""The cluster's shape: which Ansible groups exist, and which groups a manifest gives each node.

The profile decides every node's groups and writes them into the node's boot command,
``startup.sh --groups a,b,c``. That command is an RSpec Execute service, which every aggregate
copies unchanged into the manifest, so the groups travel from the profile to the inventory with
no guessing by name. ``site.yml`` targets only groups listed in :data:`KNOWN_GROUPS`; a unit test
holds the profile, this list and ``site.yml`` to each other.
"""

from __future__ import annotations

import shlex

from elastic import cluster_groups as g
from elastic import node_paths
from elastic.errors import InputError
from elastic.profile.topology import Node

# group -> what a member does. Keep in step with site.yml (tests/unit/testbed/test_groups.py).
# The names are elastic.cluster_groups', where every layer finds them.
KNOWN_GROUPS: dict[str, str] = {
    g.SLURM_CONTROLLER: "runs slurmctld",
    g.SLURM_DBD: "runs slurmdbd and its MariaDB",
    g.SLURM_COMPUTE: "runs slurmd and the jobs",
    g.NFS_SERVER: f"exports /home and {node_paths.SHARED_SOFTWARE}",
    g.NFS_CLIENT: f"mounts the shares of the {g.NFS_SERVER}",
    g.CONFIG_SERVER: "a member of the configuration server; runs the elastic manager",
}

STARTUP_SCRIPT = "startup.sh"
GROUPS_OPTION = "--groups"


def node_groups(node: Node) -> tuple[str, ...]:
    """The groups the manifest gives ``node``: none when its boot command carries none."""
    found: list[str] = []
    for service in node.execute:
        words = _words(service.command)
        if not any(w.endswith(STARTUP_SCRIPT) for w in words):
            continue
        for i, word in enumerate(words):
            value = None
            if word == GROUPS_OPTION and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(GROUPS_OPTION + "="):
                value = word.split("=", 1)[1]
            if value is not None:
                found += [g.strip() for g in value.split(",") if g.strip()]
    for group in found:
        if group not in KNOWN_GROUPS:
            raise InputError(
                f"node {node.client_id!r}: the manifest gives it the unknown group {group!r} "
                f"(known groups: {', '.join(KNOWN_GROUPS)})"
            )
    return tuple(dict.fromkeys(found))


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
