"""The partition's snapshot finds each job's nodes among the pool's without scanning it."""

from __future__ import annotations

from elastic.manager.model import JobRecord
from elastic.slurm.queue import snapshot


class Name(str):
    """A node name that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Name.compared += 1
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return str.__hash__(self)


def test_lookups_do_not_grow_with_the_pool() -> None:
    pool = [Name(f"node-{i:04d}") for i in range(400)]
    # each job's names are other objects than the pool's, as when parsed from squeue
    jobs = [
        JobRecord.model_construct(
            job_id=str(i), nodes=(Name(f"node-{i:04d}"),), elapsed=1.0, remaining=None,
            priority=1.0, user="", queue="", application="",
        )
        for i in range(400)
    ]  # fmt: skip
    Name.compared = 0
    snap = snapshot(jobs, pool, 0.0)
    assert list(snap.nodes) == sorted(pool)
    # a few per job with a set; a scan of the pool's list made it about 80,000
    assert Name.compared < 10 * len(jobs), Name.compared


def test_nodes_outside_the_pool_follow_in_job_order() -> None:
    jobs = [
        JobRecord(job_id="1", nodes=("b", "z"), elapsed=1.0),
        JobRecord(job_id="2", nodes=("y",), elapsed=1.0),
    ]
    assert snapshot(jobs, ["b", "a"], 0.0).nodes == ("a", "b", "z", "y")
