"""Reaching an experiment's elastic managers from the workstation, with nothing but SSH.

The managers listen on the experiment LAN only (10.10.1.x), which a workstation cannot route to
(the local testbed keeps each LAN in a network namespace; CloudLab's LANs are private too). So
:func:`open_manager` logs in to a ``config_server`` node that answers (the first, in inventory
order, that SSH reaches within a few seconds), reads its manager's configuration there (address,
port, tokens, and ``peers``: every manager's URL) and the token it needs, and forwards one Unix
socket per manager, in a private directory, through that one SSH connection (``ssh -L``). The
client is given every manager and finds the active one itself (``elastic.manager.client``), so
nobody edits an address after a failover. The token lives only in this process's memory: it is
not written on the workstation, nor printed.

The managers serve HTTPS: through the tunnel the client still asks for the manager's own URL
(its LAN address), so the certificate is verified for that address, against the cluster's CA:
the experiment's PKI on the workstation when it deployed the cluster, else the CA the
deploy put on the node logged in to (reached over the same authenticated SSH as the token).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from elastic import cluster_groups, node_paths, wire
from elastic.errors import InputError, NotFoundError, PtcError, RemoteError, RemoteTimeout
from elastic.manager.auth import OBSERVER
from elastic.manager.client import ManagerClient, split_urls
from elastic.remote import ssh

CONNECT_TIMEOUT = 5  # s: a node that does not answer SSH this fast is passed over


@dataclass(frozen=True)
class ManagerSite:
    """Where an experiment's managers run: the node logged in to, its manager's LAN address,
    port and tokens directory, and every manager's URL."""

    node: str
    address: str
    port: int
    tokens: str
    peers: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    @property
    def urls(self) -> list[str]:
        return split_urls(list(self.peers) or [self.url])

    def observer_token_path(self) -> str:
        return f"{self.tokens}/{OBSERVER}.token"

    def token_path(self, partition: str | None) -> str:
        name = "admin.token" if partition is None else f"partition-{partition}.token"
        return f"{self.tokens}/{name}"


def inventory_groups(inventory: Path) -> dict[str, list[str]]:
    try:
        doc = yaml.safe_load(inventory.read_text()) or {}
    except OSError as err:
        raise NotFoundError(f"{inventory}: {err.strerror or err} (run `ptc inventory`)") from err
    children = (doc.get("all") or {}).get("children") or {}
    return {g: list((v or {}).get("hosts") or {}) for g, v in children.items()}


def controller(inventory: Path, purpose: str) -> str:
    """The experiment's Slurm controller (the first host of its group); an error naming
    ``purpose``, what it was wanted for, when the inventory has none."""
    group = cluster_groups.SLURM_CONTROLLER
    controllers = inventory_groups(inventory).get(group) or []
    if not controllers:
        raise InputError(f"{inventory}: no Slurm controller ({group}) {purpose}")
    return controllers[0]


def ssh_run(
    ssh_config: Path,
    node: str,
    command: str,
    timeout: float = 60.0,
    connect_timeout: int = 30,
) -> str:
    return ssh.run(ssh_config, node, command, timeout=timeout, connect_timeout=connect_timeout)


def find_manager(inventory: Path, ssh_config: Path) -> ManagerSite:
    """The first ``config_server`` node that answers, with its manager's configuration."""
    group = cluster_groups.CONFIG_SERVER
    members = inventory_groups(inventory).get(group) or []
    if not members:
        raise NotFoundError(f"{inventory}: no host in group {group}: no elastic manager")
    problems: list[str] = []
    for node in members:
        try:
            text = ssh_run(
                ssh_config,
                node,
                f"cat {node_paths.MANAGER_CONFIG}",
                timeout=30,
                connect_timeout=CONNECT_TIMEOUT,
            )
        except (RemoteError, RemoteTimeout) as err:
            problems.append(str(err))
            continue
        conf: dict[str, Any] = yaml.safe_load(text) or {}
        return ManagerSite(
            node=node,
            address=str(conf["listen"]),
            port=int(conf.get("port", wire.MANAGER_PORT)),
            tokens=str(conf.get("tokens", node_paths.ELASTIC_TOKENS_DIR)),
            peers=tuple(str(u) for u in conf.get("peers") or ()),
        )
    raise NotFoundError(
        f"no elastic manager configured ({node_paths.MANAGER_CONFIG}) on any of {', '.join(members)}; deploy with "
        f"-e ptc_elastic=true ({'; '.join(problems)})"
    )


class Tunnel(ssh.SocketTunnel):
    """One Unix socket per manager, in a 0700 temporary directory, over one SSH connection;
    up when constructed."""

    def __init__(
        self, ssh_config: Path, node: str, targets: Sequence[tuple[str, int]] | str, port: int = 0
    ) -> None:
        if isinstance(targets, str):  # Tunnel(ssh_config, node, address, port)
            targets = [(targets, port)]
        what = "the manager at " + ", ".join(f"{a}:{p}" for a, p in targets)
        super().__init__(
            ssh_config,
            node,
            targets,
            connect_timeout=CONNECT_TIMEOUT,
            what=what,
            prefix="ptc-elastic-",
        )
        self.socket = next(iter(self.sockets.values()))
        self.wait(30.0, poll_s=0.05)


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if not parts.hostname:
        raise PtcError(f"manager URL {url!r}: no host")
    return parts.hostname, parts.port or 80


@contextlib.contextmanager
def open_manager(
    inventory: Path,
    ssh_config: Path,
    partition: str | None = None,
    *,
    failover_timeout: float | None = None,
    observer: bool = False,
) -> Iterator[ManagerClient]:
    """A client of the experiment's managers, as the admin (``partition`` None), as that
    partition, or (``observer``) with the token that only reads, over SSH forwards that close
    with the context. The active manager comes first."""
    site = find_manager(inventory, ssh_config)
    path = site.observer_token_path() if observer else site.token_path(partition)
    try:
        token = ssh_run(ssh_config, site.node, f"cat {path}").strip()
    except RemoteError as err:
        who = "the admin" if partition is None else f"partition {partition}"
        who = "the observer" if observer else who
        raise NotFoundError(f"{site.node}: no token for {who} ({path})") from err
    urls = site.urls
    ca = cluster_ca(inventory, ssh_config, site.node)
    tunnel = Tunnel(ssh_config, site.node, [_target(u) for u in urls])
    transports: dict[str, httpx.BaseTransport] = {
        url: httpx.HTTPTransport(uds=str(tunnel.sockets[_target(url)]), verify=ca) for url in urls
    }
    extra: dict[str, Any] = {"ca": ca}
    if failover_timeout is not None:
        extra["failover_timeout"] = failover_timeout
    client = ManagerClient(urls, token, transports=transports, **extra)
    try:
        active = client.health().get("active_manager")
        if isinstance(active, str) and active.rstrip("/") in urls and active != urls[0]:
            client.close()
            first = active.rstrip("/")
            client = ManagerClient(
                [first, *(u for u in urls if u != first)], token, transports=transports, **extra
            )
        yield client
    finally:
        client.close()
        tunnel.close()


def cluster_ca(inventory: Path, ssh_config: Path, node: str) -> ssl.SSLContext:
    """A context trusting only the cluster's CA (see the module's docstring)."""
    local = inventory.parent / "pki" / "etcd" / "ca.crt"
    if local.is_file():
        return ssl.create_default_context(cafile=str(local))
    try:
        pem = ssh_run(ssh_config, node, f"cat {node_paths.ELASTIC_CA}")
    except RemoteError as err:
        raise NotFoundError(
            f"{node}: no cluster CA ({local} here, {node_paths.ELASTIC_CA} there) to verify the managers "
            "with: deploy with -e ptc_elastic=true"
        ) from err
    return ssl.create_default_context(cadata=pem)


def slurm_states(inventory: Path, ssh_config: Path) -> dict[str, str]:
    """{node: Slurm state} from sinfo on the controller ({} when there is none)."""
    controllers = inventory_groups(inventory).get(cluster_groups.SLURM_CONTROLLER) or []
    if not controllers:
        return {}
    out = ssh_run(ssh_config, controllers[0], "sinfo --noheader --Node --format='%N|%T|%E'")
    states: dict[str, str] = {}
    for line in out.splitlines():
        name, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if name:
            reason = reason.strip()
            states[name] = state.strip() + ("" if reason in ("", "none") else f" ({reason})")
    return states
