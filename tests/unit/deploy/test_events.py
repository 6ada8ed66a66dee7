"""Folding ansible-runner events into counts and failure reports (no Ansible needed)."""

from __future__ import annotations

from typing import Any

from elastic.deploy.events import Failure, Tracker, failure_message


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": data}


def run_events() -> list[dict[str, Any]]:
    return [
        ev("playbook_on_play_start", play="Slurm"),
        ev("playbook_on_task_start", task="Install slurmd"),
        ev("runner_on_ok", host="node-0", task="Install slurmd", res={"changed": True}),
        ev("runner_on_ok", host="node-1", task="Install slurmd", res={"changed": False}),
        ev("playbook_on_task_start", task="slurm : Run slurmd"),
        ev(
            "runner_on_failed",
            host="node-1",
            play="Slurm",
            task="slurm : Run slurmd",
            resolved_action="ansible.builtin.systemd_service",
            res={"msg": "Unable to start service slurmd: Job for slurmd.service failed"},
        ),
        ev(
            "runner_on_failed",
            host="node-0",
            task="probe",
            ignore_errors=True,
            res={"msg": "ignored"},
        ),
        ev("runner_on_unreachable", host="node-2", task="Gathering Facts", res={"msg": "timeout"}),
        ev(
            "playbook_on_stats",
            ok={"node-0": 2, "node-1": 1},
            changed={"node-0": 1},
            failures={"node-1": 1},
            dark={"node-2": 1},
            skipped={},
            rescued={},
        ),
    ]


def test_counts_follow_events_and_recap() -> None:
    tracker = Tracker()
    for event in run_events():
        tracker.feed(event)
    assert tracker.play == "Slurm"
    assert tracker.tasks_started == 2
    live = tracker.hosts
    assert (live["node-0"].ok, live["node-0"].changed) == (2, 1)  # the ignored failure counts ok
    assert live["node-1"].failed == 1
    final = tracker.final()
    assert final["node-1"].failed == 1 and final["node-2"].unreachable == 1
    assert final["node-0"].changed == 1


def test_fatal_failures_name_host_task_and_unit() -> None:
    tracker = Tracker()
    for event in run_events():
        tracker.feed(event)
    fatal = {f.host: f for f in tracker.fatal_failures()}
    assert set(fatal) == {"node-1", "node-2"}
    assert fatal["node-1"].task == "slurm : Run slurmd"
    assert fatal["node-1"].unit == "slurmd"
    assert fatal["node-2"].unreachable and fatal["node-2"].unit is None


def test_rescued_failure_is_not_fatal() -> None:
    tracker = Tracker()
    tracker.feed(ev("runner_on_failed", host="head", task="Clone", res={"msg": "no network"}))
    tracker.feed(ev("playbook_on_stats", ok={"head": 3}, rescued={"head": 1}, failures={}, dark={}))
    assert tracker.fatal_failures() == []


def test_unit_from_wait_task_name() -> None:
    failure = Failure(
        host="head",
        play="p",
        task="slurm : Wait for slurmctld to listen",
        action="ansible.builtin.wait_for",
        message="Timeout when waiting for 127.0.0.1:6817",
    )
    assert failure.unit == "slurmctld"
    other = Failure("head", "p", "Write slurm.conf", "ansible.builtin.template", "boom")
    assert other.unit is None


def test_unit_from_service_module_arguments() -> None:
    tracker = Tracker()
    tracker.feed(
        ev(
            "runner_on_failed",
            host="node-0",
            task="munge : Run munged",
            resolved_action="ansible.builtin.service",
            res={"msg": "start failed", "invocation": {"module_args": {"name": "munge"}}},
        )
    )
    assert tracker.failures[0].unit == "munge"


def test_failure_message_prefers_msg_then_output_and_loops() -> None:
    assert failure_message({"msg": "m", "stderr": "e"}) == "m\ne"
    assert failure_message({"stdout": "only out"}) == "only out"
    looped = {
        "results": [{"item": "a", "failed": False}, {"item": "b", "failed": True, "msg": "bad"}]
    }
    assert failure_message(looped) == "item 'b': bad"
    # Ansible's own msg for a failed loop says nothing; the items' messages say what broke.
    labelled = {
        "msg": "One or more items failed",
        "results": [
            {"failed": False, "item": {"path": "/home"}, "_ansible_item_label": "/home"},
            {"failed": True, "item": {"path": "/opt/ptc"}, "_ansible_item_label": "/opt/ptc",
             "msg": "nfs-cat rc=1: NFS4ERR_GRACE"},
        ],
    }  # fmt: skip
    assert failure_message(labelled) == "item '/opt/ptc': nfs-cat rc=1: NFS4ERR_GRACE"
    assert "censored" in failure_message({"censored": "the output has been hidden (censored)"})
    assert failure_message({}) == "(no message)"
