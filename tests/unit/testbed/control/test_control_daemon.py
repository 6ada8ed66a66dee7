"""The service as a detached daemon: start, status, stop, and ensure-running after a death.
Only the health call is made: the daemon serves the real nodeops, which needs containers."""

from __future__ import annotations

import os
import signal
import stat
import time
from collections.abc import Iterator

import pytest
from control_support import make_experiment, secret

from elastic.testbed.backends.local.control import CREDENTIAL_NAME, SOCKET_NAME, service
from elastic.testbed.experiment import Experiment


@pytest.fixture
def alpha() -> Iterator[Experiment]:
    exp = make_experiment("alpha")
    yield exp
    service.stop(exp)


def test_start_status_stop(alpha: Experiment) -> None:
    assert not service.status(alpha).running
    started = service.start(alpha)
    assert started.running and started.pid is not None
    assert os.getsid(started.pid) == started.pid  # its own session: outlives `ptc`
    places = service.Places.of(alpha)
    assert stat.S_IMODE(places.socket.stat().st_mode) == 0o600
    assert service.start(alpha).pid == started.pid  # already running: nothing new
    assert service.stop(alpha)
    assert not service.status(alpha).running
    assert not places.socket.exists() and not places.pid_file.exists()
    assert secret(alpha) not in places.log.read_text()
    assert "serving experiment alpha" in places.log.read_text()


def test_ensure_running_restarts_a_dead_service(alpha: Experiment) -> None:
    first = service.start(alpha)
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while service.status(alpha).pid is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert service.ensure_running(alpha) is True
    again = service.status(alpha)
    assert again.running and again.pid != first.pid
    assert service.ensure_running(alpha) is False


def test_service_state_is_apart_from_what_nodes_mount(alpha: Experiment) -> None:
    service.start(alpha)
    places = service.Places.of(alpha)
    assert sorted(p.name for p in places.shared.iterdir()) == [SOCKET_NAME, CREDENTIAL_NAME]
    assert {p.name for p in places.state.iterdir()} >= {"journal", "service.pid", "service.log"}
    assert not places.state.is_relative_to(places.shared)
