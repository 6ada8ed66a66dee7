"""A real etcd (Debian's etcd-server) on loopback, set up the way the etcd role sets up a member:
TLS only with a throwaway CA, client certificates without a common name, JWT tokens, and users
and roles applied by the role's own ``ptc-etcd-admin``. No stand-in: the client and the store are
tested against etcd itself.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from elastic import paths
from elastic.configserver.client import Credentials, Endpoint, EtcdClient

AUTH_SCRIPT = paths.REPO_ROOT / "roles" / "etcd" / "files" / "ptc-etcd-admin"
USERS = ("root", "manager", "partition-a")
ROLES = [
    {"name": "manager", "permissions": [{"prefix": "/ptc/manager/", "access": "readwrite"}]},
    {"name": "partition-a", "permissions": [{"prefix": "/ptc/partitions/a/", "access": "read"}]},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    if not ca:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] * server)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(directory: Path, name: str) -> tuple[x509.Name, ec.EllipticCurvePrivateKey]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    (directory / "ca.crt").write_bytes(_pem(_cert(subject, key, subject, key, ca=True)))
    return subject, key


def make_pki(root: Path) -> Path:
    """The controller's PKI directory layout the etcd role writes (ca.crt, ca.key, members/,
    clients/, users/, jwt.key/jwt.pub)."""
    for sub in ("members", "clients", "users"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    ca_name, ca_key = make_ca(root, "test etcd CA")
    _write_key(ca_key, root / "ca.key")
    member_key = _key()
    member = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ptc etcd member")])
    _write_key(member_key, root / "members" / "m1.key")
    (root / "members" / "m1.crt").write_bytes(
        _pem(_cert(member, member_key, ca_name, ca_key, server=True))
    )
    for user in USERS:
        key = _key()
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ptc etcd client"),
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, user),
            ]
        )
        _write_key(key, root / "clients" / f"{user}.key")
        (root / "clients" / f"{user}.crt").write_bytes(_pem(_cert(subject, key, ca_name, ca_key)))
        (root / "users" / f"{user}.password").write_text(os.urandom(12).hex())
    jwt = _key()
    _write_key(jwt, root / "jwt.key")
    (root / "jwt.pub").write_bytes(
        jwt.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return root


def make_stranger(directory: Path) -> tuple[Path, Path]:
    """A client certificate from a CA that is not the cluster's."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_name, ca_key = make_ca(directory, "someone else's CA")
    key = _key()
    _write_key(key, directory / "stranger.key")
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "stranger")])
    (directory / "stranger.crt").write_bytes(_pem(_cert(subject, key, ca_name, ca_key)))
    return directory / "stranger.crt", directory / "stranger.key"


@dataclass
class EtcdServer:
    pki: Path
    data: Path
    port: int
    peer_port: int
    proc: subprocess.Popen[bytes]
    log: Path
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.url, "127.0.0.1", "m1")

    def credentials(self, user: str) -> Credentials:
        return Credentials.from_pki(self.pki, user)

    def client(self, user: str = "root", **kwargs: float) -> EtcdClient:
        return EtcdClient([self.endpoint], self.credentials(user), **kwargs)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        handle = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.args, stdout=handle, stderr=handle, stdin=subprocess.DEVNULL
        )
        handle.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def etcd_binary() -> str | None:
    return shutil.which("etcd")


def start_etcd(
    pki: Path,
    data: Path,
    log: Path,
    token_ttl_s: int = 600,
    name: str = "m1",
    ports: tuple[int, int] | None = None,
    initial_cluster: str | None = None,
    extra: Sequence[str] = (),
) -> EtcdServer:
    port, peer = ports or (free_port(), free_port())
    member = pki / "members"
    args = [
        etcd_binary() or "etcd",
        f"--name={name}",
        f"--data-dir={data}",
        "--logger=zap",
        "--log-level=error",
        f"--listen-client-urls=https://127.0.0.1:{port}",
        f"--advertise-client-urls=https://127.0.0.1:{port}",
        f"--listen-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-cluster={initial_cluster or f'{name}=https://127.0.0.1:{peer}'}",
        "--initial-cluster-token=test",
        f"--cert-file={member}/m1.crt",
        f"--key-file={member}/m1.key",
        f"--trusted-ca-file={pki}/ca.crt",
        "--client-cert-auth",
        f"--peer-cert-file={member}/m1.crt",
        f"--peer-key-file={member}/m1.key",
        f"--peer-trusted-ca-file={pki}/ca.crt",
        "--peer-client-cert-auth",
        f"--auth-token=jwt,pub-key={pki}/jwt.pub,priv-key={pki}/jwt.key,"
        f"sign-method=ES256,ttl={token_ttl_s}s",
        *extra,
    ]
    handle = log.open("ab")
    proc = subprocess.Popen(args, stdout=handle, stderr=handle, stdin=subprocess.DEVNULL)
    handle.close()
    server = EtcdServer(pki, data, port, peer, proc, log, args)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"etcd exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    return server


def apply_auth(server: EtcdServer, roles: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Run the role's ptc-etcd-admin against the server; what it changed."""
    spec = {
        "endpoint": server.url,
        "cacert": str(server.pki / "ca.crt"),
        "cert": str(server.pki / "clients" / "root.crt"),
        "key": str(server.pki / "clients" / "root.key"),
        "root_password": (server.pki / "users" / "root.password").read_text(),
        "roles": list(ROLES if roles is None else roles),
        "users": [
            {
                "name": user,
                "password": (server.pki / "users" / f"{user}.password").read_text(),
                "roles": [user],
            }
            for user in USERS
            if user != "root"
        ],
    }
    # The script is written for the nodes' Python 3: run it with this one.
    out = subprocess.run(
        [sys.executable, str(AUTH_SCRIPT)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"ptc-etcd-admin failed: {out.stderr}")
    changed: list[str] = json.loads(out.stdout)["changed"]
    return changed


def start_cluster(
    pki: Path, base: Path, members: int, extra: Sequence[str] = ()
) -> list[EtcdServer]:
    """``members`` etcd processes on loopback forming one cluster (every member uses the same
    certificate: they all listen on 127.0.0.1)."""
    base.mkdir(parents=True, exist_ok=True)
    ports = [(free_port(), free_port()) for _ in range(members)]
    initial = ",".join(f"m{i}=https://127.0.0.1:{p[1]}" for i, p in enumerate(ports))
    servers = []
    for i, p in enumerate(ports):
        servers.append(
            start_etcd(
                pki,
                base / f"m{i}",
                base / f"m{i}.log",
                name=f"m{i}",
                ports=p,
                initial_cluster=initial,
                extra=extra,
            )
        )
    return servers
