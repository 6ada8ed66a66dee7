"""A provider's notice on a node (a spot interruption): the node drains itself with the notice
in its reason, the client passes it to the manager once, and the reclamation that follows
requeues the node's jobs before the provider's deadline."""

from __future__ import annotations

import pytest
from fake_slurm import Job
from slurm_env import NODES, T0, World

from elastic.cli.elastic import _describe as describe
from elastic.manager import Principal
from elastic.manager.errors import FieldError, Forbidden
from elastic.sites import notice

SPOT = "ec2 spot terminate"


def test_a_notice_becomes_a_reclamation_that_requeues_before_the_deadline(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=list(NODES))
    world.slurm.jobs = [Job("7", ["node-1"], elapsed="2:00"), Job("8", ["node-2"])]
    world.client.report_pv()
    # what the node's watcher sets: DRAIN with the notice as the reason
    world.slurm.reasons["node-1"] = notice.reason(SPOT, T0 + 60)
    world.slurm.states["node-1"] = "draining"
    world.client.sync_pool()
    world.client.sync_pool()  # seen again: passed on once
    recs = world.manager.read().reclamations
    assert list(recs) == ["r1"]
    rec = recs["r1"]
    assert rec.chosen == ["node-1"] and rec.deadline == T0 + 60 and rec.grace == 60
    assert rec.requested_by == f"partition slurm: {SPOT}"
    assert [j.job_id for j in rec.jobs] == ["7"]  # from the last vector
    started = [e for e in world.manager.events() if e["kind"] == "reclamation-started"][-1]
    assert started["data"]["notice"] == SPOT
    assert describe(started) == f"r1: {SPOT}, GP 60 s, slurm -> pool: node-1"
    # the manager notifies the client as for any reclamation
    world.manager.tick()
    world.client.notified(world.notes[-1])
    world.clock.t = T0 + 30
    world.client.step()
    assert world.slurm.requeued == [] and world.owners()["node-1"] == "slurm"
    world.clock.t = T0 + 58  # the deadline less the client's lead
    world.client.step()
    assert world.slurm.requeued == ["7"]
    assert world.owners()["node-1"] is None and world.owners()["node-2"] == "slurm"
    world.manager.tick()
    assert world.manager.reclamation("r1").state == "done"


def test_a_notice_on_a_node_the_partition_does_not_hold_is_not_passed_on(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0"])
    world.slurm.reasons["node-3"] = notice.reason(SPOT, T0 + 60)  # nobody's node
    world.client.sync_pool()
    assert world.manager.read().reclamations == {}


def test_a_later_notice_for_the_same_node_is_passed_on_again(world: World) -> None:
    """A node resumed again after its instance ended may get another instance, and notice."""
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0"])
    world.client.report_pv()
    world.slurm.reasons["node-0"] = notice.reason(SPOT, T0 + 60)
    world.client.sync_pool()
    world.manager.tick()
    world.client.notified(world.notes[-1])
    world.clock.t = T0 + 61
    world.client.step()
    world.manager.tick()
    assert world.owners()["node-0"] is None
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0"])
    world.slurm.reasons["node-0"] = notice.reason(SPOT, T0 + 200)
    world.client.sync_pool()
    assert sorted(world.manager.read().reclamations) == ["r1", "r2"]
    assert world.manager.reclamation("r2").deadline == T0 + 200


def test_the_manager_takes_a_notice_only_from_the_partition_for_its_own_nodes(
    world: World,
) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0"])
    slurm, ref = Principal("slurm"), Principal("ref")
    with pytest.raises(FieldError, match="partition slurm does not hold node-1"):
        world.manager.notice(slurm, "slurm", ["node-0", "node-1"], T0 + 60, SPOT)
    with pytest.raises(Forbidden, match="partition ref may not"):
        world.manager.notice(ref, "slurm", ["node-0"], T0 + 60, SPOT)
    with pytest.raises(FieldError, match="grace"):
        world.manager.notice(slurm, "slurm", ["node-0"], T0 + 10**9, SPOT)
    assert world.manager.read().reclamations == {}
    # a notice already passed: nothing left to wait for, the nodes go at once
    [rec] = world.manager.notice(slurm, "slurm", ["node-0"], T0 - 5, SPOT)
    assert rec.grace == 0 and rec.deadline == T0
    # the same again: the reclamation already under way, nothing new
    assert [r.id for r in world.manager.notice(slurm, "slurm", ["node-0"], T0, SPOT)] == [rec.id]


@pytest.mark.parametrize(
    "reason",
    [
        "ptc notice: ec2 spot terminate at 2027-01-15T08:00:60",  # no Z
        "ptc notice: EC2 at 2027-01-15T08:00:00Z",  # not the form's words
        "ptc reclamation r1 deadline 2027-01-15T08:00:30Z",
        "",
    ],
)
def test_other_reasons_carry_no_notice(reason: str) -> None:
    assert notice.parse(reason) is None
