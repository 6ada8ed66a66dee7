"""The Slurm client's logic against a real manager and a fake Slurm that records commands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fake_slurm import FakeSlurm, Job
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from slurm_env import NODES, T0, World

from elastic import wire
from elastic.errors import InputError, PtcError
from elastic.events import Event, Kind, Reporter, collect
from elastic.policies import JobInfo, LifoPolicy, Snapshot, select_nodes
from elastic.slurm import service
from elastic.slurm.commands import REQUEUE_DELAY_S, RESIZED_REQUEUE_DELAY_S, Slurm
from elastic.slurm.queue import parse_squeue
from elastic.slurm.service import SlurmClientSettings, build_repair, create_app
from elastic.slurm_time import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00", 0.0),
        ("1:02", 62.0),
        ("1:02:03", 3723.0),
        ("1-01:02:03", 90123.0),
        ("2-00:00:00", 172800.0),
        ("UNLIMITED", None),
        ("NOT_SET", None),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_parse_duration_names_the_bad_value() -> None:
    with pytest.raises(PtcError, match="1:xx"):
        parse_duration("1:xx")


def test_parse_squeue_expands_hostlists_with_scontrol() -> None:
    fake = FakeSlurm()
    out = "12|elastic|bob|high|RUNNING|5:00|UNLIMITED|node-[1-2]|a|b\n13|elastic|al|normal|RUNNING|0:07|1:00|node-0|x\n"
    jobs = parse_squeue(out, Slurm(fake))
    assert jobs[0].nodes == ("node-1", "node-2") and jobs[0].application == "a|b"
    assert jobs[0].elapsed == 300.0 and jobs[0].remaining is None and jobs[0].queue == "high"
    assert jobs[1].nodes == ("node-0",) and jobs[1].remaining == 60.0
    assert ["scontrol", "show", "hostnames", "node-[1-2]"] in fake.calls


def hold_all(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=list(NODES))


def test_pv_from_the_queue_is_the_policy_s_and_the_manager_picks_from_it(world: World) -> None:
    hold_all(world)
    world.slurm.jobs = [
        Job("1", ["node-0"], elapsed="1:40", left="20:00"),
        Job("2", ["node-1", "node-2"], elapsed="8:20", left="0:10"),
        Job("3", ["head"], partition="other"),  # another Slurm partition's job: not ours
    ]
    values = world.client.report_pv()
    snap = Snapshot(
        T0,
        NODES,
        (
            JobInfo("1", ("node-0",), 100.0, remaining=1200.0),
            JobInfo("2", ("node-1", "node-2"), 500.0, remaining=10.0),
        ),
    )
    assert values == dict(LifoPolicy().evaluate(snap).values)
    stored = world.manager.read().partitions["slurm"].pv
    assert stored is not None and stored.policy == "LIFO"
    assert [j.job_id for j in stored.jobs] == ["1", "2"]
    rec = world.manager.reclaim(world.admin, "slurm", 2, 30)
    assert rec.chosen == select_nodes(LifoPolicy().evaluate(snap), 2) == ["node-3", "node-0"]


def test_the_pv_carries_the_pool_s_slurm_states_and_the_waiting_demand(world: World) -> None:
    """For people watching the pool: the states the last sync read, and the jobs waiting."""
    hold_all(world)
    world.slurm.states.update({"node-0": "allocated", "node-1": "mixed#"})
    world.slurm.pending = [2, 1, 3]
    world.client.sync_pool()
    world.client.report_pv()
    stored = world.manager.read().partitions["slurm"].pv
    assert stored is not None
    assert stored.node_states == {
        "node-0": "allocated", "node-1": "mixed#", "node-2": "idle~", "node-3": "idle~"
    }  # fmt: skip
    assert (stored.pending_jobs, stored.pending_nodes) == (3, 6)


def test_graceful_preemption_drain_release_idle_requeue_at_deadline(world: World) -> None:
    hold_all(world)
    world.slurm.jobs = [
        Job("1", ["node-0"], elapsed="1:40"),
        Job("2", ["node-1", "node-2"], elapsed="8:20"),
    ]
    world.client.report_pv()
    world.manager.reclaim(world.admin, "slurm", 3, 30)
    world.manager.tick()
    payload = world.notes[-1]
    assert payload["nodes"] == ["node-3", "node-0", "node-1"]
    world.client.notified(payload)
    drain = world.slurm.updates()[-1]
    assert drain[:4] == ["scontrol", "update", "NodeName=node-0,node-1,node-3", "State=DRAIN"]
    assert drain[4] == "Reason=ptc reclamation r1 deadline 2027-01-15T08:00:30Z"
    world.client.notified(payload)  # the once-a-minute repeat drains nothing again
    assert world.slurm.updates()[-1] == drain
    # node-3 is idle: it goes at once; node-0 and node-1 are busy
    world.clock.t += 1
    world.client.step()
    assert world.owners()["node-3"] is None
    assert world.slurm.updates()[-2][:4] == [
        "scontrol",
        "update",
        "NodeName=node-3",
        "State=POWER_DOWN_FORCE",
    ]
    assert world.slurm.updates()[-1] == ["scontrol", "update", "NodeName=node-3", "State=UNDRAIN"]
    # job 1 finishes within the grace period: node-0 goes when idle
    world.slurm.jobs = [j for j in world.slurm.jobs if j.job_id != "1"]
    world.clock.t += 10
    world.client.step()
    assert world.owners()["node-0"] is None and world.owners()["node-1"] == "slurm"
    # at the deadline (less the lead) job 2 is requeued and node-1 handed back
    world.clock.t = T0 + 28
    world.client.step()
    assert world.slurm.requeued == ["2"]
    assert world.owners() == {"node-0": None, "node-1": None, "node-2": "slurm", "node-3": None}
    assert world.client.pending == {}
    world.clock.t = T0 + 30
    world.manager.tick()
    rec = world.manager.reclamation("r1")
    assert rec.state == "done" and rec.forced == []
    # the client requeued job 2 and released node-1 itself just before the deadline: the
    # manager counts job 2 as killed from the client's report (simulator formula)
    finished = [e for e in world.manager.events() if e["kind"] == "reclamation-finished"][-1]
    assert finished["data"]["wasted_cycles"] == (500.0 + 30.0) * 2
    assert [j["job_id"] for j in finished["data"]["jobs_killed"]] == ["2"]
    report = [e for e in world.manager.events() if e["kind"] == "jobs-requeued"][-1]["data"]
    assert report["jobs"] == [
        {"job_id": "2", "elapsed": 500.0, "node_count": 2, "requeued": True, "detail": ""}
    ]


def test_a_resized_job_is_requeued_held_until_its_old_step_can_be_gone(world: World) -> None:
    """A job Slurm resized while it ran is requeued with a begin time RESIZED_REQUEUE_DELAY_S
    ahead, set while it is held, then released; a job never resized REQUEUE_DELAY_S ahead."""
    hold_all(world)
    world.slurm.jobs = [
        Job("5", ["node-0", "node-1"], elapsed="3:00", resized=True),
        Job("6", ["node-2"], elapsed="2:00"),
    ]
    world.client.report_pv()
    world.manager.reclaim(world.admin, "slurm", 4, 30)
    world.manager.tick()
    world.client.notified(world.notes[-1])
    world.clock.t = T0 + 28
    world.client.step()
    assert sorted(world.slurm.requeued) == ["5", "6"]
    sent = [c for c in world.slurm.calls if c[:2] != ["scontrol", "show"] and "5" in " ".join(c)]
    assert [c for c in sent if c[0] == "scontrol" and c[1] in ("requeuehold", "release")] == [
        ["scontrol", "requeuehold", "5"],
        ["scontrol", "release", "5"],
    ]
    assert world.slurm.begin == {
        "5": f"now+{RESIZED_REQUEUE_DELAY_S}",
        "6": f"now+{REQUEUE_DELAY_S}",
    }
    assert world.slurm.held == []


def test_a_job_that_cannot_be_requeued_is_cancelled_and_reported(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-1"])
    world.slurm.jobs = [Job("7", ["node-1"], elapsed="0:30", requeueable=False)]
    world.client.report_pv()
    world.manager.reclaim(world.admin, "slurm", 1, 0)
    world.client.notified(_payload(world))  # GP 0: the deadline is now
    world.client.step()
    assert world.slurm.cancelled == ["7"] and world.slurm.requeued == []
    report = [e for e in world.manager.events() if e["kind"] == "jobs-requeued"][-1]["data"]
    assert report["jobs"][0]["requeued"] is False
    assert "Only batch jobs" in report["jobs"][0]["detail"]


def _payload(world: World) -> dict[str, object]:
    rec = world.manager.reclamation("r1")
    return {
        "reclamation": rec.id,
        "nodes": rec.outstanding,
        "deadline": rec.deadline,
        "reason": f"ptc reclamation {rec.id}",
    }


def test_missed_deadline_still_requeues_on_nodes_the_manager_took(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0", "node-1"])
    world.slurm.jobs = [Job("5", ["node-0"], elapsed="5:00")]
    world.client.report_pv()
    world.manager.reclaim(world.admin, "slurm", 2, 30)
    world.manager.tick()
    world.client.notified(world.notes[-1])
    world.clock.t = T0 + 31
    world.manager.tick()  # the manager takes the nodes first
    assert world.owners()["node-0"] is None
    world.client.step()
    assert world.slurm.requeued == ["5"]
    assert (world.slurm.updates()[-2][:4]) == [
        "scontrol",
        "update",
        "NodeName=node-0,node-1",
        "State=POWER_DOWN_FORCE",
    ]
    kinds = [e["kind"] for e in world.manager.events()]
    assert "nodes-deleted" not in kinds  # the nodes were gone: no DeleteNodes was sent


def test_resume_adds_configures_and_waits_for_slurmd(world: World) -> None:
    world.slurm.register_after = 2
    result = world.client.resume("node-[0-1]")
    assert result.ready == ["node-0", "node-1"] and result.failed == {}
    assert world.prov.calls == [
        ("power_on", ["node-0", "node-1"]),
        ("configure", ["node-0", "node-1"]),
    ]
    assert world.owners()["node-0"] == "slurm" and world.owners()["node-1"] == "slurm"
    assert world.clock.t == T0 + 4  # two polls of 2 s before slurmd registered
    # the steps count from the resume's start, by the client's clock
    assert result.started == T0 and result.timings["total"] == 4.0


def test_every_resume_is_reported_to_the_managers_event_log_with_its_steps(world: World) -> None:
    world.slurm.register_after = 2
    world.client.resume("node-[0-1]")
    world.prov.fail = "configure"
    world.client.resume("node-2")
    reported = [e for e in world.manager.events(0, 1000) if e["kind"] == "resume-reported"]
    assert [(e["data"]["nodes"], e["data"]["ready"]) for e in reported] == [
        (["node-0", "node-1"], ["node-0", "node-1"]),
        (["node-2"], []),
    ]
    first, second = (e["data"] for e in reported)
    assert first["partition"] == "slurm" and first["failed"] == {}
    assert first["timings"]["register"] == 4.0  # two polls of 2 s on the fake clock
    assert set(first["timings"]) == {"manager", "power_on", "playbook", "register", "total"}
    assert second["failed"]["node-2"].startswith("configure failed")


def test_a_manager_that_refuses_the_report_does_not_fail_the_resume(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Event] = []
    world.client.report = Reporter("slurm-elastic", collect(events))

    def refuse(*args: object, **kwargs: object) -> None:
        raise PtcError("503: the manager is not the leader")

    monkeypatch.setattr(world.client.manager, "report_resume", refuse)
    result = world.client.resume("node-0")
    assert result.ready == ["node-0"] and result.failed == {}
    assert world.owners()["node-0"] == "slurm"
    warnings = [e.message for e in events if e.kind is Kind.WARNING]
    assert warnings == [
        "the manager did not take the resume's report: 503: the manager is not the leader"
    ]


def test_resume_playbook_failure_marks_down_with_the_task_and_gives_back(world: World) -> None:
    world.prov.fail = "configure"
    result = world.client.resume("node-2")
    assert result.ready == []
    reason = world.slurm.reasons["node-2"]
    assert world.slurm.states["node-2"] == "down~"  # DOWN at once, then powered down
    assert reason.startswith("ptc resume: configure failed")
    assert "task 'slurm : start slurmd' failed: Unable to start service slurmd" in reason
    assert world.owners()["node-2"] is None


def test_resume_of_a_node_taken_meanwhile_powers_it_down_without_counting_a_failure(
    world: World,
) -> None:
    """Slurm chose a free node, and the reference partition took it before the resume asked
    the manager: the node is powered down again (its job requeued), not DOWN, and the race is
    not a failure of the node towards protected mode."""
    world.manager.add_nodes(world.admin, "ref", nodes=["node-1"])
    result = world.client.resume("node-[0-1]")
    assert result.ready == ["node-0"] and list(result.failed) == ["node-1"]
    assert "held by partition ref" in world.slurm.reasons["node-1"]
    assert world.slurm.updates()[0][2:4] == ["NodeName=node-1", "State=POWER_DOWN_FORCE"]
    assert not world.slurm.states["node-1"].startswith("down")
    assert world.owners() == {"node-0": "slurm", "node-1": "ref", "node-2": None, "node-3": None}
    assert world.manager.read().partitions["slurm"].protection.failures == 0
    world.client.sync_pool()
    assert world.slurm.reasons["node-1"] == "ptc: held by partition ref"


def test_a_node_whose_site_has_no_room_goes_back_powered_down_and_its_site_is_held_back(
    world: World,
) -> None:
    """No capacity is the site's condition, not the node's: the site's nodes are held back in
    a reservation first (the requeued job goes elsewhere), the node is powered down (its job
    requeued), never DOWN, back in the pool, and not counted towards protected mode. When the
    site is no longer held back, the reservation goes."""
    world.prov.full = {"node-2"}
    world.prov.held = {"ptc-paused-dear": ["node-2", "node-3"]}
    result = world.client.resume("node-[1-2]")
    assert result.ready == ["node-1"] and list(result.failed) == ["node-2"]
    assert world.slurm.reservations == {"ptc-paused-dear": ["node-2", "node-3"]}
    reserved_at = world.slurm.calls.index(
        next(c for c in world.slurm.calls if c[:3] == ["scontrol", "create", "reservation"])
    )
    powered_down_at = world.slurm.calls.index(
        ["scontrol", "update", "NodeName=node-2", "State=POWER_DOWN_FORCE",
         f"Reason={world.slurm.reasons['node-2']}"]
    )  # fmt: skip
    assert reserved_at < powered_down_at
    assert world.slurm.reasons["node-2"].startswith("ptc resume: power on: no free machine")
    assert world.slurm.states["node-2"] == "idle~"
    assert world.owners()["node-2"] is None and world.owners()["node-1"] == "slurm"
    assert world.manager.read().partitions["slurm"].protection.failures == 0
    world.prov.held = {"ptc-paused-dear": ["node-3"]}
    assert world.client.sync_sites() == {"ptc-paused-dear": ["node-3"]}
    assert world.slurm.reservations == {"ptc-paused-dear": ["node-3"]}
    world.prov.held = {}
    world.client.sync_sites()
    assert world.slurm.reservations == {}


def test_a_node_left_down_while_held_elsewhere_is_returned_once_freed(world: World) -> None:
    world.manager.add_nodes(world.admin, "ref", nodes=["node-1"])
    world.slurm.states["node-1"] = "down~"  # Slurm shows DOWN over the holder's DRAIN
    world.slurm.reasons["node-1"] = "ptc: held by partition ref"
    world.client.sync_pool()
    assert world.slurm.updates() == [], "held still: left as it is"
    world.manager.delete_nodes(world.admin, "ref", ["node-1"])
    assert world.client.sync_pool()["undrained"] == ["node-1"]
    assert world.slurm.updates()[-1][2:] == ["NodeName=node-1", "State=RESUME"]


def test_resume_timeout_and_resume_fail_program(world: World) -> None:
    world.slurm.register_after = 100
    result = world.client.resume("node-3")
    assert "did not register within 10 s" in result.failed["node-3"]
    assert world.owners()["node-3"] is None
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-2"])
    assert world.client.resume_failed("node-2") == ["node-2"]
    assert world.slurm.states["node-2"].startswith("down") and world.owners()["node-2"] is None


def test_suspend_gives_back_and_tolerates_nodes_no_longer_ours(world: World) -> None:
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0", "node-1"])
    assert world.client.suspend("node-[0-1]") == ["node-0", "node-1"]
    assert ("power_off", ["node-0", "node-1"]) in world.prov.calls
    [deleted] = [e for e in world.manager.read().events if e.kind == "nodes-deleted"]
    assert deleted.data["power_off"] >= 0  # the suspend's time, for the manager's histogram
    assert world.client.suspend("node-0") == []  # already in the pool: nothing to do
    assert world.owners()["node-0"] is None


def test_client_endpoint_checks_the_token(world: World) -> None:
    hold_all(world)
    world.client.report_pv()
    world.manager.reclaim(world.admin, "slurm", 1, 60)
    world.manager.tick()
    app = create_app(world.client, "s3cret", run_loop=False)
    http = TestClient(app)
    r = http.post(wire.NOTIFY_PATH, json=world.notes[-1])
    assert r.status_code == 401
    r = http.post(wire.NOTIFY_PATH, json=world.notes[-1], headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    r = http.post(
        wire.NOTIFY_PATH,
        json=world.notes[-1],
        headers={"Authorization": "Bearer s3cret"},
    )
    assert r.status_code == 200 and "r1" in world.client.pending


def test_settings_refuse_listening_everywhere(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "c.yml"
    conf.write_text("manager_url: http://10.10.1.1:8700\ntoken_file: /x\nlisten: 0.0.0.0\n")
    with pytest.raises(InputError, match="listen"):
        SlurmClientSettings.load(conf)
    conf.write_text("manager_url: http://x\ntoken_file: /x\npolicy: BEST\n")
    with pytest.raises(InputError, match="policy"):
        SlurmClientSettings.load(conf)


def test_a_lent_machines_node_freed_by_mistake_stays_drained(world: World) -> None:
    world.manager.add_nodes(world.admin, "ref", nodes=["node-1", "node-2"])
    world.slurm.states.update({"node-1": "idle~", "node-2": "idle~"})
    world.client.sync_pool()
    world.manager.delete_nodes(world.admin, "ref", ["node-1", "node-2"])
    world.prov.away = {"node-1"}  # node-1's machine is lent elsewhere; node-2 came back
    assert world.client.sync_pool()["undrained"] == ["node-2"]
    assert world.slurm.reasons["node-1"] == "ptc: held by partition ref"


@pytest.mark.parametrize(
    ("lender", "error"),
    [
        ("ref", "lender: a mapping"),
        ("{partition: ref}", "lender: token_file: missing"),
        ("{partition: ref, token_file: /t, url: x}", "lender: url: unknown"),
    ],
)
def test_settings_name_a_wrong_lender(tmp_path: Path, lender: str, error: str) -> None:
    conf = tmp_path / "c.yml"
    conf.write_text(f"manager_url: http://x\ntoken_file: /x\nlender: {lender}\n")
    with pytest.raises(InputError, match=f"c.yml: {error}"):
        SlurmClientSettings.load(conf)
    conf.write_text(
        "manager_url: http://x\ntoken_file: /x\nlender: {partition: ref, token_file: /t}\n"
    )
    assert SlurmClientSettings.load(conf).lender == ("ref", Path("/t"))


def test_nodes_other_partitions_hold_are_drained_and_freed_ones_undrained(world: World) -> None:
    world.manager.add_nodes(world.admin, "ref", nodes=["node-1"])
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0"])
    world.slurm.states["node-2"] = "drained~"
    world.slurm.reasons["node-2"] = "admin: bad disk"  # someone else's drain: left alone
    nothing = {"drained": [], "undrained": [], "adopted": []}
    assert world.client.sync_pool() == nothing | {"drained": ["node-1"]}
    assert world.slurm.reasons["node-1"] == "ptc: held by partition ref"
    assert world.client.sync_pool() == nothing  # nothing twice
    world.slurm.states["node-1"] = "idle%"  # a forced power down lifted the drain
    assert world.client.sync_pool() == nothing | {"drained": ["node-1"]}
    assert world.slurm.states["node-1"] == "drained%"
    world.slurm.states["node-1"] = "drained~"  # the power down completes
    world.manager.delete_nodes(world.admin, "ref", ["node-1"])
    assert world.client.sync_pool() == nothing | {"undrained": ["node-1"]}
    assert (
        world.slurm.states["node-1"] == "idle~"
        and world.slurm.reasons["node-2"] == "admin: bad disk"
    )


def test_nodes_reclaimed_for_another_partition_stay_drained_for_it(world: World) -> None:
    hold_all(world)
    world.client.report_pv()
    got = world.manager.add_nodes(world.admin, "ref", count=1, grace=30)
    assert got.waiting == 1
    world.manager.tick()
    payload = world.notes[-1]
    assert payload["beneficiary"] == "ref"
    world.client.notified(payload)
    world.clock.t += 1
    world.client.step()  # idle: handed back at once, to ref
    (node,) = payload["nodes"]
    assert world.owners()[node] == "ref"
    assert world.slurm.updates()[-1][-2:] == ["State=DRAIN", "Reason=ptc: held by partition ref"]
    assert world.slurm.states[node] == "drained~"


def test_a_node_up_in_slurm_but_free_in_the_pool_is_adopted(world: World) -> None:
    world.slurm.states["node-3"] = "idle"  # an administrator resumed it by hand
    assert world.client.sync_pool()["adopted"] == ["node-3"]
    assert world.owners()["node-3"] == "slurm"


def test_resume_fail_program_keeps_the_reason_a_failed_step_gave(world: World) -> None:
    world.prov.fail = "configure"
    world.client.resume("node-2")
    reason = world.slurm.reasons["node-2"]
    assert reason.startswith("ptc resume: configure failed")
    world.client.resume_failed("node-2")  # Slurm's ResumeTimeout came too
    assert world.slurm.reasons["node-2"] == reason


def test_a_node_whose_step_failed_is_down_before_the_others_register(world: World) -> None:
    """Slurm resumes nodes in one hostlist: a node whose playbook failed is marked DOWN (its job
    requeued, its reason ours) at once, not when the others have registered or Slurm gave up
    on them at ResumeTimeout (ResumeFailProgram would then give its own reason first)."""
    world.prov.fail = "configure"  # fails the first node of the call: node-2
    world.slurm.register_after = 100  # node-3's slurmd never registers within 10 s
    result = world.client.resume("node-[2-3]")
    assert result.ready == [] and sorted(result.failed) == ["node-2", "node-3"]
    calls = world.slurm.calls
    down = next(
        i
        for i, c in enumerate(calls)
        if c[:4] == ["scontrol", "update", "NodeName=node-2", "State=DOWN"]
    )
    polls = [i for i, c in enumerate(calls) if c[0] == "sinfo" and c[-1] == "%N|%T"]
    assert polls and down < polls[0], "node-2 waited for node-3 before it was marked DOWN"
    assert world.slurm.reasons["node-2"].startswith("ptc resume: configure failed")
    assert world.slurm.reasons["node-3"] == "ptc resume: slurmd did not register within 10 s"
    assert world.owners()["node-2"] is None and world.owners()["node-3"] is None


def test_a_node_powering_up_for_its_job_is_drained_only_once_up(world: World) -> None:
    """Slurm requeues at once the job of a node drained while it powers up for it: the client
    waits until the node is up, so the job keeps its grace period."""
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-0", "node-1"])
    world.slurm.states.update({"node-0": "mixed#", "node-1": "idle"})
    world.slurm.jobs = [Job("5", ["node-0"], elapsed="0:00")]  # configuring: nodes powering up
    world.client.report_pv()
    squeue = next(c for c in world.slurm.calls if c[0] == "squeue")  # the PV's
    assert "--states=RUNNING,COMPLETING,CONFIGURING" in squeue
    world.manager.reclaim(world.admin, "slurm", 2, 30)
    world.manager.tick()
    world.client.notified(world.notes[-1])
    drains = [c for c in world.slurm.updates() if c[3] == "State=DRAIN"]
    assert [c[2] for c in drains] == ["NodeName=node-1"]
    world.clock.t += 1
    world.client.step()  # node-1 idle: handed back; node-0 busy and still powering up
    assert world.owners() == {"node-0": "slurm", "node-1": None, "node-2": None, "node-3": None}
    assert [c[2] for c in world.slurm.updates() if c[3] == "State=DRAIN"] == ["NodeName=node-1"]
    world.slurm.states["node-0"] = "mixed"  # slurmd registered: the job runs
    world.clock.t += 1
    world.client.step()
    assert world.slurm.updates()[-1][2:4] == ["NodeName=node-0", "State=DRAIN"]
    world.clock.t = T0 + 28
    world.client.step()
    assert world.slurm.requeued == ["5"] and world.owners()["node-0"] is None


def test_a_resume_called_off_by_a_power_down_stops_waiting(world: World) -> None:
    """A node handed back (POWER_DOWN_FORCE) while its resume waits for slurmd: the resume
    stops waiting at once and marks nothing DOWN (SuspendProgram tidies the node)."""
    world.slurm.register_after = 1  # first poll: powering up
    world.slurm.states["node-0"] = "idle~"  # then: powered down again
    result = world.client.resume("node-0")
    assert result.ready == [] and result.failed["node-0"].startswith("called off")
    assert world.clock.t == T0 + 2  # one poll, not the 10 s register timeout
    assert not any(c[3] == "State=DOWN" for c in world.slurm.updates())


def test_free_pool_nodes_powered_down_in_slurm_are_powered_off_once(world: World) -> None:
    """After a deploy the pool's machines run while Slurm holds them powered down: the loop
    powers off the free ones, never a node powering up, one another partition holds, or one
    of Slurm's own."""
    world.prov.on = set(NODES)
    world.slurm.states = {
        "node-0": "idle~",  # free, at rest: off
        "node-1": "idle#",  # powering up for a job: left alone
        "node-2": "idle~",  # held by the reference partition: its user runs it
        "node-3": "idle",  # up in Slurm
    }
    world.manager.add_nodes(world.admin, "ref", nodes=["node-2"])
    # seen so once: it may be coming up by itself, its slurmd about to register
    assert world.client.settle_power() == []
    world.clock.sleep(world.client.config.settle_grace)
    assert world.client.settle_power() == ["node-0"]
    assert world.prov.calls == [("power_off", ["node-0"])]
    assert world.prov.on == {"node-1", "node-2", "node-3"}
    assert world.client.settle_power() == []  # already off: nothing more
    assert world.prov.calls == [("power_off", ["node-0"])]


def test_a_machine_that_comes_up_by_itself_keeps_its_slurmd(world: World) -> None:
    """A node's machine started outside a resume (an EC2 instance realised on it) runs while
    Slurm still holds the node powered down, until its slurmd registers: the loop must not stop
    that slurmd (its job would fail), only a machine still so after the grace."""
    world.prov.on = {"node-1"}
    world.slurm.states = {"node-1": "idle~"}
    assert world.client.settle_power() == []
    world.clock.sleep(world.client.config.settle_grace / 2)
    world.slurm.states["node-1"] = "idle"  # registered
    assert world.client.settle_power() == []
    world.clock.sleep(world.client.config.settle_grace)
    assert world.client.settle_power() == [] and world.prov.calls == []
    # powered down by Slurm later and its machine still on: the grace starts again from then
    world.slurm.states["node-1"] = "idle~"
    assert world.client.settle_power() == []
    world.clock.sleep(world.client.config.settle_grace)
    assert world.client.settle_power() == ["node-1"]


def test_the_client_s_metrics_need_its_token_and_show_the_pool_and_its_loops(
    world: World,
) -> None:
    """``/metrics``: the pool's Slurm states as the last sync read them, and each loop's rounds,
    counted by the loop the service runs (one round of each here: the world's clock stands
    still, so only the reclamation steps come round again)."""
    world.manager.add_nodes(world.admin, "ref", nodes=["node-1"])
    world.slurm.states.update({"node-0": "allocated", "node-2": "idle~", "node-3": "idle~"})
    app = create_app(
        world.client, "s3cret", step_interval=0.01, sync_interval=5.0, observer_token="look"
    )

    def step_rounds(samples: dict[tuple[str, Any], float]) -> float:
        return samples.get(("ptc_slurm_client_round_seconds_count", (("loop", "step"),)), 0.0)

    with TestClient(app) as http:  # runs the service's loops
        assert http.get("/metrics").status_code == 401
        wrong = http.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "ptc_" not in wrong.text
        # the manager's read-only token reads the metrics, and only them
        assert http.get("/metrics", headers={"Authorization": "Bearer look"}).status_code == 200
        notify = http.post(wire.NOTIFY_PATH, json={}, headers={"Authorization": "Bearer look"})
        assert notify.status_code == 401
        deadline = time.monotonic() + 60
        while True:  # until the steps came round twice (a busy machine takes longer)
            got = http.get("/metrics", headers={"Authorization": "Bearer s3cret"})
            assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
            samples = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(got.text)
                for s in family.samples
            }
            if step_rounds(samples) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert step_rounds(samples) >= 2
    assert samples[("ptc_slurm_client_round_seconds_count", (("loop", "sync"),))] == 1
    # as the sync read them, before it drained node-1 for ref
    assert samples[("ptc_slurm_pool_nodes", (("partition", "slurm"), ("state", "idle~")))] == 3
    assert samples[("ptc_slurm_pool_nodes", (("partition", "slurm"), ("state", "allocated")))] == 1
    assert world.slurm.reasons["node-1"] == "ptc: held by partition ref"
    assert samples[("ptc_slurm_nodes_under_repair", ())] == 0


def test_the_repair_loop_gets_the_lender_s_token_or_goes_on_without_it(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "partition-ref.token"
    settings = SlurmClientSettings(
        manager_url="http://testserver", token_file=tmp_path / "t", lender=("ref", token)
    )
    with caplog.at_level("WARNING"):
        assert build_repair(settings, world.client).lender is None  # no token file yet
    assert f"--token-file {token}" in caplog.text
    token.write_text("s3cret\n")
    lender = build_repair(settings, world.client).lender
    assert lender is not None and lender.partition == "ref"


def test_the_client_serves_without_the_observer_s_token_when_it_cannot_read_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    observer = tmp_path / "observer.token"
    settings = SlurmClientSettings(
        manager_url="http://testserver", token_file=tmp_path / "t", observer_token_file=observer
    )
    with caplog.at_level("WARNING"):
        assert service._observer_token(settings) is None
    assert f"--token-file {observer}" in caplog.text
    observer.write_text("look\n")
    assert service._observer_token(settings) == "look"
    unnamed = SlurmClientSettings(manager_url="http://testserver", token_file=tmp_path / "t")
    assert service._observer_token(unnamed) is None


def test_the_sites_waiting_jobs_ask_for_by_constraint_reach_the_provisioner(world: World) -> None:
    """The gate must not hold back a site a waiting job asks for by name: the client tells the
    provisioner which features the waiting jobs' constraints name."""
    world.slurm.jobs.append(Job("7", nodes=["node-2"], state="PENDING", features="here|dear"))
    world.slurm.jobs.append(Job("8", nodes=["node-3"], state="PENDING"))
    world.client.sync_sites()
    assert world.prov.asked == {"here", "dear"}
