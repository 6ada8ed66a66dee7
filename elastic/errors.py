"""What can go wrong, by kind. The CLI maps each kind to a message and an exit status.

Every message names the field, line, node, host or parameter at fault. Callers that are not the
CLI (a Slurm hook, a service) can catch a kind and act on its fields instead of parsing text.

Exit statuses: 2 bad input, 3 testbed, 4 deploy, 5 remote command, 6 remote timeout,
7 download, 130 interrupted, 1 other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PtcError(Exception):
    """Base of every error ptc reports; a failure of no more specific kind."""

    exit_code = 1


class InputError(PtcError):
    """Bad input from a person or a file: a parameter, field, trace line, name or option."""

    exit_code = 2


class NotFoundError(InputError):
    """Something named does not exist: an experiment, a node, a run, a file."""


class TestbedError(PtcError):
    """The testbed (local containers or CloudLab's aggregate) failed to do what was asked."""

    __test__ = False  # not a pytest class, despite the name
    exit_code = 3


class NodeControlError(TestbedError):
    """What powers a node (the local testbed's control service, CloudLab's portal) refused or
    failed a request, or could not be reached (``status`` None). ``status`` is the HTTP status
    of the answer: 409 means the node or experiment is busy and the same request may go through
    later; 401 and 403 a credential refused. ``node`` and ``step`` say where, when known."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        node: str | None = None,
        step: str | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.node = node
        self.step = step
        self.body = body or {}


class NoCapacity(NodeControlError):
    """The site has no room now (no free machine on the testbed, an instance capacity or limit
    error of a cloud): not the node's fault, so the node goes back to the pool powered down, and
    the site is tried again later."""


@dataclass(frozen=True)
class TaskFailure:
    """One failed (or unreachable) Ansible task on one host."""

    host: str
    task: str
    message: str
    play: str = ""
    unreachable: bool = False


class DeployError(PtcError):
    """A playbook run failed; ``failures`` says where, ``run_dir`` keeps the whole run."""

    exit_code = 4

    def __init__(
        self, message: str, failures: Sequence[TaskFailure] = (), run_dir: str | None = None
    ) -> None:
        super().__init__(message)
        self.failures = tuple(failures)
        self.run_dir = run_dir


class RemoteError(PtcError):
    """A command on a node (over SSH) failed."""

    exit_code = 5

    def __init__(
        self, message: str, *, host: str, command: str, returncode: int | None, output: str = ""
    ) -> None:
        super().__init__(message)
        self.host = host
        self.command = command
        self.returncode = returncode
        self.output = output


class RemoteTimeout(RemoteError):
    """A command on a node did not finish in time; it may still be running there."""

    exit_code = 6

    def __init__(self, message: str, *, host: str, command: str, timeout_s: float) -> None:
        super().__init__(message, host=host, command=command, returncode=None)
        self.timeout_s = timeout_s


class Interrupted(PtcError):
    """The user stopped a command (Ctrl-C); the message says what was left and how to go on."""

    exit_code = 130  # the shell's status of a command ended by SIGINT


class FetchError(PtcError):
    """A download failed (no network, a server's error) or its checksum is not the pinned one."""

    exit_code = 7

    def __init__(self, message: str, *, url: str, path: Path) -> None:
        super().__init__(message)
        self.url = url
        self.path = path  # where the file would have gone
