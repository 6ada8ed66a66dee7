"""The testbed's side of a resume and a suspend: what "power" and "configure" mean for a node.

The programs slurmctld runs (ResumeProgram and the others) run on the controller. What they do
to a pool node's machine is the partition's ``node_operation``:

- ``power`` (the local testbed's default): the testbed powers the node off when Slurm suspends
  it and on when Slurm resumes it, through the experiment's control service (a unix socket the
  testbed mounts into the experiment's nodes, with the experiment's own credential: it can act
  on this experiment's nodes and nothing else). A powered-off node gives its memory and CPU back
  to the testbed;
- ``none``: the node stays up for the whole experiment (CloudLab's pool nodes, whose power
  the portal holds); only its Slurm life is switched.

Then, on both:

- **power on**: the node answers over SSH on the experiment LAN (a dead node fails here, with
  the reason, before any playbook runs);
- **configure**: ``ptc-playbook RESUME_PLAYBOOK --limit NODES`` from the controller; the default
  playbook (``elastic-resume.yml``) starts munge, checks the shares and starts slurmd, because
  the pool nodes carry their software from ``ptc deploy`` (as a CloudLab user would bake a disk
  image). A failed task fails exactly the hosts it failed on, and names the task;
- **power off**: slurmd stops (and stays disabled) and any leftover job step is killed; under
  ``power`` the testbed then stops the machine.

Everything goes through an injected runner (argv in, :class:`Completed` out) and an injected
control client, so the unit tests replay real ansible-playbook output without running it.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from elastic.errors import DeployError, InputError, RemoteError, TaskFailure
from elastic.remote import ssh
from elastic.testbed.control.client import ControlClient, ControlError

NODE_OPERATIONS = ("none", "power")


@dataclass(frozen=True)
class Completed:
    returncode: int | None  # None: timed out
    output: str


Run = Callable[[Sequence[str], float], Completed]


class PowerControl(Protocol):
    """The testbed's control service as the provisioner uses it (``ControlClient``)."""

    def power_on(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def power_off(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def nodes(self) -> dict[str, str]: ...


def subprocess_run(argv: Sequence[str], timeout: float) -> Completed:
    try:
        done = subprocess.run(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        out = err.stdout if isinstance(err.stdout, str) else ""
        return Completed(None, out)
    except OSError as err:
        return Completed(127, str(err))
    return Completed(done.returncode, done.stdout)


class ProvisionFailed(RemoteError):
    """Power on or off failed on some nodes; ``failures`` maps each to what happened."""

    def __init__(self, step: str, failures: dict[str, str]) -> None:
        text = "; ".join(f"{n}: {m}" for n, m in sorted(failures.items()))
        super().__init__(
            f"{step} failed on {', '.join(sorted(failures))}: {text}",
            host=",".join(sorted(failures)),
            command=step,
            returncode=None,
        )
        self.failures = dict(failures)


_TASK = re.compile(r"^TASK \[(?P<task>.*)\] \**\s*$")
_FAILED = re.compile(
    r"^(?:fatal|failed): \[(?P<host>[^\]]+?)(?: -> [^\]]+)?\](?: \(item=.*?\))?"
    r"(?:: (?P<kind>[A-Z!]+))?(?: =>\s*(?P<rest>.*))?$"
)
_RESULT = re.compile(r"^(?:ok|changed|skipping|fatal|failed|TASK|PLAY|RUNNING HANDLER)\b")
_MSG = re.compile(r'"msg": "(?P<msg>(?:[^"\\]|\\.)*)"|^\s*msg: (?P<yaml>.*)$')


def failed_tasks(output: str) -> list[TaskFailure]:
    """The failed and unreachable tasks in ansible-playbook's default output, per host: the task
    header the failure falls under, and the first ``msg`` of its result (JSON or YAML). A
    failure Ansible ignored (``...ignoring``) is not one."""
    failures: list[TaskFailure] = []
    task = ""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        m = _TASK.match(line)
        if m:
            task = m.group("task")
            continue
        f = _FAILED.match(line)
        if not f:
            continue
        body = [f.group("rest") or ""]
        for follow in lines[i + 1 :]:
            if _RESULT.match(follow) or follow.startswith("...ignoring"):
                body.append(follow)
                break
            body.append(follow)
        if body[-1].startswith("...ignoring"):
            continue
        message = ""
        for k, part in enumerate(body):
            mm = _MSG.search(part)
            if not mm:
                continue
            message = (mm.group("msg") or mm.group("yaml") or "").strip()
            if message in ("|", "|-", ">", ">-"):  # a YAML block: its indented lines
                indent = len(part) - len(part.lstrip()) + 1
                block = []
                for follow in body[k + 1 :]:
                    if follow.strip() and len(follow) - len(follow.lstrip()) < indent:
                        break
                    block.append(follow.strip())
                message = " ".join(b for b in block if b)
            message = message.strip("'\"")
            break
        unreachable = (f.group("kind") or "").startswith("UNREACHABLE")
        failures.append(TaskFailure(f.group("host"), task, message, unreachable=unreachable))
    return failures


@dataclass
class PlaybookProvisioner:
    """Pool nodes that stay up; the resume playbook configures them, power off stops slurmd."""

    playbook_command: tuple[str, ...] = ("/usr/local/sbin/ptc-playbook",)
    resume_playbook: str = "elastic-resume.yml"
    playbook_vars_file: Path | None = None
    playbook_timeout: float = 600.0
    ssh_key: Path = Path("/root/.ssh/id_ed25519")
    known_hosts: Path = Path("/var/lib/ptc-elastic/known_hosts")
    ssh_timeout: float = 20.0
    node_operation: str = "none"
    control: PowerControl | None = None
    run: Run = subprocess_run

    def __post_init__(self) -> None:
        if self.node_operation not in NODE_OPERATIONS:
            raise InputError(
                f"provisioner: node_operation: {self.node_operation!r} is not one of "
                f"{', '.join(NODE_OPERATIONS)}"
            )
        if self.node_operation == "power" and self.control is None:
            self.control = ControlClient()

    def _testbed(self, step: str, nodes: Sequence[str]) -> None:
        """Ask the testbed's control service; its refusal or failure fails the nodes it names
        (or all of them), with the service's step."""
        assert self.control is not None
        action = self.control.power_on if step == "power on" else self.control.power_off
        try:
            action(list(nodes), f"{step.replace(' ', '-')}-{uuid.uuid4()}")
        except ControlError as err:
            where = f"{step} (testbed{', ' + err.step if err.step else ''})"
            named = [err.node] if err.node is not None and err.node in nodes else list(nodes)
            raise ProvisionFailed(where, dict.fromkeys(named, str(err))) from err

    def _ssh(self, node: str, command: str) -> list[str]:
        return ssh.argv(
            f"root@{node}",
            command,
            identity=self.ssh_key,
            options={
                "IdentitiesOnly": "yes",
                # Keys the deploy knew are in the file; a node it did not see is recorded at
                # first contact; a key that changes is refused.
                "StrictHostKeyChecking": "accept-new",
                "UserKnownHostsFile": str(self.known_hosts),
                "ConnectTimeout": 10,
                "LogLevel": "ERROR",
            },
        )

    def _on_each(
        self, step: str, nodes: Sequence[str], command: str, *, tolerate: bool = False
    ) -> None:
        """``command`` on every node at once; ``tolerate``: a node SSH cannot reach (exit 255)
        is not a failure (it is already off)."""

        def one(node: str) -> tuple[str, Completed]:
            return node, self.run(self._ssh(node, command), self.ssh_timeout)

        failures: dict[str, str] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            for node, done in pool.map(one, nodes):
                if done.returncode != 0 and not (tolerate and done.returncode == 255):
                    last = done.output.strip().splitlines()[-1:] or ["no output"]
                    why = "timed out" if done.returncode is None else f"exit {done.returncode}"
                    failures[node] = f"{why}: {last[0][:200]}"
        if failures:
            raise ProvisionFailed(step, failures)

    def power_on(self, nodes: Sequence[str]) -> None:
        """Under ``power`` the testbed starts the machines; then each must answer over SSH."""
        if self.node_operation == "power":
            self._testbed("power on", nodes)
        self._on_each("power on (SSH)", nodes, "true")

    def running(self, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` whose machines the testbed runs: [] when it powers nothing."""
        if self.node_operation != "power":
            return []
        assert self.control is not None
        states = self.control.nodes()
        return [n for n in nodes if states.get(n) == "running"]

    def configure(self, nodes: Sequence[str]) -> None:
        argv = [*self.playbook_command, self.resume_playbook, "--limit", ",".join(nodes)]
        if self.playbook_vars_file is not None and self.playbook_vars_file.exists():
            argv += ["-e", f"@{self.playbook_vars_file}"]
        done = self.run(argv, self.playbook_timeout)
        if done.returncode == 0:
            return
        failures = [f for f in failed_tasks(done.output) if f.host in nodes]
        if done.returncode is None:
            message = f"{self.resume_playbook} timed out after {self.playbook_timeout:.0f} s"
        else:
            message = f"{self.resume_playbook} failed (exit {done.returncode})"
        if not failures:
            tail = " | ".join(done.output.strip().splitlines()[-3:])
            message += f": {tail[:300]}"
        raise DeployError(message, failures)

    def power_off(self, nodes: Sequence[str]) -> None:
        """slurmd stops first (a node the testbed powered off already is not reachable, and
        not a failure under ``power``); then the testbed stops the machine."""
        power = self.node_operation == "power"
        self._on_each(
            "power off",
            nodes,
            "systemctl stop slurmd; pkill -KILL -x slurmstepd; "
            "if systemctl is-active --quiet slurmd; then exit 1; fi",
            tolerate=power,
        )
        if power:
            self._testbed("power off", nodes)


def from_settings(settings: Any) -> PlaybookProvisioner:
    """The provisioner the client's configuration names (``provisioner:
    elastic.slurm.provision:from_settings``); its settings are the extra keys of the file."""
    extra: dict[str, Any] = dict(getattr(settings, "extra", {}) or {})
    known = {
        "playbook_command",
        "resume_playbook",
        "playbook_vars_file",
        "playbook_timeout",
        "ssh_key",
        "known_hosts",
        "ssh_timeout",
        "node_operation",
        "control_socket",
        "control_credential",
    }
    unknown = sorted(set(extra) - known)
    if unknown:
        raise InputError(f"provisioner: unknown setting {unknown[0]!r} (known: {sorted(known)})")
    command = extra.get("playbook_command", ["/usr/local/sbin/ptc-playbook"])
    if isinstance(command, str):
        command = [command]
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise InputError("provisioner: playbook_command: expected a list of strings")
    operation = str(extra.get("node_operation", "none"))
    control = None
    if operation == "power":
        control = ControlClient(
            Path(extra.get("control_socket", "/run/ptc-testbed/api.sock")),
            Path(extra.get("control_credential", "/run/ptc-testbed/credential")),
        )
    try:
        return PlaybookProvisioner(
            playbook_command=tuple(command),
            resume_playbook=str(extra.get("resume_playbook", "elastic-resume.yml")),
            playbook_vars_file=Path(extra["playbook_vars_file"])
            if extra.get("playbook_vars_file")
            else None,
            playbook_timeout=float(extra.get("playbook_timeout", 600.0)),
            ssh_key=Path(extra.get("ssh_key", "/root/.ssh/id_ed25519")),
            known_hosts=Path(extra.get("known_hosts", "/var/lib/ptc-elastic/known_hosts")),
            ssh_timeout=float(extra.get("ssh_timeout", 20.0)),
            node_operation=operation,
            control=control,
        )
    except (TypeError, ValueError) as err:
        raise InputError(f"provisioner: {err}") from err
