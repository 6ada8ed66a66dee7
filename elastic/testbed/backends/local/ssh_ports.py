"""The host ports the local testbed's nodes publish their SSH on.

Left to podman (``127.0.0.1::22``), a node's port comes from the kernel's ephemeral range, the
range outgoing connections take their source ports from. While the node is powered off its port
is free, any SSH client's connection to another node may take it, and the node then cannot
start again ("address already in use"). So ports are chosen here: outside the ephemeral range,
never one that another ptc container holds (running or stopped), and never one in use now.

The choice and the container's creation happen under one host-wide lock (every PTC_HOME and
testbed directory share the host's ports), so two creations at once never pick the same port.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from elastic.errors import TestbedError
from elastic.testbed.backends.local import podman

LOCK = Path("/run/lock/ptc-ssh-ports.lock")
HOST = "127.0.0.1"
# Ports below this are left to services a host is likely to run (databases, web servers).
LOWEST = 10000
HIGHEST = 65535
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range(text: str | None = None) -> range:
    """The kernel's ephemeral port range (both ends included)."""
    if text is None:
        try:
            text = EPHEMERAL.read_text()
        except OSError:
            text = "32768 60999"  # Linux's default
    low, high = (int(part) for part in text.split())
    return range(low, high + 1)


def candidates(ephemeral: range, held: Iterable[int]) -> list[int]:
    """Ports a node may publish on: outside ``ephemeral`` and not ``held``, lowest first."""
    taken = set(held)
    return [p for p in range(LOWEST, HIGHEST + 1) if p not in ephemeral and p not in taken]


def held_ports() -> set[int]:
    """Host ports published by any ptc container, running or stopped."""
    proc = podman.run(
        "ps", "-a", "--filter", f"label={podman.EXPERIMENT_LABEL}", "--format", "json"
    )
    ports: set[int] = set()
    for container in json.loads(proc.stdout or "[]"):
        for mapping in container.get("Ports") or []:
            ports.add(int(mapping["host_port"]))
    return ports


def _free_now(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def choose(
    held: Iterable[int], ephemeral: range, free_now: Callable[[int], bool] = _free_now
) -> int:
    """A port from the candidates that is free now. Random rather than lowest first, so that a
    port a removed node just gave up (which some known_hosts may still pin to that node's old
    keys) is seldom handed to a new node at once."""
    pool = candidates(ephemeral, held)
    random.shuffle(pool)
    for port in pool:
        if free_now(port):
            return port
    raise TestbedError(
        f"no free port for a node's SSH on {HOST} between {LOWEST} and {HIGHEST} outside "
        f"the ephemeral range {ephemeral.start}-{ephemeral.stop - 1}"
    )


@contextmanager
def allocated() -> Iterator[int]:
    """A port for a new node's SSH, held for the block: create the container inside it."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield choose(held_ports(), ephemeral_range())
    finally:
        os.close(fd)
