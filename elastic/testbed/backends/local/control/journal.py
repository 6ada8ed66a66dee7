"""The service's operations on disk, one JSON file per request id, each write atomic.

An operation is recorded ``started`` before any node is touched and ``done`` or ``failed``
after. A service that starts finds the ``started`` records of a predecessor that died mid-way
and marks them ``interrupted``: the same request id then runs the operation again (it sets
target states, so what already happened is not done twice), and nothing else ever does."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic import atomic
from elastic.errors import InputError

REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

STARTED = "started"
DONE = "done"
FAILED = "failed"
INTERRUPTED = "interrupted"
FINISHED = frozenset({DONE, FAILED})


@dataclass
class Record:
    id: str
    action: str
    nodes: list[str]
    state: str = STARTED
    attempts: int = 1
    started: float = field(default_factory=time.time)
    finished: float | None = None
    seconds: float | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    # {"status", "message", "node", "step"} of a failed operation
    error: dict[str, Any] | None = None
    # when a predecessor service was found to have died in the middle of this operation
    interrupted: list[float] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        return asdict(self)


def check_id(request_id: str) -> str:
    if not REQUEST_ID.match(request_id):
        raise InputError(
            f"request id {request_id!r} is invalid: 1-128 letters, digits and . _ : -, "
            "starting with a letter or digit"
        )
    return request_id


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, request_id: str) -> Path:
        return self.directory / f"{check_id(request_id)}.json"

    def get(self, request_id: str) -> Record | None:
        path = self._path(request_id)
        if not path.is_file():
            return None
        return Record(**json.loads(path.read_text()))

    def save(self, record: Record) -> None:
        atomic.write_json(self._path(record.id), record.view(), mode=0o600)

    def start(self, request_id: str, action: str, nodes: Sequence[str]) -> Record:
        """Record an operation before it touches any node (a retry counts one attempt more)."""
        previous = self.get(request_id)
        record = Record(id=request_id, action=action, nodes=list(nodes))
        if previous is not None:
            record.attempts = previous.attempts + 1
            record.interrupted = previous.interrupted
        self.save(record)
        return record

    def finish(
        self, record: Record, steps: list[dict[str, Any]], error: dict[str, Any] | None = None
    ) -> Record:
        record.finished = time.time()
        record.seconds = round(record.finished - record.started, 3)
        record.steps = steps
        record.error = error
        record.state = FAILED if error else DONE
        self.save(record)
        return record

    def recover(self) -> list[Record]:
        """Mark the operations a dead predecessor left ``started`` as ``interrupted``."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            record = Record(**json.loads(path.read_text()))
            if record.state == STARTED:
                record.state = INTERRUPTED
                record.interrupted.append(time.time())
                self.save(record)
                found.append(record)
        return found
