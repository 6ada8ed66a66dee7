"""Several managers, one active: leadership through an etcd lease.

Every ``config_server`` node runs a manager on the same state in etcd. Each campaigns with a
:class:`~elastic.configserver.election.LeaseElection` (a leader key attached to a lease of a few
seconds); the one that holds the key is active. :class:`ElectedLeadership` is the manager's
:class:`~elastic.manager.core.Leadership` for it:

- ``is_active`` is true only while the lease is surely alive (renewed less than its TTL ago) and
  the manager has finished taking over. The API answers every request but health and the
  schema with 503 otherwise, and the background loop does nothing, so a manager whose node
  froze, or that lost etcd, stops acting the moment its lease could have run out.
- Every write the active manager makes carries the election's guard (the leader key's create
  revision is its own), so a write a deposed manager still had in flight fails inside etcd's
  transaction (``elastic.manager.etcd_store.NotLeader``).
- On election, ``on_elected`` runs before the manager serves (the service applies its
  configuration: pool and partitions). Nothing else needs reloading: the state is read from
  etcd on every request and every tick, and reclamation deadlines are absolute times in it, so
  the next tick resumes them where the previous manager left off.
- ``active`` names the active manager (its URL, from the leader key; cached for a second) so a
  standby's 503 can point clients at it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from elastic.configserver.election import LeaseElection
from elastic.configserver.errors import ConfigServerError

log = logging.getLogger(__name__)


def identity(name: str, url: str) -> str:
    """What the leader key holds: the node's name and the URL clients reach it at."""
    return json.dumps({"name": name, "url": url}, sort_keys=True)


def parse_identity(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return str(doc.get("name", "")), str(doc.get("url", ""))


class ElectedLeadership:
    """A manager's leadership through an etcd lease; ``start`` campaigns in a thread."""

    def __init__(
        self,
        election: LeaseElection,
        *,
        on_elected: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        cache_s: float = 1.0,
    ) -> None:
        self.election = election
        self.election.on_lost = self._on_lost
        self.on_elected = on_elected
        self._clock = clock
        self._cache_s = cache_s
        self._ready = threading.Event()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active: tuple[float, str | None] = (-1e18, None)
        self.terms = 0  # how many times this manager became active

    # -- Leadership ------------------------------------------------------------------------
    def is_active(self) -> bool:
        return self._ready.is_set() and self.election.leading

    def active(self) -> str | None:
        """The active manager's URL (this one's when it leads), None when nobody leads."""
        if self.is_active():
            found = parse_identity(self.election.identity)
            return found[1] if found else None
        at, url = self._active
        now = self._clock()
        if now - at < self._cache_s:
            return url
        try:
            found = parse_identity(self.election.leader())
        except ConfigServerError:
            found = None
        url = found[1] if found else None
        self._active = (now, url)
        return url

    # -- the campaign ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="manager-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Resign (revoke the lease, so a standby takes over at once) and stop campaigning."""
        self._stop.set()
        self._ready.clear()
        self.election.resign()
        self._lost.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _on_lost(self) -> None:
        self._ready.clear()
        self._lost.set()
        log.warning("lost the lease: standing by")

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.election.campaign():
                return  # stopped
            self._lost.clear()
            log.info("elected (term %d): taking over", self.election.revision)
            try:
                if self.on_elected is not None:
                    self.on_elected()
            except Exception:  # the configuration is applied again at the next election
                log.exception("applying the configuration after the election failed")
            if self.election.leading and not self._stop.is_set():
                self.terms += 1
                self._ready.set()
            # Until the keeper says the lease is lost. Meanwhile ``is_active`` is false whenever
            # the lease could have run out (a renewal is late), and true again once renewed.
            while not self._stop.is_set() and not self._lost.wait(0.2):
                pass
            self._ready.clear()
