"""`ptc deploy`: run a playbook against a target's inventory through ansible-runner.

Every run keeps its events, stdout and a summary in ``RUNS/<timestamp>-<playbook>/``. Asked to
(``skip_if_current``, as ``ptc deploy`` does unless ``--full``), a run whose inputs every node
was last deployed from, with nothing changed on the nodes since, skips Ansible altogether
(:mod:`elastic.deploy.stamp`); its summary says so and why any other run was needed. Facts are
cached in the target's fact cache so that a run limited to a few hosts (adding a compute node)
still renders slurm.conf with the facts of every node. Progress goes to ``on_event`` (topic
``deploy``): a STATUS per task, a PROGRESS per result with the per-host counts in ``data``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ansible_runner import Runner, RunnerConfig
from ansible_runner.utils import signal_handler

from elastic import atomic, paths
from elastic.deploy import first_contact, secrets, stamp
from elastic.deploy.events import Failure, HostCounts, Tracker
from elastic.deploy.managed import ManagedPaths
from elastic.deploy.target import Target
from elastic.errors import DeployError, NotFoundError, PtcError, RemoteTimeout, TaskFailure
from elastic.events import OnEvent, Reporter
from elastic.remote import ssh
from elastic.remote.select import Hosts, select

DEFAULT_PLAYBOOK = "site.yml"
JOURNAL_LINES = 30
# PTC_MITOGEN=0 (or `ptc deploy --no-mitogen`) runs Ansible's own linear strategy.
MITOGEN_ENV = "PTC_MITOGEN"
# plugins/cache/ptc_facts.py (ansible.cfg's cache_plugins): facts kept per experiment, across runs.
FACT_CACHE_PLUGIN = "ptc_facts"
# mitogen's linear strategy, as ptc runs it (see the plugin's docstring).
STRATEGY = "ptc_mitogen_linear"
STRATEGY_DIR = paths.REPO_ROOT / "plugins" / "strategy"
# The elastic role's default elastic_wheelhouse: the wheels it installs are a run's input too.
WHEELHOUSE = Path.home() / ".cache" / "ptc-elastic" / "wheels"


@dataclass(frozen=True)
class DeployResult:
    playbook: str
    run_dir: Path
    elapsed_s: float
    status: str
    hosts: dict[str, HostCounts]
    # every node was up to date: Ansible did not run
    up_to_date: bool = False
    # why it ran, per node found not up to date (empty when it was not asked to check)
    why_run: dict[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())

    @property
    def failed(self) -> int:
        return sum(h.failed + h.unreachable for h in self.hosts.values())

    def describe(self) -> str:
        if self.up_to_date:
            return (
                f"{len(self.hosts)} hosts up to date (last deployed from these inputs, nothing "
                f"changed since): nothing to run, in {self.elapsed_s:.1f}s"
            )
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
            "up_to_date": self.up_to_date,
            "why_run": self.why_run,
            "hosts": {name: counts.as_dict() for name, counts in self.hosts.items()},
        }


def resolve_playbook(playbook: str | Path) -> Path:
    path = Path(playbook)
    if not path.is_absolute() and not path.exists():
        path = paths.REPO_ROOT / path
    if not path.is_file():
        raise NotFoundError(
            f"playbook {str(playbook)!r} not found (looked in . and {paths.REPO_ROOT})"
        )
    return path.resolve()


def deploy(
    target: Target,
    playbook: str | Path = DEFAULT_PLAYBOOK,
    limit: str | None = None,
    extravars: Mapping[str, Any] | None = None,
    on_event: OnEvent | None = None,
    mitogen: bool | None = None,
    skip_if_current: bool = False,
) -> DeployResult:
    """Run ``playbook`` on the target; raise DeployError naming host, task and message.

    ``mitogen`` (default: on unless PTC_MITOGEN=0) runs it with mitogen's strategy.
    ``skip_if_current`` skips the run when every node is up to date (no ``limit``).
    """
    book = resolve_playbook(playbook)
    run_dir = target.new_run_dir(book.stem)
    report = Reporter("deploy", on_event)
    tracker = Tracker()
    managed = ManagedPaths()  # what the stamp keeps of each node, besides its watched trees
    started = time.monotonic()
    report.begin(f"{book.name} on {target.name}" + (f" (limit {limit})" if limit else ""))

    def on_ansible_event(event: dict[str, Any]) -> bool:
        task = tracker.task
        tracker.feed(event)
        managed.feed(event)
        if report:
            if tracker.task != task:
                report.status(f"{tracker.play} / {tracker.task}")
            if event.get("event", "").startswith("runner_on_"):
                report.progress(tracker.tasks_started, **_progress_data(tracker, started))
        return True  # keep the event in the run directory

    inventory = Hosts.from_inventory(yaml.safe_load(target.inventory.read_text()) or {})
    hosts = list(inventory.hosts)
    use_mitogen = mitogen_enabled() if mitogen is None else mitogen
    if use_mitogen and first_contact.records_at_first_contact(target.ssh_config):
        report.status("first contact: recording the host keys of nodes not reached before")
        first_contact.make(target.ssh_config, hosts)

    given = dict(extravars or {})
    if given:
        atomic.write_json(run_dir / "extravars.json", secrets.redacted(given))
    label = _label(book)
    inputs = stamp.fingerprint(book, target.inventory, given, wheels=WHEELHOUSE)
    why_run: dict[str, str] = {}
    if skip_if_current and limit is None:
        report.status(f"checking whether {len(hosts)} hosts are up to date")
        why_run = {
            h: why for h, why in stamp.probe(target.ssh_config, hosts, inputs, label).items() if why
        }
        if not why_run:
            result = DeployResult(
                label,
                run_dir,
                time.monotonic() - started,
                "up to date",
                {h: HostCounts() for h in hosts},
                up_to_date=True,
            )
            atomic.write_json(run_dir / "summary.json", result.as_dict())
            report.end(result.describe(), status=result.status)
            return result
        for host, why in sorted(why_run.items()):
            report.status(f"{host}: to deploy: {why}")
    # A run that stops half-way, or runs on some hosts only, must leave none of its hosts
    # claiming inputs it was not wholly deployed from. The hosts a limit leaves out keep
    # theirs: they did not change, and their stamps name the inventory they were deployed with.
    for host, why in stamp.clear(target.ssh_config, _run_on(inventory, limit)).items():
        report.warning(f"{host}: could not clear its deploy record ({why})")
    with secrets.private_vars_file(given) as vars_file:
        config = RunnerConfig(
            private_data_dir=str(run_dir),
            artifact_dir=str(run_dir),
            ident="ansible",
            project_dir=str(paths.REPO_ROOT),
            playbook=str(book),
            inventory=str(target.inventory),
            limit=limit,
            # A file's name on the command line, not the values (see elastic.deploy.secrets).
            cmdline=f"-e @{vars_file}",
            envvars={**_environment(use_mitogen), **fact_cache_environment(target.fact_cache)},
            # Not "jsonfile": ansible-runner would then choose the plugin and its directory.
            fact_cache_type=FACT_CACHE_PLUGIN,
            quiet=True,
            suppress_env_files=True,
        )
        config.prepare()
        # ansible-runner starts from the whole environment and records it in the run directory.
        config.env = secrets.scrub_environment(config.env)
        runner = Runner(config, event_handler=on_ansible_event, cancel_callback=signal_handler())
        runner.run()
    result = DeployResult(
        playbook=label,
        run_dir=run_dir,
        elapsed_s=time.monotonic() - started,
        status=str(runner.status),
        hosts=tracker.final(),
        why_run=why_run,
    )
    atomic.write_json(run_dir / "summary.json", result.as_dict())
    succeeded = runner.status == "successful" and not result.failed
    if succeeded and limit is None:
        kept = {h: managed.of(h) for h in hosts}
        for host, why in stamp.record(target.ssh_config, hosts, inputs, label, kept).items():
            report.warning(f"{host}: could not record its deploy ({why}): the next one runs")
    report.end(result.describe(), **_progress_data(tracker, started), status=result.status)
    if not succeeded:
        failures = tracker.fatal_failures()
        raise DeployError(
            _failure_report(target, failures, runner, run_dir),
            [_task_failure(f) for f in failures],
            str(run_dir),
        )
    return result


def _run_on(inventory: Hosts, limit: str | None) -> list[str]:
    """The hosts a run with ``limit`` may change: every host when the limit uses more of
    Ansible's pattern language (``!``, ``&``, ``:``) than ptc's selectors."""
    if limit is None:
        return list(inventory.hosts)
    try:
        return select(limit, inventory)
    except PtcError:
        return list(inventory.hosts)


def _label(book: Path) -> str:
    return str(book.relative_to(paths.REPO_ROOT) if book.is_relative_to(paths.REPO_ROOT) else book)


def _progress_data(tracker: Tracker, started: float) -> dict[str, Any]:
    return {
        "play": tracker.play,
        "task": tracker.task,
        "tasks": tracker.tasks_started,
        "elapsed_s": time.monotonic() - started,
        "hosts": {h: c.as_dict() for h, c in sorted(tracker.hosts.items())},
    }


def _task_failure(f: Failure) -> TaskFailure:
    return TaskFailure(f.host, f.task, f.message, f.play, f.unreachable)


def fact_cache_environment(directory: Path) -> dict[str, str]:
    """Ansible's settings for the experiment's fact cache: the repository's ptc_facts plugin
    (jsonfile's files, decoded once per run) in ``directory``, kept across runs."""
    return {
        "ANSIBLE_CACHE_PLUGIN": FACT_CACHE_PLUGIN,
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(directory),
    }


def mitogen_enabled() -> bool:
    """Whether runs use mitogen's strategy: yes unless PTC_MITOGEN is 0, false, no or off."""
    return os.environ.get(MITOGEN_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def mitogen_strategy_dir() -> Path | None:
    """mitogen's strategy plugins, or None when mitogen is not installed."""
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "plugins" / "strategy"


def _environment(mitogen: bool = True) -> dict[str, str]:
    env = {
        "ANSIBLE_CONFIG": str(paths.REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(paths.REPO_ROOT / "roles"),
        # ansible-runner starts the ansible-playbook it finds first on PATH: this Python's.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_NOCOLOR": "1",
        # ansible-runner turns host key checking off unless told: the inventory decides how.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        # plugins/callback/ptc_warm.py: filters, tests and action plugins loaded before the
        # workers fork (ansible-runner adds its own callback directory to this one).
        "ANSIBLE_CALLBACK_PLUGINS": str(paths.REPO_ROOT / "plugins" / "callback"),
        "ANSIBLE_CALLBACKS_ENABLED": "ptc_warm",
    }
    strategies = mitogen_strategy_dir() if mitogen else None
    if strategies is not None:
        # One persistent Python per node runs every task (no module upload, no new SSH
        # session per task); plays keep linear's order and handler semantics. ptc's wrapper
        # of mitogen_linear leaves out mitogen's CPU pinning on small controllers
        # (plugins/strategy/ptc_mitogen_linear.py).
        env["ANSIBLE_STRATEGY_PLUGINS"] = os.pathsep.join([str(STRATEGY_DIR), str(strategies)])
        env["ANSIBLE_STRATEGY"] = STRATEGY
    return env


def _failure_report(target: Target, failures: list[Failure], runner: Any, run_dir: Path) -> str:
    lines = [f"deploy of {target.name} failed ({runner.status}, rc={runner.rc})"]
    if not failures:
        lines.append("  no task failed: see the log for the reason")
    for failure in failures:
        what = "unreachable" if failure.unreachable else "failed"
        lines.append(f"  {failure.host}: task {failure.task!r} {what} (play {failure.play!r}):")
        lines += [f"    {line}" for line in failure.message.splitlines()[:20]]
        unit = failure.unit
        if unit:
            lines.append(f"  journalctl -u {unit} -n {JOURNAL_LINES} on {failure.host}:")
            lines += [f"    {line}" for line in journal(target, failure.host, unit).splitlines()]
    lines.append(f"  log: {run_dir / 'ansible' / 'stdout'}")
    return "\n".join(lines)


def journal(target: Target, host: str, unit: str, lines: int = JOURNAL_LINES) -> str:
    """The last journal lines of a unit on a node, over SSH as the inventory reaches it."""
    command = f"journalctl --no-pager -o short-iso -n {lines} -u {unit}"
    try:
        done = ssh.execute(target.ssh_config, host, command, timeout=30)
    except RemoteTimeout:
        return "(journalctl over ssh timed out)"
    text = done.text.strip() or done.error_text.strip()
    return text or "(journal is empty)"
