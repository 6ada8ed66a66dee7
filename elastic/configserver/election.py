"""One active instance among several (the elastic manager on every config_server node), elected
with a lease-guarded key in etcd.

A candidate grants itself a lease of ``ttl`` seconds and creates the leader key attached to it,
only if the key does not exist (one transaction). The winner keeps the lease alive; when it
dies or is cut off, the lease expires within ``ttl`` and etcd deletes the key, and the next
candidate's transaction succeeds. The key's create revision identifies the term: every write the
leader makes carries :meth:`LeaseElection.guard` (``create_revision(key) == mine``), so a deposed
leader's writes fail even if it has not yet noticed (see ``EtcdStore(guard=...)``). A leader
that cannot renew its lease before it would expire calls ``on_lost`` and stops leading at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from elastic.configserver.client import (
    EtcdClient,
    compare_create_revision,
    op_get,
    op_put,
    parse_range,
)
from elastic.configserver.errors import ConfigServerError

DEFAULT_KEY = "/ptc/manager/leader"


class LeaseElection:
    def __init__(
        self,
        client: EtcdClient,
        identity: str,
        key: str = DEFAULT_KEY,
        ttl: int = 2,
        on_lost: Callable[[], None] | None = None,
        poll_s: float = 0.1,
    ) -> None:
        self.client = client
        self.identity = identity
        self.key = key
        self.ttl = ttl
        self.on_lost = on_lost
        self.poll_s = poll_s
        self.revision = 0  # the leader key's create revision while we lead
        self.lease = 0
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._renewed = 0.0
        self._keeper: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        """True only while the lease is surely alive (renewed less than ``ttl`` ago)."""
        return self._leading.is_set() and time.monotonic() - self._renewed < self.ttl

    def guard(self) -> list[dict[str, Any]]:
        """Comparisons that hold only while this term lasts (for EtcdStore)."""
        return [compare_create_revision(self.key, "=", self.revision)]

    def leader(self) -> str | None:
        kv = self.client.get(self.key)
        return kv.text if kv else None

    def campaign(self, timeout: float | None = None) -> bool:
        """Block until elected (True), or until ``timeout`` passes or :meth:`abandon` /
        :meth:`resign` is called (False). May be called again after the lease was lost."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            try:
                if self._try_once():
                    return True
            except ConfigServerError:
                pass  # no quorum now: try again
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._stop.wait(self.poll_s)
        return False

    def _try_once(self) -> bool:
        # A cheap local read first: while someone leads, a standby sends no write at all.
        if self.client.get(self.key, serializable=True) is not None:
            return False
        sent = time.monotonic()  # the lease runs from no earlier than this
        if not self.lease or self.client.lease_keepalive(self.lease) <= 0:
            sent = time.monotonic()
            self.lease = self.client.lease_grant(self.ttl)
        result = self.client.txn(
            [compare_create_revision(self.key, "=", 0)],
            [op_put(self.key, self.identity, lease=self.lease), op_get(self.key)],
        )
        if not result.succeeded:
            return False
        kv = parse_range(result.responses[1]["response_range"]).kvs[0]
        self.revision = kv.create_revision
        self._renewed = sent
        self._leading.set()
        self._keeper = threading.Thread(target=self._keep, name="lease-keeper", daemon=True)
        self._keeper.start()
        return True

    def _keep(self) -> None:
        interval = self.ttl / 3
        while self._leading.is_set() and not self._stop.wait(interval):
            sent = time.monotonic()
            try:
                alive = self.client.lease_keepalive(self.lease) > 0
            except ConfigServerError:
                alive = time.monotonic() - self._renewed < self.ttl
                if alive:
                    continue  # try again before the lease could have expired
            if alive:
                self._renewed = sent
                continue
            self._lose()
            return

    def _lose(self) -> None:
        if self._leading.is_set():
            self._leading.clear()
            lease, self.lease = self.lease, 0
            # The lease may still be alive in etcd (renewals failed while etcd elected a leader,
            # which extends every lease): give it up, so that the next campaign is not held up.
            with contextlib.suppress(ConfigServerError):
                self.client.lease_revoke(lease)
            if self.on_lost:
                self.on_lost()

    def abandon(self) -> None:
        """Stop renewing without revoking (as if this node died): the lease runs out."""
        self._stop.set()
        self._leading.clear()

    def resign(self) -> None:
        """Give up leadership at once (revoke the lease: the key goes with it)."""
        self._stop.set()
        if self.lease:
            with contextlib.suppress(ConfigServerError):
                self.client.lease_revoke(self.lease)
        self._leading.clear()
        self.lease = 0
