"""Reaching an experiment's configuration server: its members, credentials and endpoints.

From a workstation, the credentials are the controller's PKI directory the etcd role wrote
(``inventory/pki/etcd`` in the experiment directory) and the members are the inventory's
``config_server`` hosts. Their LAN addresses are not reachable from outside the experiment (a
namespace locally, a private LAN on CloudLab), so :func:`open_experiment` carries the client
ports over one SSH connection to a node, with local forwards, and checks each member's
certificate under the member's own name. On a node, see :mod:`elastic.configserver.node`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic import cluster_groups
from elastic.configserver.client import Credentials, Endpoint, EtcdClient
from elastic.errors import NotFoundError, PtcError
from elastic.remote import ssh
from elastic.testbed import experiment as experiments
from elastic.testbed.experiment import Experiment

CLIENT_PORT = 2379
TUNNEL_WAIT_S = 20.0


@dataclass(frozen=True)
class MemberAddress:
    name: str
    address: str  # its LAN address
    port: int = CLIENT_PORT


def pki_dir(exp: Experiment) -> Path:
    """Where the etcd role keeps the cluster's CA, keys and passwords (on this machine)."""
    return exp.inventory_dir / "pki" / "etcd"


def _inventory(exp: Experiment) -> dict[str, Any]:
    inventory = exp.require_inventory()
    import yaml  # here: nodes use this module without PyYAML

    data = yaml.safe_load(inventory.read_text()) or {}
    return dict(data.get("all", {}))


def members_of(exp: Experiment) -> list[MemberAddress]:
    """The configuration server's members, in inventory order."""
    inv = _inventory(exp)
    hosts = inv.get("hosts", {}) or {}
    children = inv.get("children", {}) or {}
    group = (children.get(cluster_groups.CONFIG_SERVER, {}) or {}).get("hosts", {}) or {}
    if not group:
        raise NotFoundError(
            f"experiment {exp.name!r} has no {cluster_groups.CONFIG_SERVER} hosts: its profile "
            "runs no configuration server"
        )
    out = []
    for name in group:
        address = (hosts.get(name) or {}).get("ptc_lan_address")
        if not address:
            raise PtcError(f"experiment {exp.name!r}: member {name} has no LAN address")
        out.append(MemberAddress(name, str(address)))
    return out


def select_members(known: Sequence[MemberAddress], names: Sequence[str]) -> list[MemberAddress]:
    """``names`` among ``known``, or a NotFoundError naming the unknown ones."""
    if not names:
        return list(known)
    by_name = {m.name: m for m in known}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise NotFoundError(
            f"--member: {', '.join(unknown)} is not a member of the configuration server "
            f"(members: {', '.join(by_name)})"
        )
    return [by_name[n] for n in names]


def ssh_hosts(exp: Experiment) -> list[str]:
    """Every inventory host, the members first: the tunnel goes through the first that answers."""
    inv = _inventory(exp)
    members = [m.name for m in members_of(exp)]
    return members + [h for h in (inv.get("hosts", {}) or {}) if h not in members]


class Tunnel(ssh.Tunnel):
    """``ssh -N -L`` through one node, forwarding a local port to each member's client port."""

    def __init__(self, ssh_config: Path, via: str, members: Sequence[MemberAddress]) -> None:
        self.ports = {m.name: ssh.free_port() for m in members}
        forwards = [
            ssh.Forward(f"127.0.0.1:{self.ports[m.name]}", m.address, m.port) for m in members
        ]
        super().__init__(ssh_config, via, forwards, connect_timeout=10, keepalive_s=5)

    def wait(self, timeout: float = TUNNEL_WAIT_S, poll_s: float = 0.2) -> None:
        super().wait(timeout, poll_s)


def credentials_for(exp: Experiment, user: str) -> Credentials:
    pki = pki_dir(exp)
    if not (pki / "ca.crt").is_file():
        raise NotFoundError(
            f"experiment {exp.name!r}: no configuration-server CA in {pki} "
            f"(deploy it first: `ptc deploy {exp.name}`)"
        )
    return Credentials.from_pki(pki, user)


@contextmanager
def open_experiment(
    name: str, user: str = "root", members: Sequence[str] = (), timeout: float = 5.0
) -> Iterator[EtcdClient]:
    """A client for experiment ``name``'s configuration server, as etcd user ``user``."""
    exp = experiments.load(name)
    chosen = select_members(members_of(exp), members)
    creds = credentials_for(exp, user)
    errors: list[str] = []
    for via in ssh_hosts(exp):
        tunnel = Tunnel(exp.ssh_config_path, via, chosen)
        try:
            tunnel.wait()
        except PtcError as err:
            errors.append(str(err))
            tunnel.close()
            continue
        endpoints = [
            Endpoint(f"https://127.0.0.1:{tunnel.ports[m.name]}", m.name, m.name) for m in chosen
        ]
        client = EtcdClient(endpoints, creds, timeout=timeout)
        try:
            yield client
        finally:
            client.close()
            tunnel.close()
        return
    raise PtcError(f"experiment {name!r}: no node could carry the connection: {'; '.join(errors)}")
