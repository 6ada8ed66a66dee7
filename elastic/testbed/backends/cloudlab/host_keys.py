"""Forgetting a reloaded CloudLab node's old host key, on purpose.

CloudLab nodes are made by the aggregate, so ptc cannot read their host keys beforehand: the
experiment's inventory takes a node's key at first contact (``accept-new``) and refuses one
that changes. A reload writes a fresh disk and with it a fresh host key, so the old entry must
go, or every later connection is refused as a possible impostor. Only the reloaded nodes'
entries are removed; the next connection records the new key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from pathlib import Path

from elastic import atomic
from elastic.testbed.known_hosts import host_pattern


def _names(field: str) -> list[str]:
    return field.split(",")


def _hashed_match(field: str, pattern: str) -> bool:
    # OpenSSH's HashKnownHosts form: |1|base64(salt)|base64(HMAC-SHA1(salt, host))
    parts = field.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt = base64.b64decode(parts[2])
        digest = base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    mine = hmac.new(salt, pattern.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(mine, digest)


def _matches(line: str, pattern: str) -> bool:
    fields = line.split()
    if not fields or line.lstrip().startswith("#"):
        return False
    names = fields[1] if fields[0].startswith("@") and len(fields) > 1 else fields[0]
    return pattern in _names(names) or _hashed_match(names, pattern)


def forget(known_hosts: Path, host: str, port: int) -> int:
    """Remove every entry for ``host`` on ``port``; return how many went. Written atomically."""
    if not known_hosts.is_file():
        return 0
    pattern = host_pattern(host, port)
    lines = known_hosts.read_text().splitlines()
    kept = [line for line in lines if not _matches(line, pattern)]
    removed = len(lines) - len(kept)
    if removed:
        atomic.write_text(known_hosts, "".join(f"{line}\n" for line in kept))
        known_hosts.chmod(0o600)
    return removed
