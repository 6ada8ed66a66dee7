"""One command on one node, a copy to a node, local forwards through a node: OpenSSH.

Every ssh and scp command line ptc starts is built here (:func:`argv`), from the experiment's
ssh_config (``-F``) or, on a node without one, explicit options. ``BatchMode=yes`` always: a
command that would ask for a password or a passphrase fails at once instead of waiting for a
person who is not there. The remote command gets the given bytes on its standard input, or
none (an immediate end of file): a caller's own stdin (a terminal, or CI's non-blocking one)
never reaches a node.

Why OpenSSH and not fabric for these: every option of the ssh_config applies exactly as it does
for Ansible and ``ptc ssh`` (host-key pinning, ``Match``, proxies), a timed-out command is
ended by killing one process, and the figures in ``benchmarks/ssh_seam.py`` show a fresh ssh
per command costs no more than a fresh fabric connection. Fan-out to many nodes is
:mod:`elastic.remote.group`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic.errors import RemoteError, RemoteTimeout

# How much of a failed command's output its error message quotes (the error keeps it all).
QUOTED_CHARS = 600
SHOWN_COMMAND_CHARS = 200


def argv(
    host: str,
    command: str | None = None,
    *,
    config: Path | None = None,
    identity: Path | None = None,
    options: Mapping[str, str | int] | None = None,
    extra: Sequence[str] = (),
    program: str = "ssh",
    batch: bool = True,
) -> list[str]:
    """``ssh [-F CONFIG] [-i KEY] -o BatchMode=yes -o K=V ... EXTRA HOST [COMMAND]``.

    ``program="scp"`` gives the same options for scp, without host and command; ``batch=False``
    leaves BatchMode out, for a person at a terminal (``ptc ssh``)."""
    out = [program]
    if program == "scp":
        out.append("-q")
    if config is not None:
        out += ["-F", str(config)]
    if identity is not None:
        out += ["-i", str(identity)]
    settings: dict[str, str | int] = {"BatchMode": "yes"} if batch else {}
    settings.update(options or {})
    for key, value in settings.items():
        out += ["-o", f"{key}={value}"]
    out += extra
    if program == "ssh":
        out.append(host)
        if command is not None:
            out.append(command)
    return out


@dataclass(frozen=True)
class Completed:
    """What one command on one node did (``stdout``/``stderr`` as bytes)."""

    host: str
    command: str
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode(errors="replace")


def _shown(command: str, label: str | None) -> str:
    return label or command[:SHOWN_COMMAND_CHARS]


def execute(
    config: Path | None,
    host: str,
    command: str,
    *,
    timeout: float,
    stdin: bytes | str | None = None,
    connect_timeout: int | None = None,
    options: Mapping[str, str | int] | None = None,
    identity: Path | None = None,
    label: str | None = None,
) -> Completed:
    """Run ``command`` on ``host``; what it did, whatever its exit status.

    Raises :class:`RemoteTimeout` when it has not ended within ``timeout`` seconds (the local
    ssh is killed; the command may still run on the node)."""
    opts = dict(options or {})
    if connect_timeout is not None:
        opts["ConnectTimeout"] = connect_timeout
    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    try:
        proc = subprocess.run(
            argv(host, command, config=config, identity=identity, options=opts),
            input=data,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise RemoteTimeout(
            f"{host}: `{_shown(command, label)}` did not finish in {timeout:.0f} s",
            host=host,
            command=command,
            timeout_s=timeout,
        ) from err
    return Completed(host, command, proc.returncode, proc.stdout, proc.stderr)


def check(done: Completed, label: str | None = None) -> Completed:
    """``done``, or a RemoteError naming its host, command, exit status and last output."""
    if done.returncode == 0:
        return done
    detail = (done.error_text.strip() or done.text.strip() or "no output")[-QUOTED_CHARS:]
    raise RemoteError(
        f"{done.host}: `{_shown(done.command, label)}` failed ({done.returncode}): {detail}",
        host=done.host,
        command=done.command,
        returncode=done.returncode,
        output=done.text + done.error_text,
    )


def run(
    config: Path,
    host: str,
    command: str,
    *,
    timeout: float,
    stdin: bytes | str | None = None,
    connect_timeout: int | None = None,
    label: str | None = None,
) -> str:
    """``command``'s standard output, or RemoteError (non-zero exit) / RemoteTimeout.

    ``stdin`` is how secrets reach a node: never on a command line, which other users can
    read. ``label`` stands for a command too long (or too secret) to read in a message."""
    done = execute(
        config,
        host,
        command,
        timeout=timeout,
        stdin=stdin,
        connect_timeout=connect_timeout,
        label=label,
    )
    return check(done, label).text


def run_bytes(config: Path, host: str, command: str, data: bytes, *, timeout: float) -> bytes:
    """As :func:`run` with ``data`` on stdin, for binary output (a tar stream)."""
    return check(execute(config, host, command, timeout=timeout, stdin=data)).stdout


def copy_to(config: Path, host: str, local: Path, remote: str, *, timeout: float = 300) -> None:
    """scp ``local`` to ``host:remote``."""
    command = [*argv(host, config=config, program="scp"), str(local), f"{host}:{remote}"]
    shown = f"scp {local} {remote}"
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise RemoteTimeout(
            f"{host}: copying {local.name} did not finish in {timeout:.0f} s",
            host=host,
            command=shown,
            timeout_s=timeout,
        ) from err
    if proc.returncode != 0:
        raise RemoteError(
            f"{host}: copying {local.name} failed: {proc.stderr.strip()[-300:]}",
            host=host,
            command=shown,
            returncode=proc.returncode,
        )


# --- forwards --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forward:
    """A local end (``127.0.0.1:PORT``, or a Unix socket path) carried to ``address:port`` as
    the node ``via`` sees it."""

    local: str
    address: str
    port: int

    @property
    def is_socket(self) -> bool:
        return self.local.startswith("/")

    def spec(self) -> str:
        return f"{self.local}:{self.address}:{self.port}"

    def ready(self) -> bool:
        """The local end accepts connections (a socket file: it exists)."""
        if self.is_socket:
            return Path(self.local).exists()
        host, _, port = self.local.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            return False


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Tunnel:
    """``ssh -N -L LOCAL:ADDRESS:PORT ... VIA``: every forward over one SSH connection, until
    :meth:`close`. :meth:`wait` returns once every local end answers."""

    def __init__(
        self,
        config: Path,
        via: str,
        forwards: Sequence[Forward],
        *,
        connect_timeout: int = 10,
        keepalive_s: int | None = None,
        what: str | None = None,
    ) -> None:
        self.via = via
        self.forwards = list(forwards)
        self.what = what or ", ".join(f"{f.address}:{f.port}" for f in self.forwards)
        options: dict[str, str | int] = {
            "ExitOnForwardFailure": "yes",
            "ConnectTimeout": connect_timeout,
        }
        if any(f.is_socket for f in self.forwards):
            options["StreamLocalBindUnlink"] = "yes"
        if keepalive_s is not None:
            options["ServerAliveInterval"] = keepalive_s
        extra = ["-N"]
        for f in self.forwards:
            extra += ["-L", f.spec()]
        self.proc = subprocess.Popen(
            argv(via, config=config, options=options, extra=extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait(self, timeout: float, poll_s: float = 0.1) -> None:
        """Until every forward is up; RemoteError if ssh ended, RemoteTimeout past
        ``timeout`` (the tunnel is closed then)."""
        deadline = time.monotonic() + timeout
        while not all(f.ready() for f in self.forwards):
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.close()
                raise RemoteError(
                    f"{self.via}: cannot forward to {self.what}: {err.strip() or 'no message'}",
                    host=self.via,
                    command="ssh -L",
                    returncode=self.proc.returncode,
                )
            if time.monotonic() > deadline:
                self.close()
                raise RemoteTimeout(
                    f"{self.via}: the SSH forward to {self.what} did not come up in "
                    f"{timeout:.0f} s",
                    host=self.via,
                    command="ssh -L",
                    timeout_s=timeout,
                )
            time.sleep(poll_s)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


class SocketTunnel(Tunnel):
    """A :class:`Tunnel` whose local ends are Unix sockets in a private (0700) temporary
    directory, removed on close: only this user can reach what it forwards to."""

    def __init__(
        self,
        config: Path,
        via: str,
        targets: Sequence[tuple[str, int]],
        *,
        connect_timeout: int = 10,
        what: str | None = None,
        prefix: str = "ptc-ssh-",
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.sockets = {
            (address, port): self.dir / f"forward{i}.sock"
            for i, (address, port) in enumerate(targets)
        }
        forwards = [Forward(str(sock), a, p) for (a, p), sock in self.sockets.items()]
        try:
            super().__init__(config, via, forwards, connect_timeout=connect_timeout, what=what)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.dir, ignore_errors=True)
