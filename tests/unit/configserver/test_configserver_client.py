"""The stdlib etcd client against a real etcd: key-value, transactions, leases, snapshots,
users and roles, TLS, and what each failure looks like."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from etcd_env import EtcdServer, free_port, make_stranger, start_etcd

from elastic.configserver.client import (
    Credentials,
    Endpoint,
    EtcdClient,
    compare_mod_revision,
    compare_value,
    op_get,
    op_put,
    prefix_end,
)
from elastic.configserver.errors import (
    ConfigServerError,
    Indeterminate,
    PermissionDenied,
    Unavailable,
)
from elastic.errors import NotFoundError


def test_prefix_end() -> None:
    assert prefix_end("/ptc/") == "/ptc0"
    assert prefix_end("a") == "b"


def test_put_get_range_delete(etcd: EtcdServer, prefix: str) -> None:
    with etcd.client() as c:
        first = c.put(prefix + "a", "1")
        second = c.put(prefix + "b", b"\x00\xff")
        assert second > first
        kv = c.get(prefix + "a")
        assert kv is not None and kv.text == "1" and kv.mod_revision == first
        got = c.range(prefix, prefix=True)
        assert [k.key for k in got.kvs] == [prefix + "a", prefix + "b"]
        assert got.kvs[1].value == b"\x00\xff"
        assert got.revision >= second
        keys = c.range(prefix, prefix=True, keys_only=True)
        assert all(k.value == b"" for k in keys.kvs) and keys.count == 2
        assert c.range(prefix, prefix=True, serializable=True).count == 2
        assert c.delete(prefix, prefix=True) == 2
        assert c.get(prefix + "a") is None


def test_txn_compare_and_swap(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "reg"
    with etcd.client() as c:
        rev = c.put(key, "0")
        won = c.txn([compare_mod_revision(key, "=", rev)], [op_put(key, "1")], [op_get(key)])
        assert won.succeeded and won.revision > rev
        lost = c.txn([compare_mod_revision(key, "=", rev)], [op_put(key, "2")], [op_get(key)])
        assert not lost.succeeded
        current = lost.responses[0]["response_range"]["kvs"][0]
        assert int(current["mod_revision"]) == won.revision
        by_value = c.txn([compare_value(key, "=", "1")], [op_put(key, "3")])
        assert by_value.succeeded
        kv = c.get(key)
        assert kv is not None and kv.text == "3"


def test_lease_attaches_and_revokes(etcd: EtcdServer, prefix: str) -> None:
    with etcd.client() as c:
        lease = c.lease_grant(30)
        assert c.lease_keepalive(lease) > 0
        c.put(prefix + "leased", "x", lease=lease)
        kv = c.get(prefix + "leased")
        assert kv is not None and kv.lease == lease
        c.lease_revoke(lease)
        assert c.get(prefix + "leased") is None
        assert c.lease_keepalive(lease) <= 0


def test_roles_limit_users(etcd: EtcdServer, prefix: str) -> None:
    with etcd.client() as root:
        root.put("/ptc/secrets/munge.key", "s3cret")
        root.put("/ptc/partitions/a/x", "visible")
    with etcd.client("manager") as manager:
        manager.put(prefix + "ok", "1")
        with pytest.raises(PermissionDenied, match="manager"):
            manager.put("/ptc/partitions/a/x", "nope")
        with pytest.raises(PermissionDenied):
            manager.get("/ptc/secrets/munge.key")
    with etcd.client("partition-a") as part:
        kv = part.get("/ptc/partitions/a/x")
        assert kv is not None and kv.text == "visible"
        with pytest.raises(PermissionDenied):
            part.get("/ptc/secrets/munge.key")
        with pytest.raises(PermissionDenied):
            part.range("/ptc/secrets/", prefix=True, keys_only=True)
        with pytest.raises(PermissionDenied):
            part.put("/ptc/partitions/a/x", "overwrite")
        with pytest.raises(PermissionDenied):
            part.snapshot(io.BytesIO())


def test_wrong_password_is_refused(etcd: EtcdServer) -> None:
    creds = etcd.credentials("manager")
    wrong = Credentials(creds.ca, creds.cert, creds.key, "manager", "not-the-password")
    with (
        EtcdClient([etcd.endpoint], wrong) as c,
        pytest.raises(PermissionDenied, match="'manager' could not log in"),
    ):
        c.get("/ptc/manager/x")


def test_missing_certificate_names_the_file(etcd: EtcdServer, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"client certificate of 'nobody'.*nobody\.crt"):
        Credentials.from_pki(etcd.pki, "nobody")


def test_certificate_of_another_ca_is_refused(etcd: EtcdServer, tmp_path: Path) -> None:
    cert, key = make_stranger(tmp_path / "stranger")
    creds = etcd.credentials("root")
    stranger = Credentials(creds.ca, cert, key, "root", creds.password)
    with EtcdClient([etcd.endpoint], stranger) as c, pytest.raises(Unavailable, match="m1"):
        c.get("/ptc/x")


def test_server_name_is_checked(etcd: EtcdServer) -> None:
    wrong_name = Endpoint(etcd.url, "not-the-member", "m1")
    with EtcdClient([wrong_name], etcd.credentials("root")) as c, pytest.raises(Unavailable):
        c.get("/ptc/x")


def test_a_dead_endpoint_is_skipped(etcd: EtcdServer, prefix: str) -> None:
    dead = Endpoint(f"https://127.0.0.1:{free_port()}", "127.0.0.1", "dead")
    with EtcdClient([dead, etcd.endpoint], etcd.credentials("root"), timeout=2) as c:
        c.put(prefix + "k", "v")  # refused connection: surely not applied, so tried elsewhere
        kv = c.get(prefix + "k")
        assert kv is not None and kv.text == "v"


def test_no_endpoint_answers(etcd: EtcdServer) -> None:
    dead = [Endpoint(f"https://127.0.0.1:{free_port()}", "127.0.0.1", f"d{i}") for i in (1, 2)]
    with (
        EtcdClient(dead, etcd.credentials("root"), timeout=2) as c,
        pytest.raises(Unavailable, match=r"d1.*d2"),
    ):
        c.get("/ptc/x")


def test_snapshot_is_etcds_own(etcd: EtcdServer, prefix: str, tmp_path: Path) -> None:
    with etcd.client() as c:
        c.put(prefix + "snap", "in the snapshot")
        path = tmp_path / "snap.db"
        with path.open("wb") as out:
            snap = c.snapshot(out)
    assert snap.size == path.stat().st_size > 0 and len(snap.sha256) == 64
    # etcdctl checks the hash etcd appends, and counts the keys.
    status = subprocess.run(
        ["etcdctl", "snapshot", "status", str(path), "-w", "json"],
        capture_output=True, text=True, check=True, env={"ETCDCTL_API": "3"},
    )  # fmt: skip
    assert '"totalKey"' in status.stdout


def test_expired_token_is_renewed(pki: Path, tmp_path: Path) -> None:
    import time

    from etcd_env import apply_auth

    server = start_etcd(pki, tmp_path / "data", tmp_path / "log", token_ttl_s=1)
    try:
        apply_auth(server)
        with server.client() as c:
            c.put("/ptc/t", "1")
            time.sleep(2.5)  # the first token has expired by now
            kv = c.get("/ptc/t")
            assert kv is not None and kv.text == "1"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("code", "message", "write_outcome"),
    [
        (1, "etcdserver: request cancelled", Indeterminate),
        (4, "context deadline exceeded", Indeterminate),
        (2, "unknown", Indeterminate),
        (5, "etcdserver: requested lease not found", ConfigServerError),
        (3, "etcdserver: too many operations in txn request", ConfigServerError),
    ],
)
def test_a_write_refused_after_its_proposal_may_have_landed(
    etcd: EtcdServer,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    message: str,
    write_outcome: type[ConfigServerError],
) -> None:
    """A member shutting down cancels a request it has already proposed: the write may commit
    through the other members, so only codes that etcd gives before proposing are definite."""
    with etcd.client() as c:
        c.get("/warm-up")  # log in first: the answer below is for the request itself

        def answer(*_: object) -> tuple[int, dict[str, object]]:
            return 500, {"code": code, "message": message}

        monkeypatch.setattr(c, "_send", answer)
        with pytest.raises(ConfigServerError) as write:
            c.put("/k", "v")
        assert type(write.value) is write_outcome
        assert write.value.code == code
        with pytest.raises(ConfigServerError) as read:
            c.get("/k")
        assert type(read.value) is ConfigServerError  # a read is never indeterminate
