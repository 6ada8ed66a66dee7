"""benchmarks/peer_deploy.py's own logic, without a cluster: counting each node's tasks from
ansible-runner's events, the wall time per task, the peer's variables and playbook built from a
ptc inventory, and the per-run files (the unpacked role, the munge key)."""

from __future__ import annotations

import importlib.util
import io
import stat
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from elastic.paths import REPO_ROOT


def _load() -> ModuleType:
    path = REPO_ROOT / "benchmarks" / "peer_deploy.py"
    spec = importlib.util.spec_from_file_location("peer_deploy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


pd = _load()


def result(kind: str, host: str, role: str | None = None, **data: Any) -> dict[str, Any]:
    event_data: dict[str, Any] = {"host": host, "task": "t", **data}
    if role:
        event_data["role"] = role
    return {"event": kind, "event_data": event_data}


def test_tasks_per_host_counts_one_result_per_task_and_host() -> None:
    events = [
        result("runner_on_ok", "head", res={"changed": True}),
        result("runner_on_ok", "head", res={"changed": False}),
        result("runner_item_on_ok", "head", res={"changed": True}),  # a loop item, not a task
        result("runner_on_skipped", "head"),
        result("runner_on_failed", "node-0", ignore_errors=True, res={}),
        result("runner_on_failed", "node-0", res={}),
        result("runner_on_unreachable", "node-1", res={}),
        {"event": "playbook_on_task_start", "event_data": {"task": "t"}},
    ]
    counts = pd.tasks_per_host(events)
    assert list(counts) == ["head", "node-0", "node-1"]
    head = counts["head"]
    assert (head.ran, head.changed, head.skipped, head.failed, head.total) == (2, 1, 1, 0, 3)
    assert (counts["node-0"].ran, counts["node-0"].failed) == (2, 1)
    assert (counts["node-1"].ran, counts["node-1"].failed) == (1, 1)


def test_tasks_per_host_keeps_only_the_roles_asked_for() -> None:
    events = [
        result("runner_on_ok", "head", role="munge", res={"changed": True}),
        result("runner_on_ok", "head", role="slurm", res={}),
        result("runner_on_ok", "head", role="mpi", res={}),
        result("runner_on_ok", "head", res={}),  # a play's own task
    ]
    counts = pd.tasks_per_host(events, frozenset({"munge", "slurm"}))
    assert (counts["head"].ran, counts["head"].changed) == (2, 1)
    assert pd.tasks_per_host(events)["head"].ran == 4


def mark(kind: str, second: int, task: str = "", role: str = "") -> dict[str, Any]:
    data = {"task": task, **({"role": role} if role else {})}
    return {"event": kind, "created": f"2026-11-30T10:00:{second:02d}", "event_data": data}


def test_task_times_run_to_the_next_mark_and_add_up_repeats() -> None:
    events = [
        mark("playbook_on_play_start", 0),
        mark("playbook_on_task_start", 1, "Gathering Facts"),
        mark("runner_on_ok", 2, "Gathering Facts"),  # results are not marks
        mark("playbook_on_task_start", 4, "Install", role="munge"),
        mark("playbook_on_handler_task_start", 10, "Restart munge", role="munge"),
        mark("playbook_on_play_start", 11),
        mark("playbook_on_task_start", 12, "Install", role="munge"),
        mark("playbook_on_stats", 14),
    ]
    times = pd.task_times(events)
    assert times == {"munge: Install": 8.0, "Gathering Facts": 3.0, "munge: Restart munge": 1.0}
    assert next(iter(times)) == "munge: Install"  # slowest first


def test_node_kinds_names_the_head_and_the_range_of_compute_nodes() -> None:
    same = {"ran": 3, "changed": 1, "skipped": 2, "failed": 0}
    counts = {"head": {"ran": 9, "changed": 4, "skipped": 1, "failed": 0}, "node-0": same,
              "node-1": same}  # fmt: skip
    assert pd.node_kinds(counts, "head") == {
        "head": "10 (9 run, 4 changed)",
        "compute": "5 (3 run, 1 changed)",
    }
    counts["node-1"] = {"ran": 4, "changed": 1, "skipped": 2, "failed": 0}
    assert (
        pd.node_kinds(counts, "head")["compute"] == "5 (3 run, 1 changed) .. 6 (4 run, 1 changed)"
    )
    assert pd.node_kinds({}, "head") == {}


INVENTORY = {
    "all": {
        "hosts": {"head": {}, "node-0": {}, "node-1": {}},
        "children": {
            "slurm_controller": {"hosts": {"head": None}},
            "slurm_dbd": {"hosts": {"head": None}},
            "slurm_compute": {"hosts": {"node-1": None, "node-0": None}},
            "nfs_client": {"hosts": {"node-0": None}},
        },
    }
}


def test_peer_vars_describe_the_inventorys_cluster(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    v = pd.peer_vars(INVENTORY, key)
    assert v["slurm_munge_key"] == str(key)
    assert [n["name"] for n in v["slurm_nodes"]] == ["node-0", "node-1"]
    assert v["slurm_partitions"][0]["Nodes"] == "node-0,node-1"
    assert v["slurm_config"]["SlurmctldHost"] == "head"
    assert v["slurm_config"]["AccountingStorageType"] == "accounting_storage/slurmdbd"
    dbd = v["slurmdbd_config"]
    assert dbd["DbdHost"] == "head" and dbd["StorageLoc"] == pd.ACCOUNTING_DB
    # The role's default slurmctld key stops slurmdbd; None leaves it out of slurmdbd.conf.
    assert dbd["SlurmctldPidFile"] is None
    for group in ("slurm_controller", "slurm_dbd", "slurm_compute"):
        assert f"groups['{group}']" in v["slurm_roles"]


def test_peer_vars_refuse_an_inventory_without_the_slurm_groups(tmp_path: Path) -> None:
    children = dict(INVENTORY["all"]["children"])
    del children["slurm_dbd"]
    with pytest.raises(ValueError, match="slurm_dbd"):
        pd.peer_vars({"all": {"children": children}}, tmp_path / "k")


def test_peer_playbook_sets_up_the_database_before_the_role(tmp_path: Path) -> None:
    book = pd.peer_playbook(tmp_path / "vars.yml")
    database, slurm = book
    assert database["hosts"] == "slurm_dbd"
    modules = [next(k for k in task if k != "name") for task in database["tasks"]]
    assert modules == [
        "ansible.builtin.apt",
        "ansible.builtin.service",
        "community.mysql.mysql_db",
        "community.mysql.mysql_user",
    ]
    user = database["tasks"][-1]["community.mysql.mysql_user"]
    assert user["plugin"] == "unix_socket" and "password" not in user
    assert slurm["roles"] == [{"role": pd.PEER_ROLE}]
    assert slurm["vars_files"] == [str(tmp_path / "vars.yml")]
    assert set(slurm["hosts"].split(":")) == {"slurm_controller", "slurm_dbd", "slurm_compute"}


def tarball(path: Path, members: dict[str, bytes], symlink: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            archive.addfile(info)
    return path


def test_unpack_role_names_the_role_and_refuses_odd_archives(tmp_path: Path) -> None:
    good = tarball(tmp_path / "good.tgz", {"ansible-slurm-x/tasks/main.yml": b"---\n"})
    role = pd.unpack_role(good, tmp_path / "roles")
    assert role == tmp_path / "roles" / pd.PEER_ROLE
    assert (role / "tasks" / "main.yml").read_text() == "---\n"
    two = tarball(tmp_path / "two.tgz", {"a/tasks/main.yml": b"", "b/x": b""})
    with pytest.raises(ValueError, match="one top-level directory"):
        pd.unpack_role(two, tmp_path / "r2")
    escape = tarball(tmp_path / "escape.tgz", {"a/../../x": b""})
    with pytest.raises(ValueError, match="outside plain files"):
        pd.unpack_role(escape, tmp_path / "r3")
    link = tarball(tmp_path / "link.tgz", {"a/tasks/main.yml": b""}, symlink="a/passwd")
    with pytest.raises(ValueError, match="outside plain files"):
        pd.unpack_role(link, tmp_path / "r4")
    no_tasks = tarball(tmp_path / "none.tgz", {"a/README.md": b""})
    with pytest.raises(ValueError, match=r"tasks/main\.yml"):
        pd.unpack_role(no_tasks, tmp_path / "r5")


def test_the_munge_key_is_private_random_and_never_overwritten(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    pd.write_munge_key(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == 1024
    other = tmp_path / "other.key"
    pd.write_munge_key(other)
    assert key.read_bytes() != other.read_bytes()
    with pytest.raises(FileExistsError):
        pd.write_munge_key(key)


def test_peer_controller_points_the_roles_path_at_the_peer_and_gives_it_back(
    tmp_path: Path,
) -> None:
    before = pd.runner._environment(False)
    with pd.peer_controller(tmp_path):
        env = pd.runner._environment(False)
        assert env["ANSIBLE_ROLES_PATH"] == str(tmp_path)
        assert env["ANSIBLE_INJECT_FACT_VARS"] == "True"
    assert pd.runner._environment(False) == before
