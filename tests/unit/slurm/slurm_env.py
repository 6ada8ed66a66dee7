"""Test helpers: a real manager (in-process, temporary state file, injected clock), the fake
Slurm, and a provisioner that records its steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_slurm import FakeSlurm
from fastapi.testclient import TestClient

from elastic.errors import DeployError, TaskFailure
from elastic.manager import Manager, Principal
from elastic.slurm.client import SlurmElasticClient
from elastic.slurm.provision import ProvisionFailed

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
    on: set[str] = field(default_factory=set)  # machines running (a testbed that powers them)
    away: set[str] = field(default_factory=set)  # machines lent to another experiment
    full: set[str] = field(default_factory=set)  # nodes whose site has no room now
    held: dict[str, list[str]] = field(default_factory=dict)  # held back, by site
    asked: frozenset[str] = frozenset()  # the features waiting jobs asked for, as last told

    def _step(self, step: str, nodes: Sequence[str]) -> None:
        self.calls.append((step, list(nodes)))
        if step == self.fail:
            raise DeployError(
                "playbook failed",
                [TaskFailure(nodes[0], "slurm : start slurmd", "Unable to start service slurmd")],
            )

    def power_on(self, nodes: Sequence[str]) -> None:
        self._step("power_on", nodes)
        if short := sorted(self.full & set(nodes)):
            raise ProvisionFailed(
                "power on", dict.fromkeys(short, "no free machine on the testbed"), short
            )
        self.on |= set(nodes)

    def held_back(
        self,
        nodes: Sequence[str],
        states: Mapping[str, str] | None = None,
        demand: int = 0,
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        self.asked = asked
        return {name: [n for n in held if n in nodes] for name, held in self.held.items()}

    def configure(self, nodes: Sequence[str]) -> None:
        self._step("configure", nodes)

    def power_off(self, nodes: Sequence[str]) -> None:
        self._step("power_off", nodes)
        self.on -= set(nodes)

    def running(self, nodes: Sequence[str]) -> list[str]:
        return [n for n in nodes if n in self.on]

    def lent(self, nodes: Sequence[str]) -> list[str]:
        return [n for n in nodes if n in self.away]

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        chosen = still(list(nodes))
        if chosen:
            self.power_off(chosen)
        return chosen

    def check(self) -> str:
        return "the recorded test testbed"

    repairs = True
    powers = True
    fresh_disks: bool = True  # whether the testbed gives fresh disks

    def renew(self, nodes: Sequence[str]) -> bool:
        self._step("renew", nodes)
        if self.fresh_disks:
            self.on |= set(nodes)
        return self.fresh_disks

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        self._step("provision+start" if start else "provision", nodes)


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
