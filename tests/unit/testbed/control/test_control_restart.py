"""A real service process killed mid-operation, and the client's retry with the same request
id against its successor: the operation runs at most once more, and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from control_support import make_experiment

from elastic import paths
from elastic.testbed.backends.local.control import service
from elastic.testbed.backends.local.control.client import ControlClient, ControlError
from elastic.testbed.experiment import Experiment

SCRIPT = Path(__file__).with_name("fake_control_service.py")


class Services:
    def __init__(self, exp: Experiment, calls: Path) -> None:
        self.exp, self.calls = exp, calls
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *flags: str) -> subprocess.Popen[bytes]:
        places = service.Places.of(self.exp)
        places.socket.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), self.exp.name, str(self.calls), *flags],
            # this checkout's elastic, as `python -m` from the repository root would import
            env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT)},
        )
        self.procs.append(proc)
        client = ControlClient(places.socket, places.credential, timeout=1.0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                client.health()
                return proc
            except ControlError:
                assert proc.poll() is None, "the fake service exited"
                time.sleep(0.1)
        raise AssertionError("the fake service did not answer")

    def calls_made(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    svc = Services(make_experiment("alpha"), tmp_path / "calls")
    yield svc
    for proc in svc.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_killed_mid_operation_then_retried_runs_once_more(services: Services) -> None:
    places = service.Places.of(services.exp)
    first = services.start("--hang")
    client = ControlClient(places.socket, places.credential, timeout=60)
    answer: dict[str, Any] = {}

    def request() -> None:
        answer["body"] = client.power_on(["node-0"], "resume-1")

    worker = threading.Thread(target=request)
    worker.start()
    deadline = time.monotonic() + 20
    while not services.calls_made() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert services.calls_made() == ["power_on node-0"]
    first.send_signal(signal.SIGKILL)  # mid power_on: recorded as started, never finished
    first.wait()
    services.start()  # the successor; the client's connection broke and it retries
    worker.join(30)
    body = answer["body"]
    assert (body["state"], body["attempts"], body["replayed"]) == ("done", 2, False)
    assert len(body["interrupted"]) == 1
    assert services.calls_made() == ["power_on node-0", "power_on node-0"]
    # and once done, the same id never runs it again
    assert client.power_on(["node-0"], "resume-1")["replayed"] is True
    assert len(services.calls_made()) == 2


def test_client_error_fields(services: Services) -> None:
    places = service.Places.of(services.exp)
    make_experiment("beta")
    services.start()
    good = ControlClient(places.socket, places.credential, timeout=10)
    wrong = places.credential.parent.parent / "wrong-credential"
    wrong.write_text("not-the-credential\n")
    with pytest.raises(ControlError) as refused:
        ControlClient(places.socket, wrong, timeout=10).nodes()
    assert (refused.value.status, refused.value.node) == (401, None)
    with pytest.raises(ControlError) as unknown:
        good.power_off(["node-7"], "r-unknown")
    assert (unknown.value.status, unknown.value.node) == (404, "node-7")
    with pytest.raises(ControlError) as foreign:
        good.power_off(["beta-node-0"], "r-foreign")
    assert (foreign.value.status, foreign.value.node) == (403, "beta-node-0")
    assert services.calls_made() == []
    assert good.power_off(["node-0"], "r-ok")["steps"][0]["node"] == "node-0"


def test_client_without_a_service_fails_after_its_timeout(tmp_path: Path) -> None:
    exp = make_experiment("alpha")
    places = service.Places.of(exp)
    started = time.monotonic()
    with pytest.raises(ControlError) as err:
        ControlClient(places.socket, places.credential, timeout=1.5).power_on(["node-0"], "r")
    assert err.value.status is None and err.value.node is None
    assert "did not answer" in str(err.value)
    assert time.monotonic() - started >= 1.0  # it kept retrying, not one attempt
