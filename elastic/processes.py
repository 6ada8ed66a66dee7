"""Whether a process recorded on disk still lives: a pid with its start time, so a pid the
kernel has since given to another process does not count."""

from __future__ import annotations

import os
from pathlib import Path


def _fields(pid: int, proc: Path) -> list[str] | None:
    """``/proc/PID/stat`` from field 3 (the state) on; None when the process is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    return stat.rsplit(")", 1)[1].split()


def running(pid: int, proc: Path = Path("/proc")) -> bool:
    """The process exists and is not a zombie (exited, not yet reaped) or dead."""
    fields = _fields(pid, proc)
    return fields is not None and fields[0] not in ("Z", "X")


def start_time(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process's start time in clock ticks since boot; None when it is gone."""
    fields = _fields(pid, proc)
    return None if fields is None else int(fields[19])


def parent(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process's parent pid; None when it is gone."""
    fields = _fields(pid, proc)
    return None if fields is None else int(fields[1])


def alive(pid: int, started: int | None) -> bool:
    """``pid`` runs and, when ``started`` is known, is the same process that was recorded."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    if started is None:
        return True
    return start_time(pid) == started
