"""The ``env`` fixture: see manager_env."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from manager_env import NODES, Clock, Env, Notifications, make_manager

from elastic.manager import Principal
from elastic.manager.app import create_app


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    clock, notes = Clock(), Notifications()
    manager = make_manager(tmp_path, clock, notes)
    admin = Principal("admin", admin=True)
    for i, name in enumerate(NODES):
        manager.register_node(
            admin, name, cpus=4, memory_mb=8192, features=["x86"] + ["gpu"] * (i == 3)
        )
    _, slurm = manager.create_partition(admin, "slurm", "http://10.10.1.1:8701")
    _, ref = manager.create_partition(admin, "ref")
    http = TestClient(create_app(manager, run_loop=False))
    admin_token = (tmp_path / "tokens" / "admin.token").read_text().strip()
    yield Env(tmp_path, clock, notes, manager, http, admin_token, slurm, ref)
