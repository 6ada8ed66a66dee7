"""The munge key for a cloud instance joining the cluster: once, to the node it was meant for.

A new EC2 instance needs the cluster's munge key before its slurmd can talk to slurmctld, and
its user data is no place for the key (anyone allowed to describe the instance, and every process
on it, can read user data). So the resume that launches the instance issues a **join token**: a
random secret bound to the node's name, valid for ``ttl`` seconds and for one use. The token goes
in the user data; at first boot the node presents it to the Slurm client's HTTPS endpoint on the
controller (``GET /v1/join/NODE/munge.key``, ``Authorization: Bearer TOKEN``) and gets the key
back, once. A token read from the user data later is spent; one for another node, or expired, is
refused without saying which.

The tokens are kept hashed (SHA-256: the file holds nothing that would open the endpoint) in a
root-only JSON file, written atomically under a lock: the resume programs (each a process of its
own) issue them and the client's service redeems them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from elastic import atomic
from elastic.errors import InputError

# How long a join token stays good: the instance's boot until cloud-init runs the user data
# (a minute or two on EC2), with room for a slow image.
TOKEN_TTL_S = 1800.0
# The endpoint's path for a node's key (the Slurm client's service serves it).
KEY_PATH = "/v1/join/{node}/munge.key"
_NODE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def key_path(node: str) -> str:
    if not _NODE.match(node):
        raise InputError(f"join: node {node!r} is not a hostname")
    return KEY_PATH.format(node=node)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class JoinTokens:
    """The join tokens in ``path`` (root-only)."""

    def __init__(
        self, path: Path, ttl: float = TOKEN_TTL_S, clock: Callable[[], float] = time.time
    ) -> None:
        if not ttl > 0:
            raise InputError(f"join tokens: ttl {ttl!r} is not seconds > 0")
        self.path = path
        self.ttl = ttl
        self.clock = clock

    def issue(self, node: str) -> str:
        """A new token for ``node``; an earlier one of the node's is void from now on (a node
        launched again must not be joined by its old instance's user data)."""
        key_path(node)
        token = secrets.token_urlsafe(32)
        with self._locked() as tokens:
            now = self.clock()
            for digest, entry in list(tokens.items()):
                if entry["node"] == node or entry["expires"] <= now:
                    del tokens[digest]
            tokens[_digest(token)] = {"node": node, "expires": now + self.ttl}
        return token

    def redeem(self, node: str, token: str) -> bool:
        """Whether ``token`` is ``node``'s and still good; it is spent either way once it
        matched a node's token (a token tried for the wrong node is void too)."""
        digest = _digest(token)
        with self._locked() as tokens:
            entry = tokens.pop(digest, None)
            if entry is None:
                return False
            same = hmac.compare_digest(str(entry["node"]), node)
            return same and self.clock() < float(entry["expires"])

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, Any]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_name(self.path.name + ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tokens = _read(self.path)
            before = json.dumps(tokens, sort_keys=True)
            yield tokens
            if json.dumps(tokens, sort_keys=True) != before:
                text = json.dumps(tokens, sort_keys=True, indent=1) + "\n"
                atomic.write_text(self.path, text, mode=0o600)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The tokens on disk; a file that is missing or not ours reads as none (a token lost is a
    node that does not join, and its resume times out: never a key handed out)."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, dict[str, Any]] = {}
    if isinstance(raw, dict):
        for digest, entry in raw.items():
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("node"), str)
                and isinstance(entry.get("expires"), int | float)
            ):
                found[str(digest)] = {"node": entry["node"], "expires": float(entry["expires"])}
    return found


class KeyServer:
    """What the endpoint hands out: the munge key at ``key_file`` (root-only), to a node that
    presents its join token."""

    def __init__(self, tokens: JoinTokens, key_file: Path) -> None:
        self.tokens = tokens
        self.key_file = key_file

    def key_for(self, node: str, token: str) -> bytes | None:
        """The key, or None when the token is not this node's good one."""
        if not _NODE.match(node) or not token or not self.tokens.redeem(node, token):
            return None
        return self.key_file.read_bytes()
