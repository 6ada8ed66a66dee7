"""EtcdStore keeps the manager's Store contract on a real etcd: compare-and-swap on one key,
fencing by a guard, and lost answers resolved by reading back."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from etcd_env import EtcdServer

from elastic.configserver.client import EtcdClient, TxnResult, compare_create_revision
from elastic.configserver.errors import ConfigServerError, Indeterminate
from elastic.errors import PtcError
from elastic.manager.errors import RevisionConflict
from elastic.manager.etcd_store import FORMAT, EtcdStore, NotLeader
from elastic.manager.store import encode


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


# -- a state larger than one etcd request, kept in chunks ---------------------------------------


def big_state(nodes: int, owner: str = "pool") -> dict[str, Any]:
    """A state of the manager's shape, about 200 bytes per node: 10,000 nodes make more than
    etcd takes in one request."""
    return {
        "nodes": {
            f"emu{i:05d}": {
                "name": f"emu{i:05d}",
                "cpus": 4,
                "memory_mb": 512,
                "features": ["emulated"],
                "owner": owner,
                "since": 1e9 + i,
            }
            for i in range(nodes)
        },
        "events": [
            {"seq": i, "kind": "node-registered", "node": f"emu{i:05d}"} for i in range(nodes)
        ],
    }


def chunk_keys(c: EtcdClient, key: str) -> dict[str, int]:
    """The store's chunk keys under ``key`` and the revision each was last put at."""
    listed = c.range(key + "/chunks/", prefix=True, keys_only=True).kvs
    return {kv.key: kv.mod_revision for kv in listed}


def test_a_state_larger_than_a_request_is_kept_in_chunks(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "state"
    with etcd.client("manager") as c:
        store = EtcdStore(c, key)
        first = big_state(10_000)
        with pytest.raises(ConfigServerError, match="too large"):
            c.put(prefix + "whole", encode(first))  # etcd refuses it as one value
        r1 = store.write(first, expect=0)
        assert store.read() == (r1, first)
        # Nothing but the manifest is in the key itself.
        manifest = json.loads(c.get(key).value)  # type: ignore[union-attr]
        assert manifest["format"] == FORMAT
        assert chunk_keys(c, key) == {
            f"{key}/chunks/{n}": chunk_keys(c, key)[f"{key}/chunks/{n}"] for n in manifest["chunks"]
        }
        # One node changes owner and one event is added: a few chunks are written, the ones
        # they replace are deleted, and a fresh store reads the new state whole.
        second = json.loads(json.dumps(first))
        second["nodes"]["emu04242"]["owner"] = "slurm"
        second["events"].append({"seq": 10_000, "kind": "node-added", "node": "emu04242"})
        r2 = store.write(second, expect=r1)
        written = [k for k, rev in chunk_keys(c, key).items() if rev == r2]
        assert 1 <= len(written) <= 4, written
        assert len(chunk_keys(c, key)) == len(json.loads(c.get(key).value)["chunks"])  # type: ignore[union-attr]
        assert EtcdStore(c, key).read() == (r2, second)
        with pytest.raises(RevisionConflict, match=f"not {r1}"):
            EtcdStore(c, key).write(first, expect=r1)


def test_a_state_written_whole_by_an_earlier_version_is_read_and_replaced(
    etcd: EtcdServer, prefix: str
) -> None:
    key = prefix + "state"
    with etcd.client("manager") as c:
        old = c.put(key, json.dumps({"nodes": {"n0": "pool"}}))
        store = EtcdStore(c, key)
        assert store.read() == (old, {"nodes": {"n0": "pool"}})
        new = store.write({"nodes": {"n0": "slurm"}}, expect=old)
        assert json.loads(c.get(key).value)["format"] == FORMAT  # type: ignore[union-attr]
        assert EtcdStore(c, key).read() == (new, {"nodes": {"n0": "slurm"}})


def test_a_missing_or_altered_chunk_is_named(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "state"
    with etcd.client("manager") as c:
        store = EtcdStore(c, key)
        store.write(big_state(2_000), expect=0)
        some = sorted(chunk_keys(c, key))
        good = c.get(some[0]).value  # type: ignore[union-attr]
        c.put(some[0], b"{}")
        with pytest.raises(PtcError, match=f"{some[0]}: its bytes do not match"):
            store.read()
        c.put(some[0], good)
        c.delete(some[1])
        with pytest.raises(PtcError, match=f"{some[1]}: missing"):
            store.read()


class Raced(EtcdClient):
    """Runs ``meanwhile`` just before its first transaction without comparisons (a write's
    chunks being staged)."""

    meanwhile: Callable[[], object] | None = None

    def txn(self, compare: Any, success: Any, failure: Any = ()) -> TxnResult:
        if not compare and self.meanwhile is not None:
            run, self.meanwhile = self.meanwhile, None
            run()
        return super().txn(compare, success, failure)


def test_chunks_of_a_write_that_never_landed_are_swept(etcd: EtcdServer, prefix: str) -> None:
    key = prefix + "state"
    with etcd.client("manager") as c:
        r1 = EtcdStore(c, key).write({"v": 1}, expect=0)
        # A writer stages a large state's chunks, and another's write lands meanwhile: the
        # first loses the compare-and-swap.
        racing = Raced([etcd.endpoint], etcd.credentials("manager"))
        racing.meanwhile = lambda: EtcdStore(c, key).write({"v": 2}, expect=r1)
        with pytest.raises(RevisionConflict):
            EtcdStore(racing, key).write(big_state(5_000), expect=r1)
        racing.close()
        assert len(chunk_keys(c, key)) > 10  # left behind
        # Another store's first write sweeps them; only its manifest's chunks remain.
        revision, doc = EtcdStore(c, key).read()
        fresh = EtcdStore(c, key)
        fresh.read()
        r3 = fresh.write({"v": 3}, expect=revision)
        names = json.loads(c.get(key).value)["chunks"]  # type: ignore[union-attr]
        assert set(chunk_keys(c, key)) == {f"{key}/chunks/{n}" for n in names}
        assert fresh.read() == (r3, {"v": 3})
        assert doc == {"v": 2}


def test_a_chunk_put_again_since_is_not_collected(etcd: EtcdServer, prefix: str) -> None:
    """A writer staging a chunk the last write dropped keeps it: deletes compare revisions."""
    key = prefix + "state"
    with etcd.client("manager") as c:
        store = EtcdStore(c, key)
        r1 = store.write({"v": 1}, expect=0)
        (dropped,) = chunk_keys(c, key)
        value = c.get(dropped).value  # type: ignore[union-attr]
        r2 = store.write({"v": 2}, expect=r1)
        assert dropped not in chunk_keys(c, key)
        c.put(dropped, value)  # as a writer with expect=r2 would stage it
        store._collect([dropped], r2)
        assert dropped in chunk_keys(c, key)


def test_a_lost_answer_of_a_staged_write_is_resolved(etcd: EtcdServer, prefix: str) -> None:
    c = LosesAnswers([etcd.endpoint], etcd.credentials("manager"))
    store = EtcdStore(c, prefix + "state")
    rev = store.write({"v": 1}, expect=0)
    c.lose_next = True  # the first staging transaction's answer
    landed = store.write(big_state(5_000), expect=rev)
    assert EtcdStore(c, prefix + "state").read() == (landed, big_state(5_000))
    c.close()
