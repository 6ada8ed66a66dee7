"""The control service as a process: serve in the foreground, or start, stop and check a
detached daemon (its own session, a pid file, a log), as `ptc up`/`down`/`control` do.

No init system is needed: `ptc up` starts the daemon and `ptc up`, `deploy` and `status`
start it again if it died; the journal makes a restart safe."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from elastic import atomic, paths
from elastic.errors import TestbedError
from elastic.testbed import backends
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local.control import CREDENTIAL_NAME, SOCKET_NAME, credential
from elastic.testbed.backends.local.control.client import ControlClient, ControlError
from elastic.testbed.backends.local.control.journal import Journal
from elastic.testbed.backends.local.control.sockpath import SocketPath
from elastic.testbed.experiment import Experiment, State

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
MODULE = "elastic.testbed.backends.local.control"

log = logging.getLogger("ptc.control")


@dataclass(frozen=True)
class Places:
    """Where one experiment's service keeps what: the node-visible directory (socket and
    credential) and the host-only one (journal, pid file, log)."""

    shared: Path
    state: Path

    @classmethod
    def of(cls, exp: Experiment) -> Places:
        return cls(exp.control_dir, exp.control_state_dir)

    @property
    def socket(self) -> Path:
        return self.shared / SOCKET_NAME

    @property
    def credential(self) -> Path:
        return self.shared / CREDENTIAL_NAME

    @property
    def journal(self) -> Path:
        return self.state / "journal"

    @property
    def pid_file(self) -> Path:
        return self.state / "service.pid"

    @property
    def log(self) -> Path:
        return self.state / "service.log"


def serves(exp: Experiment) -> bool:
    """The testbeds whose nodes reach a service on this host (CloudLab has its own portal)."""
    return backends.capabilities(exp.testbed).control_service and not exp.adopted


def prepare(exp: Experiment) -> None:
    """The directories and the credential, before any node mounts them."""
    places = Places.of(exp)
    credential.ensure(places.credential)
    places.state.mkdir(parents=True, exist_ok=True)
    os.chmod(places.state, 0o700)


def serve(name: str) -> None:
    """Run the service of experiment ``name`` in the foreground until SIGTERM or SIGINT."""
    import uvicorn

    from elastic.testbed import nodeops
    from elastic.testbed.backends.local.control.app import Settings, create_app

    exp = experiments.load(name)
    places = Places.of(exp)
    prepare(exp)
    digest = credential.digest(credential.read(places.credential))
    app = create_app(Settings(exp.name, digest, Journal(places.journal), nodeops))
    sock = _bind(places.socket)
    atomic.write_text(places.pid_file, f"{os.getpid()}\n")
    log.info("serving experiment %s on %s (pid %d)", exp.name, places.socket, os.getpid())
    try:
        config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        places.socket.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if _pid(places) == os.getpid():
                places.pid_file.unlink()
        log.info("stopped")


def _bind(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)  # a predecessor's, dead: nothing listens on it
    where = SocketPath(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(where.path)
    finally:
        where.close()
    os.chmod(path, 0o600)  # root only: the nodes' root, and the host's
    sock.listen(64)
    return sock


def _pid(places: Places) -> int | None:
    try:
        return int(places.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(places: Places, name: str) -> int | None:
    """The pid of this experiment's service if it runs (not merely a reused pid)."""
    pid = _pid(places)
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    ours = MODULE.encode() in argv and b"serve" in argv and name.encode() in argv
    return pid if ours else None


@dataclass(frozen=True)
class Status:
    experiment: str
    pid: int | None
    answers: bool
    socket: Path
    log: Path

    @property
    def running(self) -> bool:
        return self.pid is not None and self.answers


def status(exp: Experiment) -> Status:
    places = Places.of(exp)
    pid = _alive(places, exp.name)
    answers = False
    if pid is not None:
        try:
            answers = (
                ControlClient(places.socket, places.credential, 5.0).health().get("experiment")
                == exp.name
            )
        except ControlError:
            answers = False
    return Status(exp.name, pid, answers, places.socket, places.log)


def start(exp: Experiment) -> Status:
    """Start the daemon unless it runs; wait until it answers."""
    current = status(exp)
    if current.running:
        return current
    if current.pid is not None:  # alive but deaf: replace it
        stop(exp)
    prepare(exp)
    places = Places.of(exp)
    with places.log.open("ab") as out:
        os.chmod(places.log, 0o600)
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, "serve", exp.name],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=paths.REPO_ROOT,
            start_new_session=True,  # outlives the `ptc` that started it, and its terminal
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError(
                f"the control service of {exp.name!r} exited with status {proc.returncode}: "
                f"{_tail(places.log)}"
            )
        current = status(exp)
        if current.running:
            return current
        time.sleep(0.2)
    raise TestbedError(
        f"the control service of {exp.name!r} did not answer on {places.socket} within "
        f"{START_TIMEOUT:.0f} s; see {places.log}"
    )


def stop(exp: Experiment) -> bool:
    """Stop the daemon (SIGTERM, then SIGKILL); False if none ran."""
    places = Places.of(exp)
    pid = _alive(places, exp.name)
    if pid is None:
        places.pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and _alive(places, exp.name) == pid:
        time.sleep(0.1)
    if _alive(places, exp.name) == pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    places.pid_file.unlink(missing_ok=True)
    places.socket.unlink(missing_ok=True)
    return True


def ensure_running(exp: Experiment) -> bool:
    """Start the service of an experiment that has one if it is not running; True if started."""
    if not serves(exp) or exp.state != State.READY:
        return False
    if status(exp).running:
        return False
    start(exp)
    return True


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
