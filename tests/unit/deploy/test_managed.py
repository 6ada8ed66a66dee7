"""The paths a run's tasks manage, as the stamp keeps them: read from the results, and every
path the roles write either named there or under a tree the stamp watches whole."""

from __future__ import annotations

from typing import Any

import yaml
from support.role_vars import render, role_context

from elastic.deploy import stamp
from elastic.deploy.managed import PATH_ARGS, WRITERS, ManagedPaths
from elastic.paths import REPO_ROOT
from elastic.testbed.backends.local.role_packages import _tasks


def ok(host: str, res: Any, action: str = "ansible.builtin.file") -> dict[str, Any]:
    return {
        "event": "runner_on_ok",
        "event_data": {"host": host, "res": res, "resolved_action": action},
    }


def invoked(**args: Any) -> dict[str, Any]:
    return {"changed": False, "invocation": {"module_args": args}}


def test_paths_come_from_each_result_and_each_loop_item() -> None:
    seen = ManagedPaths()
    seen.feed(ok("head", invoked(dest="/etc/slurm/slurm.conf", src="/tmp/x"), "template"))
    seen.feed(ok("head", {"results": [invoked(path="/var/spool/a/"), invoked(path="/var/log/b")]}))
    seen.feed(ok("node-0", invoked(creates="/opt/ptc/bin/hpgmg-fv", chdir="/tmp/b"), "command"))
    assert seen.of("head") == ["/etc/slurm/slurm.conf", "/var/log/b", "/var/spool/a"]
    assert seen.of("node-0") == ["/opt/ptc/bin/hpgmg-fv"]
    assert seen.of("node-1") == []


def test_what_ran_elsewhere_was_skipped_or_is_hidden_names_nothing() -> None:
    seen = ManagedPaths()
    delegated = {
        **invoked(dest="/root/pki/ca.key"),
        "_ansible_delegated_vars": {"ansible_host": "localhost"},
    }
    seen.feed(ok("head", delegated))
    seen.feed(ok("head", {"results": [{"skipped": True, **invoked(path="/srv/x")}]}))
    seen.feed(ok("head", {"censored": "the output has been hidden", "changed": True}))
    seen.feed(ok("head", invoked(path="relative/dir", name="/not/a/path/arg")))
    seen.feed(
        {"event": "runner_on_failed", "event_data": {"host": "head", "res": invoked(path="/x")}}
    )
    seen.feed(ok("head", "odd"))
    # read or waited for, not written: a pid file a service rewrites is none of the run's
    seen.feed(ok("head", invoked(path="/run/munge/munged.pid"), "ansible.builtin.wait_for"))
    seen.feed(ok("head", invoked(path="/var/lib/slurm"), "ansible.builtin.stat"))
    assert seen.of("head") == []


# Task keywords (not modules): what is left of a task is its module.
_KEYWORDS = {
    "name", "when", "loop", "loop_control", "register", "notify", "tags", "become",
    "become_user", "vars", "no_log", "changed_when", "failed_when", "delegate_to", "run_once",
    "environment", "check_mode", "ignore_errors", "until", "retries", "delay", "listen", "args",
    "async", "poll", "diff", "throttle", "any_errors_fatal", "module_defaults", "timeout",
    "delegate_facts", "local_action", "with_items", "with_dict", "block", "rescue", "always",
}  # fmt: skip


def _named_paths(task: dict[str, Any]) -> list[str]:
    modules = [k for k in task if k not in _KEYWORDS]
    if not modules or modules[0].rsplit(".", 1)[-1] not in WRITERS:
        return []
    args = task[modules[0]] if isinstance(task[modules[0]], dict) else {}
    args = {**args, **(task.get("args") or {})}
    return [args[k] for k in PATH_ARGS if isinstance(args.get(k), str)]


def _resolved(path: str, context: dict[str, Any]) -> str:
    """``path`` rendered with the role's variables, cut before the first part that needs a
    loop item or an inventory (what is left is the directory the task writes in)."""
    cut = path.split("{{ item")[0]
    try:
        return render(cut, context)
    except Exception:
        return cut


def test_every_path_a_role_writes_is_named_in_its_result_or_watched_whole() -> None:
    """A task whose output is hidden (``no_log``) names nothing the stamp could keep: whatever it
    writes must lie under a tree the stamp watches whole. Tasks delegated to another host write
    nothing on the node."""
    hidden: list[str] = []
    for tasks_dir in sorted((REPO_ROOT / "roles").glob("*/tasks")):
        role = tasks_dir.parent.name
        context = role_context(role)
        for tasks_file in sorted(tasks_dir.glob("*.yml")):
            for task in _tasks(yaml.safe_load(tasks_file.read_text()) or []):
                if not task.get("no_log") or task.get("delegate_to") or "local_action" in task:
                    continue
                for path in _named_paths(task):
                    where = _resolved(path, context)
                    if not any(where.startswith(top + "/") for top in stamp.WATCHED):
                        hidden.append(f"{role}/{tasks_file.name}: {task.get('name')}: {where}")
    assert not hidden, (
        "tasks that hide their output write outside the trees the stamp watches, so a change "
        "there would not be seen by the no-op deploy: " + "; ".join(hidden)
    )


def test_the_check_finds_tasks_that_name_paths() -> None:
    """The walk above sees the roles' tasks, blocks included (else it would pass on nothing)."""
    named = [
        p
        for tasks_dir in (REPO_ROOT / "roles").glob("*/tasks")
        for f in tasks_dir.glob("*.yml")
        for t in _tasks(yaml.safe_load(f.read_text()) or [])
        for p in _named_paths(t)
    ]
    assert len(named) > 50
    assert "/etc/munge/munge.key" in named  # a hidden one, inside a block
