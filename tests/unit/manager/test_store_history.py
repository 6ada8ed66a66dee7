"""The manager's file store under faults, checked for linearizability.

Four processes read the store and compare-and-swap its revision (``write(expect=...)``) as fast
as they can, each logging its calls and answers (an ``O_APPEND`` write per event, which a
SIGKILL cannot tear). Meanwhile one is frozen (SIGSTOP) for a second, perhaps holding the lock,
and two are killed (SIGKILL), perhaps mid-write, and replaced. The history must be linearizable
against a compare-and-swap register of the revision, and every document read must be the one
its revision wrote. The same harness on a store without its lock must fail the check: the
checker can see a lost update when there is one.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastic.history.linearizable import Result, check
from elastic.history.models import CasRegister
from elastic.history.ops import Outcome, from_events
from elastic.manager.errors import RevisionConflict
from elastic.manager.store import JsonFileStore

FORK = multiprocessing.get_context("fork")


class UnlockedStore(JsonFileStore):
    """A broken store for the negative control: no lock, and a pause between the revision's
    check and the write, so that two writers can both pass the check."""

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        yield

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        revision, _ = self._load()
        if revision != expect:
            raise RevisionConflict(f"revision is {revision}, not {expect}")
        time.sleep(0.005)
        return super().write(document, expect=revision)


def work(store_path: str, log: str, name: str, seed: int, seconds: float, broken: bool) -> None:
    store = (UnlockedStore if broken else JsonFileStore)(Path(store_path))
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    rng = random.Random(seed)

    def emit(kind: str, f: str, value: Any = None) -> None:
        event = {"process": name, "type": kind, "f": f, "value": value, "time": time.monotonic()}
        os.write(fd, (json.dumps(event) + "\n").encode())

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if rng.random() < 0.4:
            emit("invoke", "read")
            revision, document = store.read()
            consistent = document is None or document.get("n") == revision
            emit("ok", "read", revision if consistent else f"torn: {document}")
            continue
        seen, _ = store.read()
        emit("invoke", "cas", [seen, seen + 1])
        try:
            store.write({"n": seen + 1}, expect=seen)
        except RevisionConflict:
            emit("ok", "cas", False)
        else:
            emit("ok", "cas", True)


def run(tmp: Path, broken: bool, seconds: float = 4.0) -> tuple[Result, list[int], int]:
    """Run the workers under the faults; the check's result, the killed workers' exit codes,
    and how many operations were left without an answer."""
    store, logs = tmp / "state.json", tmp / "logs"
    logs.mkdir()
    procs: dict[str, Any] = {}

    def start(name: str, seed: int, for_s: float) -> None:
        args = (str(store), str(logs / f"{name}.jsonl"), name, seed, for_s, broken)
        procs[name] = FORK.Process(target=work, args=args)
        procs[name].start()

    began = time.monotonic()
    for i in range(4):
        start(f"w{i}", i, seconds)
    time.sleep(0.5)
    os.kill(procs["w0"].pid, signal.SIGSTOP)
    time.sleep(1.0)
    os.kill(procs["w0"].pid, signal.SIGCONT)
    killed = []
    for victim, seed in (("w1", 11), ("w2", 12)):
        time.sleep(0.7)
        os.kill(procs[victim].pid, signal.SIGKILL)
        procs[victim].join()
        killed.append(procs[victim].exitcode)
        start(f"{victim}b", seed, max(0.5, seconds - (time.monotonic() - began)))
    for proc in procs.values():
        proc.join(timeout=60)
        assert proc.exitcode is not None, "a worker did not finish"
    events = [
        json.loads(line) for log in sorted(logs.iterdir()) for line in log.read_text().splitlines()
    ]
    events.sort(key=lambda e: e["time"])
    ops = from_events(events)
    open_ops = sum(op.outcome is Outcome.INFO for op in ops)
    return check(CasRegister(start=0), ops), killed, open_ops


def test_the_file_store_stays_linearizable_through_kills_and_a_freeze(tmp_path: Path) -> None:
    result, killed, open_ops = run(tmp_path, broken=False)
    print(f"\n{result.ops} ops, {open_ops} without an answer, {result.steps} search steps")
    assert killed == [-signal.SIGKILL, -signal.SIGKILL]
    assert result.ops > 100
    assert result.valid is True, (result.stuck, result.prefix[-5:])


def test_the_check_sees_the_lost_updates_of_a_store_without_its_lock(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, broken=True, seconds=3.0)
    assert result.valid is False
    assert result.stuck is not None
