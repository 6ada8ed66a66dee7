"""When munge's and slurmd's restart handlers restart: only a daemon that was running before the
role's "Run" task (which now runs before the handlers) read the settings it replaced; one that
task started from stopped read the new ones already. The handlers' own conditions, read from the
roles, evaluated by ansible-playbook against the results that task can register."""

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


def condition(role: str, handler: str) -> str:
    """The handler's ``when``, as one expression."""
    handlers = yaml.safe_load((REPO_ROOT / "roles" / role / "handlers" / "main.yml").read_text())
    when = next(h for h in handlers if h["name"] == handler)["when"]
    parts = when if isinstance(when, list) else [when]
    return " and ".join(f"({p})" for p in parts)


def evaluate(tmp_path: Path, cases: list[tuple[str, dict[str, Any]]]) -> list[bool]:
    """Each expression under its case's variables (a variable a case leaves out is undefined)."""
    tasks = [
        {
            "name": f"case {n}",
            "ansible.builtin.debug": {"msg": "{{ (" + expression + ") | bool }}"},
            "vars": case,
        }
        for n, (expression, case) in enumerate(cases)
    ]
    play = {"hosts": "localhost", "gather_facts": False, "tasks": tasks}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play], sort_keys=False))
    env = dict(
        os.environ,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
    )
    ansible = str(Path(sys.executable).with_name("ansible-playbook"))
    run = subprocess.run(
        [ansible, "-e", f"ansible_python_interpreter={sys.executable}", "play.yml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tasks_out = json.loads(run.stdout)["plays"][0]["tasks"]
    return [t["hosts"]["localhost"]["msg"] for t in tasks_out]


def ran(state: str) -> dict[str, Any]:
    """What the "Run" task registers for a unit that was ``state`` before it."""
    return {"changed": state != "active", "status": {"ActiveState": state}}


def test_munge_restarts_only_a_munged_that_ran_before(tmp_path: Path) -> None:
    cases: list[dict[str, Any]] = [
        {"munge_run": ran("active")},
        {"munge_run": ran("inactive")},
        {"munge_run": ran("failed")},
        {},  # the Run task did not run (a run that notified from elsewhere)
    ]
    got = evaluate(tmp_path, [(condition("munge", "Restart munge"), c) for c in cases])
    assert got == [True, False, False, True]


@pytest.mark.parametrize(
    ("power_saved", "before", "restart", "wait"),
    [
        (False, "active", True, True),  # a running slurmd with old settings
        (False, "inactive", False, True),  # started by the Run task: new settings, still waited for
        (False, "failed", False, True),
        (True, "inactive", False, False),  # a powered-down pool node stays down
        (True, "active", True, True),  # a resumed pool node takes the new settings
    ],
)
def test_slurmd_restarts_only_a_slurmd_that_ran_before(
    tmp_path: Path, power_saved: bool, before: str, restart: bool, wait: bool
) -> None:
    case = {"__slurm_power_saved": power_saved, "slurm_slurmd_run": ran(before)}
    if power_saved:  # the Run task leaves the unit as it is under power saving
        case["slurm_slurmd_run"]["changed"] = False
    handlers = ("Restart the slurmd service", "Wait for slurmd to listen")
    got = evaluate(tmp_path, [(condition("slurm", h), case) for h in handlers])
    assert got == [restart, wait]


def test_the_run_tasks_come_before_the_handlers_they_inform() -> None:
    """The handlers read the Run tasks' results, so those run first: munge's before the play's end,
    slurmd's before the compute tasks flush the handlers."""
    compute = yaml.safe_load((REPO_ROOT / "roles/slurm/tasks/compute.yml").read_text())
    names = [t["name"] for t in compute]
    assert names.index("Run slurmd") < names.index("Apply slurmd changes now")
    run = compute[names.index("Run slurmd")]
    assert run["register"] == "slurm_slurmd_run"
    munge = yaml.safe_load((REPO_ROOT / "roles/munge/tasks/main.yml").read_text())
    assert next(t for t in munge if t["name"] == "Run munged")["register"] == "munge_run"
