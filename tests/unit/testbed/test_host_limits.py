"""The inotify limit is raised before nodes start, and a failure to raise it names the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.errors import TestbedError
from elastic.events import Event, Reporter, collect
from elastic.testbed.backends.local.host_limits import ensure_inotify_instances


def test_a_low_limit_is_raised_and_reported(tmp_path: Path) -> None:
    knob = tmp_path / "max_user_instances"
    knob.write_text("128\n")
    events: list[Event] = []
    ensure_inotify_instances(Reporter("testbed", collect(events)), knob, 1024)
    assert knob.read_text().strip() == "1024"
    assert any("from 128 to 1024" in e.message for e in events)


def test_a_high_enough_limit_is_left_alone(tmp_path: Path) -> None:
    knob = tmp_path / "max_user_instances"
    knob.write_text("4096\n")
    events: list[Event] = []
    ensure_inotify_instances(Reporter("testbed", collect(events)), knob, 1024)
    assert knob.read_text().strip() == "4096" and not events


def test_an_unreadable_limit_is_named(tmp_path: Path) -> None:
    with pytest.raises(TestbedError, match="cannot read"):
        ensure_inotify_instances(Reporter("testbed", None), tmp_path / "missing", 1024)
    (tmp_path / "garbled").write_text("many\n")
    with pytest.raises(TestbedError, match="cannot read"):
        ensure_inotify_instances(Reporter("testbed", None), tmp_path / "garbled", 1024)


def test_a_limit_that_cannot_be_raised_names_the_sysctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    knob = tmp_path / "max_user_instances"
    knob.write_text("128\n")

    def refuse(self: Path, data: str) -> int:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(TestbedError, match=r"sysctl -w fs\.inotify\.max_user_instances=1024"):
        ensure_inotify_instances(Reporter("testbed", None), knob, 1024)
