"""Everything a run starts, written down as it starts, and taken down in reverse order.

The ledger is a file of JSON lines in the run's directory: the harness and the ResumeProgram
(a process slurmctld starts) both append to it, so a process started by either is stopped by
the harness on Ctrl-C, SIGTERM or an error. Each process is recorded with its start time (a
pid reused by another program is left alone), and every process of the run carries the run's
marker in its environment, which finds the ones nobody recorded (slurmstepd, the jobs).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

from elastic import processes

MARKER = "PTC_SCALE_RUN"


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:  # one write of one short line: appends from several processes do not interleave
            os.write(fd, line)
        finally:
            os.close(fd)

    def process(self, pid: int, what: str) -> None:
        self._append({"kind": "process", "pid": pid, "started": processes.start_time(pid),
                      "what": what})  # fmt: skip

    def directory(self, path: Path) -> None:
        self._append({"kind": "dir", "path": str(path)})

    def entries(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def marked(run: str, proc: Path = Path("/proc")) -> list[int]:
    """Processes whose environment carries ``MARKER=run``."""
    needle = f"{MARKER}={run}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def stop(pids: list[int], grace: float = 5.0, *, kill: Callable[[int, int], None] = os.kill,
         alive: Callable[[int], bool] = processes.running,
         sleep: Callable[[float], None] = time.sleep) -> list[int]:  # fmt: skip
    """SIGTERM each, SIGKILL those left after ``grace``; the pids that were signalled."""
    sent = []
    for pid in pids:
        try:
            kill(pid, signal.SIGTERM)
            sent.append(pid)
        except ProcessLookupError:
            pass
    waited = 0.0
    while waited < grace and any(alive(p) for p in sent):
        sleep(0.1)
        waited += 0.1
    for pid in sent:
        if alive(pid):
            with suppress(ProcessLookupError):
                kill(pid, signal.SIGKILL)
    return sent


def tear_down(
    ledger: Ledger,
    run: str,
    *,
    stop_pids: Callable[[list[int]], list[int]] = stop,
    find_marked: Callable[[str], list[int]] = marked,
    alive: Callable[[int, int | None], bool] = processes.alive,
    remove: Callable[[Path], None] = lambda p: shutil.rmtree(p, ignore_errors=True),
) -> dict[str, list[Any]]:
    """Stop the ledger's processes (newest first) that still live, then any other process of
    the run, then remove its directories (newest first). Idempotent."""
    entries = ledger.entries()
    recorded = [e for e in reversed(entries) if e["kind"] == "process"]
    live = [int(e["pid"]) for e in recorded if alive(int(e["pid"]), e.get("started"))]
    stopped = stop_pids(live) if live else []
    strays = [p for p in find_marked(run) if p not in stopped]
    stopped += stop_pids(strays) if strays else []
    removed = []
    for entry in reversed(entries):
        if entry["kind"] == "dir":
            remove(Path(entry["path"]))
            removed.append(entry["path"])
    return {"stopped": stopped, "removed": removed}


class Interrupted(Exception):
    """SIGTERM arrived: unwind as Ctrl-C does, so the cleanup runs."""


@contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGTERM raises ``Interrupted`` (SIGINT already raises KeyboardInterrupt) while inside."""

    def raise_it(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, raise_it)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
