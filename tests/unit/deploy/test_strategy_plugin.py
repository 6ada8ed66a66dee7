"""ptc_mitogen_linear: mitogen's linear strategy, whose workers are not all pinned to one CPU on
a controller of fewer than four CPUs (mitogen's own policy pins them there)."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.deploy import runner

# An action: where the worker that runs it may be scheduled.
PROBE = """
import os
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        return {"changed": False, "cpus": sorted(os.sched_getaffinity(0))}
"""


def run_action(tmp_path: Path, name: str, source: str, strategy: str) -> dict[str, Any]:
    """What the action plugin ``source``, run as task ``name`` on one local host under
    ``strategy``, returned."""
    actions = tmp_path / "actions"
    actions.mkdir(exist_ok=True)
    (actions / f"{name}.py").write_text(source)
    play = {"hosts": "all", "gather_facts": False, "tasks": [{name: {}}]}
    (tmp_path / "site.yml").write_text(yaml.safe_dump([play]))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "inventory.yml").write_text(
        yaml.safe_dump({"all": {"vars": local, "hosts": {"a": {}}}})
    )
    env = {
        **os.environ,
        **runner._environment(mitogen=True),
        "ANSIBLE_STRATEGY": strategy,
        "ANSIBLE_ACTION_PLUGINS": str(actions),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "json",
    }
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    done = subprocess.run(
        [*argv, "site.yml"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["a"]
    return result


def worker_cpus(tmp_path: Path, strategy: str) -> list[int]:
    cpus: list[int] = run_action(tmp_path, "ptc_cpus", PROBE, strategy)["cpus"]
    return cpus


def plugin() -> object:
    spec = importlib.util.spec_from_file_location(
        "ptc_mitogen_linear", runner.STRATEGY_DIR / "ptc_mitogen_linear.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pinning_is_left_out_below_mitogen_s_own_threshold() -> None:
    module = plugin()
    assert [module.unpin(n) for n in (1, 2, 3, 4, 16)] == [True, True, True, False, False]  # type: ignore[attr-defined]


def test_a_worker_may_run_on_every_cpu_of_a_small_controller(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    cpus = worker_cpus(tmp_path, runner.STRATEGY)
    if multiprocessing.cpu_count() < 4:
        assert cpus == allowed
    else:  # mitogen's policy stays: each worker on one CPU
        assert len(cpus) == 1


@pytest.mark.skipif(
    not 2 <= multiprocessing.cpu_count() < 4, reason="mitogen pins to CPU 1 on 2-3 CPUs only"
)
def test_mitogen_s_own_strategy_pins_the_worker_to_one_cpu_there(tmp_path: Path) -> None:
    assert worker_cpus(tmp_path, "mitogen_linear") == [1]


def test_collections_are_listed_once_however_many_modules_ask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ansible.collections.list
    import ansible_mitogen.planner

    module = plugin()
    calls: list[int] = []

    def listing() -> list[bytes]:
        calls.append(1)
        return [b"/a/ansible_collections", b"/b/ansible_collections"]

    monkeypatch.setattr(ansible.collections.list, "list_collection_dirs", listing)
    monkeypatch.setattr(module._Collections, "dirs", None)  # type: ignore[attr-defined]
    invocations = [type("Invocation", (), {"_extra_sys_paths": set()})() for _ in range(3)]
    for invocation in invocations:
        ansible_mitogen.planner._load_collections(invocation)
    assert ansible_mitogen.planner._load_collections is module._load_collections  # type: ignore[attr-defined]
    assert calls == [1]
    assert all(
        i._extra_sys_paths == {"/a/ansible_collections", "/b/ansible_collections"}
        for i in invocations
    )


# An action: whether the worker that runs it inherited the collections' list from the main process.
INHERITED = """
import sys
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        found = [m for m in list(sys.modules.values()) if hasattr(m, "_Collections")]
        return {"changed": False, "listed": [m._Collections.dirs is not None for m in found]}
"""


def test_a_worker_finds_the_collections_listed_before_it_was_forked(tmp_path: Path) -> None:
    result = run_action(tmp_path, "ptc_inherited", INHERITED, runner.STRATEGY)
    assert result["listed"] == [True]
