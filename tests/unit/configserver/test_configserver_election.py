"""Lease election on a real etcd: one leader at a time, the next one takes over once the first
stops renewing, and the deposed leader's writes are fenced."""

from __future__ import annotations

import time

import pytest
from etcd_env import EtcdServer

from elastic.configserver.election import LeaseElection
from elastic.manager.etcd_store import EtcdStore, NotLeader


def test_one_leader_then_failover_and_fencing(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "leader"
    with etcd.client("manager") as c1, etcd.client("manager") as c2:
        first = LeaseElection(c1, "m1", key, ttl=2)
        second = LeaseElection(c2, "m2", key, ttl=2)
        assert first.campaign(timeout=10) and first.leading
        assert not second.campaign(timeout=1.0)
        assert second.leader() == "m1"
        store1 = EtcdStore(c1, prefix + "state", guard=first.guard)
        rev = store1.write({"by": "m1"}, expect=0)

        first.abandon()  # m1's node dies: nobody renews its lease
        died = time.monotonic()
        assert second.campaign(timeout=15)
        took = time.monotonic() - died
        assert second.leader() == "m2" and second.revision > first.revision
        print(f"takeover after {took:.2f} s (ttl 2 s)")
        with pytest.raises(NotLeader):
            store1.write({"by": "m1 again"}, expect=rev)
        store2 = EtcdStore(c2, prefix + "state", guard=second.guard)
        store2.write({"by": "m2"}, expect=rev)
        second.resign()
        assert second.leader() is None


def test_lost_lease_is_noticed(etcd: EtcdServer, prefix: str) -> None:
    lost: list[bool] = []
    with etcd.client("manager") as c:
        e = LeaseElection(c, "m1", prefix + "leader", ttl=2, on_lost=lambda: lost.append(True))
        assert e.campaign(timeout=10)
        c.lease_revoke(e.lease)  # the lease is gone (as when etcd expired it)
        deadline = time.monotonic() + 10
        while not lost and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lost and not e.leading
        e.abandon()
