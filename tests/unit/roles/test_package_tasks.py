"""Package tasks skip when the run's list of installed packages holds all they would install.

site.yml lists each host's installed packages once (ptc_packages_installed) before the common role
runs; every apt task's condition must name exactly the packages the task installs, or a rerun
would skip an install it needs (or open apt's cache for nothing). So each task writes its list
once, in one variable (a role default, a role var, or the task's own ``vars``) that both its
``name`` and its condition use. Since any of them may be the first to run on a node, each
refreshes apt's lists when they are stale.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible._internal._templating._engine import TemplateEngine
from ansible.parsing.dataloader import DataLoader
from ansible.template import trust_as_template
from jinja2 import StrictUndefined
from jinja2.nativetypes import NativeEnvironment

from elastic import paths
from elastic.testbed.backends.local.role_packages import _names, _tasks, _variables, task_context

ROLES = paths.REPO_ROOT / "roles"
GUARD = "ptc_packages_installed"
# The one condition of every package task, over the variable that holds its packages.
STANDARD_GUARD = (
    "ptc_packages_installed is not defined or {} | difference(ptc_packages_installed) | length > 0"
)


def _apt_tasks() -> Iterator[tuple[str, Path, dict[str, Any]]]:
    for task_file in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(task_file.read_text()) or []):
            if "ansible.builtin.apt" in task and task["ansible.builtin.apt"].get("name"):
                yield task_file.parts[-3], task_file, task


APT_TASKS = list(_apt_tasks())


def _guard(task: dict[str, Any]) -> str | None:
    when = task.get("when", [])
    for condition in when if isinstance(when, list) else [when]:
        if GUARD in str(condition):
            return str(condition)
    return None


def _condition(expression: str, context: dict[str, Any]) -> bool:
    env = NativeEnvironment(undefined=StrictUndefined)
    env.filters["difference"] = lambda a, b: [x for x in a if x not in b]
    env.tests["defined"] = lambda value: not isinstance(value, StrictUndefined)
    return bool(env.compile_expression(expression, undefined_to_none=False)(**context))


def test_there_are_package_tasks_to_check() -> None:
    assert len(APT_TASKS) >= 15


@pytest.mark.parametrize(
    ("role", "task_file", "task"),
    APT_TASKS,
    ids=lambda v: v if isinstance(v, str) else getattr(v, "name", None) or v.get("name"),
)
def test_package_task_skips_exactly_when_its_packages_are_installed(
    role: str, task_file: Path, task: dict[str, Any]
) -> None:
    guard = _guard(task)
    assert guard is not None, f"{task_file}: {task['name']!r} has no {GUARD} condition"
    context = task_context(task, _variables(ROLES))
    context.setdefault("hpgmg_fe_enabled", False)
    names = _names(task["ansible.builtin.apt"]["name"], context, str(task_file))
    # Ansible renders the task's own variables where the condition uses them.
    for key in task.get("vars") or {}:
        context[key] = _names(context[key], context, f"{task_file}: vars.{key}")
    assert names
    others = ["not-a-role-package-1", "not-a-role-package-2"]
    # Nothing listed (another play, or a role used alone): the task runs.
    assert _condition(guard, context) is True
    # Everything installed: it skips.
    assert _condition(guard, {**context, GUARD: others + names}) is False
    # Any one of its packages missing: it runs.
    for missing in names:
        listed = others + [n for n in names if n != missing]
        assert _condition(guard, {**context, GUARD: listed}) is True, missing


def test_every_package_task_writes_its_list_once() -> None:
    """``name`` is one variable and the condition is the standard one over that variable, so
    the list of packages is written in one place only."""
    for _role, task_file, task in APT_TASKS:
        where = f"{task_file}: {task['name']!r}"
        name = task["ansible.builtin.apt"]["name"]
        found = re.fullmatch(r"\{\{ ([a-z_]+) \}\}", name) if isinstance(name, str) else None
        assert found, f"{where}: name is not one variable ({name!r})"
        assert _guard(task) == STANDARD_GUARD.format(found.group(1)), where


def test_every_package_task_refreshes_apt_s_lists_when_they_are_stale() -> None:
    for _role, task_file, task in APT_TASKS:
        apt = task["ansible.builtin.apt"]
        where = f"{task_file}: {task['name']!r}"
        assert apt.get("update_cache") is True, where
        assert apt.get("cache_valid_time") not in (None, 0, "0"), where


def test_site_lists_the_installed_packages_before_the_common_role() -> None:
    plays = yaml.safe_load((paths.REPO_ROOT / "site.yml").read_text())
    base = next(p for p in plays if any(r.get("role") == "common" for r in p.get("roles", [])))
    setters = [
        t for t in base.get("pre_tasks", []) if GUARD in t.get("ansible.builtin.set_fact", {})
    ]
    assert setters, "site.yml's play with the common role does not set ptc_packages_installed first"
    # It comes before every play that installs packages of another role.
    assert plays.index(base) <= 2


def test_the_run_s_list_holds_the_installed_packages_only() -> None:
    """site.yml's list, rendered by Ansible from dpkg-query's lines (status, then name): the
    packages installed, not those removed with their configuration left or half installed."""
    site = yaml.safe_load((paths.REPO_ROOT / "site.yml").read_text())
    (expression,) = (
        task["ansible.builtin.set_fact"][GUARD]
        for play in site
        for task in play.get("pre_tasks", [])
        if GUARD in task.get("ansible.builtin.set_fact", {})
    )
    lines = ["ii bash", "rc removed-kept-config", "iU half-installed", "ii libc6", "ii g++-12"]
    listed = {"stdout": "\n".join([*lines, "ii python3.11"])}
    engine = TemplateEngine(loader=DataLoader(), variables={"ptc_dpkg_query": listed})
    installed = engine.template(trust_as_template(expression))
    assert installed == ["bash", "libc6", "g++-12", "python3.11"]
