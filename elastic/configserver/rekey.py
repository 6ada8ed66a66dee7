"""Give a restored configuration server the passwords of the experiment it now serves.

A snapshot carries its cluster's etcd users with their password hashes. Restored onto another
experiment (a new configuration server with its own PKI), those are the source's passwords,
which nothing here knows, so no client of this experiment could log in. etcd's gRPC API also
takes the user from a client certificate's common name, so ptc signs a certificate for ``root``
with this experiment's CA, valid for minutes, with a key made in memory, and uses it once on one
member: ``etcdctl user passwd`` gives every user that the snapshot and this experiment's PKI both
have the password in ``users/NAME.password``. The same operation after a restore onto the same
experiment changes nothing but etcd's auth revision.

The certificate, its key and the passwords reach the member as a tar stream on stdin, unpacked
into a 0700 directory under /run that is removed when the command ends, never on a command line.
"""

from __future__ import annotations

import datetime
import io
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from elastic.configserver import commands
from elastic.errors import NotFoundError, PtcError
from elastic.testbed.experiment import Experiment

ADMIN = "root"
CERT_LIFETIME = datetime.timedelta(minutes=10)
_SIGN_ONLY = x509.KeyUsage(
    digital_signature=True, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
    encipher_only=False, decipher_only=False,
)  # fmt: skip

# Prints "set USER", "missing USER" (in the PKI, not in the snapshot) and "kept USER" (in the
# snapshot, no password here). $1 is the member's client URL, $2 each etcdctl call's time limit.
_SCRIPT = r"""
set -eu
umask 077
d=$(mktemp -d -p /run ptc-rekey.XXXXXX)
trap 'rm -rf "$d"' EXIT
tar -x -C "$d"
endpoint=$1
limit=$2
# timeout: etcdctl 3.4 retries a TLS handshake the member refuses for ever.
ctl() {
  timeout "$limit" env -u ETCDCTL_USER -u ETCDCTL_PASSWORD ETCDCTL_API=3 etcdctl \
    --endpoints="$endpoint" --cacert="$d/ca.crt" --cert="$d/admin.crt" --key="$d/admin.key" \
    --dial-timeout=5s --command-timeout=10s "$@"
}
have=$(ctl user list)
for f in "$d"/users/*.password; do
  u=$(basename "$f" .password)
  if printf '%s\n' "$have" | grep -qxF -- "$u"; then
    ctl user passwd "$u" --interactive=false < "$f" > /dev/null
    echo "set $u"
  else
    echo "missing $u"
  fi
done
for u in $have; do
  [ -e "$d/users/$u.password" ] || echo "kept $u"
done
"""


@dataclass(frozen=True)
class Rekeyed:
    member: str
    set: list[str]  # users whose password is now this experiment's
    kept: list[str]  # users of the snapshot this experiment has no password for
    missing: list[str]  # users of this experiment the snapshot lacks (`ptc deploy` adds them)


def _passwords(pki: Path) -> list[Path]:
    passwords = sorted((pki / "users").glob("*.password"))
    if not passwords:
        raise NotFoundError(f"{pki / 'users'}: no user passwords (deploy the experiment first)")
    return passwords


def _signer(pki: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey]:
    """The experiment's CA certificate and key, or an error naming the missing file."""
    try:
        ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
        ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    except FileNotFoundError as err:
        raise NotFoundError(
            f"{err.filename}: the configuration server's CA is not on this machine; re-keying "
            f"needs the experiment's PKI (deploy the experiment first)"
        ) from err
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PtcError(f"{pki / 'ca.key'}: neither an EC nor an RSA key; cannot sign with it")
    return ca_cert, ca_key


def check(pki: Path) -> None:
    """Raise, naming what is missing, unless ``pki`` holds what re-keying needs."""
    _passwords(pki)
    _signer(pki)


def admin_certificate(pki: Path, now: datetime.datetime | None = None) -> tuple[bytes, bytes]:
    """A short-lived client certificate (PEM) for etcd user ``root``, signed by the experiment's
    CA, and its key (PEM): the pair exists only in memory here."""
    ca_cert, ca_key = _signer(pki)
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ptc etcd restore"),
                    x509.NameAttribute(NameOID.COMMON_NAME, ADMIN),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + CERT_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(_SIGN_ONLY, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def bundle(pki: Path, now: datetime.datetime | None = None) -> bytes:
    """The tar stream the member unpacks: the CA, the admin pair and every user's password."""
    passwords = _passwords(pki)
    cert, key = admin_certificate(pki, now)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))

        add("ca.crt", (pki / "ca.crt").read_bytes())
        add("admin.crt", cert)
        add("admin.key", key)
        for path in passwords:
            add(f"users/{path.name}", path.read_text().strip().encode() + b"\n")
    return out.getvalue()


def parse(member: str, output: str) -> Rekeyed:
    found: dict[str, list[str]] = {"set": [], "kept": [], "missing": []}
    for line in output.splitlines():
        what, _, user = line.partition(" ")
        if what in found and user:
            found[what].append(user)
    return Rekeyed(member, found["set"], found["kept"], found["missing"])


def rekey(exp: Experiment, member: str, client_url: str, stream: bytes) -> Rekeyed:
    """Set every shared user's password on the cluster ``member`` belongs to (one member is
    enough: the change goes through Raft like any write); ``stream`` is :func:`bundle`'s."""
    out = commands.run(
        exp, member, command(client_url), timeout=120, stdin=stream,
        label=f"etcdctl user passwd (re-keying via {client_url})",
    )  # fmt: skip
    return parse(member, out)


def command(client_url: str, timeout_s: int = 30) -> str:
    """The shell command a member runs, with :func:`bundle`'s stream on stdin (each etcdctl
    call gets ``timeout_s``)."""
    return f"sh -c {shlex.quote(_SCRIPT)} rekey {shlex.quote(client_url)} {int(timeout_s)}"
