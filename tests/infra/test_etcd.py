"""The configuration server (etcd): every member healthy, TLS only, no anonymous access, and the
secrets prefix closed to a partition's credentials.

Requests are made on the nodes themselves, with the credentials the etcd role installed there
(/etc/ptc/etcd), through etcd's JSON gateway with Python's standard library, so the checks see
what any client on the cluster sees. Nothing here prints a password or a secret's value.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from conftest import cluster_var, group, name_of, require_group, variables
from testinfra.host import Host

CLIENT_DIR = "/etc/ptc/etcd"
SERVER_PKI = "/etc/etcd/pki"
PORT = 2379
PEER_PORT = 2380

# Runs on a node: one JSON request through the gateway, printed as {"status": .., "body": ..}
# or {"error": ..} when the connection itself fails. argv: url user(or -) path json-body.
_REQUEST = r"""
import json, ssl, sys, urllib.error, urllib.request
url, user, path, body = sys.argv[1:5]
d = "@DIR@"
ctx = ssl.create_default_context(cafile=d + "/ca.crt")
if user != "-":
    ctx.load_cert_chain(d + "/" + user + ".crt", d + "/" + user + ".key")
def call(p, b, token=None):
    req = urllib.request.Request(url + "/v3/" + p, data=b.encode(), method="POST")
    if token:
        req.add_header("Authorization", token)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
token = None
if user != "-" and len(sys.argv) > 5:
    pw = open(d + "/" + user + ".password").read().strip()
    status, got = call("auth/authenticate", json.dumps({"name": user, "password": pw}))
    if status != 200:
        print(json.dumps({"status": status, "body": got, "stage": "authenticate"})); sys.exit()
    token = got["token"]
try:
    status, got = call(path, body, token)
    print(json.dumps({"status": status, "body": got}))
except Exception as e:  # the connection failed: that is the answer being checked
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
""".replace("@DIR@", CLIENT_DIR)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def request(
    node: Host, url: str, user: str | None, path: str, body: dict[str, Any], *, login: bool
) -> dict[str, Any]:
    args = [url, user or "-", path, json.dumps(body)] + (["login"] if login else [])
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in args)
    out = node.run(f"python3 - {quoted} <<'PTC_EOF'\n{_REQUEST}\nPTC_EOF")
    assert out.rc == 0, f"{name_of(node)}: the request script failed: {out.stderr.strip()[-300:]}"
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def members(host: Host) -> list[str]:
    return group(host, "config_server")


def my_url(host: Host) -> str:
    return f"https://{variables(host)['ptc_lan_address']}:{PORT}"


def partition_user(host: Host) -> str:
    return f"partition-{cluster_var(host, 'ptc_cluster_name', 'ptc')}"


def test_etcd_member_running(host: Host) -> None:
    require_group(host, "config_server")
    service = host.service("etcd")
    assert service.is_running and service.is_enabled, (
        f"{name_of(host)}: etcd is not running and enabled"
    )


def test_etcd_member_keys_private(host: Host) -> None:
    require_group(host, "config_server")
    for path, owner in (
        (f"{SERVER_PKI}/member.key", "etcd"),
        (f"{SERVER_PKI}/jwt.key", "etcd"),
        (f"{SERVER_PKI}/root.key", "root"),
        (f"{SERVER_PKI}/root.password", "root"),
    ):
        f = host.file(path)
        assert f.exists and (f.user, f.mode) == (owner, 0o400), (
            f"{name_of(host)}: {path} is not {owner} 0o400"
        )


def test_etcd_compacts_its_history(host: Host) -> None:
    """The running member (not only its configuration file) compacts periodically: without it
    the manager's rewrites would fill etcd's space quota and stop every write."""
    require_group(host, "config_server")
    pid = host.run("systemctl show -p MainPID --value etcd").stdout.strip()
    assert pid and pid != "0", f"{name_of(host)}: etcd has no main process"
    environ = host.run(f"tr '\\0' '\\n' < /proc/{pid}/environ").stdout.splitlines()
    settings = dict(line.split("=", 1) for line in environ if "=" in line)
    assert settings.get("ETCD_AUTO_COMPACTION_MODE") == "periodic", (
        f"{name_of(host)}: etcd (pid {pid}) runs without periodic auto-compaction"
    )
    assert settings.get("ETCD_AUTO_COMPACTION_RETENTION"), (
        f"{name_of(host)}: etcd (pid {pid}) has no compaction retention"
    )


def test_etcd_pki_copy_on_the_controller_is_root_only(host: Host) -> None:
    """The controller keeps the cluster's PKI for its own playbook runs (ansible_controller):
    nobody but root can read any of it."""
    require_group(host, "slurm_controller")
    if not group(host, "config_server"):
        pytest.skip("no configuration server in this cluster")
    pki = "/var/lib/ptc/ansible/inventory/pki"
    assert host.file(f"{pki}/etcd/ca.key").exists, f"{name_of(host)}: no copy of the PKI in {pki}"
    # Certificates may be 0644 inside directories only root can enter; keys never.
    loose = host.run(
        f"find {pki} ! -user root -o -type d -perm /077 "
        f"-o -type f \\( -name '*.key' -o -name '*.password' \\) -perm /077"
    ).stdout.split()
    assert not loose, f"{name_of(host)}: open beyond root: {loose}"


def test_etcd_all_members_healthy(host: Host) -> None:
    """From each member: every member of config_server is in the cluster and healthy."""
    require_group(host, "config_server")
    out = host.run("ptc-etcdctl endpoint health -w json")
    assert out.rc == 0, f"{name_of(host)}: endpoint health failed: {out.stderr.strip()[-300:]}"
    health = json.loads(out.stdout)
    unhealthy = [h["endpoint"] for h in health if not h.get("health")]
    assert not unhealthy and len(health) == len(members(host)), (
        f"{name_of(host)}: {len(health)} endpoints answered, unhealthy: {unhealthy}"
    )
    listed = json.loads(host.run("ptc-etcdctl member list -w json").stdout)["members"]
    names = sorted(m.get("name", "") for m in listed)
    assert names == sorted(members(host)), (
        f"{name_of(host)}: the cluster's members are {names}, not {sorted(members(host))}"
    )


def test_etcd_one_leader(host: Host) -> None:
    require_group(host, "config_server")
    out = host.run("ptc-etcdctl endpoint status -w json")
    assert out.rc == 0, f"{name_of(host)}: endpoint status failed: {out.stderr.strip()[-300:]}"
    statuses = json.loads(out.stdout)
    leaders = {s["Status"]["leader"] for s in statuses}
    assert len(leaders) == 1 and 0 not in leaders, (
        f"{name_of(host)}: members disagree on the leader: {leaders}"
    )


@pytest.mark.parametrize("port", [PORT, PEER_PORT])
def test_etcd_refuses_plain_http(host: Host, port: int) -> None:
    require_group(host, "config_server")
    address = my_url(host).split("//")[1].split(":")[0]
    out = host.run(
        f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' http://{address}:{port}/health"
    )
    assert out.rc != 0 or out.stdout.strip() in ("000", "400"), (
        f"{name_of(host)}: plain HTTP on {address}:{port} answered {out.stdout.strip()}"
    )


def test_etcd_refuses_clients_without_certificate(host: Host) -> None:
    require_group(host, "config_server")
    got = request(host, my_url(host), None, "kv/range", {"key": b64("/")}, login=False)
    assert "error" in got, f"{name_of(host)}: a client without a certificate was served: {got}"


def test_etcd_refuses_certificate_of_another_ca(host: Host) -> None:
    require_group(host, "config_server")
    tmp = host.run("mktemp -d").stdout.strip()
    try:
        made = host.run(
            f"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
            f"-subj /O=stranger -keyout {tmp}/k.pem -out {tmp}/c.pem 2>&1"
        )
        assert made.rc == 0, f"{name_of(host)}: openssl could not make a certificate: {made.stdout}"
        out = host.run(
            f"curl -sS -m 10 --cacert {CLIENT_DIR}/ca.crt --cert {tmp}/c.pem --key {tmp}/k.pem "
            f"-X POST -d '{{}}' {my_url(host)}/v3/maintenance/status"
        )
        assert out.rc != 0, (
            f"{name_of(host)}: a certificate from another CA was served: {out.stdout[:200]}"
        )
    finally:
        host.run(f"rm -rf {tmp}")


def test_etcd_refuses_anonymous_requests(host: Host) -> None:
    """A valid client certificate without a user's password gets nothing."""
    require_group(host, "config_server")
    got = request(host, my_url(host), "root", "kv/range", {"key": b64("/")}, login=False)
    assert got.get("status") not in (None, 200), f"{name_of(host)}: anonymous read served: {got}"
    refusal = json.dumps(got)
    assert "user name is empty" in refusal or "permission denied" in refusal, (
        f"{name_of(host)}: unexpected answer to an anonymous read: {got}"
    )


def test_etcd_secrets_closed_to_partition(host: Host) -> None:
    """The partition's own prefix is readable with its credentials; the secrets prefix is not."""
    require_group(host, "slurm_controller")
    user = partition_user(host)
    if not host.file(f"{CLIENT_DIR}/{user}.crt").exists:
        pytest.fail(f"{name_of(host)}: the partition's credentials ({user}) are not installed")
    url = f"https://{members(host)[0]}:{PORT}"
    own = request(
        host, url, user, "kv/range", {"key": b64(f"/ptc/partitions/{user[10:]}/")}, login=True
    )
    assert own.get("status") == 200, f"{name_of(host)}: {user} cannot read its own prefix: {own}"
    secrets = request(
        host,
        url,
        user,
        "kv/range",
        {"key": b64("/ptc/secrets/"), "range_end": b64("/ptc/secrets0"), "keys_only": True},
        login=True,
    )
    assert secrets.get("status") != 200 and "permission denied" in json.dumps(secrets), (
        f"{name_of(host)}: {user} was not refused the secrets prefix: {secrets}"
    )
    write = request(
        host, url, user, "kv/put", {"key": b64("/ptc/manager/x"), "value": b64("x")}, login=True
    )
    assert write.get("status") != 200, f"{name_of(host)}: {user} wrote the manager's prefix"
