"""Thin, typed access to the podman CLI with the project's containers.conf."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from elastic.errors import TestbedError

CONTAINERS_CONF = Path(__file__).with_name("containers.conf")
# What ptc labels its containers with: the experiment, the node (client_id), and the
# testbed directory whose machines they count as.
EXPERIMENT_LABEL = "io.ptc.experiment"
NODE_LABEL = "io.ptc.node"
TESTBED_LABEL = "io.ptc.testbed"
# On a machine that stands for an instance of a FAKE EC2 region (``fake_ec2``): its instance id.
FAKE_EC2_INSTANCE_LABEL = "io.ptc.fake-ec2-instance"


def container_name(experiment: str, node: str) -> str:
    """The container that is ``node`` of ``experiment``."""
    return f"ptc-{experiment}-{node}"


def env() -> dict[str, str]:
    environ = dict(os.environ)
    environ.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    return environ


def run(
    *args: str, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            ["podman", *args],
            env=env(),
            input=input.decode() if input is not None else None,
            capture_output=True,
            text=True,
        )
    except FileNotFoundError as err:
        raise TestbedError("podman is not installed: run `make setup`") from err
    if check and proc.returncode != 0:
        raise TestbedError(
            f"podman {' '.join(args[:2])} failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def image_exists(ref: str) -> bool:
    return run("image", "exists", ref, check=False).returncode == 0


def inspect(name: str) -> dict[str, Any] | None:
    proc = run("container", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data: list[dict[str, Any]] = json.loads(proc.stdout)
    return data[0] if data else None


def states_of(experiment: str) -> dict[str, str]:
    """Container name -> podman's word for its state (``running``, ``exited``, ``created``, ...)
    for every container labelled as ``experiment``'s, from one podman process: the Slurm
    client asks for its pool's states every 15 s while it has free nodes at rest, and an
    inspect per node cost one process each."""
    proc = run("ps", "-a", "--filter", f"label={EXPERIMENT_LABEL}={experiment}", "--format", "json")
    found: dict[str, str] = {}
    for entry in json.loads(proc.stdout or "[]") or []:
        for name in entry.get("Names") or []:
            found[str(name)] = str(entry.get("State", "unknown"))
    return found


def containers_of(experiment: str) -> list[str]:
    """The names of every container labelled as ``experiment``'s, running or not."""
    return list(states_of(experiment))


def exec_(container: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run("exec", container, *cmd, check=check)
