"""The testbed's side of a resume and a suspend: what "power" and "configure" mean for a node.

The programs slurmctld runs (ResumeProgram and the others) run on the controller. What they do
to a pool node's machine is the partition's ``node_operation``, carried out through the
experiment's control service (a unix socket the testbed mounts into the experiment's nodes,
with the experiment's own credential: it can act on this experiment's nodes and nothing else):

- ``power``: the testbed powers the node off when Slurm suspends it and on when Slurm resumes
  it; the disk is kept. A powered-off node gives its memory and CPU back to the testbed;
- ``reload``: powered off at suspend like ``power``, and given a fresh disk from the image at
  resume (CloudLab's reload): every job starts on a clean node;
- ``release``: at suspend the node is parked, its machine back in the testbed's free pool,
  where another experiment may take it; at resume it is allocated again, with its name and
  addresses and a fresh disk. A testbed with no free machine fails the resume, with the reason;
- ``none``: the node stays up for the whole experiment (CloudLab's pool nodes, whose power
  the portal holds); only its Slurm life is switched.

Then, on all of them:

- **power on**: the node answers over SSH on the experiment LAN (a dead node fails here, with
  the reason, before any playbook runs). A fresh disk has new host keys: the control service
  answers with those the testbed pinned when it made the disk, and they replace the old ones
  in the head's known_hosts files (no first-contact guess);
- **configure**: ``ptc-playbook PLAYBOOK --limit NODES`` from the controller. On a kept disk
  the default playbook (``elastic-resume.yml``) starts munge, checks the shares and starts
  slurmd, because the pool nodes carry their software from ``ptc deploy`` (as a CloudLab user
  would bake a disk image); a fresh disk gets ``elastic-provision.yml`` (site.yml's part for the
  node, then the same start). A failed task fails exactly the hosts it failed on, and names it;
- **power off**: slurmd stops (and stays disabled) and any leftover job step is killed; then
  the testbed powers off or parks the machine.

Everything goes through an injected runner (argv in, :class:`Completed` out) and an injected
control client, so the unit tests replay real ansible-playbook output without running it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from elastic import atomic, node_paths
from elastic.errors import (
    DeployError,
    InputError,
    NoCapacity,
    NodeControlError,
    RemoteError,
    TaskFailure,
)
from elastic.remote import ssh
from elastic.sites.ec2.control import Ec2Control
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.settings import check_name
from elastic.sites.ec2.userdata import SHARE_OPTIONS, ClusterUser, JoinSpec, Share
from elastic.slurm.commands import Slurm
from elastic.slurm.commands import subprocess_runner as slurm_runner
from elastic.slurm.join import JoinTokens, key_path
from elastic.slurm.sites import SiteNodes
from elastic.testbed.backends.cloudlab.portal import PortalControl, PortalSettings
from elastic.testbed.backends.local import control as testbed_control
from elastic.testbed.backends.local.control.client import ControlClient

NODE_OPERATIONS = ("none", "power", "reload", "release")
# The environment variable through which boto3 finds the controller's AWS credentials file.
AWS_CREDENTIALS_VARIABLE = "AWS_SHARED_CREDENTIALS_FILE"
# What may carry the operations out (``node_control``'s kind), the default first.
NODE_CONTROLS = ("testbed", "cloudlab_portal")
# The settings under which a resume gives the node a fresh disk (new host keys, no software).
FRESH_DISK = ("reload", "release")
# What each call to the testbed leaves a node as, when it succeeds.
_LEAVES = {
    "power on": "running",
    "reload": "running",
    "allocate": "running",
    "power off": "stopped",
    "release": "parked",
}


@dataclass(frozen=True)
class Completed:
    returncode: int | None  # None: timed out
    output: str


Run = Callable[[Sequence[str], float], Completed]


class PowerControl(Protocol):
    """What powers the pool's machines, as the provisioner uses it: the local testbed's control
    service (``ControlClient``), CloudLab's portal (``PortalControl``) or an EC2 site
    (``elastic.sites.ec2.control.Ec2Control``). ``operations``: the node operations it can
    carry out; ``check``: refuse a credential it would be refused with, and say what it
    reaches. A control may also declare ``joins_by_user_data = True``: its machines join the
    cluster by themselves at first boot (cloud-init), so the provisioner neither reaches them
    over SSH nor configures them with a playbook."""

    @property
    def operations(self) -> tuple[str, ...]: ...

    def check(self) -> str: ...

    def power_on(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def power_off(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def reload(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def release(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def allocate(self, nodes: list[str], request_id: str) -> dict[str, Any]: ...

    def nodes(self) -> dict[str, str]: ...

    def hosts(self) -> dict[str, Any]: ...


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
    """Power on or off failed on some nodes; ``failures`` maps each to what happened.
    ``capacity``: those that failed because their site had no room (``NoCapacity``): not their
    fault, they go back to the pool powered down."""

    def __init__(self, step: str, failures: dict[str, str], capacity: Iterable[str] = ()) -> None:
        text = "; ".join(f"{n}: {m}" for n, m in sorted(failures.items()))
        super().__init__(
            f"{step} failed on {', '.join(sorted(failures))}: {text}",
            host=",".join(sorted(failures)),
            command=step,
            returncode=None,
        )
        self.failures = dict(failures)
        self.capacity = frozenset(capacity) & set(failures)


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

    playbook_command: tuple[str, ...] = (node_paths.PLAYBOOK_COMMAND,)
    resume_playbook: str = "elastic-resume.yml"
    fresh_playbook: str = "elastic-provision.yml"
    deploy_playbook: str = "site.yml"
    repairs = True  # it can give a node a fresh disk (when the control can) and configure it
    # ptc-playbook's state on the head: its fact cache and the known_hosts its inventory uses.
    playbook_state_dir: Path = Path(node_paths.PLAYBOOK_STATE_DIR)
    playbook_vars_file: Path | None = None
    playbook_timeout: float = 600.0
    ssh_key: Path = Path(node_paths.MESH_KEY)
    known_hosts: Path = Path(node_paths.CLIENT_KNOWN_HOSTS)
    ssh_timeout: float = 20.0
    node_operation: str = "power"
    control: PowerControl | None = None
    # Under power: how long a request waits while another operation holds its node, and the
    # lock that makes this head's power changes one at a time (default: beside known_hosts).
    busy_timeout: float = 120.0
    lock_file: Path | None = None
    run: Run = subprocess_run
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.node_operation not in NODE_OPERATIONS:
            raise InputError(
                f"provisioner: node_operation: {self.node_operation!r} is not one of "
                f"{', '.join(NODE_OPERATIONS)}"
            )
        if self.node_operation != "none" and self.control is None:
            self.control = ControlClient()
        if self.control is not None and self.node_operation != "none":
            offered = tuple(self.control.operations)
            if self.node_operation not in offered:
                raise InputError(
                    f"provisioner: node_operation: {self.node_operation!r} is not offered by "
                    f"the node control in use (it offers {', '.join(offered)})"
                )

    @property
    def joins_by_user_data(self) -> bool:
        """Whether the nodes join the cluster by themselves at first boot (their user data),
        as the control declares: then nothing reaches them over SSH and no playbook runs on
        them; Slurm's registration within ResumeTimeout says whether a resume worked."""
        if self.node_operation == "none" or self.control is None:
            return False
        return bool(getattr(self.control, "joins_by_user_data", False))

    def check(self) -> str:
        """What powers the pool, checked now: its credential accepted and not broader than
        allowed; in words. Raises the control's error otherwise."""
        if self.node_operation == "none" or self.control is None:
            return "node_operation none: the pool's machines stay up, nothing powers them"
        return self.control.check()

    @contextlib.contextmanager
    def _power_lock(self) -> Iterator[None]:
        """One power change at a time on this head. The client's loop powering off the pool
        at rest and a hook resuming a node run in different processes: without it, a resume
        could start a node that a settle, decided a moment before, then stops under it."""
        if self.node_operation == "none":
            yield
            return
        path = self.lock_file or self.known_hosts.parent / "power.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _testbed(self, step: str, nodes: Sequence[str]) -> dict[str, Any]:
        """Ask the testbed's control service for ``step`` (a key of ``_LEAVES``); its answer.
        A node busy with another operation (409) is waited for, up to ``busy_timeout``, with a
        fresh request each time (the refused one did nothing). A refusal or failure fails, with
        the service's step, the nodes it left out of the wanted state: the one it names with
        its message, the others as left out."""
        assert self.control is not None
        action: Callable[[list[str], str], dict[str, Any]] = getattr(
            self.control, step.replace(" ", "_")
        )
        deadline = self.clock() + self.busy_timeout
        while True:
            try:
                return action(list(nodes), f"{step.replace(' ', '-')}-{uuid.uuid4()}")
            except NodeControlError as err:
                if err.status == 409 and self.clock() < deadline:
                    self.sleep(1.0)
                    continue
                where = f"{step} (testbed{', ' + err.step if err.step else ''})"
                failures = self._left_out(step, nodes, err)
                short = failures if isinstance(err, NoCapacity) else ()
                raise ProvisionFailed(where, failures, capacity=short) from err

    def _left_out(self, step: str, nodes: Sequence[str], err: NodeControlError) -> dict[str, str]:
        assert self.control is not None
        want = _LEAVES[step]
        try:
            states = self.control.nodes() if err.status is not None else {}
        except NodeControlError:
            states = {}
        failed = {
            n: str(err)
            if n == err.node or err.node is None
            else f"left {states.get(n, '?')}: {err}"
            for n in nodes
            if states.get(n) != want or n == err.node
        }
        return failed or dict.fromkeys(nodes, str(err))

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
        """The testbed starts the machines (``power``), gives them fresh disks (``reload``) or
        allocates them back (``release``: a parked node; one still held is powered on); then
        each must answer over SSH. Nodes that join by their user data are only brought up."""
        if self.joins_by_user_data:
            with self._power_lock():
                self._testbed("allocate" if self.node_operation == "release" else "power on", nodes)
            return
        if self.node_operation != "none":
            with self._power_lock():
                self._bring_up(nodes)
        self._on_each("power on (SSH)", nodes, "true")

    def _bring_up(self, nodes: Sequence[str]) -> None:
        if self.node_operation == "power":
            self._testbed("power on", nodes)
            # its disk may have been made again from the host (`ptc node reload`) since the
            # head last learnt its keys
            self._trust_pinned(nodes)
            return
        if self.node_operation == "reload":
            self._trust(self._testbed("reload", nodes), nodes)
            return
        assert self.control is not None
        states = self.control.nodes()
        parked = [n for n in nodes if states.get(n) == "parked"]
        stopped = [n for n in nodes if states.get(n) == "stopped"]
        if parked:
            self._trust(self._testbed("allocate", parked), parked)
        if stopped:
            self._testbed("power on", stopped)
        if held := [n for n in nodes if n not in parked]:
            # a node still held may have had its disk made again from the host since the
            # head last learnt its keys (a deploy allocates parked nodes back)
            self._trust_pinned(held)

    def _trust_pinned(self, nodes: Sequence[str]) -> None:
        """Ask the testbed for the keys it pinned for ``nodes`` and trust those; a node whose
        keys changed has a new disk, and its cached facts go."""
        assert self.control is not None
        try:
            pinned = self.control.hosts()
        except NodeControlError as err:
            raise ProvisionFailed("power on (host keys)", dict.fromkeys(nodes, str(err))) from err
        self._trust({"hosts": {n: pinned[n] for n in nodes if n in pinned}}, nodes, fresh=False)

    def _trust(self, answer: dict[str, Any], nodes: Sequence[str], fresh: bool = True) -> None:
        """The host keys the testbed pinned replace the old ones in the head's known_hosts
        files (the client's and ptc-playbook's), by name and LAN address. ptc-playbook's
        cached facts of a node are the old disk's and go: always after a reload or an
        allocation (``fresh``), else only when its keys changed (nothing is written then)."""
        hosts = answer.get("hosts")
        if not isinstance(hosts, dict):
            raise ProvisionFailed(
                "power on (host keys)",
                dict.fromkeys(nodes, "the control service's answer has no host keys for them"),
            )
        changed = [
            n
            for n, info in hosts.items()
            if fresh
            or known_keys(self.known_hosts, n)
            != {" ".join(str(k).split()[:2]) for k in info.get("keys", [])}
        ]
        if not changed:
            return  # files the deploy wrote stay as it wrote them
        for path in (self.known_hosts, self.playbook_state_dir / "inventory" / "known_hosts"):
            replace_host_keys(path, {n: hosts[n] for n in changed})
        for node in changed:
            (self.playbook_state_dir / "facts" / node).unlink(missing_ok=True)

    @property
    def powers(self) -> bool:
        """Whether the testbed powers the pool's machines (``running`` tells which run)."""
        return self.node_operation != "none"

    def running(self, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` whose machines the testbed would power off or park: [] when it
        does neither. Under ``release`` a stopped node still holds its machine."""
        if self.node_operation == "none":
            return []
        assert self.control is not None
        states = self.control.nodes()
        holding = ("running", "stopped") if self.node_operation == "release" else ("running",)
        return [n for n in nodes if states.get(n) in holding]

    def held_back(
        self,
        nodes: Sequence[str],
        states: Mapping[str, str] | None = None,
        demand: int = 0,
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        """None: the sites' pauses are the dispatch's (``elastic.slurm.site_dispatch``)."""
        return {}

    def lent(self, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` the node control says are lent to another experiment."""
        if self.control is None:
            return []
        states = self.control.nodes()
        return [n for n in nodes if states.get(n) == "lent"]

    def configure(self, nodes: Sequence[str]) -> None:
        if self.joins_by_user_data:
            return  # their user data configures them
        fresh = self.node_operation in FRESH_DISK
        self._playbook(self.fresh_playbook if fresh else self.resume_playbook, nodes)

    def renew(self, nodes: Sequence[str]) -> bool:
        """A fresh disk from the image for each node, its machine running after, when the node
        control can give one (True); False when it cannot (the nodes keep their disks)."""
        if self.joins_by_user_data and self.node_operation == "release":
            # a fresh disk is a new machine: the old one ended, another launched in its place
            with self._power_lock():
                self._testbed("release", nodes)
                self._testbed("allocate", nodes)
            return True
        if self.control is None or "reload" not in self.control.operations:
            return False
        with self._power_lock():
            self._trust(self._testbed("reload", nodes), nodes)
        self._on_each("reload (SSH)", nodes, "true")
        return True

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        """Make the nodes what ``ptc deploy`` made them, whatever their disks hold: the node's
        part of the deploy playbook; ``start``: then make them Slurm nodes, as a resume does.
        Nodes that join by their user data did so when their machines started."""
        if self.joins_by_user_data:
            return
        self._playbook(self.fresh_playbook if start else self.deploy_playbook, nodes)

    def _playbook(self, playbook: str, nodes: Sequence[str]) -> None:
        argv = [*self.playbook_command, playbook, "--limit", ",".join(nodes)]
        if self.playbook_vars_file is not None and self.playbook_vars_file.exists():
            argv += ["-e", f"@{self.playbook_vars_file}"]
        done = self.run(argv, self.playbook_timeout)
        if done.returncode == 0:
            return
        failures = [f for f in failed_tasks(done.output) if f.host in nodes]
        if done.returncode is None:
            message = f"{playbook} timed out after {self.playbook_timeout:.0f} s"
        else:
            message = f"{playbook} failed (exit {done.returncode})"
        if not failures:
            tail = " | ".join(done.output.strip().splitlines()[-3:])
            message += f": {tail[:300]}"
        raise DeployError(message, failures)

    def power_off(self, nodes: Sequence[str]) -> None:
        """slurmd stops first (a node the testbed powered off already is not reachable, and
        not a failure then); then the testbed stops or parks the machine."""
        with self._power_lock():
            self._power_off(nodes)

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        """Power off those of ``nodes`` that ``still`` keeps, asked once this head's power lock
        is held (no resume can start a node between the question and the power off)."""
        with self._power_lock():
            chosen = still(list(nodes))
            if chosen:
                self._power_off(chosen)
            return chosen

    def _power_off(self, nodes: Sequence[str]) -> None:
        if self.joins_by_user_data:
            # nothing reaches them over SSH: the machine ends or stops with its slurmd
            self._testbed("release" if self.node_operation == "release" else "power off", nodes)
            return
        testbed = self.node_operation != "none"
        if testbed and self.node_operation == "release":
            # a parked node has no machine to reach; one powered off is parked as it is
            assert self.control is not None
            states = self.control.nodes()
            nodes = [n for n in nodes if states.get(n) != "parked"]
            if not nodes:
                return
        self._on_each(
            "power off",
            nodes,
            "systemctl stop slurmd; pkill -KILL -x slurmstepd; "
            "if systemctl is-active --quiet slurmd; then exit 1; fi",
            tolerate=testbed,
        )
        if testbed:
            self._testbed("release" if self.node_operation == "release" else "power off", nodes)


def known_keys(path: Path, host: str) -> set[str]:
    """The keys (``type base64``) ``path`` holds for ``host`` by name."""
    if not path.is_file():
        return set()
    found = set()
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#") and host in fields[0].split(","):
            found.add(f"{fields[1]} {fields[2]}")
    return found


def replace_host_keys(path: Path, hosts: dict[str, Any]) -> None:
    """Make ``hosts`` (node -> {"addresses", "keys"}) the only keys ``path`` knows for each
    node's name and addresses; lines naming other hosts stay. Written atomically."""
    names: dict[str, list[str]] = {}
    for node, info in hosts.items():
        keys = [str(k) for k in info.get("keys", [])]
        if not keys:
            raise ProvisionFailed("power on (host keys)", {node: "the testbed pinned no host key"})
        names[node] = [node, *(str(a) for a in info.get("addresses", []))]
    stale = {n for ns in names.values() for n in ns}
    lines = path.read_text().splitlines() if path.is_file() else []
    kept = [
        line
        for line in lines
        if line.startswith("#") or not stale & set(line.split(" ", 1)[0].split(","))
    ]
    added = [
        f"{','.join(dict.fromkeys(ns))} {key}"
        for node, ns in names.items()
        for key in hosts[node]["keys"]
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, "\n".join([*kept, *added]) + "\n")


# The client's settings a provisioner takes as they are written, each to its field's type; a
# setting left out keeps the field's default, so PlaybookProvisioner's defaults are the only ones.
_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "resume_playbook": str,
    "fresh_playbook": str,
    "playbook_state_dir": Path,
    "playbook_vars_file": lambda value: Path(value) if value else None,
    "playbook_timeout": float,
    "ssh_key": Path,
    "known_hosts": Path,
    "ssh_timeout": float,
}


def from_settings(settings: Any) -> PlaybookProvisioner:
    """The provisioner the client's configuration names (``provisioner:
    elastic.slurm.provision:from_settings``); its settings are the extra keys of the file."""
    return PlaybookProvisioner(**provisioner_settings(dict(getattr(settings, "extra", {}) or {})))


def provisioner_settings(extra: dict[str, Any]) -> dict[str, Any]:
    """A :class:`PlaybookProvisioner`'s fields from the client's settings (its extra keys),
    each checked; unknown keys are refused, naming them."""
    known = {
        *_SETTINGS,
        "playbook_command",
        "node_operation",
        "control_socket",
        "control_credential",
        "node_control",
        "ec2",  # what an ec2 site's control needs from the controller (``control_of``)
    }
    unknown = sorted(set(extra) - known)
    if unknown:
        raise InputError(f"provisioner: unknown setting {unknown[0]!r} (known: {sorted(known)})")
    command = extra.get("playbook_command", list(PlaybookProvisioner.playbook_command))
    if isinstance(command, str):
        command = [command]
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise InputError("provisioner: playbook_command: expected a list of strings")
    operation = str(extra.get("node_operation", PlaybookProvisioner.node_operation))
    control = node_control(extra) if operation != "none" else None
    try:
        given = {key: convert(extra[key]) for key, convert in _SETTINGS.items() if key in extra}
    except (TypeError, ValueError) as err:
        raise InputError(f"provisioner: {err}") from err
    return {
        "playbook_command": tuple(command),
        "node_operation": operation,
        "control": control,
        **given,
    }


def control_of(site: SiteNodes, extra: dict[str, Any], where: str) -> PowerControl:
    """What powers the machines of ``site`` (of the sites file), by its provider and that
    provider's settings, the client's settings ``extra`` filling in what the site leaves out
    (the testbed's socket and credential, the portal's token file, an EC2 site's cluster and
    credentials file). ``where`` names the site in errors."""
    provider, settings = site.provider, site.settings
    if provider == "ec2":
        return ec2_control(site, extra, where)
    if provider == "local":
        return node_control({**extra, "node_control": {"kind": "testbed"}})
    if provider == "cloudlab":
        portal = dict(extra.get("node_control") or {})
        if portal.get("kind") != "cloudlab_portal" or not portal.get("token_file"):
            raise InputError(
                f"{where}: provider cloudlab: the controller holds no portal token "
                "(deploy with elastic_cloudlab_portal_token_src)"
            )
        merged = {**portal, **settings, "kind": "cloudlab_portal"}
        return PortalControl(PortalSettings.from_mapping(merged, f"{where}: cloudlab"))
    raise InputError(
        f"{where}: provider {provider}: Slurm's hooks cannot reach it yet (known: local, cloudlab)"
    )


# The settings of ``ec2`` in the client's configuration, the ones it must have first. The
# munge key's source may be ``controller`` (the client's join endpoint, ``join_url``, with a
# one-use token per launch kept in ``tokens_file``, its certificate verified with ``ca_file``),
# and slurm.conf's ``configless`` (slurmd asks slurmctld at ``conf_server``).
EC2_SETTINGS = ("cluster", "credentials_file", "munge_key", "slurm_conf")
EC2_OPTIONAL = ("join_url", "tokens_file", "ca_file", "key_file", "conf_server")
# ... and the seconds of the client's reconciliation of the sites' instances (elastic.slurm.ec2_sync).
EC2_SECONDS = ("sync_interval", "orphan_grace")
# ... and what an instance has besides Slurm, as every node: the cluster's user
# ({name, uid, gid, home}) and the NFS shares ([{server, path, options}]).
EC2_NODE = ("user", "shares")
FROM_CONTROLLER = "controller"
CONFIGLESS = "configless"


def ec2_control(site: SiteNodes, extra: dict[str, Any], where: str) -> PowerControl:
    """The control of the ec2 ``site``: its instances in the cluster ``extra["ec2"]["cluster"]``
    (their ``ptc:cluster`` tag), through boto3 with the site's region and endpoint. The AWS
    credential is the shared-credentials file the deploy put on the controller, given to boto3
    by ``AWS_SHARED_CREDENTIALS_FILE`` only: never a command line, a log or user data. An
    instance's private address becomes its Slurm node's through ``scontrol``."""
    raw = extra.get("ec2")
    if not isinstance(raw, Mapping):
        raise InputError(
            f"{where}: provider ec2: the controller has no ec2 settings (deploy with "
            "elastic_ec2_credentials_src)"
        )
    known = (*EC2_SETTINGS, *EC2_OPTIONAL, *EC2_SECONDS, *EC2_NODE)
    if unknown := sorted(set(map(str, raw)) - set(known)):
        raise InputError(f"provisioner: ec2.{unknown[0]}: not known ({', '.join(known)})")
    for key in EC2_SETTINGS:
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise InputError(f"provisioner: ec2.{key}: missing or not a string")
    for key in EC2_OPTIONAL:
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise InputError(f"provisioner: ec2.{key}: empty or not a string")
    for key in EC2_SECONDS:
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InputError(f"provisioner: ec2.{key}: {value!r} is not seconds >= 0")
    credentials = Path(raw["credentials_file"])
    if not credentials.is_file():
        raise InputError(
            f"{where}: provider ec2: the controller holds no AWS credentials at {credentials} "
            "(deploy with elastic_ec2_credentials_src)"
        )
    given = os.environ.get(AWS_CREDENTIALS_VARIABLE)
    if given and Path(given) != credentials:
        raise InputError(
            f"{where}: provider ec2: {AWS_CREDENTIALS_VARIABLE} is {given}, the configuration "
            f"says {credentials}"
        )
    # boto3 reads the file the variable names; the service's unit and the hooks' entry point
    # set it, and a process started otherwise (a check by hand) finds the same file.
    os.environ[AWS_CREDENTIALS_VARIABLE] = str(credentials)
    try:
        settings = site.ec2_settings()
        user_data = _user_data(raw)
        provider = Ec2Provider(settings)
        slurm = Slurm(slurm_runner())
        return Ec2Control(
            provider,
            check_name(raw["cluster"], "provisioner: ec2.cluster"),
            site.name,
            site.nodes,
            user_data,
            on_address=slurm.set_address,
        )
    except InputError as err:
        raise InputError(f"{where}: provider ec2: {err}") from err


def _user_data(raw: Mapping[str, Any]) -> Callable[[str], JoinSpec]:
    """Each launched node's join: where it fetches the munge key and slurm.conf, or, from the
    controller, a key endpoint with a token issued for this launch and slurmd configless."""
    conf_server = None
    if raw["slurm_conf"] == CONFIGLESS:
        conf_server = raw.get("conf_server")
        if not conf_server:
            raise InputError("provisioner: ec2.conf_server: missing (slurm_conf is configless)")
    slurm_conf = "" if conf_server else raw["slurm_conf"]
    user, shares = _node_likeness(raw)
    if raw["munge_key"] != FROM_CONTROLLER:
        fixed = JoinSpec(
            raw["munge_key"],
            slurm_conf,
            dynamic=False,
            conf_server=conf_server,
            user=user,
            shares=shares,
        )
        return lambda node: fixed
    for key in ("join_url", "tokens_file", "ca_file"):
        if not raw.get(key):
            raise InputError(f"provisioner: ec2.{key}: missing (munge_key is {FROM_CONTROLLER})")
    url = str(raw["join_url"]).rstrip("/")
    if not url.startswith("https://"):
        raise InputError(f"provisioner: ec2.join_url: {url!r} is not an https:// URL")
    try:
        ca = Path(raw["ca_file"]).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"provisioner: ec2.ca_file: cannot read it ({err.strerror})") from err
    tokens = JoinTokens(Path(raw["tokens_file"]))
    JoinSpec(url + key_path("n"), slurm_conf, conf_server=conf_server, ca_pem=ca)  # checked now

    def join(node: str) -> JoinSpec:
        return JoinSpec(
            url + key_path(node),
            slurm_conf,
            dynamic=False,
            conf_server=conf_server,
            key_token=tokens.issue(node),
            ca_pem=ca,
            user=user,
            shares=shares,
        )

    return join


def _node_likeness(raw: Mapping[str, Any]) -> tuple[ClusterUser | None, tuple[Share, ...]]:
    """The cluster's user and shares an instance gets, from ``ec2.user`` and ``ec2.shares``
    (either may be missing: the image has the user, or the cluster shares nothing)."""
    user = None
    try:
        if (given := raw.get("user")) is not None:
            if not isinstance(given, Mapping):
                raise InputError("user: expected {name, uid, gid, home}")
            if missing := sorted({"name", "uid", "gid", "home"} - set(map(str, given))):
                raise InputError(f"user.{missing[0]}: missing")
            user = ClusterUser(given["name"], given["uid"], given["gid"], given["home"])
        listed = raw.get("shares") or []
        if not isinstance(listed, list) or not all(isinstance(s, Mapping) for s in listed):
            raise InputError("shares: expected a list of {server, path}")
        shares = tuple(
            Share(s.get("server"), s.get("path"), s.get("options") or SHARE_OPTIONS) for s in listed
        )
    except InputError as err:
        raise InputError(f"provisioner: ec2.{err}") from None
    return user, shares


def node_control(extra: dict[str, Any]) -> PowerControl:
    """What powers the pool, from the client's settings: ``node_control: {kind: testbed}`` (the
    default: the local testbed's control service, at ``control_socket`` with
    ``control_credential``) or ``{kind: cloudlab_portal, url, token_file, experiment, ...}``."""
    raw = extra.get("node_control") or {"kind": "testbed"}
    if not isinstance(raw, dict):
        raise InputError("provisioner: node_control: expected a mapping with a kind")
    kind = str(raw.get("kind", NODE_CONTROLS[0]))
    if kind == "testbed":
        return ControlClient(
            Path(extra.get("control_socket", testbed_control.SOCKET)),
            Path(extra.get("control_credential", testbed_control.CREDENTIAL)),
        )
    if kind == "cloudlab_portal":
        return PortalControl(PortalSettings.from_mapping(raw, "provisioner: node_control"))
    raise InputError(
        f"provisioner: node_control: kind: {kind!r} is not one of {', '.join(NODE_CONTROLS)}"
    )
