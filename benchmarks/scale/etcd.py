"""The manager's etcd store at scale: Debian's etcd-server 3.4 unpacked (never installed) and run
as one member on loopback, set up as the etcd role sets up a member (TLS only, client
certificates of a throwaway CA, JWT tokens, users and roles applied by the role's own
``ptc-etcd-admin``), so the manager reaches it as it does on a cluster: ``store: {kind: etcd}``
with a node's credential directory.

The member is one process of the run (in its ledger, with the run's marker), its data directory
under the run's directory; it is stopped and removed with the rest of the run.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.scale.cluster import REPO, Layout, start, unpack
from elastic.errors import PtcError

PACKAGES = ("etcd-server",)
BINARY = "usr/bin/etcd"
STATE_KEY = "/ptc/manager/state"  # the manager's, as elastic.manager.etcd_store names it
COPY_KEY = "/ptc/manager/scale-copy"  # the harness's copy, for the store's writes per second
USER = "manager"
# Memory beyond the file store's run: etcd holds every revision of the state until compaction.
MEMORY = 1024 * 1024 * 1024


def unpack_etcd(cache: Path) -> Path:
    """etcd's binary, from Debian's package unpacked under ``cache``."""
    return unpack(cache, PACKAGES, "etcd-root", BINARY) / BINARY


def etcd_env_module() -> ModuleType:
    """The throwaway PKI and the role's user set-up of the configuration server's tests."""
    where = str(REPO / "tests" / "unit" / "configserver")
    if where not in sys.path:
        sys.path.insert(0, where)
    import etcd_env

    module: ModuleType = etcd_env
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def etcd_argv(
    binary: Path, data: Path, pki: Path, port: int, peer: int, max_request_bytes: int | None
) -> list[str]:
    """One member as the etcd role configures one (its environment file), on loopback.
    ``max_request_bytes`` None keeps etcd's own limit (1.5 MiB), as the role does."""
    member = pki / "members"
    argv = [
        str(binary),
        "--name=m1",
        f"--data-dir={data}",
        "--logger=zap",
        "--log-level=warn",
        f"--listen-client-urls=https://127.0.0.1:{port}",
        f"--advertise-client-urls=https://127.0.0.1:{port}",
        f"--listen-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-cluster=m1=https://127.0.0.1:{peer}",
        "--initial-cluster-token=scale",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",
        f"--cert-file={member}/m1.crt",
        f"--key-file={member}/m1.key",
        f"--trusted-ca-file={pki}/ca.crt",
        "--client-cert-auth",
        f"--peer-cert-file={member}/m1.crt",
        f"--peer-key-file={member}/m1.key",
        f"--peer-trusted-ca-file={pki}/ca.crt",
        "--peer-client-cert-auth",
        f"--auth-token=jwt,pub-key={pki}/jwt.pub,priv-key={pki}/jwt.key,sign-method=ES256,ttl=600s",
    ]
    if max_request_bytes is not None:
        argv.append(f"--max-request-bytes={max_request_bytes}")
    return argv


def client_directory(pki: Path, directory: Path, url: str, user: str = USER) -> Path:
    """A node's credential directory (what the etcd role installs on a node, read by
    ``elastic.configserver.node.open_node``) for ``user``, from the controller's PKI layout."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    (directory / "endpoints").write_text(url + "\n")
    shutil.copyfile(pki / "ca.crt", directory / "ca.crt")
    for suffix in ("crt", "key"):
        shutil.copyfile(pki / "clients" / f"{user}.{suffix}", directory / f"{user}.{suffix}")
    shutil.copyfile(pki / "users" / f"{user}.password", directory / f"{user}.password")
    for path in directory.iterdir():
        path.chmod(0o600)
    return directory


@dataclass(frozen=True)
class Etcd:
    proc: subprocess.Popen[bytes]
    url: str
    credentials: Path  # the manager's credential directory
    data: Path

    def store_settings(self, timeout: float = 60.0) -> dict[str, Any]:
        """The manager configuration's ``store:`` mapping."""
        return {"kind": "etcd", "key": STATE_KEY, "user": USER,
                "credentials": str(self.credentials), "timeout": timeout}  # fmt: skip

    def data_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.data.rglob("*") if p.is_file())


def start_etcd(
    layout: Layout, run_id: str, binary: Path, *, max_request_bytes: int | None = None
) -> Etcd:
    """One member, its users and roles, and the manager's credential directory."""
    support = etcd_env_module()
    d = layout.run / "etcd"
    d.mkdir(parents=True, exist_ok=True)
    pki = support.make_pki(d / "pki")
    port, peer = free_port(), free_port()
    argv = etcd_argv(binary, d / "data", pki, port, peer, max_request_bytes)
    proc = start(argv, layout, run_id, "etcd", d / "etcd.log")
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise PtcError(f"etcd exited {proc.returncode}; see {d}/etcd.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise PtcError(f"etcd: not listening within 30 s; see {d}/etcd.log") from None
            time.sleep(0.1)
    url = f"https://127.0.0.1:{port}"
    member = support.EtcdServer(pki, d / "data", port, peer, proc, d / "etcd.log")
    support.apply_auth(member)
    return Etcd(proc, url, client_directory(pki, d / "client", url), d / "data")


@dataclass(frozen=True)
class EtcdRun:
    """What each size of a run with ``--store etcd`` starts its member with."""

    binary: Path
    max_request_bytes: int | None = None

    def start(self, layout: Layout, run_id: str) -> Etcd:
        return start_etcd(layout, run_id, self.binary, max_request_bytes=self.max_request_bytes)
