"""Reading ansible-runner events: per-host counts as they arrive, and what failed where.

Kept apart from the runner so the parsing can be tested on recorded events, without Ansible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# ansible-runner event names -> the counter they bump.
_COUNTED = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}
_SERVICE_ACTIONS = {"service", "systemd", "systemd_service", "sysvinit"}
_UNIT_IN_TEXT = re.compile(r"\b([A-Za-z0-9@_.-]+)\.service\b")
# Tasks that wait for a daemon or restart it name it: "Wait for slurmd to listen",
# "Restart the slurmctld service", "Run slurmdbd".
_UNIT_IN_TASK = re.compile(
    r"^(?:[\w-]+ : )?(?:Wait for|Restart the|Restart|Run)\s+([A-Za-z0-9@_.-]+?)(?:\s+(?:to|service)\b|$)"
)


@dataclass
class HostCounts:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "unreachable": self.unreachable,
            "skipped": self.skipped,
            "rescued": self.rescued,
        }


@dataclass(frozen=True)
class Failure:
    host: str
    play: str
    task: str
    action: str
    message: str
    unreachable: bool = False
    service: str | None = None  # the service module's "name" argument, when Ansible reports it

    @property
    def unit(self) -> str | None:
        """The systemd unit the failed task was starting or waiting for, if it names one."""
        if self.unreachable:
            return None
        if self.service:
            return self.service.removesuffix(".service")
        found = _UNIT_IN_TEXT.search(self.message)
        if found:
            return found.group(1)
        if self.action.rsplit(".", 1)[-1] in _SERVICE_ACTIONS | {"wait_for"}:
            named = _UNIT_IN_TASK.match(self.task)
            if named:
                return named.group(1)
        return None


@dataclass
class Tracker:
    """Folds events into what the progress display and the final report need."""

    play: str = ""
    task: str = ""
    tasks_started: int = 0
    hosts: dict[str, HostCounts] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data: dict[str, Any] = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play", ""))
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self.task = str(data.get("task", ""))
            self.tasks_started += 1
        elif kind in _COUNTED and data.get("host"):
            self._count(kind, data)
        elif kind == "playbook_on_stats":
            self.stats = {
                key: dict(data.get(key) or {})
                for key in ("ok", "changed", "failures", "dark", "skipped", "rescued")
            }

    def _count(self, kind: str, data: dict[str, Any]) -> None:
        host = str(data["host"])
        counts = self.hosts.setdefault(host, HostCounts())
        res: dict[str, Any] = data.get("res") or {}
        if kind == "runner_on_failed" and data.get("ignore_errors"):
            counts.ok += 1
            return
        setattr(counts, _COUNTED[kind], getattr(counts, _COUNTED[kind]) + 1)
        if kind == "runner_on_ok" and res.get("changed"):
            counts.changed += 1
        if kind in ("runner_on_failed", "runner_on_unreachable"):
            action = str(data.get("resolved_action") or data.get("task_action") or "")
            args = (res.get("invocation") or {}).get("module_args") or {}
            service = args.get("name") if action.rsplit(".", 1)[-1] in _SERVICE_ACTIONS else None
            self.failures.append(
                Failure(
                    host=host,
                    play=str(data.get("play", "")),
                    task=str(data.get("task", "")),
                    action=action,
                    message=failure_message(res),
                    unreachable=kind == "runner_on_unreachable",
                    service=str(service) if service else None,
                )
            )

    def final(self) -> dict[str, HostCounts]:
        """Per-host counts, from Ansible's own recap when the run got that far."""
        if not self.stats:
            return self.hosts
        names = set().union(*(set(v) for v in self.stats.values())) | set(self.hosts)
        out: dict[str, HostCounts] = {}
        for host in sorted(names):
            out[host] = HostCounts(
                ok=self.stats.get("ok", {}).get(host, 0),
                changed=self.stats.get("changed", {}).get(host, 0),
                failed=self.stats.get("failures", {}).get(host, 0),
                unreachable=self.stats.get("dark", {}).get(host, 0),
                skipped=self.stats.get("skipped", {}).get(host, 0),
                rescued=self.stats.get("rescued", {}).get(host, 0),
            )
        return out

    def fatal_failures(self) -> list[Failure]:
        """The last failure of each host that ended failed or unreachable (not rescued ones)."""
        final = self.final()
        last: dict[str, Failure] = {}
        for failure in self.failures:
            counts = final.get(failure.host)
            if counts is None or counts.failed or counts.unreachable:
                last[failure.host] = failure
        return list(last.values())


def failure_message(res: dict[str, Any]) -> str:
    """The most useful text of a failed result: msg, then stderr, then stdout; for a loop, the
    failed items' own messages (Ansible's msg there only says that some item failed)."""
    if res.get("censored"):
        return str(res["censored"])
    failed_items = [
        f"item {item.get('_ansible_item_label', item.get('item'))!r}: {failure_message(item)}"
        for item in res.get("results") or []
        if isinstance(item, dict) and item.get("failed")
    ]
    if failed_items:
        return "\n".join(failed_items)
    parts: list[str] = []
    for key in ("msg", "stderr", "stdout"):
        value = res.get(key)
        if value and str(value).strip() and str(value).strip() not in parts:
            parts.append(str(value).strip())
    return "\n".join(parts) or "(no message)"
