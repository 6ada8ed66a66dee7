"""Re-keying a restored configuration server (elastic.configserver.rekey): the short-lived admin
certificate, the stream a member receives, and the member's script run here against a real etcd
whose users hold other passwords, as after a restore of another cluster's snapshot."""

from __future__ import annotations

import datetime
import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from etcd_env import apply_auth, make_pki, start_etcd

from elastic.configserver.errors import PermissionDenied
from elastic.configserver.rekey import CERT_LIFETIME, admin_certificate, bundle, command, parse
from elastic.errors import NotFoundError


def test_the_admin_certificate_is_root_s_signed_by_the_ca_and_short_lived(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    now = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.UTC)
    pem, _key = admin_certificate(pki, now)
    cert = x509.load_pem_x509_certificate(pem)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "root"
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.not_valid_after_utc == now + CERT_LIFETIME
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_the_stream_carries_the_passwords_and_never_the_ca_key(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    with tarfile.open(fileobj=io.BytesIO(bundle(pki))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        names = set(members)
        assert names == {
            "ca.crt",
            "admin.crt",
            "admin.key",
            "users/root.password",
            "users/manager.password",
            "users/partition-a.password",
        }
        assert all(m.mode == 0o600 for m in members.values())
        got = tar.extractfile("users/manager.password")
        assert got is not None
        assert got.read().decode().strip() == (pki / "users" / "manager.password").read_text()


def test_missing_pki_files_are_named(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    (pki / "ca.key").unlink()
    with pytest.raises(NotFoundError, match=r"ca\.key"):
        bundle(pki)
    for password in (pki / "users").glob("*.password"):
        password.unlink()
    with pytest.raises(NotFoundError, match="no user passwords"):
        bundle(pki)


def test_parse_sorts_the_script_s_lines() -> None:
    got = parse("head", "set root\nset manager\nmissing partition-b\nkept partition-old\nnoise\n")
    assert (got.member, got.set, got.missing, got.kept) == (
        "head", ["root", "manager"], ["partition-b"], ["partition-old"],
    )  # fmt: skip


def test_the_script_gives_a_foreign_cluster_s_users_this_pki_s_passwords(tmp_path: Path) -> None:
    """The server's users log in with the "source" passwords; after the script, with this PKI's,
    and the old ones are refused. A user only the server has keeps its password."""
    pki = make_pki(tmp_path / "pki")
    server = start_etcd(pki, tmp_path / "data", tmp_path / "etcd.log")
    try:
        apply_auth(server)  # users with the "source" passwords
        old_manager = (pki / "users" / "manager.password").read_text()
        with server.client() as root:
            root.call("auth/user/add", {"name": "partition-old", "password": "x" * 12})
        # This experiment's PKI: the same CA, other passwords, one user the server lacks.
        for user in ("root", "manager", "partition-a", "partition-new"):
            (pki / "users" / f"{user}.password").write_text(f"new-{user}-0123456789")
        before = set(Path("/run").glob("ptc-rekey.*"))
        proc = subprocess.run(
            command(server.url), shell=True, input=bundle(pki), capture_output=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        got = parse("m1", proc.stdout.decode())
        assert sorted(got.set) == ["manager", "partition-a", "root"]
        assert got.missing == ["partition-new"]
        assert got.kept == ["partition-old"]
        with server.client("manager") as manager:
            manager.put("/ptc/manager/after-rekey", "1")
        with server.client() as root:
            assert root.get("/ptc/manager/after-rekey") is not None
        (pki / "users" / "manager.password").write_text(old_manager)
        with pytest.raises(PermissionDenied), server.client("manager") as manager:
            manager.get("/ptc/manager/after-rekey")
        assert set(Path("/run").glob("ptc-rekey.*")) == before, "the member's copy was left"
    finally:
        server.stop()


def test_a_certificate_of_another_ca_is_refused(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    other = make_pki(tmp_path / "other")
    (other / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())  # trusts ours, signs with its
    server = start_etcd(pki, tmp_path / "data", tmp_path / "etcd.log")
    try:
        apply_auth(server)
        proc = subprocess.run(
            command(server.url, timeout_s=5), shell=True, input=bundle(other),
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode != 0
        assert not parse("m1", proc.stdout.decode()).set
    finally:
        server.stop()


def test_ec_keys_only_are_made(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    _cert, key = admin_certificate(make_pki(tmp_path / "pki"))
    assert isinstance(serialization.load_pem_private_key(key, None), ec.EllipticCurvePrivateKey)
