"""Faults injected into a FAKE EC2 region, kept in one file of the region's directory.

The command line writes them and the region's service reads them, each under the same lock,
so a count of refusals is taken exactly once per RunInstances call however many processes look.

- **Capacity**: the next RunInstances calls fail with ``InsufficientInstanceCapacity``, a
  given number of times or until cleared. EC2 answers that with HTTP 500, which boto3 retries
  (four more attempts by default): every attempt is one call here, as it is one call on EC2.
- **Interrupts**: a spot interruption of the instance that is a node, after a notice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic import atomic
from elastic.errors import InputError, PtcError

FAULTS_NAME = "faults.json"


@dataclass(frozen=True)
class Interrupt:
    """A spot interruption asked for: the instance that is ``node`` ends ``notice_s`` seconds
    after ``asked`` (the epoch), its notice shown on its machine meanwhile."""

    node: str
    notice_s: float
    asked: float

    @property
    def due(self) -> float:
        return self.asked + self.notice_s


@dataclass
class State:
    # None: no capacity fault; -1: until cleared; N > 0: the next N RunInstances calls.
    capacity: int | None = None
    interrupts: list[Interrupt] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "interrupts": [asdict(i) for i in self.interrupts]}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path) -> State:
        try:
            capacity = data.get("capacity")
            if capacity is not None and (not isinstance(capacity, int) or capacity == 0):
                raise ValueError(f"field capacity: {capacity!r} is not -1, a count or null")
            interrupts = [Interrupt(**i) for i in data.get("interrupts", [])]
        except (TypeError, ValueError) as err:
            raise PtcError(f"fake EC2 faults {path}: {err}") from err
        return cls(capacity, interrupts)


UNTIL_CLEARED = -1


class Faults:
    """The faults of one region, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FAULTS_NAME
        self._lock = directory / "faults.lock"

    @contextlib.contextmanager
    def _changing(self) -> Iterator[State]:
        self._lock.parent.mkdir(parents=True, exist_ok=True)
        with self._lock.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            before = state.as_json()
            yield state
            if state.as_json() != before:
                atomic.write_json(self.path, state.as_json(), mode=0o600)

    def _read(self) -> State:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return State()
        except ValueError as err:
            raise PtcError(f"fake EC2 faults {self.path}: not JSON ({err})") from err
        return State.from_json(data, self.path)

    def read(self) -> State:
        with self._changing() as state:
            return State(state.capacity, list(state.interrupts))

    def set_capacity(self, count: int | None) -> None:
        """Refuse the next ``count`` RunInstances calls; None: every one until cleared."""
        if count is not None and count < 1:
            raise InputError(f"--count must be at least 1, not {count}")
        with self._changing() as state:
            state.capacity = UNTIL_CLEARED if count is None else count

    def clear_capacity(self) -> bool:
        """No more capacity refusals; whether there were any left."""
        with self._changing() as state:
            had = state.capacity is not None
            state.capacity = None
            return had

    def take_capacity(self) -> bool:
        """Whether this RunInstances call is refused (taking one from a count)."""
        with self._changing() as state:
            if state.capacity is None:
                return False
            if state.capacity > 0:
                state.capacity -= 1
                if state.capacity == 0:
                    state.capacity = None
            return True

    def interrupt(self, node: str, notice_s: float, now: float) -> Interrupt:
        if notice_s < 0:
            raise InputError(f"--notice must be 0 seconds or more, not {notice_s:g}")
        asked = Interrupt(node, notice_s, now)
        with self._changing() as state:
            if any(i.node == node for i in state.interrupts):
                raise InputError(f"node {node!r}: an interruption is already pending")
            state.interrupts.append(asked)
        return asked

    def done(self, node: str) -> None:
        with self._changing() as state:
            state.interrupts = [i for i in state.interrupts if i.node != node]
