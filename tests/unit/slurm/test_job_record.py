"""One job record from ``squeue`` to the manager's store: what the Slurm client parses is what
the manager keeps with the preemption vector, field for field, over the real HTTP API."""

from __future__ import annotations

from fake_slurm import Job
from slurm_env import NODES, World

from elastic.manager.model import JobRecord
from elastic.slurm.queue import parse_squeue


def test_the_manager_keeps_the_records_the_client_parsed(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=list(NODES))
    world.slurm.jobs = [
        Job("1", ["node-0"], elapsed="1-02:03", left="20:00", qos="high", name="a|b", user="bob"),
        Job("2", ["node-1", "node-2"], elapsed="8:20", left="UNLIMITED"),
    ]
    world.client.report_pv()
    pv = world.manager.read().partitions["slurm"].pv
    assert pv is not None
    parsed = parse_squeue(world.client.slurm.running_jobs("elastic"), world.client.slurm)
    assert pv.jobs == parsed
    first = pv.jobs[0]
    assert first == JobRecord(
        job_id="1",
        nodes=("node-0",),
        elapsed=93780.0,  # days-hours:minutes
        remaining=1200.0,
        user="bob",
        queue="high",
        application="a|b",
    )
    assert pv.jobs[1].remaining is None and pv.jobs[1].nodes == ("node-1", "node-2")


def test_the_policies_see_the_same_job() -> None:
    record = JobRecord(job_id="9", nodes=("node-0",), elapsed=5.0, queue="q", application="x")
    info = record.info()
    assert (info.job_id, info.nodes, info.elapsed, info.queue, info.application) == (
        "9",
        ("node-0",),
        5.0,
        "q",
        "x",
    )
