"""The control service as a process: serve in the foreground, or start, stop and check a
detached daemon (its own session, a pid file, a log), as `ptc up`/`down`/`control` do.

No init system is needed: `ptc up` starts the daemon and `ptc up`, `deploy` and `status`
start it again if it died; the journal makes a restart safe."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from elastic import atomic
from elastic.testbed import backends
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local.control import CREDENTIAL_NAME, SOCKET_NAME, credential
from elastic.testbed.backends.local.control.client import ControlClient, ControlError
from elastic.testbed.backends.local.control.journal import Journal
from elastic.testbed.backends.local.control.sockpath import SocketPath
from elastic.testbed.backends.local.daemon import Daemon
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
            if _daemon(exp).recorded() == os.getpid():
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


def _daemon(exp: Experiment) -> Daemon:
    places = Places.of(exp)
    return Daemon(MODULE, exp.name, places.pid_file, places.log, "the control service")


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
    pid = _daemon(exp).alive()
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
    return _daemon(exp).start(
        lambda: s if (s := status(exp)).running else None,
        START_TIMEOUT,
        0.2,
        f"did not answer on {places.socket} within {START_TIMEOUT:.0f} s",
    )


def stop(exp: Experiment) -> bool:
    """Stop the daemon (SIGTERM, then SIGKILL); False if none ran."""
    stopped = _daemon(exp).stop(STOP_TIMEOUT, 0.1)
    if stopped:
        Places.of(exp).socket.unlink(missing_ok=True)
    return stopped


def ensure_running(exp: Experiment) -> bool:
    """Start the service of an experiment that has one if it is not running; True if started."""
    if not serves(exp) or exp.state != State.READY:
        return False
    if status(exp).running:
        return False
    start(exp)
    return True
