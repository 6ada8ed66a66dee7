"""ptc_mitogen_linear skips a task whose condition is false in the main process, without forking a
worker for it, and runs there a task only the controller runs (an include, set_fact, assert,
debug, fail, a role's arguments check). The same playbook under mitogen's own linear strategy,
where every task runs in a worker, must give the same results: each host's result of each task
(registered and shown, failed and ignored), the handlers, the stats; and the skips and the
controller's tasks must really happen without a worker."""

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

# Test plugins: record which process evaluated them (its parent is this test for the main
# process, the main process for a worker); ptc_traced is true for host "a" only, ptc_seen always.
TRACE = """
import os

def record(hostname, path):
    with open(path, "a") as f:
        f.write(f"{hostname} {os.getppid()}\\n")

def traced(hostname, path):
    record(hostname, path)
    return hostname == "a"

def seen(hostname, path):
    record(hostname, path)
    return True

class TestModule:
    def tests(self):
        return {"ptc_traced": traced, "ptc_seen": seen}
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
                "ansible.builtin.command": "true",
                "changed_when": False,
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
                "name": "a fact, set where the controller runs it",
                "ansible.builtin.set_fact": {"fact": "{{ inventory_hostname is ptc_seen(seen) }}"},
                "register": "setting",
            },
            {"name": "show the fact", "ansible.builtin.debug": {"var": "fact"}},
            {
                "name": "variables from a file",
                "ansible.builtin.include_vars": "{{ 'vars.yml' if inventory_hostname is ptc_seen(seen) }}",
            },
            {
                "name": "show a variable from the file",
                "ansible.builtin.debug": {"var": "from_file"},
            },
            {"name": "show how it was set", "ansible.builtin.debug": {"var": "setting"}},
            {
                "name": "an assertion that holds",
                "ansible.builtin.assert": {"that": ["fact | bool"], "quiet": True},
            },
            {
                "name": "an assertion that fails on all but a",
                "ansible.builtin.assert": {
                    "that": ["inventory_hostname == 'a'"],
                    "fail_msg": "not a",
                },
                "ignore_errors": True,
            },
            {
                "name": "a failure on b",
                "ansible.builtin.fail": {"msg": "b fails"},
                "when": "inventory_hostname == 'b'",
                "ignore_errors": True,
            },
            {
                "name": "an arguments check",
                "ansible.builtin.validate_argument_spec": {
                    "argument_spec": {"count": {"type": "int", "required": True}},
                    "provided_arguments": {"count": "{{ 2 + 1 }}"},
                },
            },
            {
                "name": "an arguments check that fails",
                "ansible.builtin.validate_argument_spec": {
                    "argument_spec": {"count": {"type": "int", "required": True}},
                    "provided_arguments": {"count": "many"},
                },
                "ignore_errors": True,
            },
            {
                "name": "a role whose arguments are checked",
                "ansible.builtin.include_role": {"name": "small"},
                "vars": {"small_word": "{{ inventory_hostname }}"},
            },
            {
                "name": "an include evaluated by the controller",
                "ansible.builtin.include_tasks": "included.yml",
                "when": "inventory_hostname is ptc_seen(seen)",
            },
            {
                "name": "a hidden fact",
                "ansible.builtin.set_fact": {"hidden": "secret"},
                "no_log": True,
            },
            {
                "name": "a fact retried in a worker",
                "ansible.builtin.set_fact": {
                    "retried": "{{ inventory_hostname is ptc_seen(seen) }}"
                },
                "retries": 1,
                "until": "retried | bool",
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


# The JSON output, then which process evaluated each traced and each seen test plugin call.
Run = tuple[Any, list[tuple[str, int]], list[tuple[str, int]]]


def run(tmp_path: Path, strategy: str) -> Run:
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
    (work / "roles" / "small" / "meta").mkdir()
    spec = {"options": {"small_word": {"type": "str", "default": "none"}}}
    (work / "roles" / "small" / "meta" / "argument_specs.yml").write_text(
        yaml.safe_dump({"argument_specs": {"main": spec}})
    )
    (work / "vars.yml").write_text(yaml.safe_dump({"from_file": "{{ inventory_hostname }}!"}))
    (work / "site.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {h: {} for h in ("a", "b", "c")}
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"vars": local, "hosts": hosts}}))
    trace, seen = work / "trace", work / "seen"
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
        [*argv, "-e", f"trace={trace} seen={seen}", "site.yml"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    output = json.loads(done.stdout.replace(str(work), "WORK"))  # each strategy has its own
    return normalised(output), recorded(trace), recorded(seen)


def recorded(path: Path) -> list[tuple[str, int]]:
    """Which host each evaluation of a test plugin was for, and its process's parent."""
    return [(h, int(p)) for h, p in (line.split() for line in path.read_text().splitlines())]


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


def results(run: Any, name: str) -> dict[str, Any]:
    """Each host's result of the task called ``name`` (the callback lists a task once per host
    under a strategy it does not know to run hosts in lockstep)."""
    tasks = [t for t in run["plays"][0]["tasks"] if t["task"]["name"] == name]
    assert tasks, name
    return {h: r for t in tasks for h, r in t["hosts"].items()}


def test_the_controller_s_tasks_in_the_main_process_give_what_a_worker_gives(
    runs: dict[str, Run],
) -> None:
    ours = runs[runner.STRATEGY][0]
    assert {h: r["fact"] for h, r in results(ours, "show the fact").items()} == dict.fromkeys(
        "abc", True
    )
    shown = results(ours, "show a variable from the file")
    assert {h: r["from_file"] for h, r in shown.items()} == {h: f"{h}!" for h in "abc"}
    assert results(ours, "show how it was set")["a"]["setting"]["ansible_facts"] == {"fact": True}
    failed = results(ours, "an assertion that fails on all but a")
    assert {h: r.get("failed", False) for h, r in failed.items()} == {
        "a": False,
        "b": True,
        "c": True,
    }
    assert failed["b"]["msg"] == "not a"
    assert results(ours, "a failure on b")["b"]["msg"] == "b fails"
    assert not any(r.get("failed") for r in results(ours, "an arguments check").values())
    wrong = results(ours, "an arguments check that fails")["c"]
    assert wrong["failed"] is True and "count" in wrong["msg"]
    role_check = results(ours, "small : Validating arguments against arg spec 'main'")
    assert sorted(role_check) == ["a", "b", "c"]
    assert not any(r.get("failed") or r.get("skipped") for r in role_check.values())
    hidden = results(ours, "a hidden fact")["a"]
    assert "secret" not in json.dumps(hidden) and hidden["censored"]
    assert results(ours, "included")["c"]["msg"] == "included"


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


def test_the_controller_s_tasks_run_without_a_worker(runs: dict[str, Run]) -> None:
    """The fact, the variables file's name and the include's condition are evaluated by the main
    process for every host; the retried fact, which may sleep, by each host's worker. Under
    mitogen's own strategy all four are a worker's."""
    main = os.getpid()
    ours, theirs = runs[runner.STRATEGY][2], runs["mitogen_linear"][2]
    for host in "abc":
        assert sorted(p == main for h, p in ours if h == host) == [False, True, True, True]
        assert [p == main for h, p in theirs if h == host] == [False] * 4
