"""Reaching an experiment's elastic manager from the workstation, with nothing but SSH.

The manager listens on the experiment LAN only (10.10.1.x), which a workstation cannot route to
(the local testbed keeps each LAN in a network namespace; CloudLab's LANs are private too). So
:func:`open_manager` finds the manager's node in the experiment's inventory (the first host of
``config_server``), reads its configuration (address, port) and the token it needs over SSH,
and forwards a Unix socket in a private directory to the manager's address with ``ssh -L``. The
token lives only in this process's memory: it is not written on the workstation, nor printed.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from elastic.errors import NotFoundError, RemoteError, RemoteTimeout
from elastic.manager.client import ManagerClient

MANAGER_GROUP = "config_server"
CONTROLLER_GROUP = "slurm_controller"
CONFIG = "/etc/ptc-elastic/manager.yml"


@dataclass(frozen=True)
class ManagerSite:
    """Where an experiment's manager runs: its node, LAN address, port and tokens directory."""

    node: str
    address: str
    port: int
    tokens: str

    def token_path(self, partition: str | None) -> str:
        name = "admin.token" if partition is None else f"partition-{partition}.token"
        return f"{self.tokens}/{name}"


def inventory_groups(inventory: Path) -> dict[str, list[str]]:
    try:
        doc = yaml.safe_load(inventory.read_text()) or {}
    except OSError as err:
        raise NotFoundError(f"{inventory}: {err.strerror or err} (run `ptc inventory`)") from err
    children = (doc.get("all") or {}).get("children") or {}
    return {g: sorted((v or {}).get("hosts") or {}) for g, v in children.items()}


def ssh_run(ssh_config: Path, node: str, command: str, timeout: float = 60.0) -> str:
    argv = ["ssh", "-F", str(ssh_config), "-o", "BatchMode=yes", node, command]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise RemoteTimeout(
            f"{node}: `{command}` timed out after {timeout:.0f} s",
            host=node,
            command=command,
            timeout_s=timeout,
        ) from err
    if done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise RemoteError(
            f"{node}: `{command}` failed (exit {done.returncode}): {detail}",
            host=node,
            command=command,
            returncode=done.returncode,
            output=done.stderr,
        )
    return done.stdout


def find_manager(inventory: Path, ssh_config: Path) -> ManagerSite:
    groups = inventory_groups(inventory)
    members = groups.get(MANAGER_GROUP) or []
    if not members:
        raise NotFoundError(f"{inventory}: no host in group {MANAGER_GROUP}: no elastic manager")
    node = members[0]
    try:
        text = ssh_run(ssh_config, node, f"cat {CONFIG}")
    except RemoteError as err:
        raise NotFoundError(
            f"{node}: no elastic manager configured ({CONFIG}); deploy with -e ptc_elastic=true"
        ) from err
    conf: dict[str, Any] = yaml.safe_load(text) or {}
    return ManagerSite(
        node=node,
        address=str(conf["listen"]),
        port=int(conf.get("port", 8700)),
        tokens=str(conf.get("tokens", "/etc/ptc-elastic/tokens")),
    )


class Tunnel:
    """``ssh -N -L SOCKET:ADDRESS:PORT NODE``, with the socket in a 0700 temporary directory."""

    def __init__(self, ssh_config: Path, node: str, address: str, port: int) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ptc-elastic-"))
        self.socket = self._dir / "manager.sock"
        argv = [
            "ssh", "-F", str(ssh_config), "-N", "-o", "BatchMode=yes",
            "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
            "-L", f"{self.socket}:{address}:{port}", node,
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                self.close()
                raise RemoteError(
                    f"{node}: cannot forward to the manager at {address}:{port}: {err.strip()}",
                    host=node,
                    command="ssh -L",
                    returncode=self._proc.returncode,
                )
            if time.monotonic() > deadline:
                self.close()
                raise RemoteTimeout(
                    f"{node}: the SSH forward to {address}:{port} did not come up in 30 s",
                    host=node,
                    command="ssh -L",
                    timeout_s=30.0,
                )
            time.sleep(0.05)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        shutil.rmtree(self._dir, ignore_errors=True)


@contextlib.contextmanager
def open_manager(
    inventory: Path, ssh_config: Path, partition: str | None = None
) -> Iterator[ManagerClient]:
    """A client of the experiment's manager, as the admin (``partition`` None) or as that
    partition, over an SSH forward that closes with the context."""
    site = find_manager(inventory, ssh_config)
    path = site.token_path(partition)
    try:
        token = ssh_run(ssh_config, site.node, f"cat {path}").strip()
    except RemoteError as err:
        who = "the admin" if partition is None else f"partition {partition}"
        raise NotFoundError(f"{site.node}: no token for {who} ({path})") from err
    tunnel = Tunnel(ssh_config, site.node, site.address, site.port)
    try:
        transport = httpx.HTTPTransport(uds=str(tunnel.socket))
        yield ManagerClient(f"http://{site.address}:{site.port}", token, transport=transport)
    finally:
        tunnel.close()


def slurm_states(inventory: Path, ssh_config: Path) -> dict[str, str]:
    """{node: Slurm state} from sinfo on the controller ({} when there is none)."""
    controllers = inventory_groups(inventory).get(CONTROLLER_GROUP) or []
    if not controllers:
        return {}
    out = ssh_run(ssh_config, controllers[0], "sinfo --noheader --Node --format='%N|%T|%E'")
    states: dict[str, str] = {}
    for line in out.splitlines():
        name, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if name:
            reason = reason.strip()
            states[name] = state.strip() + ("" if reason in ("", "none") else f" ({reason})")
    return states
