"""Tokens: one for the administrator, one per partition, each in its own root-only file.

``<dir>/admin.token`` and ``<dir>/partition-<name>.token`` (mode 0600, the directory 0700),
generated on first need with ``secrets.token_urlsafe``. The state document never holds a token,
so status output, the event log and a replicated store cannot leak one; nothing here logs one.
A request presents ``Authorization: Bearer <token>``; it is compared with every known token in
constant time (``hmac.compare_digest`` on each, no early exit).
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


@dataclass(frozen=True)
class Principal:
    """Who is calling: the administrator, or one partition (``name``)."""

    name: str
    admin: bool = False

    def describe(self) -> str:
        return "admin" if self.admin else f"partition {self.name}"

    def require_admin(self, action: str) -> None:
        if not self.admin:
            raise Forbidden(f"{self.describe()} may not {action}; it needs the admin token")

    def require_partition(self, partition: str, action: str, *, admin_ok: bool = True) -> None:
        if self.admin and admin_ok:
            return
        if self.admin or self.name != partition:
            raise Forbidden(
                f"{self.describe()} may not {action} of partition {partition}", "partition"
            )


class Tokens:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._cache: dict[str, str] = {}

    def _path(self, key: str) -> Path:
        name = "admin.token" if key == ADMIN else f"partition-{key}.token"
        return self.directory / name

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
        """The token for ``key`` (``admin`` or a partition name), made if missing."""
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

    def authenticate(self, presented: str | None, partitions: list[str]) -> Principal:
        if not presented:
            raise Unauthenticated("no token: send 'Authorization: Bearer <token>'")
        found: Principal | None = None
        candidates = [(ADMIN, Principal(ADMIN, admin=True))]
        candidates += [(name, Principal(name)) for name in partitions]
        given = presented.encode()
        for key, principal in candidates:
            token = self.get(key)
            if token is None:
                continue
            if hmac.compare_digest(given, token.encode()) and found is None:
                found = principal
        if found is None:
            raise Unauthenticated("the token matches no admin or partition")
        return found
