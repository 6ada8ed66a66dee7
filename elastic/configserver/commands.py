"""Commands and copies on an experiment's nodes, over the experiment's SSH configuration, for
the configuration-server operations that work member by member (restore, re-keying)."""

from __future__ import annotations

from pathlib import Path

from elastic.remote import ssh
from elastic.testbed.experiment import Experiment


def run(
    exp: Experiment,
    host: str,
    command: str,
    timeout: float = 120,
    stdin: bytes | None = None,
    label: str | None = None,
) -> str:
    """``command`` on ``host``; its standard output, or a RemoteError naming host and command
    (or ``label``, for a command too long to read in a message).

    ``stdin`` is how secrets reach a node: never on a command line, which other users can read.
    """
    return ssh.run(exp.ssh_config_path, host, command, timeout=timeout, stdin=stdin, label=label)


def copy(exp: Experiment, host: str, local: Path, remote: str) -> None:
    ssh.copy_to(exp.ssh_config_path, host, local, remote)
