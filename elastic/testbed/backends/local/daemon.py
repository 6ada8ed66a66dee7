"""An experiment's detached daemon on the host: started in its own session with its log, known
by a pid file, stopped with SIGTERM and then SIGKILL. The control service and the FAKE EC2
region are two such daemons; each says how it serves and what stopping leaves to clear.

A pid counts as the daemon only while its command line is ``python -m MODULE serve NAME``: a
pid file outlives its process, and the kernel gives the number to another."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from elastic import paths, processes
from elastic.errors import TestbedError

T = TypeVar("T")


@dataclass(frozen=True)
class Daemon:
    """``module``'s ``serve`` for experiment ``name``: ``what`` names it in errors."""

    module: str
    name: str
    pid_file: Path
    log: Path
    what: str

    def recorded(self) -> int | None:
        """The pid in the pid file, alive or not."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> int | None:
        """The daemon's pid if it runs (not merely a reused pid)."""
        pid = self.recorded()
        if pid is None or not processes.running(pid):
            return None
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        ours = self.module.encode() in argv and b"serve" in argv and self.name.encode() in argv
        return pid if ours else None

    def start(self, ready: Callable[[], T | None], timeout: float, poll: float, late: str) -> T:
        """Start it and wait until ``ready()`` gives something, and return that; TestbedError
        with the log's tail if it exits first, or with ``late`` (what was waited for) after
        ``timeout`` seconds."""
        with self.log.open("ab") as out:
            os.chmod(self.log, 0o600)
            proc = subprocess.Popen(
                [sys.executable, "-m", self.module, "serve", self.name],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=paths.REPO_ROOT,
                start_new_session=True,  # outlives the `ptc` that started it, and its terminal
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise TestbedError(
                    f"{self.what} of {self.name!r} exited with status {proc.returncode}: "
                    f"{self.tail()}"
                )
            if (served := ready()) is not None:
                return served
            time.sleep(poll)
        raise TestbedError(f"{self.what} of {self.name!r} {late}; see {self.log}")

    def stop(self, timeout: float, poll: float) -> bool:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the pid file goes. False if none
        ran."""
        pid = self.alive()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.alive() == pid:
                time.sleep(poll)
            if self.alive() == pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return pid is not None

    def tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
