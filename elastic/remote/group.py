"""One command, or one copy, on many nodes at once: ``ptc run``, ``ptc put``, ``ptc get``.

Built on fabric (a :class:`fabric.Connection` per host, configured from the experiment's
ssh_config), with three things fabric's ``ThreadingGroup`` does not give:

- **a cap**: at most ``parallel`` hosts at once (a thread pool of that size), so a command on
  a hundred nodes does not open a hundred connections together;
- **every failure as a result**: with ``warn=True`` a non-zero exit is not in fabric's
  ``GroupResult.failed``, and an unreachable host or a timeout raises instead of returning.
  Here each host gets a :class:`HostResult` with a ``failure`` kind (:func:`classify`);
- **a deadline that holds**: a node that stops answering (a frozen or powered-off machine)
  is ended by its deadline, whatever fabric is waiting for: connecting, the SSH banner,
  authentication, output, or a copy. A watchdog closes the connection at the deadline.

Host keys follow the ssh_config: with ``StrictHostKeyChecking no`` any key is taken, otherwise
only keys in its ``UserKnownHostsFile`` (``accept-new`` takes a new host's key for this run).
"""

from __future__ import annotations

import logging
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter

# Failure kinds, from the least to the most worrying for the node.
EXIT = "exit"  # the command ran and exited non-zero
TIMEOUT = "timeout"  # no end (of the connection, the command or the copy) by the deadline
UNREACHABLE = "unreachable"  # no TCP connection (refused, no route, nothing answered)
AUTH = "auth"  # connected, but the login was refused (key, host key)
SSH = "ssh"  # any other SSH or I/O failure
COPY = "copy"  # a copy failed on a path (no such file, permission)

TAIL_LINES = 3
_QUIET = logging.NullHandler()


@dataclass(frozen=True)
class HostResult:
    """What happened on one host. ``started``/``ended`` are wall-clock (epoch) seconds."""

    host: str
    failure: str  # "" when it went well, else one of the kinds above
    message: str  # why it failed ("" when it did not)
    exit_status: int | None  # None when the command did not run to an end (or for copies)
    started: float
    ended: float
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return not self.failure

    @property
    def elapsed_s(self) -> float:
        return self.ended - self.started

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last lines of its output (stderr's when it failed and wrote some)."""
        text = self.stderr if (self.failure and self.stderr.strip()) else self.stdout
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "ok": self.ok,
            "failure": self.failure or None,
            "message": self.message,
            "exit_status": self.exit_status,
            "started": round(self.started, 3),
            "ended": round(self.ended, 3),
            "elapsed_s": round(self.elapsed_s, 3),
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


@dataclass(frozen=True)
class Options:
    """How to reach hosts and how long to give each."""

    ssh_config: Path
    parallel: int = 8
    timeout: float = 60.0  # per host: its command, or its copy
    connect_timeout: float = 10.0  # per host: TCP connection, banner and login

    def __post_init__(self) -> None:
        if self.parallel < 1:
            raise InputError(f"--parallel: expected at least 1, got {self.parallel}")
        if self.timeout <= 0:
            raise InputError(
                f"--timeout: expected a positive number of seconds, got {self.timeout}"
            )
        if self.connect_timeout <= 0:
            raise InputError(
                f"--connect-timeout: expected a positive number of seconds, got "
                f"{self.connect_timeout}"
            )


def as_root(command: str) -> str:
    """``command`` as root: as it is when the login is root, else through ``sudo -n`` (which
    fails at once, rather than waiting, where sudo wants a password)."""
    quoted = shlex.quote(command)
    return (
        f'if [ "$(id -u)" -eq 0 ]; then exec sh -c {quoted}; '
        f"else exec sudo -n -- sh -c {quoted}; fi"
    )


def classify(err: BaseException, timeout: float, connect_timeout: float) -> tuple[str, str]:
    """(failure kind, message) for what fabric, invoke or paramiko raised."""
    import paramiko
    from invoke.exceptions import CommandTimedOut
    from paramiko.ssh_exception import NoValidConnectionsError

    if isinstance(err, CommandTimedOut):
        return TIMEOUT, f"did not finish in {timeout:g} s"
    if isinstance(err, NoValidConnectionsError):
        why = {type(e).__name__ for e in err.errors.values()}
        where = ", ".join(f"{a[0]}:{a[1]}" for a in err.errors)
        refused = why == {"ConnectionRefusedError"}
        return UNREACHABLE, f"{'connection refused' if refused else 'no connection'} ({where})"
    if isinstance(err, (TimeoutError, socket.timeout)):
        return TIMEOUT, f"no answer within {connect_timeout:g} s"
    if isinstance(err, paramiko.BadHostKeyException):
        return AUTH, f"host key mismatch: {_first_line(err)}"
    if isinstance(err, paramiko.AuthenticationException):
        return AUTH, f"login refused: {_first_line(err)}"
    if isinstance(err, paramiko.SSHException):
        text = _first_line(err)
        if "banner" in text.lower() or "timeout" in text.lower():
            return TIMEOUT, f"no SSH answer within {connect_timeout:g} s ({text})"
        if "no existing session" in text.lower():
            return TIMEOUT, f"no SSH session within {connect_timeout:g} s"
        if "not found in known_hosts" in text:
            return AUTH, text
        return SSH, text
    if isinstance(err, FileNotFoundError | PermissionError | IsADirectoryError):
        return COPY, _first_line(err)
    if isinstance(err, OSError):
        return UNREACHABLE, _first_line(err)
    return SSH, f"{type(err).__name__}: {_first_line(err)}"


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


# --- connections ---------------------------------------------------------------------------


def connect(host: str, options: Options) -> Any:
    """An unopened :class:`fabric.Connection` to ``host`` as the ssh_config describes it."""
    import fabric
    import paramiko

    # Failures come back as results; paramiko's transport thread would also print them.
    logging.getLogger("paramiko").addHandler(_QUIET)
    config = fabric.Config(runtime_ssh_path=str(options.ssh_config))
    conn = fabric.Connection(
        host,
        config=config,
        connect_timeout=max(1, round(options.connect_timeout)),
        connect_kwargs={
            "banner_timeout": options.connect_timeout,
            "auth_timeout": options.connect_timeout,
        },
    )
    ssh = conn.ssh_config
    if str(ssh.get("identitiesonly", "no")).lower() == "yes":
        conn.connect_kwargs.update(allow_agent=False, look_for_keys=False)
    checking = str(ssh.get("stricthostkeychecking", "ask")).lower()
    if checking not in ("no", "off"):
        for known in ssh.get("userknownhostsfile", "~/.ssh/known_hosts").split():
            path = Path(known).expanduser()
            if path.is_file():
                conn.client.load_host_keys(str(path))
        policy = paramiko.AutoAddPolicy() if checking == "accept-new" else paramiko.RejectPolicy()
        conn.client.set_missing_host_key_policy(policy)
    return conn


Step = Callable[[Any], tuple[int | None, str, str]]  # connection -> (exit status, out, err)


def _one(host: str, options: Options, step: Step, what: str) -> HostResult:
    started = time.time()
    conn = connect(host, options)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        conn.close()

    # Past connect, command and a margin, close whatever fabric still waits on.
    watchdog = threading.Timer(options.connect_timeout + options.timeout + 5, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.open()
        status, out, err = step(conn)
    except Exception as error:
        # paramiko's transport thread keeps the first cause (a banner that never came); the
        # client then sees only "No existing session".
        transport = conn.client.get_transport()
        cause = getattr(transport, "saved_exception", None) or error
        kind, message = classify(cause, options.timeout, options.connect_timeout)
        if expired.is_set():
            kind, message = TIMEOUT, f"{what} did not end in {options.timeout:g} s"
        out = getattr(getattr(error, "result", None), "stdout", "") or ""
        err_text = getattr(getattr(error, "result", None), "stderr", "") or ""
        return HostResult(host, kind, message, None, started, time.time(), out, err_text)
    finally:
        watchdog.cancel()
        conn.close()
    if status not in (None, 0):
        return HostResult(host, EXIT, f"exit {status}", status, started, time.time(), out, err)
    return HostResult(host, "", "", status, started, time.time(), out, err)


def each(
    hosts: Sequence[str],
    options: Options,
    step: Step,
    what: str,
    on_event: OnEvent | None = None,
) -> list[HostResult]:
    """``step`` on every host, at most ``options.parallel`` at once; results in host order."""
    if not hosts:
        raise InputError("no host selected")
    report = Reporter("remote", on_event)
    report.begin(
        f"{what} on {len(hosts)} hosts, at most {options.parallel} at once", total=len(hosts)
    )
    results: dict[str, HostResult] = {}
    lock = threading.Lock()

    def task(host: str) -> None:
        result = _one(host, options, step, what)
        with lock:
            results[host] = result
            report.progress(
                len(results),
                len(hosts),
                f"{host}: {'ok' if result.ok else result.message}",
                host=host,
                ok=result.ok,
            )

    with ThreadPoolExecutor(max_workers=min(options.parallel, len(hosts))) as pool:
        for future in [pool.submit(task, h) for h in hosts]:
            future.result()
    ordered = [results[h] for h in hosts]
    failed = [r.host for r in ordered if not r.ok]
    report.end(f"{len(hosts) - len(failed)} ok, {len(failed)} failed", failed=failed)
    return ordered


def run(
    hosts: Sequence[str],
    command: str,
    options: Options,
    *,
    sudo: bool = False,
    on_event: OnEvent | None = None,
) -> list[HostResult]:
    """``command`` on every host (as root with ``sudo``), without stdin."""
    line = as_root(command) if sudo else command

    def step(conn: Any) -> tuple[int | None, str, str]:
        began = time.monotonic()
        result = conn.run(
            line, hide=True, warn=True, pty=False, in_stream=False, timeout=options.timeout
        )
        return ended(result, time.monotonic() - began, options.timeout)

    return each(hosts, options, step, f"`{command}`", on_event)


NO_EXIT_STATUS = -1  # what paramiko gives for a channel that closed without an exit status


def ended(result: Any, elapsed: float, timeout: float) -> tuple[int, str, str]:
    """(exit status, out, err) of a finished ``conn.run``, or the error it should have raised.

    invoke decides "timed out" by whether its timer thread is still alive, so a timer that has
    just closed the channel can lose that race and the run comes back as an ordinary exit with
    no status. A channel that closed without an exit status never ran to an end: at the
    deadline that is a timeout, before it a broken connection."""
    import paramiko
    from invoke.exceptions import CommandTimedOut

    status = int(result.exited)
    if status == NO_EXIT_STATUS:
        if elapsed >= timeout:
            raise CommandTimedOut(result, timeout=round(timeout))
        raise paramiko.SSHException("the connection closed before the command's exit status")
    return status, str(result.stdout), str(result.stderr)


def put(
    hosts: Sequence[str],
    local: Path,
    remote: str,
    options: Options,
    *,
    on_event: OnEvent | None = None,
) -> list[HostResult]:
    """Copy the file ``local`` to ``remote`` (a path, or a directory ending in ``/``) on every
    host, over SFTP."""
    if not local.is_file():
        raise InputError(f"{local}: no such file to copy")

    def step(conn: Any) -> tuple[int | None, str, str]:
        done = conn.put(str(local), remote=remote)
        return None, str(done.remote), ""

    return each(hosts, options, step, f"put {local.name}", on_event)


def get(
    hosts: Sequence[str],
    remote: str,
    local_dir: Path,
    options: Options,
    *,
    on_event: OnEvent | None = None,
) -> list[HostResult]:
    """Copy ``remote`` from every host to ``local_dir/HOST/NAME``, over SFTP."""
    name = Path(remote).name
    if not name:
        raise InputError(f"{remote!r}: give a file's path, not a directory")

    def step(conn: Any) -> tuple[int | None, str, str]:
        target = local_dir / conn.original_host / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{name}.part")
        try:
            conn.get(remote, local=str(partial))
        except BaseException:
            partial.unlink(missing_ok=True)  # a failed copy leaves nothing behind
            raise
        partial.replace(target)
        return None, str(target), ""

    return each(hosts, options, step, f"get {name}", on_event)


@dataclass
class Summary:
    """Counts of a fan-out, for a table's caption and the exit status."""

    results: list[HostResult]
    failed: list[HostResult] = field(init=False)

    def __post_init__(self) -> None:
        self.failed = [r for r in self.results if not r.ok]

    def describe(self) -> str:
        if not self.failed:
            return f"{len(self.results)} hosts ok"
        named = ", ".join(f"{r.host} ({r.message})" for r in self.failed)
        return f"{len(self.failed)} of {len(self.results)} hosts failed: {named}"
