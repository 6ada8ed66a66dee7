"""The pool a manager's configuration names is registered in one write of the state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic.manager.auth import Tokens
from elastic.manager.core import Manager
from elastic.manager.service import ServiceConfig, apply_config
from elastic.manager.store import MemoryStore


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        self.writes += 1
        return super().write(document, expect=expect)


def config(n: int) -> ServiceConfig:
    pool = tuple({"name": f"node-{i}", "cpus": 4, "memory_mb": 512} for i in range(n))
    return ServiceConfig(listen="127.0.0.1", pool=pool)


def test_a_pool_of_many_nodes_is_one_write(tmp_path: Path) -> None:
    store = CountingStore()
    manager = Manager(store, Tokens(tmp_path / "tokens"), clock=lambda: 100.0)
    apply_config(manager, config(50))
    # each write replaces the whole document: one per node made the start quadratic
    assert store.writes == 1
    state = manager.read()
    assert sorted(state.nodes) == sorted(f"node-{i}" for i in range(50))
    assert state.nodes["node-7"].cpus == 4 and state.nodes["node-7"].since == 100.0
    assert [e.data["node"] for e in state.events if e.kind == "node-registered"] == [
        f"node-{i}" for i in range(50)
    ]


def test_a_restart_with_the_same_pool_writes_nothing(tmp_path: Path) -> None:
    store = CountingStore()
    manager = Manager(store, Tokens(tmp_path / "tokens"), clock=lambda: 100.0)
    apply_config(manager, config(5))
    apply_config(manager, config(5))
    assert store.writes == 1
