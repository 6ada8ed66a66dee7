"""The fan-out under `ptc run`: its cap on parallel hosts, how each failure is named, and that
a host that never answers is reported failed by its deadline. Real sockets on loopback only."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from invoke.exceptions import CommandTimedOut
from invoke.runners import Result
from paramiko.ssh_exception import NoValidConnectionsError

from elastic.errors import InputError
from elastic.remote import group
from elastic.remote.group import HostResult, Options


def ssh_config(tmp_path: Path, port: int, checking: str = "no") -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(
        f"Host box\n    HostName 127.0.0.1\n    Port {port}\n    User root\n"
        f"    IdentitiesOnly yes\n    StrictHostKeyChecking {checking}\n"
        f"    UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
    )
    return path


def test_at_most_parallel_hosts_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    order: list[str] = []

    def one(host: str, options: Options, step: Any, what: str) -> HostResult:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
            order.append(host)
        return HostResult(host, "", "", 0, 0.0, 0.0)

    monkeypatch.setattr(group, "_one", one)
    hosts = [f"n{i}" for i in range(9)]
    results = group.each(hosts, Options(Path("unused"), parallel=3), lambda c: (0, "", ""), "x")
    assert peak == 3
    assert sorted(order) == sorted(hosts)
    assert [r.host for r in results] == hosts  # in the order asked, not the order finished


def test_bad_options_are_named() -> None:
    with pytest.raises(InputError, match="--parallel"):
        Options(Path("c"), parallel=0)
    with pytest.raises(InputError, match="--timeout"):
        Options(Path("c"), timeout=0)
    with pytest.raises(InputError, match="no host selected"):
        group.each([], Options(Path("c")), lambda c: (0, "", ""), "x")


def test_each_exception_maps_to_its_kind() -> None:
    def kind(err: BaseException) -> str:
        return group.classify(err, 5, 2)[0]

    timed_out = CommandTimedOut(Result(command="sleep 9", exited=-1), timeout=5)
    assert group.classify(timed_out, 5, 2) == (group.TIMEOUT, "did not finish in 5 s")
    refused = NoValidConnectionsError({("127.0.0.1", 22): ConnectionRefusedError(111, "x")})
    assert group.classify(refused, 5, 2) == (
        group.UNREACHABLE,
        "connection refused (127.0.0.1:22)",
    )
    assert kind(TimeoutError()) == group.TIMEOUT
    assert kind(paramiko.AuthenticationException("no")) == group.AUTH
    assert kind(paramiko.SSHException("Error reading SSH protocol banner")) == group.TIMEOUT
    assert kind(paramiko.SSHException("No existing session")) == group.TIMEOUT
    assert kind(paramiko.SSHException("Server 'x' not found in known_hosts")) == group.AUTH
    assert kind(paramiko.SSHException("something else")) == group.SSH
    assert kind(FileNotFoundError(2, "No such file")) == group.COPY
    assert kind(ConnectionResetError()) == group.UNREACHABLE


def test_a_closed_port_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    options = Options(ssh_config(tmp_path, port), timeout=5, connect_timeout=5)
    [result] = group.run(["box"], "true", options)
    assert result.failure == group.UNREACHABLE and not result.ok
    assert result.exit_status is None


@pytest.fixture
def silent_server() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on loopback that accepts and then says nothing (a frozen node behind a
    port forward); ``greeting`` bytes are sent first when given."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    greeting: list[bytes] = []
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            if greeting:
                conn.sendall(greeting[0])
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], greeting
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_host_that_accepts_and_never_answers_fails_by_its_deadline(
    tmp_path: Path, silent_server: tuple[int, list[bytes]]
) -> None:
    port, _ = silent_server
    options = Options(ssh_config(tmp_path, port), timeout=1, connect_timeout=1)
    [result] = group.run(["box"], "true", options)
    assert result.failure == group.TIMEOUT, result


def test_a_host_that_stalls_after_its_banner_fails_by_its_deadline(
    tmp_path: Path, silent_server: tuple[int, list[bytes]]
) -> None:
    port, greeting = silent_server
    greeting.append(b"SSH-2.0-OpenSSH_9.2\r\n")
    options = Options(ssh_config(tmp_path, port), timeout=1, connect_timeout=1)
    [result] = group.run(["box"], "true", options)
    assert result.failure == group.TIMEOUT, result


def test_host_keys_follow_the_ssh_config(tmp_path: Path) -> None:
    loose = group.connect("box", Options(ssh_config(tmp_path, 22, "no")))
    assert isinstance(loose.client._policy, paramiko.AutoAddPolicy)
    assert loose.connect_kwargs["allow_agent"] is False
    assert loose.connect_kwargs["look_for_keys"] is False
    strict = group.connect("box", Options(ssh_config(tmp_path, 22, "yes")))
    assert isinstance(strict.client._policy, paramiko.RejectPolicy)
    new = group.connect("box", Options(ssh_config(tmp_path, 22, "accept-new")))
    assert isinstance(new.client._policy, paramiko.AutoAddPolicy)


def test_as_root_runs_the_command_unchanged_for_root() -> None:
    line = group.as_root("echo 'a b'; id -u")
    assert "sudo -n" in line
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "a b"


def test_summary_names_the_failed_hosts() -> None:
    results = [
        HostResult("a", "", "", 0, 0, 1),
        HostResult("b", group.EXIT, "exit 3", 3, 0, 1),
        HostResult("c", group.TIMEOUT, "did not finish in 5 s", None, 0, 5),
    ]
    summary = group.Summary(results)
    assert [r.host for r in summary.failed] == ["b", "c"]
    assert summary.describe() == "2 of 3 hosts failed: b (exit 3), c (did not finish in 5 s)"


def test_the_watchdog_ends_a_host_that_blocks_past_every_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever fabric waits on that its own timeouts miss, the deadline closes it."""

    class Stuck:
        """A connection whose opening blocks until it is closed."""

        def __init__(self) -> None:
            self.closed = threading.Event()
            self.client = paramiko.SSHClient()

        def open(self) -> None:
            assert self.closed.wait(60), "never closed"
            raise EOFError("closed under us")

        def close(self) -> None:
            self.closed.set()

    monkeypatch.setattr(group, "connect", lambda host, options: Stuck())
    options = Options(Path("unused"), timeout=0.1, connect_timeout=0.1)
    [result] = group.run(["box"], "true", options)
    assert result.failure == group.TIMEOUT
    assert result.message == "`true` did not end in 0.1 s"


def test_a_run_without_an_exit_status_is_a_timeout_at_the_deadline_and_broken_before() -> None:
    """invoke can miss its own timeout (its timer closes the channel, then is still alive when
    the run looks at it): the run comes back with no exit status, which is not an exit."""
    no_status = Result(command="sleep 9", stdout="part", exited=group.NO_EXIT_STATUS)
    with pytest.raises(CommandTimedOut) as timed_out:
        group.ended(no_status, elapsed=12.3, timeout=12)
    assert group.classify(timed_out.value, 12, 5)[0] == group.TIMEOUT
    with pytest.raises(paramiko.SSHException) as broken:
        group.ended(no_status, elapsed=3.0, timeout=12)
    assert group.classify(broken.value, 12, 5)[0] == group.SSH
    assert group.ended(Result(stdout="x", exited=3), 1.0, 12) == (3, "x", "")
    assert group.ended(Result(stdout="ok", exited=0), 20.0, 12) == (0, "ok", "")
