"""Test helpers: a manager on a temporary state file, an injected clock, a recording notifier."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from elastic.manager import JsonFileStore, Manager, ManagerConfig, Tokens
from elastic.manager.app import create_app

T0 = 1_800_000_000.0
NODES = ("node-0", "node-1", "node-2", "node-3")


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Notifications:
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fail: bool = False

    def __call__(self, endpoint: str, token: str, payload: dict[str, Any]) -> None:
        self.calls.append((endpoint, token, payload))
        if self.fail:
            raise ConnectionError("client down")


@dataclass
class Env:
    tmp: Path
    clock: Clock
    notes: Notifications
    manager: Manager
    http: TestClient
    admin: str
    slurm: str
    ref: str

    def auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def state_bytes(self) -> bytes:
        return (self.tmp / "state.json").read_bytes()

    def restart(self) -> Env:
        """A new manager and app on the same state file and tokens (a service restart)."""
        manager = make_manager(self.tmp, self.clock, self.notes)
        http = TestClient(create_app(manager, run_loop=False))
        return Env(
            self.tmp, self.clock, self.notes, manager, http, self.admin, self.slurm, self.ref
        )


def make_manager(tmp: Path, clock: Clock, notes: Notifications) -> Manager:
    return Manager(
        JsonFileStore(tmp / "state.json"),
        Tokens(tmp / "tokens"),
        clock=clock,
        notifier=notes,
        config=ManagerConfig(notify_interval=60.0, max_pv_age=120.0),
    )
