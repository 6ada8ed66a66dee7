"""The manager serves HTTPS only, and its clients verify it against the cluster's CA.

A real ``python -m elastic.manager`` (uvicorn) on loopback, with a CA and a server certificate
made here; the clients are the library's ManagerClient and plain httpx."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from elastic.errors import InputError
from elastic.manager.client import ManagerClient, ManagerUnreachable, UntrustedManager
from elastic.manager.core import http_notifier
from elastic.manager.service import ServiceConfig, require_tls

REPO = Path(__file__).resolve().parents[3]


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def make_ca(directory: Path, label: str) -> tuple[Path, ec.EllipticCurvePrivateKey, x509.Name]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(label))
        .issuer_name(_name(label))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{label}.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, key, cert.subject


def make_server_cert(
    directory: Path, ca_key: ec.EllipticCurvePrivateKey, issuer: x509.Name, address: str
) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("ptc elastic manager"))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    crt, pem = directory / "manager.crt", directory / "manager.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pem.chmod(0o600)
    return crt, pem


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    url: str
    ca: Path
    other_ca: Path
    token: str


def write_config(tmp: Path, port: int, tls: dict[str, str] | None) -> Path:
    conf: dict[str, object] = {
        "listen": "127.0.0.1",
        "port": port,
        "state": str(tmp / "state.json"),
        "tokens": str(tmp / "tokens"),
        "partitions": [{"name": "ref"}],
    }
    if tls is not None:
        conf["tls"] = tls
    path = tmp / "manager.yml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tls")
    ca, ca_key, issuer = make_ca(tmp, "cluster-ca")
    other_ca, _, _ = make_ca(tmp, "some-other-ca")
    crt, key = make_server_cert(tmp, ca_key, issuer, "127.0.0.1")
    port = free_port()
    conf = write_config(tmp, port, {"cert": str(crt), "key": str(key)})
    log = (tmp / "manager.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic.manager", "--config", str(conf)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not (tmp / "tokens" / "admin.token").is_file() or not _listening(port):
            assert proc.poll() is None, (tmp / "manager.log").read_text()
            assert time.monotonic() < deadline, "the manager did not start in 30 s"
            time.sleep(0.1)
        token = (tmp / "tokens" / "admin.token").read_text().strip()
        yield Served(url, ca, other_ca, token)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_client_that_trusts_the_cluster_ca_is_served(served: Served) -> None:
    client = ManagerClient(served.url, served.token, ca=served.ca)
    try:
        assert client.health()["ok"] is True
        assert [p["name"] for p in client.status()["partitions"]] == ["ref"]
    finally:
        client.close()


def test_plain_http_is_refused(served: Served) -> None:
    plain = served.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{plain}/v1/health", timeout=5)
    client = ManagerClient(plain, served.token, failover_timeout=1)
    try:
        with pytest.raises(ManagerUnreachable, match="no active elastic manager"):
            client.health()
    finally:
        client.close()


def test_a_client_that_does_not_trust_the_ca_fails_clearly(served: Served) -> None:
    for ca in (served.other_ca, None):  # another CA; the system's CAs
        client = ManagerClient(served.url, served.token, ca=ca)
        try:
            with pytest.raises(
                UntrustedManager, match=r"manager https://127\.0\.0\.1:\d+: its TLS"
            ):
                client.health()
        finally:
            client.close()


def test_the_certificate_must_name_the_address_the_client_asks(
    tmp_path: Path, served: Served
) -> None:
    """The certificate names 127.0.0.1: asked as localhost, the client refuses it."""
    client = ManagerClient(served.url.replace("127.0.0.1", "localhost"), served.token, ca=served.ca)
    try:
        with pytest.raises(UntrustedManager, match="localhost"):
            client.health()
    finally:
        client.close()


def test_the_manager_will_not_serve_without_tls(tmp_path: Path) -> None:
    conf = write_config(tmp_path, free_port(), None)
    with pytest.raises(InputError, match="tls: missing: the manager serves HTTPS only"):
        require_tls(ServiceConfig.load(conf).tls, str(conf))
    done = subprocess.run(
        [sys.executable, "-m", "elastic.manager", "--config", str(conf)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "tls: missing" in done.stderr
    bad = write_config(tmp_path, free_port(), {"cert": str(tmp_path / "none.crt")})
    with pytest.raises(InputError, match="tls: key: missing"):
        ServiceConfig.load(bad)


def test_notify_delete_pending_verifies_the_clients_endpoint(served: Served) -> None:
    """The manager's notifier speaks HTTPS to a client's endpoint, verified to the cluster's
    CA: here the endpoint is the manager served above (it answers the notification path 404,
    which proves the TLS handshake passed)."""
    from elastic.manager.client import tls_context

    with pytest.raises(httpx.HTTPStatusError):  # reached, verified, answered
        http_notifier(verify=tls_context(served.ca))(served.url, "t", {})
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        http_notifier(verify=tls_context(served.other_ca))(served.url, "t", {})


def test_the_slurm_clients_endpoint_will_not_serve_without_tls(tmp_path: Path) -> None:
    conf = tmp_path / "slurm-client.yml"
    conf.write_text("manager_url: https://127.0.0.1:1\ntoken_file: /nonexistent\n")
    done = subprocess.run(
        [sys.executable, "-m", "elastic.slurm", "--config", str(conf), "serve"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "tls: missing: the Slurm client's endpoint serves HTTPS only" in done.stderr
