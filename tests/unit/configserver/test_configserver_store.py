"""EtcdStore keeps the manager's Store contract on a real etcd: compare-and-swap on one key,
fencing by a guard, and lost answers resolved by reading back."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from etcd_env import EtcdServer

from elastic.configserver.client import EtcdClient, TxnResult, compare_create_revision
from elastic.configserver.errors import Indeterminate
from elastic.manager.errors import RevisionConflict
from elastic.manager.etcd_store import EtcdStore, NotLeader


def test_read_write_compare_and_swap(etcd: EtcdServer, prefix: str) -> None:
    with etcd.client("manager") as c:
        store = EtcdStore(c, prefix + "state")
        assert store.read() == (0, None)
        r1 = store.write({"nodes": {"n0": "pool"}}, expect=0)
        assert store.read() == (r1, {"nodes": {"n0": "pool"}})
        r2 = store.write({"nodes": {"n0": "slurm"}}, expect=r1)
        assert r2 > r1
        with pytest.raises(RevisionConflict, match=f"not {r1}"):
            store.write({"nodes": {}}, expect=r1)
        with pytest.raises(RevisionConflict):
            store.write({"nodes": {}}, expect=0)
        assert store.read() == (r2, {"nodes": {"n0": "slurm"}})


def test_concurrent_increments_lose_nothing(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "counter"
    per_thread, threads = 15, 4

    def work() -> None:
        with etcd.client("manager") as c:
            store = EtcdStore(c, key)
            done = 0
            while done < per_thread:
                revision, doc = store.read()
                count = (doc or {}).get("count", 0)
                try:
                    store.write({"count": count + 1}, expect=revision)
                    done += 1
                except RevisionConflict:
                    continue

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with etcd.client("manager") as c:
        assert EtcdStore(c, key).read()[1] == {"count": per_thread * threads}


def test_guard_fences_a_deposed_writer(etcd: EtcdServer, prefix: str) -> None:
    leader_key = prefix + "leader"
    with etcd.client("manager") as c:
        mine = c.put(leader_key, "me")
        guard = lambda: [compare_create_revision(leader_key, "=", mine)]  # noqa: E731
        store = EtcdStore(c, prefix + "state", guard=guard)
        rev = store.write({"v": 1}, expect=0)
        c.delete(leader_key)
        c.put(leader_key, "someone else")  # a newer campaign: another create revision
        with pytest.raises(NotLeader):
            store.write({"v": 2}, expect=rev)
        assert store.read() == (rev, {"v": 1})


class LosesAnswers(EtcdClient):
    """Applies a transaction for real, then reports its answer lost: the failure a member dying
    mid-request produces only by chance."""

    lose_next = False

    def txn(self, *args: Any, **kwargs: Any) -> TxnResult:
        result = super().txn(*args, **kwargs)
        if self.lose_next:
            self.lose_next = False
            raise Indeterminate("answer lost (test)")
        return result


def test_lost_answer_of_an_applied_write_is_resolved(etcd: EtcdServer, prefix: str) -> None:
    c = LosesAnswers([etcd.endpoint], etcd.credentials("manager"))
    store = EtcdStore(c, prefix + "state")
    rev = store.write({"v": 1}, expect=0)
    c.lose_next = True
    landed = store.write({"v": 2}, expect=rev)
    assert store.read() == (landed, {"v": 2})
    c.close()
