"""The ptc_warm callback: Jinja's filters and tests are loaded in ansible-playbook's main
process, before it forks a worker per task and host, so a worker inherits them instead of
loading every filter and test file again; the repository's ansible.cfg and `ptc deploy` enable
it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elastic.deploy import runner

REPO_ROOT = Path(__file__).resolve().parents[3]

# An action that templates nothing and reports whether its worker already held the filters
# and tests when the task began (the private caches of ansible-core's Jinja plugin loaders).
PROBE = """
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import filter_loader, test_loader


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        held = [bool(loader._cached_non_collection_wrappers) for loader in (filter_loader, test_loader)]
        return {"changed": False, "held": held}
"""


def probe(tmp_path: Path, **env: str) -> list[bool]:
    actions = tmp_path / "actions"
    actions.mkdir(exist_ok=True)
    (actions / "ptc_probe.py").write_text(PROBE)
    play = {"hosts": "all", "gather_facts": False,
            "tasks": [{"ptc_probe": {}, "register": "probe"},
                      {"ansible.builtin.debug": {"var": "probe.held"}}]}  # fmt: skip
    (tmp_path / "site.yml").write_text(yaml.safe_dump([play], sort_keys=False))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "inventory.yml").write_text(
        yaml.safe_dump({"all": {"vars": local, "hosts": {"a": {}}}})
    )
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    environment = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_ACTION_PLUGINS=str(actions),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        **env,
    )
    done = subprocess.run(
        [*argv, "site.yml"], cwd=tmp_path, env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Failure using method" not in done.stdout + done.stderr, done.stderr
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    held: list[bool] = tasks[0]["hosts"]["a"]["held"]
    return held


def test_a_worker_inherits_the_filters_and_tests_the_main_process_loaded(tmp_path: Path) -> None:
    assert probe(tmp_path) == [True, True]  # enabled by the repository's ansible.cfg


def test_without_it_a_worker_starts_with_none(tmp_path: Path) -> None:
    # (ansible-core takes no empty list here: a name no plugin has leaves ptc_warm out)
    assert probe(tmp_path, ANSIBLE_CALLBACKS_ENABLED="ptc_absent") == [False, False]


@pytest.mark.parametrize("mitogen", [True, False])
def test_ptc_deploy_enables_it_beside_ansible_runner_s_own(mitogen: bool) -> None:
    env = runner._environment(mitogen)
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "ptc_warm"
    assert Path(env["ANSIBLE_CALLBACK_PLUGINS"]) == REPO_ROOT / "plugins" / "callback"
    assert (REPO_ROOT / "plugins" / "callback" / "ptc_warm.py").is_file()
