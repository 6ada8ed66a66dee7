"""Slurm's elastic partition's minimum is named once, by the elastic role (``__elastic_minimum``,
given to later plays as the fact ``elastic_minimum_nodes``): site.yml's play that takes it, and
what site.yml then hands the slurm role and the srun check, run with ansible-playbook against small
inventories (no node is reached: the plays only set facts and template expressions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.paths import REPO_ROOT

SITE = REPO_ROOT / "site.yml"


def site_play(name: str) -> dict[str, Any]:
    plays = yaml.safe_load(SITE.read_text())
    return next(p for p in plays if p["name"] == name)


def minimum_play() -> dict[str, Any]:
    """site.yml's play that takes the minimum, with that task alone: its other task installs a
    command in /usr/local/bin, which has no place on the machine running the tests."""
    play = next(
        p
        for p in yaml.safe_load(SITE.read_text())
        if p["name"].startswith("Elastic partition's minimum")
    )
    tasks = [
        t for t in play["tasks"] if t["ansible.builtin.include_role"]["tasks_from"] == "minimum"
    ]
    assert len(tasks) == 1, play
    return {**play, "tasks": tasks}


def run_plays(
    tmp_path: Path,
    plays: list[dict[str, Any]],
    groups: dict[str, list[str]],
    extra: dict[str, object],
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook on ``plays``, against an inventory of ``groups`` reached locally."""
    (tmp_path / "site.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {g: {"hosts": {h: {} for h in hosts}} for g, hosts in groups.items()},
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(
        os.environ,
        ANSIBLE_ROLES_PATH=str(REPO_ROOT / "roles"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        **env,
    )
    args = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    args += ["-e", json.dumps(extra), "site.yml"]
    return subprocess.run(
        args, cwd=tmp_path, env=environment, capture_output=True, text=True, check=False
    )


def what_site_gives(
    tmp_path: Path, groups: dict[str, list[str]], **extra: object
) -> dict[str, Any]:
    """Per host: the slurm role's SuspendExcNodes list and whether the srun check runs."""
    slurm = site_play("Slurm controller and compute nodes")
    srun = site_play("Slurm offers Open MPI's launcher (srun --mpi)")
    show = {
        "name": "Show",
        "hosts": slurm["hosts"],
        "gather_facts": False,
        "tasks": [
            {
                "name": "Show",
                "ansible.builtin.debug": {
                    "msg": {
                        "exclude": slurm["roles"][0]["vars"]["slurm_power_save_exclude_nodes"],
                        "srun": "{{ " + srun["tasks"][0]["when"] + " }}",
                    }
                },
            }
        ],
    }
    run = run_plays(
        tmp_path,
        [minimum_play(), show],
        groups,
        extra,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tasks = json.loads(run.stdout)["plays"][-1]["tasks"]
    return {host: r["msg"] for host, r in tasks[-1]["hosts"].items()}


GROUPS = {
    "slurm_controller": ["head"],
    "slurm_compute": ["node-2", "node-10", "node-0", "node-1"],
    "big": ["node-2", "node-10"],
}


@pytest.mark.parametrize(
    ("extra", "minimum"),
    [
        ({"ptc_elastic": True, "elastic_min_nodes": 2}, ["node-0", "node-1"]),
        ({"ptc_elastic": True, "elastic_min_nodes": 3}, ["node-0", "node-1", "node-10"]),
        ({"ptc_elastic": True}, []),
        # the pool is elastic_pool_group, not slurm_compute
        ({"ptc_elastic": True, "elastic_min_nodes": 1, "elastic_pool_group": "big"}, ["node-10"]),
        ({"elastic_min_nodes": 2}, []),  # no elastic partition, no minimum
    ],
)
def test_site_takes_the_minimum_from_the_elastic_role(
    tmp_path: Path, extra: dict[str, object], minimum: list[str]
) -> None:
    given = what_site_gives(tmp_path, GROUPS, **extra)
    assert sorted(given) == sorted(["head", *GROUPS["slurm_compute"]])
    for host, values in given.items():
        assert values["exclude"] == minimum, host
        # srun is checked where slurmd runs from the start: the controller and the minimum
        elastic = bool(extra.get("ptc_elastic"))
        expected = not elastic or host == "head" or host in minimum
        assert values["srun"] is expected, host


def test_the_fact_is_the_managers_minimum() -> None:
    """The manager's configuration and the fact read the same variable."""
    role = REPO_ROOT / "roles" / "elastic"
    fact = yaml.safe_load((role / "tasks" / "minimum.yml").read_text())[0]
    assert fact["ansible.builtin.set_fact"] == {"elastic_minimum_nodes": "{{ __elastic_minimum }}"}
    assert "__elastic_minimum" in (role / "templates" / "manager.yml.j2").read_text()
    assert "elastic_min_nodes" not in SITE.read_text()


def run_minimum_play(tmp_path: Path, **extra: object) -> subprocess.CompletedProcess[str]:
    """site.yml's play that takes the minimum (and checks per-job), on a small inventory."""
    plays = [minimum_play()]
    return run_plays(tmp_path, plays, GROUPS, extra, ANSIBLE_NOCOLOR="1")


@pytest.mark.parametrize(
    ("operation", "refused"), [("none", True), ("power", False), ("release", False)]
)
def test_per_job_without_an_operation_to_provision_with_is_refused_before_any_node_changes(
    tmp_path: Path, operation: str, refused: bool
) -> None:
    run = run_minimum_play(
        tmp_path, ptc_elastic=True, elastic_per_job=True, elastic_node_operation=operation
    )
    if refused:
        assert run.returncode != 0, run.stdout[-3000:]
        assert "elastic_per_job needs elastic_node_operation power" in run.stdout, run.stdout
    else:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.mark.parametrize(
    ("policy", "interval", "refused"),
    [
        ("FO", 0, False),
        ("ap-25", 1800, False),
        ("AP-100", 60, False),
        ("AP-150", 0, True),
        ("LIFO", 0, True),
        ("OI", -5, True),
    ],
)
def test_a_wrong_rebalancing_policy_or_interval_is_refused_before_any_node_changes(
    tmp_path: Path, policy: str, interval: int, refused: bool
) -> None:
    run = run_minimum_play(
        tmp_path,
        ptc_elastic=True,
        elastic_rebalance_policy=policy,
        elastic_rebalance_interval=interval,
    )
    if refused:
        assert run.returncode != 0, run.stdout[-3000:]
        assert "elastic_rebalance_policy must be OI, FO or AP-X" in run.stdout, run.stdout
        assert f"(got {policy})" in run.stdout and f"(got {interval})" in run.stdout
    else:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
