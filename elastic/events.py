"""Progress and status events: the library reports them, whoever called it renders them.

Long operations (image builds, ``ptc up``, deploys, campaigns, sweeps) take an ``on_event``
callback and call it with :class:`Event` values. They never draw: the CLI turns events into rich
progress bars and tables (``elastic.cli.draw``); a Slurm hook or a service passes
:func:`to_logger` and the same events go to a log file or the journal. ``None`` means nobody
listens. This follows ansible-runner's ``event_handler``/``status_handler``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class Kind(StrEnum):
    BEGIN = "begin"  # an operation starts; ``total`` is its size when known
    PROGRESS = "progress"  # ``done`` of ``total`` units are finished
    STATUS = "status"  # what is happening now, in ``message``
    WARNING = "warning"  # something a person should read, not fatal
    END = "end"  # the operation finished (successfully or not: see ``data``)


@dataclass(frozen=True)
class Event:
    """One thing that happened in an operation named by ``topic`` (``deploy``, ``sweep``, ...)."""

    topic: str
    kind: Kind
    message: str = ""
    done: int | None = None
    total: int | None = None
    # Topic-specific structured detail (per-host task counts for a deploy, a run's row for a
    # campaign). Renderers that do not know the topic ignore it.
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def describe(self) -> str:
        """One line of plain text, for logs."""
        count = ""
        if self.done is not None:
            count = f" {self.done}/{self.total}" if self.total is not None else f" {self.done}"
        text = f": {self.message}" if self.message else ""
        return f"{self.topic} {self.kind.value}{count}{text}"


OnEvent = Callable[[Event], None]


class Reporter:
    """Emits the events of one topic to a callback that may be ``None``."""

    def __init__(self, topic: str, on_event: OnEvent | None) -> None:
        self.topic = topic
        self._on_event = on_event

    def __bool__(self) -> bool:
        return self._on_event is not None

    def emit(
        self,
        kind: Kind,
        message: str = "",
        *,
        done: int | None = None,
        total: int | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if self._on_event is None:
            return
        event = Event(self.topic, kind, message, done, total, MappingProxyType(dict(data or {})))
        self._on_event(event)

    def begin(self, message: str = "", *, total: int | None = None, **data: Any) -> None:
        self.emit(Kind.BEGIN, message, done=0, total=total, data=data)

    def progress(self, done: int, total: int | None = None, message: str = "", **data: Any) -> None:
        self.emit(Kind.PROGRESS, message, done=done, total=total, data=data)

    def status(self, message: str, **data: Any) -> None:
        self.emit(Kind.STATUS, message, data=data)

    def warning(self, message: str, **data: Any) -> None:
        self.emit(Kind.WARNING, message, data=data)

    def end(self, message: str = "", **data: Any) -> None:
        self.emit(Kind.END, message, data=data)


def to_logger(logger: logging.Logger, progress_level: int = logging.DEBUG) -> OnEvent:
    """A callback for code with no terminal: every event becomes one log record.

    Progress ticks go at ``progress_level`` (they can be many); begin, status and end at INFO,
    warnings at WARNING. Route the logger to a file (a Slurm hook) or to stderr under systemd
    (the journal) as usual.
    """

    def handle(event: Event) -> None:
        if event.kind is Kind.WARNING:
            level = logging.WARNING
        elif event.kind is Kind.PROGRESS:
            level = progress_level
        else:
            level = logging.INFO
        logger.log(level, "%s", event.describe())

    return handle


def collect(into: list[Event]) -> OnEvent:
    """A callback that keeps every event, for tests and for callers that summarise afterwards."""
    return into.append


class Steps:
    """Counts the steps of one operation and reports each: BEGIN now, PROGRESS per step."""

    def __init__(self, report: Reporter, message: str, total: int | None = None) -> None:
        self._report = report
        self.total = total
        self.done = 0
        report.begin(message, total=total)

    def advance(self, message: str = "") -> None:
        self.done += 1
        self._report.progress(self.done, self.total, message)

    def status(self, message: str) -> None:
        self._report.status(message)

    def finish(self, message: str = "") -> None:
        self._report.end(message)
