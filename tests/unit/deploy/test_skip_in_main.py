"""ptc_mitogen_linear skips a task whose condition is false in the main process, without forking a
worker for it. The same playbook under mitogen's own linear strategy, where every skip happens
in a worker, must give the same results: each host's result of each task (registered and shown),
the handlers, the stats; and the skips must really happen without a worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.deploy import runner

# A test plugin: records which process evaluated it (its parent is this test for the main
# process, the main process for a worker), and is true for host "a" only.
TRACE = """
import os

def traced(hostname, path):
    with open(path, "a") as f:
        f.write(f"{hostname} {os.getppid()}\\n")
    return hostname == "a"

class TestModule:
    def tests(self):
        return {"ptc_traced": traced}
"""

PLAY: list[dict[str, Any]] = [
    {
        "hosts": "all",
        "gather_facts": False,
        "handlers": [
            {
                "name": "Handled",
                "ansible.builtin.debug": {"msg": "handled"},
                "when": "inventory_hostname != 'b'",
            }
        ],
        "tasks": [
            {
                "name": "traced",
                "ansible.builtin.debug": {"msg": "runs"},
                "when": "inventory_hostname is ptc_traced(trace)",
            },
            {
                "name": "skipped where not a",
                "ansible.builtin.command": "true",
                "when": "inventory_hostname == 'a'",
                "register": "first",
                "changed_when": False,
            },
            {"name": "show the registered result", "ansible.builtin.debug": {"var": "first"}},
            {
                "name": "secret",
                "ansible.builtin.debug": {"msg": "hidden"},
                "when": "inventory_hostname == 'c'",
                "no_log": True,
            },
            {
                "name": "notify",
                "ansible.builtin.command": "true",
                "changed_when": True,
                "notify": "Handled",
                "when": "inventory_hostname != 'c'",
            },
            {
                "name": "included where not a",
                "ansible.builtin.include_tasks": "included.yml",
                "when": "inventory_hostname != 'a'",
            },
            {
                "name": "a role where not b",
                "ansible.builtin.include_role": {"name": "small"},
                "when": "inventory_hostname != 'b'",
            },
            {
                "name": "a block",
                "when": "first is skipped",
                "block": [
                    {"name": "in the block", "ansible.builtin.debug": {"msg": "block"}},
                    {
                        "name": "nested condition",
                        "ansible.builtin.debug": {"msg": "nested"},
                        "when": "inventory_hostname == 'c'",
                    },
                ],
            },
            {
                "name": "once",
                "ansible.builtin.debug": {"msg": "once"},
                "run_once": True,
                "when": "false",
            },
            {
                "name": "a loop, its condition per item",
                "ansible.builtin.debug": {"msg": "{{ item }}"},
                "loop": [1, 2],
                "when": "item == 1 and inventory_hostname == 'b'",
            },
            {
                "name": "delegated",
                "ansible.builtin.debug": {"msg": "delegated"},
                "delegate_to": "a",
                "when": "inventory_hostname == 'b'",
            },
            {
                "name": "magic variables",
                "ansible.builtin.debug": {"msg": "checked"},
                "when": "ansible_check_mode or ansible_connection != 'local'",
            },
            {
                "name": "a condition that fails",
                "ansible.builtin.debug": {"msg": "never"},
                "when": "no_such_variable == 1",
                "ignore_errors": True,
            },
        ],
    }
]


def normalised(value: Any) -> Any:
    """The JSON callback's output without what differs from run to run."""
    if isinstance(value, dict):
        return {
            k: normalised(v)
            for k, v in value.items()
            if k not in {"duration", "id", "start", "end", "delta", "path"}
        }
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def run(tmp_path: Path, strategy: str) -> tuple[Any, list[tuple[str, int]]]:
    work = tmp_path / strategy
    (work / "test_plugins").mkdir(parents=True)
    (work / "test_plugins" / "ptc_trace.py").write_text(TRACE)
    (work / "included.yml").write_text(
        yaml.safe_dump([{"name": "included", "ansible.builtin.debug": {"msg": "included"}}])
    )
    (work / "roles" / "small" / "tasks").mkdir(parents=True)
    (work / "roles" / "small" / "tasks" / "main.yml").write_text(
        yaml.safe_dump([{"name": "in the role", "ansible.builtin.debug": {"msg": "role"}}])
    )
    (work / "site.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {h: {} for h in ("a", "b", "c")}
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"vars": local, "hosts": hosts}}))
    trace = work / "trace"
    env = {
        **os.environ,
        **runner._environment(mitogen=True),
        "ANSIBLE_STRATEGY": strategy,
        "ANSIBLE_TEST_PLUGINS": str(work / "test_plugins"),
        "ANSIBLE_ROLES_PATH": str(work / "roles"),
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    done = subprocess.run(
        [*argv, "-e", f"trace={trace}", "site.yml"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    traced = [(h, int(p)) for h, p in (line.split() for line in trace.read_text().splitlines())]
    return normalised(json.loads(done.stdout)), traced


Run = tuple[Any, list[tuple[str, int]]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The playbook under each strategy, once for the module's tests."""
    tmp = tmp_path_factory.mktemp("skip")
    return {s: run(tmp, s) for s in (runner.STRATEGY, "mitogen_linear")}


def test_skipping_in_the_main_process_gives_what_a_worker_gives(runs: dict[str, Run]) -> None:
    ours, theirs = runs[runner.STRATEGY][0], runs["mitogen_linear"][0]
    assert ours["stats"] == theirs["stats"]
    for mine, other in zip(ours["plays"][0]["tasks"], theirs["plays"][0]["tasks"], strict=True):
        assert mine == other, mine["task"]["name"]
    shown = {
        h: r["first"]
        for t in ours["plays"][0]["tasks"]
        if t["task"]["name"] == "show the registered result"
        for h, r in t["hosts"].items()
    }
    assert shown["b"]["skipped"] is True
    assert shown["b"]["false_condition"] == "inventory_hostname == 'a'"


def test_a_false_condition_is_evaluated_without_a_worker(runs: dict[str, Run]) -> None:
    """Host "a" (true) is evaluated by the main process, then by its worker; "b" and "c" (false)
    only by the main process. Under mitogen's own strategy every evaluation is a worker's."""
    main = os.getpid()  # ansible-playbook's parent
    ours, theirs = runs[runner.STRATEGY][1], runs["mitogen_linear"][1]
    assert {(h, p == main) for h, p in ours} == {
        ("a", False),
        ("a", True),
        ("b", True),
        ("c", True),
    }
    assert sorted(h for h, p in theirs if p != main) == ["a", "b", "c"]
    assert all(p != main for _, p in theirs)
