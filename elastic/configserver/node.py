"""Reaching the configuration server from a node of the cluster: the credentials and endpoint
list the etcd role installed (``elastic.node_paths.ETCD_CLIENT_DIR``), and the members' LAN
addresses. Standard
library only: the nodes' system Python runs this."""

from __future__ import annotations

from pathlib import Path

from elastic import node_paths
from elastic.configserver.client import Credentials, Endpoint, EtcdClient
from elastic.errors import InputError, NotFoundError

NODE_CLIENT_DIR = Path(node_paths.ETCD_CLIENT_DIR)


def node_endpoints(directory: Path = NODE_CLIENT_DIR) -> list[Endpoint]:
    path = directory / "endpoints"
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist: this node is no configuration-server client")
    endpoints = []
    for line in path.read_text().split():
        host = line.split("//", 1)[-1].rsplit(":", 1)[0]
        endpoints.append(Endpoint(line, host, host))
    if not endpoints:
        raise InputError(f"{path}: no endpoint listed")
    return endpoints


def open_node(user: str, directory: Path = NODE_CLIENT_DIR, timeout: float = 5.0) -> EtcdClient:
    """A client on a node of the cluster, with the credentials the etcd role installed."""
    return EtcdClient(node_endpoints(directory), Credentials.from_dir(directory, user), timeout)
