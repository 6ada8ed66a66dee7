"""The role's ptc-etcd-auth against a real etcd: it converges, changes nothing the second time,
and takes back a grant that is not in the desired state."""

from __future__ import annotations

from pathlib import Path

import pytest
from etcd_env import ROLES, apply_auth, start_etcd

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
