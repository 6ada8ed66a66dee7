"""Where the manager's state lives: one small interface, a JSON file behind it today.

The state is one document with a revision. ``read`` returns both; ``write`` replaces the
document only if the revision is still the one the writer read (compare-and-swap) and returns
the new revision. Every change the manager makes (a node changing owner *and* the event that
records it, a reclamation's deadline *and* its nodes' release) is one ``write``, so the changes
that go together land together. The etcd store (``elastic.manager.etcd_store``) is the same
contract: a transaction ``compare(mod_revision == expect) then put`` on one key, which names the
content-defined chunks the document is kept in, so a write stores only the chunks it changed.

Both stores hold the document as compact JSON (:func:`encode`): every write replaces the whole
state, and with an indent Python's encoder falls back from C to pure Python, which at 10,000
nodes made the encoding most of a write's cost.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from elastic.atomic import write_bytes
from elastic.errors import PtcError
from elastic.manager.errors import RevisionConflict

# The start of a state file, compact or indented: {"revision": N, "state": {
_REVISION = re.compile(rb'\{\s*"revision"\s*:\s*(\d+)\s*,\s*"state"\s*:\s*[{n]')
_HEAD = 256


def encode(document: Any) -> bytes:
    """The stored form: keys sorted (the same state gives the same bytes), no whitespace."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


class Store(Protocol):
    def read(self) -> tuple[int, dict[str, Any] | None]:
        """(revision, document); revision 0 and None when nothing was ever written."""
        ...

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        """Replace the document if the revision is still ``expect``; the new revision.
        Raises RevisionConflict otherwise."""
        ...


class MemoryStore:
    """For tests and throwaway managers: nothing survives the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._revision = 0
        self._document: dict[str, Any] | None = None

    def read(self) -> tuple[int, dict[str, Any] | None]:
        with self._lock:
            doc = None if self._document is None else json.loads(json.dumps(self._document))
            return self._revision, doc

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        with self._lock:
            if expect != self._revision:
                raise RevisionConflict(f"revision is {self._revision}, not {expect}")
            self._document = json.loads(json.dumps(document))
            self._revision += 1
            return self._revision


class JsonFileStore:
    """``{"revision":N,"state":{...}}`` in one file, root-only (0600), replaced atomically
    (a reader sees the old document or the new one). Any JSON layout of it is read, so files
    written indented by earlier versions stay readable.

    A lock file beside it (``flock``) serialises writers across processes; a process lock
    serialises threads.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(f".{self.path.name}.lock")
        with self._lock:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _load(self) -> tuple[int, dict[str, Any] | None]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return 0, None
        except (OSError, ValueError) as err:
            raise PtcError(f"manager state {self.path}: unreadable ({err})") from err
        if not isinstance(raw, dict) or not isinstance(raw.get("revision"), int):
            raise PtcError(f"manager state {self.path}: no revision; not a ptc state file")
        state = raw.get("state")
        return raw["revision"], state if isinstance(state, dict) else None

    def _revision(self) -> int:
        """The revision alone, from the file's first bytes: a write's check needs no parse of
        the whole state (the revision is the first key of every layout written, sorted). A
        file that does not start so is loaded whole, which reports what is wrong with it."""
        try:
            with self.path.open("rb") as fh:
                head = fh.read(_HEAD)
        except FileNotFoundError:
            return 0
        except OSError as err:
            raise PtcError(f"manager state {self.path}: unreadable ({err})") from err
        found = _REVISION.match(head)
        return int(found[1]) if found else self._load()[0]

    def read(self) -> tuple[int, dict[str, Any] | None]:
        with self._locked():
            return self._load()

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        with self._locked():
            revision = self._revision()
            if revision != expect:
                raise RevisionConflict(f"{self.path}: revision is {revision}, not {expect}")
            data = encode({"revision": revision + 1, "state": document}) + b"\n"
            write_bytes(self.path, data, mode=0o600)
            return revision + 1
