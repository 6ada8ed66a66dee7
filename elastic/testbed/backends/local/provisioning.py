"""The local testbed's provisioning limits: at most K nodes provisioned at once and R starting
in any minute, across every experiment on the host, and of those at most F full provisionings
(a fresh disk: reload, allocate) starting in any minute. Multiverse's vCenter allowed
``MULTIVERSE_FULL_PER_MINUTE`` full clones a minute per parent and did not limit instant ones;
a real site has such limits, and ptc's users should see them at work.

Provisioning is what makes a node ready for a job: power on (instant: the disk is kept),
reload, allocate (full). A request for
more nodes than the limits allow goes in parts. Requests beyond the limits wait their turn in
the order they came (a ticket each), never dropped; while they wait, the queue is on disk for
`ptc testbed show` and `ptc elastic status` to show. Every provisioning that ran is a line of
``provisioning.jsonl`` (when it asked, how long it waited for a slot, how long the testbed
took), the first part of a resume's overhead.

State lives beside the testbed's settings, in the machine-wide testbed directory::

    provisioning.json   {"next": N, "waiting": [...], "running": [...],
                         "starts": [[t, n, full]...]}
    provisioning.jsonl  one line per finished provisioning
    provisioning.lock   flock'd while the state is read and written

An entry whose process is gone (pid and start time) is dropped on the next read, so a killed
provisioning frees its slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic import atomic, processes
from elastic.events import OnEvent, Reporter
from elastic.testbed.backends.local import capacity

WINDOW_S = 60.0
# Multiverse's vCenter's full clones a minute per parent: the limit worth trying F at. No limit
# is set by default; this is what `ptc testbed set --full-provisions-per-minute` suggests.
MULTIVERSE_FULL_PER_MINUTE = 15
POLL_S = 0.5
LOG_NAME = "provisioning.jsonl"
# The actions that give a node a fresh disk, and so new host keys: Multiverse's full clones.
FULL_ACTIONS = ("reload", "allocate")


def is_full(action: str) -> bool:
    """``action`` (a provisioning's, or a control request's) makes a fresh disk."""
    return action in FULL_ACTIONS


@dataclass(frozen=True)
class Limits:
    concurrency: int | None  # nodes at once
    per_minute: int | None  # nodes starting in any WINDOW_S
    full_per_minute: int | None = None  # of those, full provisionings

    @property
    def part(self) -> int | None:
        """The most nodes one request provisions at a time (of an instant action)."""
        bounds = [b for b in (self.concurrency, self.per_minute) if b is not None]
        return min(bounds) if bounds else None

    def part_of(self, action: str) -> int | None:
        """The most nodes one request of ``action`` provisions at a time."""
        bounds = [self.part, self.full_per_minute if is_full(action) else None]
        given = [b for b in bounds if b is not None]
        return min(given) if given else None

    def describe(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"{self.concurrency} at once")
        if self.per_minute is not None:
            parts.append(f"{self.per_minute} a minute")
        if self.full_per_minute is not None:
            parts.append(f"{self.full_per_minute} full (reload, allocate) a minute")
        return ", ".join(parts) or "no limit"

    def as_json(self) -> dict[str, int | None]:
        return {
            "concurrency": self.concurrency,
            "per_minute": self.per_minute,
            "full_per_minute": self.full_per_minute,
        }


def limits() -> Limits:
    now = capacity.settings()
    return Limits(
        now.provision_concurrency, now.provisions_per_minute, now.full_provisions_per_minute
    )


@dataclass(frozen=True)
class Entry:
    """A provisioning request, waiting for its turn or running."""

    ticket: int
    experiment: str
    action: str
    nodes: tuple[str, ...]
    since: float  # wall clock: when it asked (waiting) or started (running)
    pid: int
    started: int | None  # the process's start time, against a reused pid

    def as_json(self) -> dict[str, Any]:
        return {
            "ticket": self.ticket,
            "experiment": self.experiment,
            "action": self.action,
            "nodes": list(self.nodes),
            "since": self.since,
            "pid": self.pid,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Entry:
        return cls(
            int(raw["ticket"]),
            str(raw["experiment"]),
            str(raw["action"]),
            tuple(str(n) for n in raw["nodes"]),
            float(raw["since"]),
            int(raw["pid"]),
            None if raw.get("started") is None else int(raw["started"]),
        )


@dataclass
class Queue:
    next: int
    waiting: list[Entry]
    running: list[Entry]
    # (when, nodes, full) of provisionings started in the window
    starts: list[tuple[float, int, bool]]

    def running_nodes(self) -> int:
        return sum(len(e.nodes) for e in self.running)

    def started_in_window(self, now: float, full_only: bool = False) -> int:
        return sum(
            n for t, n, full in self.starts if now - t < WINDOW_S and (full or not full_only)
        )

    def fits(self, count: int, bounds: Limits, now: float, full: bool = False) -> bool:
        if bounds.concurrency is not None and self.running_nodes() + count > bounds.concurrency:
            return False
        full_bound = bounds.full_per_minute if full else None
        if full_bound is not None and self.started_in_window(now, True) + count > full_bound:
            return False
        return bounds.per_minute is None or self.started_in_window(now) + count <= bounds.per_minute

    def as_json(self) -> dict[str, Any]:
        return {
            "next": self.next,
            "waiting": [e.as_json() for e in self.waiting],
            "running": [e.as_json() for e in self.running],
            "starts": [[t, n, full] for t, n, full in self.starts],
        }


def _paths() -> tuple[Path, Path, Path]:
    base = capacity.directory()
    return base / "provisioning.json", base / "provisioning.lock", base / LOG_NAME


def log_path() -> Path:
    return _paths()[2]


@contextlib.contextmanager
def _locked() -> Iterator[Queue]:
    """The queue under the lock, pruned of the dead and of starts out of the window; written
    back atomically when the block ends."""
    state, lock, _ = _paths()
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        queue = _pruned(_read(state), time.time())
        yield queue
        atomic.write_json(state, queue.as_json())
    finally:
        os.close(fd)


def _read(path: Path) -> Queue:
    try:
        raw = json.loads(path.read_text())
        return Queue(
            int(raw["next"]),
            [Entry.from_json(e) for e in raw["waiting"]],
            [Entry.from_json(e) for e in raw["running"]],
            # a start from before full ones were told apart counts as full: never too few
            [(float(s[0]), int(s[1]), bool(s[2]) if len(s) > 2 else True) for s in raw["starts"]],
        )
    except FileNotFoundError:
        return Queue(1, [], [], [])
    except (ValueError, KeyError, TypeError):
        # a torn file (the writes are atomic, so only a hand edit) holds no slot
        return Queue(1, [], [], [])


def _pruned(queue: Queue, now: float) -> Queue:
    def live(e: Entry) -> bool:
        return processes.alive(e.pid, e.started)

    return Queue(
        queue.next,
        [e for e in queue.waiting if live(e)],
        [e for e in queue.running if live(e)],
        [(t, n, full) for t, n, full in queue.starts if now - t < WINDOW_S],
    )


def snapshot() -> Queue:
    """The queue now (without waiting for anything)."""
    state, _, _ = _paths()
    if not state.parent.is_dir():
        return Queue(1, [], [], [])
    return _pruned(_read(state), time.time())


@dataclass(frozen=True)
class Slot:
    """A granted provisioning: how long it waited for its turn."""

    ticket: int
    waited_s: float


@contextlib.contextmanager
def slot(
    experiment: str,
    action: str,
    nodes: Sequence[str],
    on_event: OnEvent | None = None,
    *,
    bounds: Limits | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Slot]:
    """Wait for the turn of ``nodes`` (no more than the limits allow at once), hold it for the
    block, then log the provisioning. Waiting is reported once, with the queue ahead."""
    bounds = bounds if bounds is not None else limits()
    pid = os.getpid()
    asked = time.time()
    with _locked() as queue:
        ticket = queue.next
        queue.next += 1
        mine = Entry(
            ticket, experiment, action, tuple(nodes), asked, pid, processes.start_time(pid)
        )
        queue.waiting.append(mine)
    report = Reporter("provisioning", on_event)
    told = False
    try:
        while True:
            with _locked() as queue:
                now = time.time()
                first = min(queue.waiting, key=lambda e: e.ticket, default=None)
                if (
                    first is not None
                    and first.ticket == ticket
                    and queue.fits(len(nodes), bounds, now, is_full(action))
                ):
                    queue.waiting = [e for e in queue.waiting if e.ticket != ticket]
                    queue.running.append(
                        Entry(ticket, experiment, action, tuple(nodes), now, pid, mine.started)
                    )
                    queue.starts.append((now, len(nodes), is_full(action)))
                    break
                ahead = [e for e in queue.waiting if e.ticket < ticket]
                busy = queue.running_nodes()
            if not told:
                report.status(
                    f"{experiment}: {action} {', '.join(nodes)} waits for a provisioning slot "
                    f"({bounds.describe()}; {busy} nodes provisioning, {len(ahead)} requests "
                    "ahead)",
                    experiment=experiment,
                    nodes=list(nodes),
                    ahead=len(ahead),
                )
                told = True
            sleep(POLL_S)
    except BaseException:
        with _locked() as queue:
            queue.waiting = [e for e in queue.waiting if e.ticket != ticket]
        raise
    granted = Slot(ticket, now - asked)
    outcome = "failed"
    try:
        yield granted
        outcome = "done"
    finally:
        ended = time.time()
        with _locked() as queue:
            queue.running = [e for e in queue.running if e.ticket != ticket]
            _log(
                {
                    "ticket": ticket,
                    "experiment": experiment,
                    "action": action,
                    "nodes": list(nodes),
                    "asked": asked,
                    "started": now,
                    "ended": ended,
                    "waited_s": round(now - asked, 3),
                    "seconds": round(ended - now, 3),
                    "outcome": outcome,
                    "limits": bounds.as_json(),
                }
            )


def _log(record: dict[str, Any]) -> None:
    """One line, appended under the queue's lock (one write, so lines never interleave)."""
    with log_path().open("a") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")


def parts(
    nodes: Sequence[str], bounds: Limits | None = None, action: str = "power on"
) -> list[list[str]]:
    """``nodes`` in the parts one request of ``action`` provisions at a time, in order."""
    size = (bounds if bounds is not None else limits()).part_of(action)
    chosen = list(nodes)
    if size is None or len(chosen) <= size:
        return [chosen] if chosen else []
    return [chosen[i : i + size] for i in range(0, len(chosen), size)]


def history(since: float = 0.0) -> list[dict[str, Any]]:
    """The logged provisionings that asked at or after ``since`` (wall clock), oldest first."""
    path = log_path()
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash mid-write
        if isinstance(record, dict) and float(record.get("asked", 0)) >= since:
            out.append(record)
    return out
