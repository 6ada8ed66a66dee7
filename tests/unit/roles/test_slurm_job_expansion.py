"""The slurm role's job expansion: what it turns on and off in slurm.conf and cgroup.conf, and
its refusal of confined cores, with ansible-playbook against a local inventory (the role's
checks only; no node is changed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_elastic_minimum import run_plays

GROUPS = {"slurm_controller": ["head"], "slurm_compute": ["node-0"]}
SHOW = (
    "{{ {'task': __slurm_task_plugin, 'config': __slurm_expansion_config.get('SchedulerParameters'),"
    " 'cores': __slurm_cgroup_config.ConstrainCores} | to_json }}"
)
PLAY = {
    "name": "The slurm role's checks and derived settings",
    "hosts": "head",
    "gather_facts": False,
    "tasks": [
        {"ansible.builtin.include_role": {"name": "slurm", "tasks_from": "checks", "public": True}},
        {"name": "Show", "ansible.builtin.debug": {"msg": "PTC-SHOW " + SHOW}},
    ],
}


def derived(tmp_path: Path, **extra: object) -> tuple[int, dict[str, Any] | None, str]:
    run = run_plays(tmp_path, [PLAY], GROUPS, extra, ANSIBLE_NOCOLOR="1")
    found = re.search(r'"PTC-SHOW (\{.*\})"', run.stdout.replace('\\"', '"'))
    return run.returncode, json.loads(found.group(1)) if found else None, run.stdout


def test_off_by_default_with_binding_and_confined_cores(tmp_path: Path) -> None:
    rc, shown, out = derived(tmp_path)
    assert rc == 0, out[-3000:]
    assert shown == {"task": "task/cgroup,task/affinity", "config": None, "cores": "yes"}


@pytest.mark.parametrize(
    ("plugins", "left"),
    [("task/cgroup,task/affinity", "task/cgroup"), ("task/affinity", "task/none")],
)
def test_on_it_permits_expansion_and_drops_what_an_expanded_job_s_steps_fail_on(
    tmp_path: Path, plugins: str, left: str
) -> None:
    rc, shown, out = derived(tmp_path, slurm_job_expansion=True, slurm_task_plugin=plugins)
    assert rc == 0, out[-3000:]
    assert shown == {"task": left, "config": "permit_job_expansion", "cores": "no"}


@pytest.mark.parametrize("value", ["yes", True])
def test_on_with_cores_confined_is_refused_naming_both_variables(
    tmp_path: Path, value: object
) -> None:
    rc, shown, out = derived(
        tmp_path, slurm_job_expansion=True, slurm_cgroup_config={"ConstrainCores": value}
    )
    assert rc != 0 and shown is None, out[-3000:]
    assert "slurm_job_expansion needs ConstrainCores=no, but slurm_cgroup_config sets" in out, out
