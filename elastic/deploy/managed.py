"""The paths a run's tasks manage on each host, read from their results as the run goes.

The stamp watches the trees a playbook mostly writes (``stamp.WATCHED``) for any change. A role
also makes things elsewhere: spool and log directories, a service's state directory, a build
tree, the cluster user's home, files on a share. Those trees change all the time (a service
writes its state there), so they cannot be watched whole; the stamp instead keeps each path a
task named, and the next deploy's check compares each with what the run left (see ``stamp``).

A task names its path in its module's arguments (``dest`` of copy and template, ``path`` of
file, lineinfile and mount, ``creates`` of a command), which every result carries as
``invocation.module_args`` and a loop carries per item. A directory is kept as a directory: the
files a recursive copy puts in it are not named one by one. Results a task hides (``no_log``)
name nothing, and tasks delegated to another host (the workstation's PKI) write nothing on this
one: neither is recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# The module arguments that name a path the task writes (``creates``: what a command makes).
PATH_ARGS = ("dest", "path", "creates")
# The modules that write the path they name; others name paths they only read or wait for
# (stat, slurp, wait_for), which their services rewrite as they run.
WRITERS = frozenset(
    {
        "copy", "template", "file", "lineinfile", "blockinfile", "ini_file", "replace",
        "get_url", "unarchive", "assemble", "command", "shell", "mount", "git",
    }
)  # fmt: skip


@dataclass
class ManagedPaths:
    """Absolute paths per host, from ``runner_on_ok`` events (a loop's items included)."""

    hosts: dict[str, set[str]] = field(default_factory=dict)

    def feed(self, event: dict[str, Any]) -> None:
        if event.get("event") != "runner_on_ok":
            return
        data: dict[str, Any] = event.get("event_data") or {}
        host, res = data.get("host"), data.get("res")
        if not isinstance(host, str) or not isinstance(res, dict):
            return
        action = str(data.get("resolved_action") or data.get("task_action") or "")
        if action.rsplit(".", 1)[-1] not in WRITERS:
            return
        for result in _results(res):
            if result.get("_ansible_delegated_vars") or result.get("skipped"):
                continue  # ran on another host, or did not run
            args = (result.get("invocation") or {}).get("module_args") or {}
            for key in PATH_ARGS:
                value = args.get(key) if isinstance(args, dict) else None
                if isinstance(value, str) and value.startswith("/"):
                    self.hosts.setdefault(host, set()).add(value.rstrip("/") or "/")

    def of(self, host: str) -> list[str]:
        """The paths the run's tasks named on ``host``, sorted."""
        return sorted(self.hosts.get(host, ()))


def _results(res: dict[str, Any]) -> Iterator[dict[str, Any]]:
    items = res.get("results")
    if isinstance(items, list):
        yield from (r for r in items if isinstance(r, dict))
    else:
        yield res
