"""An experiment's own known_hosts: node host keys pinned when ptc makes the node.

A backend that makes the nodes itself (the local testbed) reads each node's public host keys
from the node before anyone connects over SSH, and ``pin`` writes them here; its inventory then
checks host keys strictly (``StrictHostKeyChecking yes``). On a testbed whose nodes are made
elsewhere (CloudLab, adopted experiments) the key is recorded at first contact
(``accept-new``). Either way a key that changes is refused, naming the node; ``ptc replace``
replaces a node's key on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elastic import atomic
from elastic.errors import TestbedError

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names ``host`` reached on ``port``."""
    return host if port == 22 else f"[{host}]:{port}"


def public_keys(text: str, node: str) -> list[str]:
    """``TYPE BASE64`` of each public key in ``text`` (the node's ssh_host_*_key.pub files)."""
    keys: list[str] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] in KEY_TYPES:
            keys.append(f"{fields[0]} {fields[1]}")
    if not keys:
        raise TestbedError(f"node {node}: no SSH host key found to pin ({text.strip()[:200]!r})")
    return keys


def pin(path: Path, host: str, port: int, keys: Sequence[str]) -> None:
    """Make ``keys`` the only ones known for ``host`` on ``port``."""
    pattern = host_pattern(host, port)
    lines = path.read_text().splitlines() if path.is_file() else []
    kept = [line for line in lines if pattern not in line.split(" ", 1)[0].split(",")]
    atomic.write_text(path, "\n".join([*kept, *(f"{pattern} {key}" for key in keys)]) + "\n")
    path.chmod(0o600)


def pinned(path: Path, host: str, port: int) -> list[str]:
    """The keys (``TYPE BASE64``) known for ``host`` on ``port``; none if the file is missing."""
    pattern = host_pattern(host, port)
    lines = path.read_text().splitlines() if path.is_file() else []
    keys = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and pattern in fields[0].split(","):
            keys.append(f"{fields[1]} {fields[2]}")
    return keys
