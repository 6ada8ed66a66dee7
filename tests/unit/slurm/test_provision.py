"""The playbook provisioner: which node failed at which task, from ansible-playbook's output.

The runner is a stand-in that replays output of the shape ansible-playbook prints with this
repository's ansible.cfg (default callback, YAML results); the real runs are in
tests/integration/test_elastic.py.
"""

from __future__ import annotations

import fcntl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from elastic import node_paths
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
from elastic.testbed.backends.local.control.client import ControlError, ControlNoCapacity

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
            node_paths.PLAYBOOK_COMMAND,
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
    prov = PlaybookProvisioner(run=run, node_operation="none")  # only slurmd, over SSH
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
        provisioner=PlaybookProvisioner(run=run, node_operation="none"),
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

    operations: tuple[str, ...] = ("power", "reload", "release")

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

    def check(self) -> str:
        return f"{len(self.states)} nodes"

    def nodes(self) -> dict[str, str]:
        return dict(self.states)

    def hosts(self) -> dict[str, Any]:
        """What the testbed pinned for the nodes it holds (PIN: as the head knows them)."""
        return {
            n: {"addresses": [f"10.10.1.{i + 2}"], "keys": [f"ssh-ed25519 PIN{n}"]}
            for i, n in enumerate(sorted(self.states))
            if self.states[n] != "parked"
        }


def test_power_mode_starts_the_machines_before_ssh_and_stops_them_after_slurmd(
    tmp_path: Path,
) -> None:
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

    prov = PlaybookProvisioner(
        run=run,
        node_operation="power",
        control=control,
        lock_file=tmp_path / "lock",
        known_hosts=tmp_path / "known_hosts",
        playbook_state_dir=tmp_path / "ansible",
    )
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


def test_power_mode_fails_the_node_the_testbed_names_with_its_step(tmp_path: Path) -> None:
    refusal = ControlError(
        "node-2: did not answer over SSH", status=500, node="node-2", step="sshd"
    )
    # the service started node-1, then failed on node-2
    control = FakeControl({"node-1": "running", "node-2": "stopped"}, refuse=refusal)
    prov = PlaybookProvisioner(
        run=Replay(), node_operation="power", control=control, lock_file=tmp_path / "lock"
    )
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["node-1", "node-2"])
    assert list(caught.value.failures) == ["node-2"]
    assert "power on (testbed, sshd)" in str(caught.value)


def test_unreachable_control_service_fails_every_node_of_the_request(tmp_path: Path) -> None:
    gone = ControlError("the testbed's control service cannot be reached", status=None)
    prov = PlaybookProvisioner(
        run=Replay(),
        node_operation="power",
        control=FakeControl({}, refuse=gone),
        lock_file=tmp_path / "lock",
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
    assert PlaybookProvisioner(run=Replay(), node_operation="none").running(["node-1"]) == []


class BusyControl(FakeControl):
    """Busy (409) for the first ``busy`` requests, as when another operation holds a node."""

    def __init__(self, states: dict[str, str], busy: int) -> None:
        super().__init__(states)
        self.busy = busy

    def _do(self, action: str, nodes: list[str], request_id: str, state: str) -> dict[str, Any]:
        if self.busy:
            self.busy -= 1
            self.requests.append((action, nodes, request_id))
            raise ControlError("node-1 is busy", status=409, node="node-1")
        return super()._do(action, nodes, request_id, state)


def test_a_busy_node_is_waited_for_with_a_fresh_request_each_time(tmp_path: Path) -> None:
    control = BusyControl({"node-1": "stopped", "node-2": "stopped"}, busy=2)
    slept: list[float] = []
    prov = PlaybookProvisioner(
        run=Replay(Completed(0, "")),
        node_operation="power",
        control=control,
        lock_file=tmp_path / "power.lock",
        sleep=slept.append,
        known_hosts=tmp_path / "known_hosts",
        playbook_state_dir=tmp_path / "ansible",
    )
    prov.power_on(["node-1", "node-2"])
    assert control.states == {"node-1": "running", "node-2": "running"}
    assert len(control.requests) == 3 and len({r[2] for r in control.requests}) == 3
    assert len(slept) == 2


def test_busy_past_the_timeout_fails_every_node_left_out(tmp_path: Path) -> None:
    control = BusyControl({"node-1": "stopped", "node-2": "running"}, busy=1000)
    clock = iter(range(0, 10_000, 50))
    prov = PlaybookProvisioner(
        run=Replay(),
        node_operation="power",
        control=control,
        lock_file=tmp_path / "power.lock",
        busy_timeout=120,
        sleep=lambda s: None,
        clock=lambda: float(next(clock)),
    )
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["node-1", "node-2", "node-3"])
    # node-2 was already running: not a failure; node-3 is unknown to the testbed: left out
    assert sorted(caught.value.failures) == ["node-1", "node-3"]
    assert "busy" in caught.value.failures["node-1"]


def test_power_off_if_asks_again_under_the_lock(tmp_path: Path) -> None:
    control = FakeControl({"node-1": "running", "node-2": "running"})
    lock = tmp_path / "power.lock"
    prov = PlaybookProvisioner(
        run=Replay(Completed(0, "")), node_operation="power", control=control, lock_file=lock
    )
    asked: list[list[str]] = []

    def still(nodes: list[str]) -> list[str]:
        # the lock is held while the question is asked: nobody else can take it
        with lock.open("a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        asked.append(nodes)
        return ["node-2"]  # node-1 began powering up meanwhile

    assert prov.power_off_if(["node-1", "node-2"], still) == ["node-2"]
    assert asked == [["node-1", "node-2"]]
    assert control.states == {"node-1": "running", "node-2": "stopped"}


class FreshDiskControl(FakeControl):
    """A control service that also reloads, parks and allocates: a fresh disk's answer carries
    its addresses and the host keys the testbed pinned (new ones each time)."""

    def __init__(self, states: dict[str, str]) -> None:
        super().__init__(states)
        self.disks = 0

    def _fresh(self, action: str, nodes: list[str], request_id: str) -> dict[str, Any]:
        answer = self._do(action, nodes, request_id, "running")
        self.disks += 1
        answer["hosts"] = {
            n: {"addresses": [f"10.10.1.{i + 2}"], "keys": [f"ssh-ed25519 KEY{self.disks}{n}"]}
            for i, n in enumerate(nodes)
        }
        return answer

    def reload(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._fresh("reload", nodes, request_id)

    def allocate(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._fresh("allocate", nodes, request_id)

    def release(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._do("release", nodes, request_id, "parked")


def fresh_provisioner(tmp_path: Path, operation: str, control: FakeControl) -> PlaybookProvisioner:
    state = tmp_path / "ansible"
    (state / "inventory").mkdir(parents=True)
    (state / "facts").mkdir()
    # the head's files as the last deploy left them: old keys, and facts of the old disks
    old = (
        "node-1,10.10.1.2 ssh-ed25519 OLD1\nnode-2,10.10.1.3 ssh-ed25519 OLD2\nhead ssh-ed25519 H\n"
    )
    (state / "inventory" / "known_hosts").write_text(old)
    (tmp_path / "known_hosts").write_text(old)
    for node in ("node-1", "node-2", "head"):
        (state / "facts" / node).write_text("{}")
    return PlaybookProvisioner(
        run=Replay(Completed(0, "")),
        node_operation=operation,
        control=control,
        lock_file=tmp_path / "lock",
        known_hosts=tmp_path / "known_hosts",
        playbook_state_dir=state,
    )


def test_reload_gives_fresh_disks_trusts_their_pinned_keys_and_configures_them_whole(
    tmp_path: Path,
) -> None:
    control = FreshDiskControl({"node-1": "stopped", "node-2": "stopped"})
    prov = fresh_provisioner(tmp_path, "reload", control)
    prov.power_on(["node-1"])
    assert [r[:2] for r in control.requests] == [("reload", ["node-1"])]
    for path in (tmp_path / "known_hosts", tmp_path / "ansible/inventory/known_hosts"):
        lines = path.read_text().splitlines()
        assert "node-1,10.10.1.2 ssh-ed25519 KEY1node-1" in lines
        assert not any("OLD1" in line for line in lines)  # the old disk's key is gone
        assert "node-2,10.10.1.3 ssh-ed25519 OLD2" in lines and "head ssh-ed25519 H" in lines
    facts = sorted(p.name for p in (tmp_path / "ansible/facts").iterdir())
    assert facts == ["head", "node-2"]  # the old disk's facts would be used by smart gathering
    prov.configure(["node-1"])
    assert prov.run.argvs[-1][:4] == [  # type: ignore[attr-defined]
        node_paths.PLAYBOOK_COMMAND,
        "elastic-provision.yml",
        "--limit",
        "node-1",
    ]
    prov.power_off(["node-1"])  # a suspend powers off; the next resume reloads again
    assert [r[0] for r in control.requests] == ["reload", "power_off"]
    assert prov.running(["node-1", "node-2"]) == []


def test_release_parks_at_suspend_and_allocates_back_at_resume(tmp_path: Path) -> None:
    control = FreshDiskControl({"node-1": "running", "node-2": "parked", "node-3": "stopped"})
    prov = fresh_provisioner(tmp_path, "release", control)
    # the client's loop: a stopped node still holds its machine, a parked one does not
    assert prov.running(["node-1", "node-2", "node-3"]) == ["node-1", "node-3"]
    prov.power_off(["node-1", "node-2"])  # node-2 is parked already: nothing asked for it
    assert [r[:2] for r in control.requests] == [("release", ["node-1"])]
    assert control.states["node-1"] == "parked"
    prov.power_on(["node-1", "node-2", "node-3"])
    # parked ones are allocated (fresh disks, new keys), a stopped one powered on
    assert [r[:2] for r in control.requests][1:] == [
        ("allocate", ["node-1", "node-2"]),
        ("power_on", ["node-3"]),
    ]
    lines = (tmp_path / "known_hosts").read_text().splitlines()
    assert "node-2,10.10.1.3 ssh-ed25519 KEY1node-2" in lines
    assert not any("OLD" in line for line in lines)
    # node-3 was held, its disk made again from the host since the head's last deploy (a
    # deploy allocates parked nodes back): its keys are asked for, not assumed
    assert "node-3,10.10.1.4 ssh-ed25519 PINnode-3" in lines


def test_power_trusts_keys_a_host_side_reload_changed_and_keeps_the_facts_of_the_others(
    tmp_path: Path,
) -> None:
    """Under power a disk is kept, unless someone reloaded the node from the host meanwhile:
    then the testbed pinned new keys, and the head must learn them before its SSH check."""
    control = FakeControl({"node-1": "stopped", "node-2": "stopped"})
    prov = fresh_provisioner(tmp_path, "power", control)
    # node-2's disk is as the head last saw it (its keys unchanged); node-1's was made again
    for path in (tmp_path / "known_hosts", tmp_path / "ansible/inventory/known_hosts"):
        path.write_text(path.read_text().replace("OLD2", "PINnode-2"))
    prov.power_on(["node-1", "node-2"])
    assert [r[:2] for r in control.requests] == [("power_on", ["node-1", "node-2"])]
    for path in (tmp_path / "known_hosts", tmp_path / "ansible/inventory/known_hosts"):
        lines = path.read_text().splitlines()
        assert "node-1,10.10.1.2 ssh-ed25519 PINnode-1" in lines
        assert not any("OLD1" in line for line in lines)
        assert "node-2,10.10.1.3 ssh-ed25519 PINnode-2" in lines
    facts = sorted(p.name for p in (tmp_path / "ansible/facts").iterdir())
    assert facts == ["head", "node-2"]  # only the new disk's stale facts went
    # the next resume finds every key as pinned: the files stay byte for byte
    before = (tmp_path / "known_hosts").stat().st_mtime_ns, (tmp_path / "known_hosts").read_text()
    prov.power_off(["node-1", "node-2"])
    prov.power_on(["node-1", "node-2"])
    after = (tmp_path / "known_hosts").stat().st_mtime_ns, (tmp_path / "known_hosts").read_text()
    assert after == before


def test_power_fails_the_nodes_when_the_testbed_will_not_say_their_keys(tmp_path: Path) -> None:
    class NoHosts(FakeControl):
        def hosts(self) -> dict[str, Any]:
            raise ControlError("control service unreachable", status=None)

    prov = fresh_provisioner(tmp_path, "power", NoHosts({"node-1": "stopped"}))
    with pytest.raises(ProvisionFailed) as err:
        prov.power_on(["node-1"])
    assert err.value.failures == {"node-1": "control service unreachable"}
    assert "power on (host keys)" in str(err.value)


def test_a_fresh_disk_without_keys_in_the_answer_is_a_failure(tmp_path: Path) -> None:
    control = FreshDiskControl({"node-1": "stopped"})
    control.reload = lambda nodes, rid: {"id": rid, "state": "done"}  # type: ignore[method-assign]
    prov = fresh_provisioner(tmp_path, "reload", control)
    with pytest.raises(ProvisionFailed, match="no host keys") as caught:
        prov.power_on(["node-1"])
    assert list(caught.value.failures) == ["node-1"]  # the node fails, with the reason


def test_a_testbed_with_no_free_machine_fails_the_resume_as_no_capacity(tmp_path: Path) -> None:
    """The node fails, named, and marked as failed for its site's lack of room (the client
    powers it down rather than DOWN, and the site is paused); another failure is not."""
    full = ControlNoCapacity(
        "control service: 503: allocate: the local testbed has 0 free machines of 7",
        status=503,
        node="node-1",
        step="allocate",
    )
    control = FreshDiskControl({"node-1": "parked"})
    control.refuse = full
    prov = fresh_provisioner(tmp_path, "release", control)
    with pytest.raises(ProvisionFailed) as caught:
        prov.power_on(["node-1"])
    assert list(caught.value.failures) == ["node-1"]
    assert caught.value.capacity == {"node-1"}
    assert "free machines" in caught.value.failures["node-1"]
    assert "allocate (testbed, allocate)" in str(caught.value)
    control.refuse = ControlError("control service: 502: podman failed", status=502)
    with pytest.raises(ProvisionFailed) as broken:
        prov.power_on(["node-1"])
    assert broken.value.capacity == frozenset()


def test_a_repair_renews_the_disk_under_power_and_configures_it_whole(tmp_path: Path) -> None:
    """A repair wants a fresh disk whatever the partition's node operation: under ``power`` the
    control's reload gives one, with its pinned keys; then the node's part of the deploy, and the
    resume's start when Slurm held the node up."""
    control = FreshDiskControl({"node-1": "running", "node-2": "stopped"})
    prov = fresh_provisioner(tmp_path, "power", control)
    assert prov.repairs and prov.powers
    assert prov.renew(["node-1"]) is True
    assert [r[:2] for r in control.requests] == [("reload", ["node-1"])]
    assert "node-1,10.10.1.2 ssh-ed25519 KEY1node-1" in (tmp_path / "known_hosts").read_text()
    prov.provision(["node-1"], start=False)
    prov.provision(["node-1"], start=True)
    playbooks = [argv[1] for argv in prov.run.argvs if argv[0] == node_paths.PLAYBOOK_COMMAND]  # type: ignore[attr-defined]
    assert playbooks == ["site.yml", "elastic-provision.yml"]


def test_a_control_without_reloads_leaves_the_disk_and_asks_nothing(tmp_path: Path) -> None:
    control = FreshDiskControl({"node-1": "running"})
    control.operations = ("power",)  # CloudLab's portal, as ptc uses it
    prov = fresh_provisioner(tmp_path, "power", control)
    assert prov.renew(["node-1"]) is False
    assert control.requests == []
    nothing = PlaybookProvisioner(node_operation="none", run=Replay(Completed(0, "")))
    assert not nothing.powers and nothing.renew(["node-1"]) is False
