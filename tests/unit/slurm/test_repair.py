"""The repair loop against the fake Slurm and the real manager: which nodes it mends, the steps of
a repair, a failed repair's reason, backoff and protected mode, and two loops on one node."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient
from slurm_env import World

from elastic.manager import ManagerConfig
from elastic.manager.client import ManagerClient
from elastic.slurm.repair import Cause, Lender, RepairConfig, RepairLoop, cause_of


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        ("idle", "", None),
        ("drained", "ptc-health: munge cannot encode and decode a credential",
         Cause("mend", "health check: munge cannot encode and decode a credential")),
        ("drained~", "ptc-health: / has 3 MB free", Cause("mend", "health check: / has 3 MB free")),
        # still running a job: it drains first
        ("draining", "ptc-health: munge cannot encode and decode a credential", None),
        ("down~", "ptc resume: power on failed: node-1: did not start",
         Cause("mend", "resume failed: power on failed: node-1: did not start")),
        ("down*", "Not responding", Cause("mend", "not responding")),
        ("mixed*", "", Cause("mend", "not responding")),  # Slurm never DOWNs a CLOUD node so
        ("down", "Not responding", Cause("mend", "not responding")),
        ("down~", "ptc repair failed: configure: site.yml failed",
         Cause("mend", "its last repair failed: configure: site.yml failed")),
        # Slurm powered a failed repair's drained node down: it stays drained, not DOWN
        ("drained~", "ptc repair failed: configure: task 'Gathering Facts' unreachable",
         Cause("mend", "its last repair failed: configure: task 'Gathering Facts' unreachable")),
        # a repair whose controller died half-way
        ("drained", "ptc repair: not responding",
         Cause("mend", "its repair was cut short: not responding")),
        ("draining", "ptc repair failed: configure: x", None),  # its job first
        ("down~", "ptc resume: partition protected: since 2026-11-30",
         Cause("return", "its resume was refused while the partition was protected")),
        # an administrator's reasons, and Slurm's own hooks at work, are not the loop's
        ("drained", "disk replacement, ask bob", None),
        ("down", "maintenance", None),
        ("down#", "ptc resume: power on failed: x", None),
        ("idle%", "", None),
    ],
)  # fmt: skip
def test_which_nodes_the_loop_mends(state: str, reason: str, expected: Cause | None) -> None:
    assert cause_of(state, reason) == expected


def loop(world: World, holder: str = "head:1", after: int = 2) -> RepairLoop:
    config = RepairConfig(interval=20, after=after, lease=600, holder=holder)
    return RepairLoop(world.client, config, clock=world.clock)


def kinds(world: World) -> list[str]:
    return [e.kind for e in world.manager.read().events if "repair" in e.kind]


def test_a_drained_node_seen_twice_is_reloaded_configured_and_returned(world: World) -> None:
    world.slurm.states["node-1"] = "drained"
    world.slurm.reasons["node-1"] = "ptc-health: munge cannot encode and decode a credential"
    world.prov.on = {"node-1"}  # its machine runs
    repair = loop(world)
    assert repair.round() == []  # once is not enough: the health check may lift it itself
    assert repair.round() == ["node-1"]
    repair.wait()
    assert world.prov.calls == [("renew", ["node-1"]), ("provision+start", ["node-1"])]
    drain, back = world.slurm.updates()
    assert drain[3:] == ["State=DRAIN", "Reason=ptc repair: health check: munge cannot encode "
                         "and decode a credential"]  # fmt: skip
    assert back[3:] == ["State=RESUME"]
    assert world.slurm.states["node-1"] == "idle"
    assert kinds(world) == ["repair-started", "node-repaired"]
    done = world.manager.read().events[-1].data
    assert done["node"] == "node-1" and done["cause"].startswith("health check: munge")
    assert set(done["timings"]) == {"drain", "reload", "configure", "return"}
    record = world.manager.read().partitions["slurm"].repairs["node-1"]
    assert record.repaired == 1 and record.holder == "" and record.failures == 0
    assert "node-1" not in world.client.under_repair
    assert repair.round() == []  # healthy now


def test_a_node_that_failed_to_boot_is_mended_and_left_powered_down(world: World) -> None:
    world.slurm.states["node-2"] = "down~"
    world.slurm.reasons["node-2"] = "ptc resume: power on failed: node-2: did not start"
    repair = loop(world, after=1)
    assert repair.round() == ["node-2"]
    repair.wait()
    steps = [step for step, _ in world.prov.calls]
    assert steps == ["renew", "provision", "power_off"]  # site.yml only: no slurmd started
    assert world.slurm.states["node-2"] == "idle~" and "node-2" not in world.prov.on


def test_a_failed_resume_s_node_is_returned_responding_and_not_powered_down_again(
    world: World,
) -> None:
    """ResumeTimeout leaves a node DOWN, powered down and not responding; RESUME keeps the last,
    and no job could have the node: the return powers it down anew, and no drift follows."""
    world.slurm.states["node-2"] = "down~"
    world.slurm.reasons["node-2"] = "ptc resume: slurmd did not register (ResumeTimeout)"
    world.slurm.dead = {"node-2"}
    repair = loop(world, after=1)
    assert repair.round() == ["node-2"]
    repair.wait()
    assert world.slurm.updates()[-1][2:] == ["NodeName=node-2", "State=POWER_DOWN_FORCE"]
    assert world.slurm.states["node-2"] == "idle~" and not world.slurm.dead
    assert repair.round() == [] and repair.round() == []
    assert kinds(world) == ["repair-started", "node-repaired"]


def test_a_failed_repair_downs_the_node_backs_off_and_counts_towards_protection(
    world: World,
) -> None:
    world.manager.config = ManagerConfig(protect_after=2, repair_backoff=300)
    world.slurm.states["node-2"] = "down~"
    world.slurm.reasons["node-2"] = "ptc resume: slurmd did not register (ResumeTimeout)"
    world.prov.fail = "provision"
    repair = loop(world, after=1)
    assert repair.round() == ["node-2"]
    repair.wait()
    reason = world.slurm.reasons["node-2"]
    # the step, and the task that failed on the node
    assert reason == (
        "ptc repair failed: configure: task 'slurm : start slurmd' failed: "
        "Unable to start service slurmd"
    )
    assert world.slurm.states["node-2"] == "down~"
    assert "node-2" not in world.prov.on  # its machine is not left running
    failed = world.manager.read().events[-1]
    assert failed.kind == "repair-failed" and failed.data["failures"] == 1
    assert failed.data["retry_at"] == world.clock() + 300
    # no loop retries faster than the backoff
    world.clock.sleep(299)
    assert repair.round() == []
    world.clock.sleep(2)
    assert repair.round() == ["node-2"]
    repair.wait()
    part = world.manager.read().partitions["slurm"]
    assert part.repairs["node-2"].failures == 2
    assert part.repairs["node-2"].not_before == world.clock() + 600  # doubled
    assert part.protection.since is not None  # two failures in a row: protected
    assert "repair: configure" in part.protection.last_failure
    world.clock.sleep(10_000)
    assert repair.round() == []  # none starts while protected


def test_two_loops_never_repair_one_node_at_once(world: World) -> None:
    world.slurm.states["node-1"] = "drained"
    world.slurm.reasons["node-1"] = "ptc-health: munge cannot encode and decode a credential"
    world.prov.on = {"node-1"}  # its machine runs
    entered, release = threading.Event(), threading.Event()
    renew = world.prov.renew

    def slow_renew(nodes: Sequence[str]) -> bool:
        entered.set()
        release.wait(10)
        return renew(nodes)

    world.prov.renew = slow_renew  # type: ignore[method-assign]
    first, second = loop(world, "head:1", after=1), loop(world, "backup:7", after=1)
    assert first.round() == ["node-1"]
    assert entered.wait(10)
    assert second.round() == []  # the first loop holds the claim
    (started,) = [e for e in world.manager.read().events if e.kind == "repair-started"]
    assert started.data["holder"] == "head:1"
    release.set()
    first.wait()
    assert kinds(world) == ["repair-started", "node-repaired"]


def test_a_claim_that_outlived_its_lease_passes_to_another_loop(world: World) -> None:
    client = world.client.manager
    assert client.claim_repair("slurm", "node-1", "head:1", "not responding", 600) == ""
    refused = client.claim_repair("slurm", "node-1", "backup:7", "not responding", 600)
    assert refused.startswith("head:1 is repairing it until")
    world.clock.sleep(601)  # the first controller died mid-repair
    assert client.claim_repair("slurm", "node-1", "backup:7", "not responding", 600) == ""
    with pytest.raises(Exception, match="holds no repair"):
        client.end_repair("slurm", "node-1", "head:1")  # too late: no longer its repair


def test_nodes_refused_while_protected_are_returned_once_it_ends(world: World) -> None:
    world.manager.config = ManagerConfig(protect_after=1)
    world.prov.fail = "configure"
    world.client.resume("node-3")
    world.prov.fail = ""
    world.client.resume("node-0")  # refused: the partition is protected
    assert world.slurm.reasons["node-0"].startswith("ptc resume: partition protected")
    repair = loop(world)
    repair.round()
    assert world.slurm.states["node-0"].startswith("down")  # still protected: it waits
    world.manager.unprotect(world.admin, "slurm")
    assert repair.round() == ["node-3"]  # seen twice now, and no longer protected
    repair.wait()
    assert world.slurm.states["node-0"] == "idle~"
    # node-0 needed no mending, node-3 did
    mended = [nodes for step, nodes in world.prov.calls if step.startswith(("renew", "provision"))]
    assert mended == [["node-3"], ["node-3"]]


def test_the_nodes_of_one_round_are_mended_together_and_fail_alone(world: World) -> None:
    for node in ("node-1", "node-2"):
        world.slurm.states[node] = "down~"
        world.slurm.reasons[node] = "ptc resume: slurmd did not register (ResumeTimeout)"
    world.prov.fail = "provision"  # the playbook's task fails on node-1, the first, only
    repair = loop(world, after=1)
    assert repair.round() == ["node-1", "node-2"]
    repair.wait()
    assert world.prov.calls[:2] == [("renew", ["node-1", "node-2"]),
                                    ("provision", ["node-1", "node-2"])]  # fmt: skip
    assert world.slurm.reasons["node-1"].startswith("ptc repair failed: configure: task")
    assert world.slurm.states["node-2"] == "idle~"
    ends = {
        e.data["node"]: e.kind
        for e in world.manager.read().events
        if e.kind in ("repair-failed", "node-repaired")
    }
    assert ends == {"node-1": "repair-failed", "node-2": "node-repaired"}


def test_a_machine_stopped_under_slurm_is_powered_down_in_slurm_without_a_reload(
    world: World,
) -> None:
    world.slurm.states.update({"node-1": "mixed", "node-2": "idle"})
    world.prov.on = {"node-2"}  # node-1's machine stopped behind Slurm's back
    repair = loop(world)
    assert repair.round() == []
    repair.round()
    (update,) = world.slurm.updates()
    assert update[2:] == [
        "NodeName=node-1",
        "State=POWER_DOWN_FORCE",
        "Reason=ptc repair: its machine is off while Slurm counted it up",
    ]
    assert world.slurm.states["node-1"] == "mixed~" and world.slurm.states["node-2"] == "idle"
    assert world.prov.calls == []  # no fresh disk, no playbook: the machine is just gone
    assert kinds(world) == ["repair-started", "node-repaired"]


def test_a_powered_down_node_slurm_holds_not_responding_is_powered_down_anew(
    world: World,
) -> None:
    """Seen after slurmctld restarts: IDLE+POWERED_DOWN+NOT_RESPONDING, shown as ``idle~``,
    given to no job and resumed by nothing. A forced power down clears it."""
    world.slurm.dead = {"node-3", "node-2"}
    world.slurm.states["node-2"] = "down~"  # DOWN: the loop's own cause, not this drift
    world.slurm.reasons["node-2"] = "an administrator's"
    repair = loop(world)
    repair.round()
    repair.round()
    (update,) = world.slurm.updates()
    assert update[2:4] == ["NodeName=node-3", "State=POWER_DOWN_FORCE"]
    assert "powered down and not responding" in update[4]
    assert world.prov.calls == []
    assert kinds(world) == ["repair-started", "node-repaired"]


def test_a_client_restarted_mid_repair_takes_its_claim_back_at_once(world: World) -> None:
    """The claim is the host's: a client killed mid-repair (its repair cut short, the node
    drained with the repair's reason) is mended by the client restarted on that host without
    waiting out the lease; a loop on another host still waits."""
    world.slurm.states["node-1"] = "drained"
    world.slurm.reasons["node-1"] = "ptc-health: munge cannot encode and decode a credential"
    world.prov.on = {"node-1"}  # its machine runs
    first = RepairLoop(world.client, RepairConfig(interval=20, after=1), clock=world.clock)
    assert first.config.holder == socket.gethostname()
    assert first._claim("node-1", Cause("mend", "health check"))  # then the client dies
    world.slurm.states["node-1"] = "drained"
    world.slurm.reasons["node-1"] = "ptc repair: health check"
    world.client.under_repair.clear()
    elsewhere = RepairConfig(interval=20, after=1, holder="backup")
    assert RepairLoop(world.client, elsewhere, clock=world.clock).round() == []
    again = RepairLoop(world.client, RepairConfig(interval=20, after=1), clock=world.clock)
    assert again.round() == ["node-1"]
    again.wait()
    assert world.slurm.states["node-1"] == "idle"


def lender(world: World) -> Lender:
    token = world.manager.tokens.get("ref")
    assert token is not None
    # a client of its own: a client's token rides on its HTTP client's headers
    own = TestClient(world.http.app)
    return Lender("ref", ManagerClient("http://testserver", token, client=own))


def test_a_lent_machines_node_free_in_the_pool_is_handed_to_the_lender(world: World) -> None:
    world.slurm.states.update({"node-1": "idle~", "node-2": "idle~"})
    world.prov.away = {"node-1"}  # lent, yet free in the manager: Slurm could resume it
    config = RepairConfig(interval=20, after=2, lease=600, holder="head:1")
    repair = RepairLoop(world.client, config, clock=world.clock, lender=lender(world))
    assert repair.round() == []
    assert world.owners()["node-1"] is None, "seen once is not enough"
    repair.round()
    assert world.owners()["node-1"] == "ref" and world.owners()["node-2"] is None
    assert world.client.sync_pool()["drained"] == ["node-1"], "Slurm now keeps it out"
    assert kinds(world) == ["repair-started", "node-repaired"]
    done = world.manager.read().events[-1].data
    assert done["cause"] == "its machine is lent to another experiment"
    assert set(done["timings"]) == {"hand over"} and world.prov.calls == []
    repair.round()
    repair.round()
    assert kinds(world) == ["repair-started", "node-repaired"], "held by ref: no longer ours"


def test_a_lent_machines_node_still_ours_leaves_our_partition_for_the_lender(
    world: World,
) -> None:
    world.client.manager.add_nodes("slurm", nodes=["node-3"])
    world.slurm.states["node-3"] = "idle~"  # a give-back to the pool that never happened
    world.prov.away = {"node-3"}
    config = RepairConfig(interval=20, after=1, lease=600, holder="head:1")
    RepairLoop(world.client, config, clock=world.clock, lender=lender(world)).round()
    assert world.owners()["node-3"] == "ref"


def test_without_a_lender_lent_machines_are_left_to_the_reconciler(world: World) -> None:
    world.slurm.states["node-1"] = "idle~"
    world.prov.away = {"node-1"}
    repair = loop(world, after=1)
    repair.round()
    assert world.owners()["node-1"] is None and kinds(world) == []


def test_drift_is_not_looked_for_when_the_testbed_powers_nothing(world: World) -> None:
    world.slurm.states["node-1"] = "idle"
    world.prov.powers = False  # type: ignore[misc]
    repair = loop(world, after=1)
    repair.round()
    assert world.slurm.updates() == [] and kinds(world) == []


def test_a_repair_ending_during_a_round_is_not_started_again_from_a_stale_view(
    world: World,
) -> None:
    """The round reads Slurm's states while a repair is under way; the repair ends (the node
    returned) before the round looks at its node. The stale view must not claim it again."""
    world.slurm.states["node-2"] = "down~"
    world.slurm.reasons["node-2"] = "ptc resume: slurmd did not register (ResumeTimeout)"
    repair = loop(world, after=1)
    world.client.under_repair.add("node-2")  # a repair of node-2 under way
    world.slurm.reasons["node-2"] = "ptc repair: resume failed: slurmd did not register"
    reasons = world.client.slurm.node_reasons

    def read_then_end(nodes: Sequence[str]) -> dict[str, tuple[str, str]]:
        seen = reasons(nodes)
        world.client.under_repair.discard("node-2")  # it ends right after the read
        world.slurm.states["node-2"], world.slurm.reasons["node-2"] = "idle~", ""
        return seen

    world.client.slurm.node_reasons = read_then_end  # type: ignore[method-assign]
    assert repair.round() == []
    world.client.slurm.node_reasons = reasons  # type: ignore[method-assign]
    assert repair.round() == [] and kinds(world) == []
