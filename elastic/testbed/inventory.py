"""Manifest -> Ansible inventory (``hosts.yml``), ``ssh_config`` and ``group_vars/all/``.

The same code serves CloudLab and local manifests: everything comes from the manifest's
``<login>`` elements, interfaces, links and each node's groups (``elastic.testbed.groups``:
the ``--groups`` of its boot command). A node without groups is a host in no cluster group.
Nodes without a ``<login>`` (remote blockstores) are not hosts.

Two ways to reach the hosts: ``Reach.LOGIN`` (a workstation: the ``<login>`` host and port,
with the experiment key) and ``Reach.LAN`` (a node of the experiment itself, such as the head
running the playbooks: every node by its LAN address, as root with the key mesh).

Which ``<login>``: a manifest from the CloudLab portal lists one per project member on every
node. The user is the one asked for (``user``), else the geni-lib context's user (``user-name``
of ``~/.bssw/geni/context.json``, made by geni-lib's ``build-context``), else the only user
the manifest lists; when a node lists several and neither names one, the build is refused.

Groups for a manifest that carries none (a profile that is not ptc's): ``groups`` maps nodes to
Ansible groups explicitly, replacing what the manifest gives those nodes. Unknown groups and
nodes are refused by name. The explicit choices (``user``, ``groups``) are kept in the
inventory directory (``choices.json``) and apply again when the inventory is rebuilt (``ptc
modify``) until they are given anew.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from elastic import atomic, cluster_groups, paths
from elastic.errors import InputError
from elastic.profile.topology import Login, Node, Topology
from elastic.testbed.groups import KNOWN_GROUPS, node_groups

_TESTBED = re.compile(r"^[a-z][a-z0-9_-]*$")
LAN_USER = "root"  # the key mesh authorises the experiment key for root on every node
CHOICES_FILE = "choices.json"  # the user's explicit --user and --group, kept for rebuilds
_SHOWN_USERS = 8


class Reach(enum.Enum):
    LOGIN = "login"  # from outside: the manifest's <login> host, port and user
    LAN = "lan"  # from a node of the experiment: LAN addresses, root, the key mesh


def geni_context_path() -> Path:
    """Where geni-lib's ``build-context`` writes the context (geni-lib's default path)."""
    return Path.home() / ".bssw" / "geni" / "context.json"


def context_user(path: Path | None = None) -> str | None:
    """The user name of a geni-lib context file (format 1 or 2); None if there is none."""
    path = path or geni_context_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"geni-lib context {str(path)!r} is not readable JSON: {err}") from err
    name: Any = None
    if isinstance(data, dict):
        name = data.get("user-name")
        users = data.get("users")
        if name is None and isinstance(users, list) and users and isinstance(users[0], dict):
            name = users[0].get("username")
    if not isinstance(name, str) or not name:
        raise InputError(f"geni-lib context {str(path)!r} names no user ('user-name')")
    return name


def load_groups_file(path: Path) -> dict[str, list[str]]:
    """A node -> groups mapping from YAML: ``node-0: [slurm_compute, nfs_client]`` (or a
    comma-separated string)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise InputError(f"groups file {str(path)!r} does not exist") from err
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise InputError(f"groups file {str(path)!r} is not YAML: {err}") from err
    if not isinstance(data, dict):
        raise InputError(f"groups file {str(path)!r} must map node names to lists of groups")
    out: dict[str, list[str]] = {}
    for node, groups in data.items():
        if isinstance(groups, str):
            groups = [g.strip() for g in groups.split(",") if g.strip()]
        elif groups is None:
            groups = []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise InputError(
                f"groups file {str(path)!r}: node {node!r} must map to a list of group names"
            )
        out[str(node)] = groups
    return out


def build_inventory(
    manifest: Topology,
    out_dir: Path,
    key_file: Path,
    testbed: str,
    reach: Reach = Reach.LOGIN,
    *,
    user: str | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    context: Path | None = None,
    pinned: bool = False,
) -> Path:
    """Write the inventory for ``manifest`` into ``out_dir``; return the hosts.yml path.

    Host keys are checked against ``out_dir/known_hosts``: strictly when ``pinned`` (whoever
    made the nodes put their keys there), else recorded at first contact; a changed key is
    refused either way (see elastic.testbed.known_hosts).

    ``user`` picks that user's ``<login>`` on every node; ``groups`` puts nodes in Ansible
    groups explicitly (replacing the manifest's for those nodes; an empty list clears a
    mapping made before); ``context`` is the geni-lib context file whose user is taken when
    the manifest lists several (default: geni-lib's default path).
    """
    if not _TESTBED.match(testbed):
        raise InputError(f"testbed name {testbed!r} is invalid (lowercase letters, digits, - _)")
    hosts = [n for n in manifest.nodes if n.login is not None]
    if not hosts:
        raise InputError("the manifest has no node with a <login> element: nothing to reach by SSH")
    out_dir = out_dir.resolve()
    key_file = key_file.resolve()
    kept_user, kept_groups = _kept_choices(out_dir)
    user = user or kept_user
    mapping = _group_mapping(manifest, hosts, kept_groups, groups or {})
    if reach is Reach.LOGIN:
        chosen = _choose_user(hosts, user, context)
        if chosen is not None:
            hosts = [_with_login(n, chosen) for n in hosts]
    link_of = {ref: link.client_id for link in manifest.links for ref in link.interface_refs}
    if reach is Reach.LAN:
        unreachable = [n.client_id for n in hosts if not _lan_addresses(n, link_of)]
        if unreachable:
            raise InputError(
                f"node(s) {', '.join(unreachable)} have no LAN address: "
                "they cannot be reached from inside the experiment"
            )

    checking = "yes" if pinned else "accept-new"
    inventory = _inventory(hosts, out_dir, key_file, testbed, link_of, reach, mapping, checking)
    hosts_path = out_dir / "hosts.yml"
    header = f"# Generated by ptc from the experiment's manifest ({testbed}); do not edit.\n"
    atomic.write_text(hosts_path, header + yaml.safe_dump(inventory, sort_keys=False, width=1000))
    atomic.write_text(
        out_dir / "ssh_config", _ssh_config(hosts, out_dir, key_file, link_of, reach, checking)
    )
    _copy_group_vars(out_dir, testbed)
    _keep_choices(out_dir, user, mapping)
    return hosts_path


def _kept_choices(out_dir: Path) -> tuple[str | None, dict[str, list[str]]]:
    path = out_dir / CHOICES_FILE
    if not path.is_file():
        return None, {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data.get("user"), {str(k): list(v) for k, v in (data.get("groups") or {}).items()}


def _keep_choices(out_dir: Path, user: str | None, mapping: dict[str, list[str]]) -> None:
    path = out_dir / CHOICES_FILE
    if user is None and not mapping:
        path.unlink(missing_ok=True)
        return
    atomic.write_text(path, json.dumps({"user": user, "groups": mapping}, indent=2) + "\n")


def _group_mapping(
    manifest: Topology,
    hosts: list[Node],
    kept: Mapping[str, Sequence[str]],
    given: Mapping[str, Sequence[str]],
) -> dict[str, list[str]]:
    """The explicit node -> groups mapping: the kept one (for nodes still there), then the
    given one over it; unknown nodes and groups refused by name."""
    names = [n.client_id for n in manifest.nodes]
    host_names = {n.client_id for n in hosts}
    for node in given:
        if node not in names:
            raise InputError(
                f"--group: the manifest has no node {node!r} (nodes: {', '.join(names)})"
            )
        if node not in host_names:
            raise InputError(f"--group: node {node!r} has no <login>: it is not an Ansible host")
    mapping = {n: list(g) for n, g in kept.items() if n in host_names}
    for node, groups in given.items():
        if groups:
            mapping[node] = list(dict.fromkeys(groups))
        else:
            mapping.pop(node, None)
    for node, groups in mapping.items():
        unknown = [g for g in groups if g not in KNOWN_GROUPS]
        if unknown:
            raise InputError(
                f"--group: node {node!r} cannot be put in the unknown group "
                f"{', '.join(map(repr, unknown))} (known groups: {', '.join(KNOWN_GROUPS)})"
            )
    return mapping


def _users(nodes: Sequence[Node]) -> list[str]:
    return sorted({lg.username for n in nodes for lg in n.logins})


def _shown(users: list[str]) -> str:
    more = len(users) - _SHOWN_USERS
    return ", ".join(users[:_SHOWN_USERS]) + (f" and {more} more" if more > 0 else "")


def _choose_user(hosts: list[Node], user: str | None, context: Path | None) -> str | None:
    """The user whose ``<login>`` every host is reached with; None: each node's only one."""
    if user:
        missing = [n.client_id for n in hosts if n.login_for(user) is None]
        if missing:
            raise InputError(
                f"user {user!r} has no <login> on node(s) {', '.join(missing)} of the manifest "
                f"(its users: {_shown(_users(hosts))})"
            )
        return user
    several = [n for n in hosts if len({lg.username for lg in n.logins}) > 1]
    if not several:
        return None
    path = context or geni_context_path()
    from_context = context_user(path)
    users = _users(several)
    if from_context is not None:
        missing = [n.client_id for n in hosts if n.login_for(from_context) is None]
        if not missing:
            return from_context
        raise InputError(
            f"the manifest lists logins for {len(users)} users ({_shown(users)}), but none "
            f"for {from_context!r}, the user of the geni-lib context {str(path)!r}, on node(s) "
            f"{', '.join(missing)}: name the user with --user"
        )
    raise InputError(
        f"the manifest lists logins for {len(users)} users on node "
        f"{several[0].client_id!r} ({_shown(users)}), as a manifest from the CloudLab portal "
        "does for every project member, and ptc cannot tell which is you: name the user with "
        "--user (e.g. `ptc inventory EXPERIMENT --user USER`), or create a geni-lib context "
        f"(geni-lib's build-context, at {str(path)!r}) whose user is taken"
    )


def _with_login(node: Node, user: str) -> Node:
    login = node.login_for(user)
    assert login is not None  # _choose_user checked every host
    others: list[Login] = [lg for lg in node.logins if lg is not login]
    return replace(node, login=login, other_logins=others)


def _inventory(
    hosts: list[Node],
    out_dir: Path,
    key_file: Path,
    testbed: str,
    link_of: dict[str, str],
    reach: Reach,
    mapping: Mapping[str, Sequence[str]],
    checking: str,
) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for node in hosts:
        chosen = mapping.get(node.client_id)
        for group in node_groups(node) if chosen is None else chosen:
            groups.setdefault(group, []).append(node.client_id)

    all_vars: dict[str, Any] = {
        "ptc_testbed": testbed,
        "ansible_ssh_common_args": (
            f"-o StrictHostKeyChecking={checking} -o UserKnownHostsFile={out_dir / 'known_hosts'} "
            "-o HashKnownHosts=no -o IdentitiesOnly=yes"
        ),
    }
    # The cluster's LAN: the controller's first one (any node's, without a controller).
    controllers = groups.get(cluster_groups.SLURM_CONTROLLER, [])
    anchor = next((n for n in hosts if n.client_id in controllers), None)
    for node in [anchor] if anchor else hosts:
        subnet = _first_lan(node, link_of)
        if subnet is not None:
            all_vars["ptc_lan_subnet"] = subnet
            break

    return {
        "all": {
            "vars": all_vars,
            "hosts": {n.client_id: _host_vars(n, key_file, link_of, reach) for n in hosts},
            "children": {
                group: {"hosts": {h: None for h in members}} for group, members in groups.items()
            },
        }
    }


def _first_lan(node: Node, link_of: dict[str, str]) -> str | None:
    for iface in node.interfaces:
        if iface.client_id in link_of and iface.ip and iface.netmask:
            return str(ipaddress.IPv4Interface(f"{iface.ip}/{iface.netmask}").network)
    return None


def _lan_addresses(node: Node, link_of: dict[str, str]) -> dict[str, str]:
    return {link_of[i.client_id]: i.ip for i in node.interfaces if i.ip and i.client_id in link_of}


def _endpoint(node: Node, link_of: dict[str, str], reach: Reach) -> tuple[str, int, str]:
    """(host, port, user) to SSH to ``node`` from where the inventory will be used."""
    assert node.login is not None  # callers pass hosts only
    if reach is Reach.LAN:
        return next(iter(_lan_addresses(node, link_of).values())), 22, LAN_USER
    return node.login.hostname, node.login.port, node.login.username


def _host_vars(node: Node, key_file: Path, link_of: dict[str, str], reach: Reach) -> dict[str, Any]:
    lan = _lan_addresses(node, link_of)
    host, port, user = _endpoint(node, link_of, reach)
    hv: dict[str, Any] = {
        "ansible_host": host,
        "ansible_port": port,
        "ansible_user": user,
        "ansible_ssh_private_key_file": str(key_file),
    }
    if lan:
        hv["ptc_lan_address"] = next(iter(lan.values()))
        hv["ptc_lan_addresses"] = lan
    return hv


def _ssh_config(
    hosts: list[Node],
    out_dir: Path,
    key_file: Path,
    link_of: dict[str, str],
    reach: Reach,
    checking: str,
) -> str:
    lines = ["# Generated by ptc from the experiment's manifest; use with ssh -F THIS_FILE NODE."]
    for node in hosts:
        host, port, user = _endpoint(node, link_of, reach)
        lines += [
            "",
            f"Host {node.client_id}",
            f"    HostName {host}",
            f"    Port {port}",
            f"    User {user}",
            f"    IdentityFile {key_file}",
            "    IdentitiesOnly yes",
            # The experiment's own known_hosts: pinned when the node was made, or recorded at
            # first contact; a key that changes is refused.
            f"    StrictHostKeyChecking {checking}",
            f"    UserKnownHostsFile {out_dir / 'known_hosts'}",
            # Readable entries: ptc pins and forgets them by name.
            "    HashKnownHosts no",
            "    LogLevel ERROR",
        ]
    return "\n".join(lines) + "\n"


def _copy_group_vars(out_dir: Path, testbed: str) -> None:
    """group_vars/all/ = the repo's inventories/group_vars/all/*.yml + <testbed>.yml."""
    source = paths.REPO_ROOT / "inventories" / "group_vars"
    target = out_dir / "group_vars" / "all"
    # Rebuilt from scratch so a file removed from the repository does not linger here.
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for src in sorted((source / "all").glob("*.yml")):
        atomic.write_bytes(target / src.name, src.read_bytes())
    testbed_vars = source / f"{testbed}.yml"
    if testbed_vars.is_file():
        atomic.write_bytes(target / "testbed.yml", testbed_vars.read_bytes())
    else:
        atomic.write_text(
            target / "testbed.yml",
            f"# No inventories/group_vars/{testbed}.yml in the repository.\n"
            f"ptc_testbed: {testbed}\n",
        )
