"""The ``world`` fixture: see slurm_env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_slurm import FakeSlurm
from fastapi.testclient import TestClient
from slurm_env import NODES, Clock, Provisioner, World

from elastic.manager import JsonFileStore, Manager, ManagerConfig, Principal, Tokens
from elastic.manager.app import create_app
from elastic.manager.client import ManagerClient
from elastic.policies import make_policy
from elastic.slurm.client import ClientConfig, SlurmElasticClient
from elastic.slurm.commands import Slurm


@pytest.fixture
def world(tmp_path: Path) -> World:
    clock = Clock()
    notes: list[dict[str, Any]] = []
    manager = Manager(
        JsonFileStore(tmp_path / "state.json"),
        Tokens(tmp_path / "tokens"),
        clock=clock,
        notifier=lambda endpoint, token, payload: notes.append(payload),
        config=ManagerConfig(),
    )
    admin = Principal("admin", admin=True)
    for name in NODES:
        manager.register_node(admin, name, cpus=2)
    _, token = manager.create_partition(admin, "slurm", "http://127.0.0.1:8701")
    manager.create_partition(admin, "ref")
    http = TestClient(create_app(manager, run_loop=False))
    fake = FakeSlurm()
    prov = Provisioner()
    client = SlurmElasticClient(
        Slurm(fake),
        ManagerClient("http://testserver", token, client=http),
        make_policy("LIFO"),
        provisioner=prov,
        config=ClientConfig(partition="slurm", register_timeout=10, register_poll=2),
        clock=clock,
        sleep=clock.sleep,
    )
    return World(clock, manager, http, fake, prov, client, admin, notes)
