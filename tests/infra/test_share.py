"""Shared storage: exported by the server, mounted (or bound) on clients, one tree everywhere."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conftest import cluster_var, group, name_of, require_group, variables
from testinfra.host import Host

from elastic import node_paths

DEFAULT_SHARES = [
    {"name": "home", "path": "/home"},
    {"name": "opt-ptc", "path": node_paths.SHARED_SOFTWARE},
]


def shares(host: Host) -> list[dict[str, str]]:
    value = cluster_var(host, "ptc_shares", DEFAULT_SHARES)
    return list(value) if isinstance(value, list) else DEFAULT_SHARES


def nfs_server(host: Host) -> str:
    """The host that serves NFS: the inventory's ptc_nfs_server when it names one (the local
    testbed's file server), else the first of the group nfs_server."""
    named = str(variables(host).get("ptc_nfs_server", ""))
    return named if named and "{" not in named else group(host, "nfs_server")[0]


def cluster_user(host: Host) -> str:
    return str(cluster_var(host, "common_cluster_user", "ptc"))


def test_nfs_server_running(host: Host) -> None:
    require_group(host, "nfs_server")
    backend = variables(host).get("nfs_server_backend", "kernel")
    if backend == "external":
        server = nfs_server(host)
        out = host.run(f"timeout 5 bash -c 'exec 3<>/dev/tcp/{server}/2049'")
        assert out.rc == 0, (
            f"{name_of(host)}: the NFS server {server} does not answer on port 2049: "
            f"{out.stderr.strip()}"
        )
        assert not host.service("nfs-ganesha").is_running, (
            f"{name_of(host)}: runs NFS-Ganesha itself although {server} serves its exports"
        )
        return
    service = "nfs-ganesha" if backend == "ganesha" else "nfs-server"
    assert host.service(service).is_running, f"{name_of(host)}: {service} is not running"
    assert (
        host.socket("tcp://0.0.0.0:2049").is_listening or host.socket("tcp://:::2049").is_listening
    ), f"{name_of(host)}: nothing listens on NFS port 2049"


def test_share_mounted(host: Host) -> None:
    require_group(host, "nfs_client")
    method = variables(host).get("nfs_client_mount_method", "kernel")
    for share in shares(host):
        mount = host.mount_point(share["path"])
        assert mount.exists, f"{name_of(host)}: {share['path']} is not mounted ({method})"
        if method == "kernel":
            assert mount.filesystem.startswith("nfs"), (
                f"{name_of(host)}: {share['path']} is {mount.filesystem}, not NFS"
            )
        for option in ("nodev", "nosuid"):
            assert option in mount.options, (
                f"{name_of(host)}: {share['path']} is mounted without {option}"
            )


def test_export_served_over_nfs(host: Host) -> None:
    """Where the kernel has no NFS client, read each export with libnfs instead of a mount."""
    require_group(host, "nfs_client")
    if variables(host).get("nfs_client_mount_method", "kernel") != "local_bind":
        pytest.skip(f"{name_of(host)}: a kernel NFS mount (its mount check covers the export)")
    server = nfs_server(host)
    for share in shares(host):
        url = f"nfs://{server}{share['path']}/.ptc-export?version=4"
        out = host.run(f"ptc-nfs-cat '{url}'")
        assert out.rc == 0 and "ptc NFS export" in out.stdout, (
            f"{name_of(host)}: {url} is not served over NFS (rc={out.rc}: {out.stderr.strip()})"
        )


def test_export_squashes_root(host: Host) -> None:
    """root on a client must not write to the export: it is mapped to nobody (root_squash)."""
    require_group(host, "nfs_client")
    if variables(host).get("nfs_client_mount_method", "kernel") != "local_bind":
        # Kernel clients: the mount itself enforces it, and there is no libnfs there.
        pytest.skip(f"{name_of(host)}: a kernel NFS mount, root squashing is the server's")
    server = nfs_server(host)
    me = name_of(host)
    target = f"/home/.ptc-root-squash-{me}"
    out = host.run(f"nfs-cp /etc/hostname 'nfs://{server}{target}?version=4'")
    written = host.file(target).exists
    host.run(f"rm -f {target}")
    assert out.rc != 0 and not written, f"{me}: root wrote {target} over NFS: root is not squashed"


def test_share_writable_and_shared(host: Host, other: Any) -> None:
    """The cluster user writes to its home here; the NFS server sees the same file."""
    require_group(host, "nfs_client", "nfs_server")
    user = cluster_user(host)
    me = name_of(host)
    token = uuid.uuid4().hex
    path = f"/home/{user}/.ptc-verify-{me}"
    out = host.run(f"runuser -u {user} -- sh -c 'echo {token} > {path}'")
    assert out.rc == 0, f"{me}: {user} cannot write {path}: {out.stderr.strip()}"
    server = group(host, "nfs_server")[0]
    seen = other(server).run(f"cat {path}")
    host.run(f"runuser -u {user} -- rm -f {path}")
    assert seen.stdout.strip() == token, (
        f"{me}: a file {user} wrote to {path} is not visible on {server}"
    )
