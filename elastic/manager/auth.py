"""Tokens: one for the administrator, one per partition, one to observe, each in its own
root-only file.

``<dir>/admin.token``, ``<dir>/partition-<name>.token`` and ``<dir>/observer.token`` (mode
0600, the directory 0700),
generated on first need with ``secrets.token_urlsafe``. The state document never holds a token,
so status output, the event log and a replicated store cannot leak one; nothing here logs one.
A request presents ``Authorization: Bearer <token>``; it is compared with every known token in
constant time (``hmac.compare_digest`` on each, no early exit).

The observer token only reads (the metrics, the status, the events): what a monitoring system
or a page showing the pool holds, so that neither can take, release or reclaim a node. Like
the administrator's, it is made when the manager starts.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from elastic.atomic import write_text
from elastic.manager.errors import Forbidden, Unauthenticated

ADMIN = "admin"
OBSERVER = "observer"
# Names no partition may take: their tokens' files are the administrator's and the observer's.
RESERVED = frozenset({ADMIN, OBSERVER})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the administrator, one partition (``name``), or the observer."""

    name: str
    admin: bool = False
    observer: bool = False

    def describe(self) -> str:
        if self.observer:
            return "the observer (read-only)"
        return "admin" if self.admin else f"partition {self.name}"

    def require_reader(self, what: str, reads: bool) -> None:
        """The observer may only call ``reads``; anyone else anything their role allows."""
        if self.observer and not reads:
            raise Forbidden(f"{self.describe()} may not {what}; its token only reads")

    def require_admin(self, action: str) -> None:
        if not self.admin:
            raise Forbidden(f"{self.describe()} may not {action}; it needs the admin token")

    def require_partition(self, partition: str, action: str, *, admin_ok: bool = True) -> None:
        if self.admin and admin_ok:
            return
        if self.admin or self.observer or self.name != partition:
            raise Forbidden(
                f"{self.describe()} may not {action} of partition {partition}", "partition"
            )


class Tokens:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._cache: dict[str, str] = {}

    def _path(self, key: str) -> Path:
        if key in (ADMIN, OBSERVER):
            return self.directory / f"{key}.token"
        return self.directory / f"partition-{key}.token"

    def _ensure_dir(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)

    def get(self, key: str) -> str | None:
        with self._lock:
            if key not in self._cache:
                try:
                    self._cache[key] = self._path(key).read_text().strip()
                except FileNotFoundError:
                    return None
            return self._cache[key]

    def ensure(self, key: str) -> str:
        """The token for ``key`` (``admin``, ``observer`` or a partition name), made if
        missing."""
        existing = self.get(key)
        if existing:
            return existing
        with self._lock:
            self._ensure_dir()
            token = secrets.token_urlsafe(32)
            write_text(self._path(key), token + "\n", mode=0o600)
            self._cache[key] = token
            return token

    def admin_path(self) -> Path:
        return self._path(ADMIN)

    def partition_path(self, name: str) -> Path:
        return self._path(name)

    def path(self, key: str) -> Path:
        """The file of ``key``'s token (``admin``, ``observer`` or a partition name)."""
        return self._path(key)

    def authenticate(self, presented: str | None, partitions: list[str]) -> Principal:
        if not presented:
            raise Unauthenticated("no token: send 'Authorization: Bearer <token>'")
        found: Principal | None = None
        candidates = [(ADMIN, Principal(ADMIN, admin=True))]
        candidates += [(OBSERVER, Principal(OBSERVER, observer=True))]
        candidates += [(name, Principal(name)) for name in partitions]
        given = presented.encode()
        for key, principal in candidates:
            token = self.get(key)
            if token is None:
                continue
            if hmac.compare_digest(given, token.encode()) and found is None:
                found = principal
        if found is None:
            raise Unauthenticated("the token matches no admin, partition or observer")
        return found
