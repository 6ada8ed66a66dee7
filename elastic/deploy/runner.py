"""`ptc deploy`: run a playbook against an experiment through ansible-runner.

Every run keeps its events, stdout and a summary in ``EXPDIR/runs/<timestamp>-<playbook>/``.
Facts are cached in ``EXPDIR/facts`` so that a run limited to a few hosts (adding a compute
node) still renders slurm.conf with the facts of every node.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_runner
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from elastic import atomic, paths
from elastic.deploy.events import Failure, HostCounts, Tracker
from elastic.errors import PtcError
from elastic.testbed.experiment import Experiment

DEFAULT_PLAYBOOK = "site.yml"
JOURNAL_LINES = 30


@dataclass(frozen=True)
class DeployResult:
    playbook: str
    run_dir: Path
    elapsed_s: float
    status: str
    hosts: dict[str, HostCounts]

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())

    @property
    def failed(self) -> int:
        return sum(h.failed + h.unreachable for h in self.hosts.values())

    def describe(self) -> str:
        ok = sum(h.ok for h in self.hosts.values())
        return (
            f"{len(self.hosts)} hosts: {ok} ok, {self.changed} changed, {self.failed} failed "
            f"in {self.elapsed_s:.1f}s"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "playbook": self.playbook,
            "run_dir": str(self.run_dir),
            "elapsed_s": round(self.elapsed_s, 2),
            "status": self.status,
            "changed": self.changed,
            "hosts": {name: counts.as_dict() for name, counts in self.hosts.items()},
        }


def require_inventory(exp: Experiment) -> Path:
    """The experiment's hosts.yml, once its nodes are up and the inventory is written."""
    if exp.state != "ready":
        raise PtcError(
            f"experiment {exp.name!r} is {exp.state}, not ready: `ptc status {exp.name}`"
        )
    inventory = exp.inventory_dir / "hosts.yml"
    if not inventory.is_file():
        raise PtcError(
            f"experiment {exp.name!r} has no inventory yet: run `ptc inventory {exp.name}`"
        )
    return inventory


def new_run_dir(exp: Experiment, label: str) -> Path:
    """EXPDIR/runs/<timestamp>-<label>, never one an earlier run already uses."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for attempt in range(1, 1000):
        suffix = "" if attempt == 1 else f".{attempt}"
        path = exp.dir / "runs" / f"{stamp}{suffix}-{label}"
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
    raise PtcError(f"cannot create a run directory under {exp.dir / 'runs'}")


def resolve_playbook(playbook: str | Path) -> Path:
    path = Path(playbook)
    if not path.is_absolute() and not path.exists():
        path = paths.REPO_ROOT / path
    if not path.is_file():
        raise PtcError(f"playbook {str(playbook)!r} not found (looked in . and {paths.REPO_ROOT})")
    return path.resolve()


def deploy(
    exp: Experiment,
    playbook: str | Path = DEFAULT_PLAYBOOK,
    limit: str | None = None,
    extravars: Mapping[str, Any] | None = None,
    console: Console | None = None,
) -> DeployResult:
    """Run ``playbook`` on the experiment; raise PtcError naming host, task and message on failure."""
    console = console or Console(stderr=True)
    book = resolve_playbook(playbook)
    inventory = require_inventory(exp)
    run_dir = new_run_dir(exp, book.stem)

    tracker = Tracker()
    started = time.monotonic()
    with Live(_render(tracker, book.name, 0.0), console=console, refresh_per_second=4) as live:

        def on_event(event: dict[str, Any]) -> bool:
            tracker.feed(event)
            live.update(_render(tracker, book.name, time.monotonic() - started))
            return True  # keep the event in the run directory

        runner = ansible_runner.run(
            private_data_dir=str(run_dir),
            artifact_dir=str(run_dir),
            ident="ansible",
            project_dir=str(paths.REPO_ROOT),
            playbook=str(book),
            inventory=str(inventory),
            limit=limit,
            extravars=dict(extravars or {}),
            envvars=_environment(),
            # An absolute path: ansible-runner would otherwise cache facts per run.
            fact_cache=str(exp.dir / "facts"),
            event_handler=on_event,
            quiet=True,
            suppress_env_files=True,
        )
        live.update(_render(tracker, book.name, time.monotonic() - started))
    if not console.is_terminal:
        console.line()  # without a terminal, Live leaves its last frame unterminated

    result = DeployResult(
        playbook=str(
            book.relative_to(paths.REPO_ROOT) if book.is_relative_to(paths.REPO_ROOT) else book
        ),
        run_dir=run_dir,
        elapsed_s=time.monotonic() - started,
        status=str(runner.status),
        hosts=tracker.final(),
    )
    atomic.write_json(run_dir / "summary.json", result.as_dict())
    if runner.status != "successful" or result.failed:
        raise PtcError(_failure_report(exp, tracker.fatal_failures(), runner, run_dir))
    return result


def _environment() -> dict[str, str]:
    return {
        "ANSIBLE_CONFIG": str(paths.REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(paths.REPO_ROOT / "roles"),
        # ansible-runner starts the ansible-playbook it finds first on PATH: this Python's.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_NOCOLOR": "1",
    }


def _render(tracker: Tracker, playbook: str, elapsed: float) -> Group:
    head = Text.assemble(
        ("deploy ", "bold"),
        (playbook, "cyan"),
        f"  {elapsed:5.0f}s  tasks {tracker.tasks_started}  ",
        (tracker.play, "bold"),
        " / ",
        tracker.task,
    )
    table = Table(box=None, pad_edge=False)
    for column in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, c in sorted(tracker.hosts.items()):
        style = "red" if c.failed or c.unreachable else ""
        table.add_row(host, str(c.ok), str(c.changed), str(c.failed), str(c.unreachable),
                      str(c.skipped), style=style)  # fmt: skip
    return Group(head, table)


def _failure_report(exp: Experiment, failures: list[Failure], runner: Any, run_dir: Path) -> str:
    lines = [f"deploy of {exp.name} failed ({runner.status}, rc={runner.rc})"]
    if not failures:
        lines.append("  no task failed: see the log for the reason")
    for failure in failures:
        what = "unreachable" if failure.unreachable else "failed"
        lines.append(f"  {failure.host}: task {failure.task!r} {what} (play {failure.play!r}):")
        lines += [f"    {line}" for line in failure.message.splitlines()[:20]]
        unit = failure.unit
        if unit:
            lines.append(f"  journalctl -u {unit} -n {JOURNAL_LINES} on {failure.host}:")
            lines += [f"    {line}" for line in journal(exp, failure.host, unit).splitlines()]
    lines.append(f"  log: {run_dir / 'ansible' / 'stdout'}")
    return "\n".join(lines)


def journal(exp: Experiment, host: str, unit: str, lines: int = JOURNAL_LINES) -> str:
    """The last journal lines of a unit on a node, over SSH as the inventory reaches it."""
    command = f"journalctl --no-pager -o short-iso -n {lines} -u {unit}"
    try:
        proc = subprocess.run(
            ["ssh", "-F", str(exp.ssh_config_path), "-o", "BatchMode=yes", host, command],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "(journalctl over ssh timed out)"
    text = proc.stdout.strip() or proc.stderr.strip()
    return text or "(journal is empty)"
