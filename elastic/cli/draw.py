"""Drawing library events on a terminal: the only place (with the other CLI modules) rich is used.

``progress(console)`` gives a callback that shows every topic's BEGIN/PROGRESS/END as a rich
progress bar and prints STATUS and WARNING lines; topics with their own display (a deploy's
per-host table) register a renderer in :data:`TABLES`. Off a terminal, the same events become
plain lines, so a piped or logged run still shows what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from elastic.events import Event, Kind, OnEvent

# topic -> function drawing the topic's latest event (with its ``data``) as a renderable.
TABLES: dict[str, Callable[[Event], RenderableType]] = {}


def deploy_table(event: Event) -> RenderableType:
    """A deploy's per-host task counts, from the ``hosts`` its events carry."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    columns = ("host", "ok", "changed", "failed", "unreachable", "skipped")
    for column in columns:
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, counts in dict(event.data.get("hosts") or {}).items():
        bad = counts.get("failed") or counts.get("unreachable")
        table.add_row(
            host, *(str(counts.get(c, 0)) for c in columns[1:]), style="red" if bad else ""
        )
    return table


TABLES["deploy"] = deploy_table


@contextmanager
def progress(console: Console | None = None, *, transient: bool = False) -> Iterator[OnEvent]:
    """A callback that renders events while the ``with`` block runs."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield _plain(console)
        return
    bars = Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[topic]}[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
    )
    tasks: dict[str, TaskID] = {}
    tables: dict[str, RenderableType] = {}

    def view() -> RenderableType:
        from rich.console import Group

        return Group(bars, *tables.values())

    with Live(view(), console=console, refresh_per_second=4) as live:

        def handle(event: Event) -> None:
            if event.topic in TABLES and event.data:
                tables[event.topic] = TABLES[event.topic](event)
            task = tasks.get(event.topic)
            if event.kind is Kind.BEGIN:
                tasks[event.topic] = bars.add_task(
                    event.message, total=event.total, topic=event.topic
                )
            elif event.kind is Kind.PROGRESS and task is not None:
                update: dict[str, Any] = {"completed": event.done}
                if event.total is not None:
                    update["total"] = event.total
                if event.message:
                    update["description"] = event.message
                bars.update(task, **update)
            elif event.kind is Kind.STATUS:
                if task is not None:
                    bars.update(task, description=event.message)
                else:
                    console.print(f"[bold]{event.topic}[/] {event.message}", highlight=False)
            elif event.kind is Kind.WARNING:
                console.print(f"[yellow]warning:[/] {event.message}", highlight=False)
            elif event.kind is Kind.END and task is not None:
                bars.update(task, description=event.message or "done")
                bars.stop_task(task)
            live.update(view())

        yield handle


def _plain(console: Console) -> OnEvent:
    def handle(event: Event) -> None:
        # Progress ticks would flood a log; begin, status, warnings and the end are enough.
        if event.kind is Kind.PROGRESS:
            return
        console.print(event.describe(), highlight=False, markup=False)

    return handle
