"""The role's ptc-etcd-admin against a real etcd: users and roles converge, nothing changes the
second time, a grant not in the desired state is taken back; secrets are kept once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from etcd_env import AUTH_SCRIPT, ROLES, EtcdServer, apply_auth, start_etcd

from elastic.configserver.errors import PermissionDenied


def test_auth_converges_and_revokes_extra_grants(pki: Path, tmp_path: Path) -> None:
    server = start_etcd(pki, tmp_path / "data", tmp_path / "log")
    try:
        first = apply_auth(server)
        assert "authentication enabled" in first
        assert any(c.startswith("user manager added") for c in first)
        assert apply_auth(server) == []  # idempotent
        wider = [
            {
                "name": "manager",
                "permissions": [
                    {"prefix": "/ptc/manager/", "access": "readwrite"},
                    {"prefix": "/ptc/extra/", "access": "read"},
                ],
            },
            ROLES[1],
        ]
        assert apply_auth(server, wider) == ["role manager: granted /ptc/extra/"]
        with server.client() as root:
            root.put("/ptc/extra/k", "v")
        with server.client("manager") as manager:
            assert manager.get("/ptc/extra/k") is not None
        assert apply_auth(server) == ["role manager: revoked /ptc/extra/"]
        with server.client("manager") as manager, pytest.raises(PermissionDenied):
            manager.get("/ptc/extra/k")
    finally:
        server.stop()


def admin(server: EtcdServer, request: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "endpoint": server.url,
        "cacert": str(server.pki / "ca.crt"),
        "cert": str(server.pki / "clients" / "root.crt"),
        "key": str(server.pki / "clients" / "root.key"),
        "root_password": (server.pki / "users" / "root.password").read_text(),
        **request,
    }
    out = subprocess.run(
        [sys.executable, str(AUTH_SCRIPT)],
        input=json.dumps(spec), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer


def test_secrets_are_kept_once_and_read_back(etcd: EtcdServer) -> None:
    prefix = "/ptc/secrets/test-keep/"
    first = admin(etcd, {"action": "secrets-put", "prefix": prefix, "secrets": {"k": "one"}})
    assert first == {"changed": ["k"]}
    # The first copy is the cluster's: a later, different value does not replace it.
    again = admin(
        etcd, {"action": "secrets-put", "prefix": prefix, "secrets": {"k": "two", "j": "x"}}
    )
    assert again == {"changed": ["j"]}
    got = admin(etcd, {"action": "secrets-get", "prefix": prefix})
    assert got == {"secrets": {"k": "one", "j": "x"}}
    with etcd.client("partition-a") as part, pytest.raises(PermissionDenied):
        part.get(prefix + "k")
