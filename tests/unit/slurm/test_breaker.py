"""The sites' circuit breaker: a pause after no capacity, a probe after it, longer pauses
after failed probes, all kept on disk across processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic.slurm.breaker import SiteBreaker, SiteState


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_pause_then_a_probe_then_a_longer_pause_up_to_the_most(tmp_path: Path) -> None:
    clock = Clock()
    breaker = SiteBreaker(tmp_path / "pauses.json", first=300, most=1000, clock=clock)
    assert breaker.state("dear") is SiteState.CLOSED
    pause = breaker.trip("dear", "0 free")
    assert (pause.until, pause.backoff, pause.since) == (1300, 300, 1000)
    assert breaker.state("dear") is SiteState.OPEN and breaker.state("cheap") is SiteState.CLOSED
    clock.t = 1100  # a resume that began before the pause fails too: the pause stands
    assert breaker.trip("dear", "0 free again").until == 1300
    clock.t = 1300
    assert breaker.state("dear") is SiteState.PROBE
    assert breaker.trip("dear", "still 0 free").backoff == 600  # the probe failed: twice
    clock.t = 1900
    assert breaker.trip("dear", "still").backoff == 1000  # never more than the most
    assert breaker.pauses()["dear"].since == 1000  # one outage, however many probes
    assert breaker.reset("dear") is True and breaker.state("dear") is SiteState.CLOSED
    assert breaker.reset("dear") is False
    assert breaker.trip("dear", "again").backoff == 300  # a new outage starts short


def test_the_pauses_are_shared_through_the_file_and_a_bad_file_reads_as_none(
    tmp_path: Path,
) -> None:
    clock = Clock()
    path = tmp_path / "pauses.json"
    SiteBreaker(path, clock=clock).trip("dear", "0 free")
    other = SiteBreaker(path, clock=clock)  # another process: a hook, the service
    assert other.state("dear") is SiteState.OPEN
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text())["dear"]["reason"] == "0 free"
    path.write_text("not json")
    assert other.pauses() == {}
    path.write_text('{"dear": {"until": "soon"}}')
    assert other.pauses() == {}


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="0 < first <= most"):
        SiteBreaker(None, first=600, most=300)
