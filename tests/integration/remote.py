"""Looking at testbed nodes as a user would: SSH with the inventory's config, and podman."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic.remote import ssh as seam


@functools.cache
def _shared_connections() -> dict[str, str | int]:
    """OpenSSH connection sharing for the tests' own commands: they poll nodes every few
    seconds for minutes, and a login costs ten times a command over a shared connection (see
    benchmarks/ssh_seam.py). One worker's commands run one at a time, so sshd's limit on
    sessions per connection is never reached. A master whose node is gone is given up within
    15 s. The library itself opens one connection per command."""
    where = tempfile.mkdtemp(prefix="ptc-mux-")
    atexit.register(shutil.rmtree, where, True)
    return {
        "ControlMaster": "auto",
        "ControlPath": f"{where}/%C",
        "ControlPersist": 30,
        "ServerAliveInterval": 5,
        "ServerAliveCountMax": 3,
    }


def ssh(
    expdir: Path, node: str, command: str, check: bool = True, *, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """``command`` on ``node`` through the library's SSH seam, with no stdin (a non-blocking
    stdin, CI's, must not reach the node's tools), over a shared connection per node; with
    ``fresh``, over a connection of its own (one that checks the node's host key now)."""
    done = seam.execute(
        expdir / "inventory" / "ssh_config",
        node,
        command,
        timeout=300,
        options=None if fresh else _shared_connections(),
    )
    proc = subprocess.CompletedProcess(
        [node, command], done.returncode, stdout=done.text, stderr=done.error_text
    )
    if check:
        assert proc.returncode == 0, (
            f"{node}: `{command}` failed ({proc.returncode}): {proc.stderr}"
        )
    return proc


def ssh_background(expdir: Path, node: str, command: str) -> subprocess.Popen[str]:
    """``command`` on ``node`` as :func:`ssh` runs it, started and left running: its output is
    collected with ``communicate()``."""
    return subprocess.Popen(
        seam.argv(node, command, config=expdir / "inventory" / "ssh_config"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def containers(experiment: str) -> list[str]:
    """Names of the podman containers labelled as the experiment's, sorted."""
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label=io.ptc.experiment={experiment}",
         "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(out.split())


def wait_for(what: str, check: Callable[[], Any], timeout: float, poll: float = 2.0) -> Any:
    """Poll ``check`` until it returns something true; fail naming ``what`` and the last answer."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
