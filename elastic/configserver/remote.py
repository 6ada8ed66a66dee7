"""Commands and copies on an experiment's nodes, over the experiment's SSH configuration, for
the configuration-server operations that work member by member (restore, re-keying)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from elastic.errors import RemoteError, RemoteTimeout
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
    shown = label or command
    try:
        proc = subprocess.run(
            ["ssh", "-F", str(exp.ssh_config_path), "-o", "BatchMode=yes", host, command],
            input=stdin if stdin is not None else b"", capture_output=True, timeout=timeout,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        raise RemoteTimeout(
            f"{host}: `{shown}` did not finish in {timeout:.0f} s",
            host=host, command=command, timeout_s=timeout,
        ) from err  # fmt: skip
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        err_text = proc.stderr.decode(errors="replace")
        raise RemoteError(
            f"{host}: `{shown}` failed ({proc.returncode}): {(err_text or out).strip()[-600:]}",
            host=host, command=command, returncode=proc.returncode, output=out,
        )  # fmt: skip
    return out


def copy(exp: Experiment, host: str, local: Path, remote: str) -> None:
    proc = subprocess.run(
        ["scp", "-q", "-F", str(exp.ssh_config_path), "-o", "BatchMode=yes",
         str(local), f"{host}:{remote}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RemoteError(
            f"{host}: copying {local.name} failed: {proc.stderr.strip()[-300:]}",
            host=host, command=f"scp {local} {remote}", returncode=proc.returncode,
        )  # fmt: skip
