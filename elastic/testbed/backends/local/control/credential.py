"""The per-experiment credential: made once with ``secrets``, kept in a root-only file.

The node reads the file through its mount; the service reads it once at start and keeps only
its SHA-256 digest, against which a presented credential is compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from elastic import atomic


def ensure(path: Path) -> None:
    """Write a fresh credential at ``path`` (mode 0600) unless one is there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if not path.is_file():
        atomic.write_text(path, secrets.token_urlsafe(32) + "\n", mode=0o600)


def read(path: Path) -> str:
    return path.read_text().strip()


def digest(credential: str) -> bytes:
    return hashlib.sha256(credential.encode()).digest()


def matches(presented: str, expected_digest: bytes) -> bool:
    # Digests of equal length compared with compare_digest: no timing hint about the secret.
    return hmac.compare_digest(digest(presented), expected_digest)
