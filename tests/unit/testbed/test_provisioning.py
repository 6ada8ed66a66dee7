"""The local testbed's provisioning limits: parts, turns in order, the per-minute window, slots
freed by failures and by dead processes, and the settings that set them."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from elastic.errors import InputError
from elastic.events import Event, collect
from elastic.testbed.backends.local import capacity, provisioning
from elastic.testbed.backends.local.provisioning import Limits


def test_a_request_goes_in_parts_no_larger_than_the_limits() -> None:
    nodes = ["a", "b", "c", "d", "e"]
    assert provisioning.parts(nodes, Limits(None, None)) == [nodes]
    assert provisioning.parts(nodes, Limits(2, None)) == [["a", "b"], ["c", "d"], ["e"]]
    assert provisioning.parts(nodes, Limits(4, 3)) == [["a", "b", "c"], ["d", "e"]]
    assert provisioning.parts([], Limits(1, None)) == []


def test_one_at_a_time_the_second_waits_for_the_first_and_says_so() -> None:
    bounds = Limits(1, None)
    first_in, release = threading.Event(), threading.Event()
    seen: list[Event] = []

    def first() -> None:
        with provisioning.slot("exp-a", "power on", ["n1"], bounds=bounds):
            first_in.set()
            assert release.wait(30)

    def second() -> None:
        with provisioning.slot("exp-b", "power on", ["n2"], collect(seen), bounds=bounds):
            pass

    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(30)
    b = threading.Thread(target=second)
    b.start()
    time.sleep(1.5)
    assert b.is_alive(), "the second provisioning did not wait for the first"
    waiting = provisioning.snapshot()
    assert [e.experiment for e in waiting.waiting] == ["exp-b"]
    assert [e.nodes for e in waiting.running] == [("n1",)]
    release.set()
    a.join(30)
    b.join(30)
    log = provisioning.history()
    assert [r["nodes"] for r in log] == [["n1"], ["n2"]]
    assert log[1]["started"] >= log[0]["ended"], "they overlapped"
    assert log[1]["waited_s"] >= 1.0 and log[0]["outcome"] == log[1]["outcome"] == "done"
    assert any("waits for a provisioning slot (1 at once" in e.message for e in seen), seen
    assert provisioning.snapshot().running == [] and provisioning.snapshot().waiting == []


def test_turns_are_taken_in_the_order_asked() -> None:
    bounds = Limits(1, None)
    hold = threading.Event()
    order: list[str] = []

    def take(name: str, block: bool) -> None:
        with provisioning.slot(name, "reload", [name], bounds=bounds):
            order.append(name)
            if block:
                assert hold.wait(30)

    threads = [threading.Thread(target=take, args=("first", True))]
    threads[0].start()
    while not order:
        time.sleep(0.05)
    for name in ("second", "third", "fourth"):
        t = threading.Thread(target=take, args=(name, False))
        t.start()
        threads.append(t)
        # each has its ticket before the next asks
        while len(provisioning.snapshot().waiting) < len(threads) - 1:
            time.sleep(0.05)
    hold.set()
    for t in threads:
        t.join(30)
    assert order == ["first", "second", "third", "fourth"]


def test_the_per_minute_limit_holds_later_starts_until_the_window_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(provisioning, "WINDOW_S", 1.5)
    bounds = Limits(None, 2)
    with provisioning.slot("exp", "allocate", ["a", "b"], bounds=bounds):
        pass
    with provisioning.slot("exp", "allocate", ["c"], bounds=bounds) as granted:
        pass
    assert granted.waited_s >= 1.0, "a third node started within the window of two"


def test_full_provisionings_have_a_limit_of_their_own_and_instant_ones_pass_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Multiverse's vCenter: 15 full clones a minute, instant clones not counted. Here one
    full provisioning in the window: a second reload waits for the window, a power on does
    not; a reload of three goes in parts of one."""
    monkeypatch.setattr(provisioning, "WINDOW_S", 1.5)
    bounds = Limits(None, None, 1)
    assert provisioning.parts(["a", "b", "c"], bounds, "reload") == [["a"], ["b"], ["c"]]
    assert provisioning.parts(["a", "b", "c"], bounds, "power on") == [["a", "b", "c"]]
    with provisioning.slot("exp", "reload", ["a"], bounds=bounds):
        pass
    with provisioning.slot("exp", "power on", ["b", "c"], bounds=bounds) as instant:
        pass
    assert instant.waited_s < 0.5, "an instant provisioning waited for the full ones' limit"
    with provisioning.slot("exp", "allocate", ["d"], bounds=bounds) as full:
        pass
    assert full.waited_s >= 1.0, "a second full provisioning started within the window"
    log = provisioning.history()
    assert log[-1]["limits"] == {"concurrency": None, "per_minute": None, "full_per_minute": 1}


def test_a_start_recorded_before_full_ones_were_told_apart_counts_as_full() -> None:
    state = capacity.directory() / "provisioning.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(
        json.dumps({"next": 2, "waiting": [], "running": [], "starts": [[time.time(), 1]]})
    )
    queue = provisioning.snapshot()
    assert queue.started_in_window(time.time(), full_only=True) == 1
    assert not queue.fits(1, Limits(None, None, 1), time.time(), full=True)
    assert queue.fits(1, Limits(None, None, 1), time.time(), full=False)


def test_a_failure_frees_the_slot_and_is_logged_as_failed() -> None:
    bounds = Limits(1, None)
    with (
        pytest.raises(RuntimeError),
        provisioning.slot("exp", "power on", ["a"], bounds=bounds),
    ):
        raise RuntimeError("boot failed")
    with provisioning.slot("exp", "power on", ["b"], bounds=bounds) as granted:
        assert granted.waited_s < 1.0
    assert [r["outcome"] for r in provisioning.history()] == ["failed", "done"]


def test_a_dead_process_holds_no_slot() -> None:
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    state = capacity.directory() / "provisioning.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "ticket": 1,
        "experiment": "crashed",
        "action": "reload",
        "nodes": ["x"],
        "since": time.time(),
        "pid": int(gone.stdout),
        "started": 1,
    }
    state.write_text(json.dumps({"next": 2, "waiting": [], "running": [entry], "starts": []}))
    with provisioning.slot("exp", "reload", ["y"], bounds=Limits(1, None)) as granted:
        assert granted.waited_s < 1.0


def test_limits_come_from_the_testbed_settings_and_keep_its_size() -> None:
    capacity.set_machines(6)
    assert provisioning.limits() == Limits(None, None)
    assert capacity.set_limits(2, 15).machines == 6
    assert provisioning.limits() == Limits(2, 15)
    capacity.set_machines(7)
    assert provisioning.limits() == Limits(2, 15), "resizing dropped the limits"
    capacity.set_limits(0, None)
    assert provisioning.limits() == Limits(None, 15)
    capacity.set_limits(None, None, 15)
    assert provisioning.limits() == Limits(None, 15, 15)
    capacity.set_machines(8)
    assert provisioning.limits() == Limits(None, 15, 15), "resizing dropped the full limit"
    capacity.set_limits(None, None, 0)
    assert provisioning.limits() == Limits(None, 15)
    assert capacity.settings().machines == 8
    with pytest.raises(InputError, match="--provisions-per-minute must be 0"):
        capacity.set_limits(None, -1)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"machines": 4, "provision_concurrency": 0}', "'provision_concurrency'"),
        ('{"machines": 4, "provisions_per_minute": "15"}', "'provisions_per_minute'"),
        ('{"machines": 4, "clones_per_minute": 15}', "'clones_per_minute'"),
        ('{"machines": 4, "full_provisions_per_minute": -2}', "'full_provisions_per_minute'"),
    ],
)
def test_a_bad_limit_in_the_settings_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(InputError, match=field):
        capacity.parse_settings(text, Path("settings.json"))
