"""A real manager (in-process, temporary state file, injected clock) and the fake Slurm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_slurm import FakeSlurm
from fastapi.testclient import TestClient

from elastic.errors import DeployError, TaskFailure
from elastic.manager import JsonFileStore, Manager, ManagerConfig, Principal, Tokens
from elastic.manager.app import create_app
from elastic.manager.client import ManagerClient
from elastic.policies import make_policy
from elastic.slurm.client import ClientConfig, SlurmElasticClient
from elastic.slurm.commands import Slurm

T0 = 1_800_000_000.0
NODES = ("node-0", "node-1", "node-2", "node-3")


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Provisioner:
    """Records the steps; ``fail`` makes one step raise like a failed playbook task."""

    calls: list[tuple[str, list[str]]] = field(default_factory=list)
    fail: str = ""

    def _step(self, step: str, nodes: Sequence[str]) -> None:
        self.calls.append((step, list(nodes)))
        if step == self.fail:
            raise DeployError(
                "playbook failed",
                [TaskFailure(nodes[0], "slurm : start slurmd", "Unable to start service slurmd")],
            )

    def power_on(self, nodes: Sequence[str]) -> None:
        self._step("power_on", nodes)

    def configure(self, nodes: Sequence[str]) -> None:
        self._step("configure", nodes)

    def power_off(self, nodes: Sequence[str]) -> None:
        self._step("power_off", nodes)


@dataclass
class World:
    clock: Clock
    manager: Manager
    http: TestClient
    slurm: FakeSlurm
    prov: Provisioner
    client: SlurmElasticClient
    admin: Principal
    notes: list[dict[str, Any]]

    def owners(self) -> dict[str, str | None]:
        return {n: node.owner for n, node in self.manager.read().nodes.items()}


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
