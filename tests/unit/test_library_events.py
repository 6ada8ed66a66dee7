"""Events: what long operations report, delivered to a callback, a logger or a terminal."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from elastic.cli import draw
from elastic.events import Event, Kind, Reporter, Steps, collect, to_logger


def test_reporter_without_listener_does_nothing() -> None:
    report = Reporter("x", None)
    assert not report
    report.begin("a", total=3)  # no callback: nothing to call, nothing raised


def test_steps_report_begin_progress_and_end_in_order() -> None:
    events: list[Event] = []
    steps = Steps(Reporter("up", collect(events)), "starting nodes", 2)
    steps.advance("node-0")
    steps.status("waiting")
    steps.advance()
    steps.finish("done")
    assert [e.kind for e in events] == [
        Kind.BEGIN, Kind.PROGRESS, Kind.STATUS, Kind.PROGRESS, Kind.END,
    ]  # fmt: skip
    assert [(e.done, e.total) for e in events if e.kind is Kind.PROGRESS] == [(1, 2), (2, 2)]
    assert events[0].describe() == "up begin 0/2: starting nodes"


def test_event_data_is_read_only() -> None:
    events: list[Event] = []
    Reporter("deploy", collect(events)).status("t", hosts={"a": 1})
    with pytest.raises(TypeError):
        events[0].data["hosts"] = {}  # type: ignore[index]


def test_to_logger_for_code_without_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("ptc.test")
    report = Reporter("deploy", to_logger(logger))
    with caplog.at_level(logging.DEBUG, logger="ptc.test"):
        report.begin("site.yml")
        report.progress(3, 10)
        report.warning("slow node")
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert levels == [
        (logging.INFO, "deploy begin 0: site.yml"),
        (logging.DEBUG, "deploy progress 3/10"),
        (logging.WARNING, "deploy warning: slow node"),
    ]


def test_cli_renderer_off_a_terminal_prints_plain_lines_without_ticks() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with draw.progress(console) as on_event:
        report = Reporter("sweep", on_event)
        report.begin("5 policies", total=2)
        report.progress(1, 2)
        report.end("2 chunks")
    assert out.getvalue().splitlines() == ["sweep begin 0/2: 5 policies", "sweep end: 2 chunks"]


def test_cli_renderer_on_a_terminal_draws_the_deploy_table() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with draw.progress(console) as on_event:
        report = Reporter("deploy", on_event)
        report.begin("site.yml")
        report.progress(1, hosts={"node-0": {"ok": 4, "changed": 1, "failed": 0}})
        report.end("1 hosts")
    assert "node-0" in out.getvalue()
