"""A usable path to a unix socket whose full path is too long for ``sun_path`` (108 bytes).

Experiment directories can be deep (a test's temporary PTC_HOME); the socket is then reached
through ``/proc/self/fd/N/NAME``, N an ``O_PATH`` descriptor of its directory, held open for as
long as the path is used."""

from __future__ import annotations

import os
from pathlib import Path

SUN_PATH_MAX = 107  # bytes, without the terminating NUL


class SocketPath:
    def __init__(self, path: Path) -> None:
        self._fd: int | None = None
        if len(os.fsencode(path)) <= SUN_PATH_MAX:
            self.path = str(path)
        else:
            self._fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
            self.path = f"/proc/self/fd/{self._fd}/{path.name}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
