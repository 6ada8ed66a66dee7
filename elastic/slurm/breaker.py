"""A circuit breaker per site: a site that answers with no capacity is paused, then probed.

When a site has no room (no free machine on the testbed, an instance capacity or limit error),
asking again at once fails again and holds the job back. So the site is **paused**: for
``first`` seconds the first time, doubling at each failed probe up to ``most``. While paused,
none of its nodes is resumed (Slurm runs the job on another site's nodes). Once the pause is
over the site is **probed**: one of its nodes may be resumed; if that works the site is whole
again, if it fails with no capacity again the next pause is twice as long.

The state is a small JSON file on the controller, written atomically under a lock: the programs
slurmctld runs (each resume is a process of its own) and the client's service share it, and it
outlives their restarts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from elastic import atomic

FIRST_PAUSE_S = 300.0
MOST_PAUSE_S = 1800.0


class SiteState(StrEnum):
    CLOSED = "closed"  # whole: every node may be resumed
    OPEN = "open"  # paused: no node is resumed
    PROBE = "probe"  # the pause is over: one node may be resumed to try the site


@dataclass(frozen=True)
class Pause:
    since: float  # when the site first answered with no capacity, this time round
    until: float  # the end of this pause
    backoff: float  # this pause's length: the next is twice as long (up to the most)
    reason: str  # the site's answer


class SiteBreaker:
    """The sites' pauses in ``path`` (None: in memory, for one process)."""

    def __init__(
        self,
        path: Path | None,
        first: float = FIRST_PAUSE_S,
        most: float = MOST_PAUSE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0 < first <= most:
            raise ValueError(f"site pause: first {first} s and most {most} s: 0 < first <= most")
        self.path = path
        self.first = first
        self.most = most
        self.clock = clock
        self._memory: dict[str, Pause] = {}

    def state(self, site: str) -> SiteState:
        pause = self.pauses().get(site)
        if pause is None:
            return SiteState.CLOSED
        return SiteState.OPEN if self.clock() < pause.until else SiteState.PROBE

    def pauses(self) -> dict[str, Pause]:
        """Every site paused now or due a probe."""
        with self._locked() as pauses:
            return dict(pauses)

    def trip(self, site: str, reason: str) -> Pause:
        """``site`` answered with no capacity: paused from now, ``first`` seconds the first
        time, twice the last pause after a failed probe (at most ``most``)."""
        with self._locked() as pauses:
            now = self.clock()
            last = pauses.get(site)
            if last is not None and now < last.until:
                return last  # a resume that began before the pause: the pause stands
            backoff = self.first if last is None else min(self.most, last.backoff * 2)
            since = now if last is None else last.since
            pauses[site] = Pause(since, now + backoff, backoff, reason)
            return pauses[site]

    def reset(self, site: str) -> bool:
        """``site`` resumed a node: whole again. Whether it was paused."""
        with self._locked() as pauses:
            return pauses.pop(site, None) is not None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Pause]]:
        """The pauses, read under the file's lock and written back if the block changed them."""
        if self.path is None:
            yield self._memory
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_name(self.path.name + ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pauses = _read(self.path)
            before = dict(pauses)
            yield pauses
            if pauses != before:
                atomic.write_text(
                    self.path,
                    json.dumps({s: asdict(p) for s, p in sorted(pauses.items())}, indent=1) + "\n",
                    mode=0o600,
                )


def _read(path: Path) -> dict[str, Pause]:
    """The pauses on disk; a file that is missing or not ours reads as none (a pause lost is a
    resume tried once more, never a site paused for good)."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = {}
    if isinstance(raw, dict):
        for site, fields in raw.items():
            with contextlib.suppress(KeyError, TypeError, ValueError):
                found[str(site)] = Pause(
                    since=float(fields["since"]),
                    until=float(fields["until"]),
                    backoff=float(fields["backoff"]),
                    reason=str(fields["reason"]),
                )
    return found
