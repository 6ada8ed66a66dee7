"""The playbook provisioner: which node failed at which task, from ansible-playbook's output.

The runner is a stand-in that replays output of the shape ansible-playbook prints with this
repository's ansible.cfg (default callback, YAML results); the real runs are in
tests/integration/test_elastic.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from elastic.errors import DeployError, InputError
from elastic.slurm.client import SlurmElasticClient
from elastic.slurm.provision import (
    Completed,
    PlaybookProvisioner,
    ProvisionFailed,
    failed_tasks,
    from_settings,
)
from elastic.slurm.service import SlurmClientSettings
from elastic.testbed.control.client import ControlError

YAML_FAILURE = """
PLAY [Resume elastic pool nodes] ***********************************************

TASK [elastic : Start munge] ***************************************************
ok: [node-1]
ok: [node-2]

TASK [elastic : Check the shares are mounted] **********************************
ok: [node-1] => (item=/home)
ok: [node-2] => (item=/home)

TASK [elastic : Start slurmd] **************************************************
changed: [node-1]
fatal: [node-2]: FAILED! =>
  changed: false
  msg: 'Unable to start service slurmd: Failed to start slurmd.service: Unit slurmd.service is masked.'

PLAY RECAP *********************************************************************
node-1                     : ok=3    changed=1    unreachable=0    failed=0
node-2                     : ok=2    changed=0    unreachable=0    failed=1
"""

JSON_AND_UNREACHABLE = """
TASK [elastic : Start munge] ***************************************************
fatal: [node-3]: UNREACHABLE! => {"changed": false, "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.10.1.5 port 22: No route to host", "unreachable": true}
failed: [node-0] (item=/home) => {"ansible_loop_var": "item", "changed": false, "msg": "non-zero return code"}
...ignoring
fatal: [node-1]: FAILED! => {"changed": false, "msg": "Could not find the requested service munge: host"}
"""


class Replay:
    def __init__(self, *answers: Completed) -> None:
        self.answers = list(answers)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Completed:
        self.argvs.append(list(argv))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_failed_tasks_from_yaml_results() -> None:
    (failure,) = failed_tasks(YAML_FAILURE)
    assert failure.host == "node-2"
    assert failure.task == "elastic : Start slurmd"
    assert "Unit slurmd.service is masked" in failure.message
    assert not failure.unreachable


def test_failed_tasks_from_json_results_skip_ignored_ones() -> None:
    failures = failed_tasks(JSON_AND_UNREACHABLE)
    assert [(f.host, f.unreachable) for f in failures] == [("node-3", True), ("node-1", False)]
    assert "No route to host" in failures[0].message
    assert failures[1].message == "Could not find the requested service munge: host"


def test_configure_runs_the_resume_playbook_on_exactly_the_nodes(tmp_path: Path) -> None:
    extra = tmp_path / "vars.yml"
    extra.write_text("ptc_elastic: true\n")
    run = Replay(Completed(0, "ok"))
    prov = PlaybookProvisioner(playbook_vars_file=extra, run=run)
    prov.configure(["node-1", "node-2"])
    assert run.argvs == [
        [
            "/usr/local/sbin/ptc-playbook",
            "elastic-resume.yml",
            "--limit",
            "node-1,node-2",
            "-e",
            f"@{extra}",
        ]
    ]


def test_configure_failure_names_the_task_per_host() -> None:
    prov = PlaybookProvisioner(run=Replay(Completed(2, YAML_FAILURE)))
    with pytest.raises(DeployError) as caught:
        prov.configure(["node-1", "node-2"])
    assert [(f.host, f.task) for f in caught.value.failures] == [
        ("node-2", "elastic : Start slurmd")
    ]


def test_configure_timeout_fails_every_node_with_the_output_tail() -> None:
    prov = PlaybookProvisioner(playbook_timeout=5, run=Replay(Completed(None, "TASK [x] ***\n")))
    with pytest.raises(DeployError, match="timed out after 5 s") as caught:
        prov.configure(["node-1"])
    assert caught.value.failures == ()


def test_power_off_reports_each_node_that_failed() -> None:
    run = Replay(Completed(0, ""), Completed(255, "ssh: connect to host node-2: No route to host"))
    prov = PlaybookProvisioner(run=run)
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_off(["node-1", "node-2"])
    assert list(caught.value.failures) == ["node-2"]
    assert (
        "exit 255: ssh: connect to host node-2: No route to host" in caught.value.failures["node-2"]
    )
    assert all(argv[-2].startswith("root@") for argv in run.argvs)
    assert "systemctl stop slurmd" in run.argvs[0][-1]


def test_from_settings_reads_the_extra_keys_and_refuses_unknown_ones(tmp_path: Path) -> None:
    conf = tmp_path / "c.yml"
    conf.write_text(
        "manager_url: http://10.10.1.1:8700\ntoken_file: /t\n"
        "provisioner: elastic.slurm.provision:from_settings\n"
        "resume_playbook: site.yml\nplaybook_timeout: 60\nplaybook_command: [ptc-playbook]\n"
    )
    prov = from_settings(SlurmClientSettings.load(conf))
    assert prov.resume_playbook == "site.yml" and prov.playbook_timeout == 60.0
    assert prov.playbook_command == ("ptc-playbook",)
    conf.write_text(conf.read_text() + "power: ipmi\n")
    with pytest.raises(InputError, match="'power'"):
        from_settings(SlurmClientSettings.load(conf))


def test_playbook_failure_fails_only_its_host_in_a_resume(world_with_playbook: tuple) -> None:  # type: ignore[type-arg]
    world, client = world_with_playbook
    result = client.resume("node-[1-2]")
    assert result.ready == ["node-1"]
    assert list(result.failed) == ["node-2"]
    reason = world.slurm.reasons["node-2"]
    assert "task 'elastic : Start slurmd' failed" in reason and "masked" in reason
    assert world.owners()["node-2"] is None and world.owners()["node-1"] == "slurm"
    assert set(result.timings) == {"manager", "power_on", "playbook", "register", "total"}


@pytest.fixture
def world_with_playbook(world):  # type: ignore[no-untyped-def]
    run = Replay(Completed(0, ""), Completed(0, ""), Completed(2, YAML_FAILURE))
    client = SlurmElasticClient(
        world.client.slurm,
        world.client.manager,
        world.client.policy,
        provisioner=PlaybookProvisioner(run=run),
        config=world.client.config,
        clock=world.clock,
        sleep=world.clock.sleep,
    )
    return world, client


YAML_BLOCK = """
TASK [elastic : Start slurmd] **************************************************
fatal: [node-3]: FAILED! =>
    changed: false
    msg: |-
        Unable to start service slurmd: Failed to start slurmd.service: Unit slurmd.service is masked.

PLAY RECAP *********************************************************************
"""


def test_failed_tasks_read_a_yaml_block_message() -> None:
    (failure,) = failed_tasks(YAML_BLOCK)
    assert failure.message == (
        "Unable to start service slurmd: Failed to start slurmd.service: "
        "Unit slurmd.service is masked."
    )


class FakeControl:
    """The testbed's control service as the provisioner sees it: records each request, keeps
    the machines' states, and refuses like the service when told to."""

    def __init__(self, states: dict[str, str], refuse: ControlError | None = None) -> None:
        self.states = states
        self.refuse = refuse
        self.requests: list[tuple[str, list[str], str]] = []

    def _do(self, action: str, nodes: list[str], request_id: str, state: str) -> dict[str, Any]:
        self.requests.append((action, nodes, request_id))
        if self.refuse is not None:
            raise self.refuse
        self.states.update(dict.fromkeys(nodes, state))
        return {"id": request_id, "state": "done"}

    def power_on(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._do("power_on", nodes, request_id, "running")

    def power_off(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._do("power_off", nodes, request_id, "stopped")

    def nodes(self) -> dict[str, str]:
        return dict(self.states)


def test_power_mode_starts_the_machines_before_ssh_and_stops_them_after_slurmd() -> None:
    control = FakeControl({"node-1": "stopped", "node-2": "stopped"})
    argvs: list[list[str]] = []

    def run(argv: Sequence[str], timeout: float) -> Completed:
        argvs.append(list(argv))
        gone = "root@node-2" in argv and "slurmd" in argv[-1]
        return (
            Completed(255, "ssh: connect to host node-2: No route to host")
            if gone
            else Completed(0, "")
        )

    prov = PlaybookProvisioner(run=run, node_operation="power", control=control)
    prov.power_on(["node-1", "node-2"])
    assert [r[:2] for r in control.requests] == [("power_on", ["node-1", "node-2"])]
    assert control.states == {"node-1": "running", "node-2": "running"}
    assert len(argvs) == 2  # then each answered over SSH
    assert prov.running(["node-1", "node-2", "node-9"]) == ["node-1", "node-2"]
    prov.power_off(["node-1", "node-2"])  # node-2 unreachable over SSH: already off, no failure
    assert [r[:2] for r in control.requests][-1] == ("power_off", ["node-1", "node-2"])
    assert control.states == {"node-1": "stopped", "node-2": "stopped"}
    ids = [r[2] for r in control.requests]
    assert len(set(ids)) == 2  # one request id per operation: a retry repeats nothing


def test_power_mode_fails_the_node_the_testbed_names_with_its_step() -> None:
    refusal = ControlError(
        "node-2: did not answer over SSH", status=500, node="node-2", step="sshd"
    )
    control = FakeControl({"node-1": "stopped", "node-2": "stopped"}, refuse=refusal)
    prov = PlaybookProvisioner(run=Replay(), node_operation="power", control=control)
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["node-1", "node-2"])
    assert list(caught.value.failures) == ["node-2"]
    assert "power on (testbed, sshd)" in str(caught.value)


def test_unreachable_control_service_fails_every_node_of_the_request() -> None:
    gone = ControlError("the testbed's control service cannot be reached", status=None)
    prov = PlaybookProvisioner(
        run=Replay(), node_operation="power", control=FakeControl({}, refuse=gone)
    )
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["node-1", "node-2"])
    assert sorted(caught.value.failures) == ["node-1", "node-2"]


def test_node_operation_is_checked_naming_the_setting(tmp_path: Path) -> None:
    conf = tmp_path / "c.yml"
    conf.write_text(
        "manager_url: http://10.10.1.1:8700\ntoken_file: /t\n"
        "provisioner: elastic.slurm.provision:from_settings\nnode_operation: reboot\n"
    )
    with pytest.raises(InputError, match="node_operation: 'reboot'"):
        from_settings(SlurmClientSettings.load(conf))
    assert PlaybookProvisioner(run=Replay()).running(["node-1"]) == []
