"""Two elastic managers on one real etcd: one active through the lease, the other a
standby naming it; when the active one dies mid-reclamation the standby takes over, finishes
the reclamation at its deadline, and the event log has every event once; the dead manager's
late writes are fenced. Times of the reclamation come from an injected clock; the election
runs on real time (a lease of 2 s)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from etcd_env import EtcdServer

from elastic.configserver.election import LeaseElection
from elastic.manager import Manager, ManagerConfig, Principal, Tokens
from elastic.manager.etcd_store import EtcdStore, NotLeader
from elastic.manager.ha import ElectedLeadership, identity

T0 = 1_800_000_000.0
ADMIN = Principal("admin", admin=True)


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@dataclass
class Node:
    name: str
    url: str
    election: LeaseElection
    leadership: ElectedLeadership
    manager: Manager
    store: EtcdStore


def wait(what: str, check: Any, timeout: float = 20.0) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def managers(etcd: EtcdServer, prefix: str, tmp_path: Path) -> Iterator[list[Node]]:
    clock = Clock()
    notes: list[dict[str, Any]] = []
    nodes = []
    for i in (1, 2):
        client = etcd.client("manager")
        url = f"http://10.10.1.20{i}:8700"
        election = LeaseElection(client, identity(f"cfg-{i}", url), prefix + "leader", ttl=2)
        store = EtcdStore(client, prefix + "state", guard=election.guard)
        leadership = ElectedLeadership(election)
        manager = Manager(
            store,
            Tokens(tmp_path / "tokens"),  # the role gives every manager the same tokens
            clock=clock,
            notifier=lambda _e, _t, payload: notes.append(payload),
            config=ManagerConfig(notify_interval=10.0),
            leadership=leadership,
        )
        nodes.append(Node(f"cfg-{i}", url, election, leadership, manager, store))
    yield nodes
    for node in nodes:
        node.leadership.stop()
        node.election.client.close()


def test_the_standby_takes_over_and_finishes_the_reclamation_once(managers: list[Node]) -> None:
    first, second = managers
    first.leadership.start()
    wait("the first manager to lead", first.leadership.is_active)
    second.leadership.start()
    wait("the standby to see the leader", lambda: second.leadership.active() == first.url)
    assert not second.leadership.is_active()

    m = first.manager
    for name in ("node-0", "node-1"):
        m.register_node(ADMIN, name, cpus=2)
    m.ensure_partition("slurm", "http://10.10.1.1:8701")
    slurm = Principal("slurm")
    m.add_nodes(slurm, "slurm", nodes=["node-0", "node-1"])
    m.set_values(slurm, "slurm", {"node-0": 0.1, "node-1": 0.9}, policy="LIFO")
    rec = m.reclaim(ADMIN, "slurm", 1, 30)
    m.tick()  # the first NotifyDeletePending
    before = m.events()

    # The first manager's node dies: nobody renews its lease, nothing it does runs any more.
    first.election.abandon()
    assert not first.leadership.is_active()
    took = wait("the standby to take over", second.leadership.is_active, timeout=30)
    print(f"took over {took:.2f} s after the active manager stopped renewing (ttl 2 s)")

    clock: Clock = second.manager.clock  # type: ignore[assignment]
    second.manager.tick()  # within the interval: no repeat
    clock.t = rec.deadline - 1
    second.manager.tick()
    assert second.manager.reclamation(rec.id).state == "pending"
    clock.t = rec.deadline
    second.manager.tick()
    done = second.manager.reclamation(rec.id)
    assert done.state == "done" and done.finished_at == rec.deadline
    assert done.forced == ["node-0"]

    # The dead manager, thawed, still has its code running: every write is fenced.
    with pytest.raises(NotLeader):
        first.manager.register_node(ADMIN, "node-9")
    first.manager.tick()  # not active: nothing

    events = second.manager.events()
    assert events[: len(before)] == before
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    started = [e for e in events if e["kind"] == "reclamation-started"]
    finished = [e for e in events if e["kind"] == "reclamation-finished"]
    assert len(started) == 1 and len(finished) == 1
    assert finished[0]["data"]["reclamation"] == rec.id


def test_a_lost_lease_stops_the_manager_and_it_campaigns_again(managers: list[Node]) -> None:
    only = managers[0]
    only.leadership.start()
    wait("the manager to lead", only.leadership.is_active)
    term = only.election.revision
    only.election.client.lease_revoke(only.election.lease)  # as when etcd expired it
    # It stands by (logged) and, alone, wins the next term at once.
    wait(
        "the manager to lead again, in a new term",
        lambda: only.leadership.is_active() and only.election.revision > term,
        timeout=20,
    )
    assert only.leadership.terms == 2
    only.manager.register_node(ADMIN, "node-0")  # writes under the new term's guard


def test_resigning_hands_over_at_once(managers: list[Node]) -> None:
    first, second = managers
    first.leadership.start()
    wait("the first manager to lead", first.leadership.is_active)
    second.leadership.start()
    first.leadership.stop()  # a service stop resigns: no lease to wait for
    took = wait("the standby to take over", second.leadership.is_active, timeout=10)
    print(f"handed over in {took:.2f} s")
    assert second.leadership.active() == second.url
