"""Slurm's accounting at scale: Debian's slurmdbd 22.05.8 and MariaDB 10.11, unpacked (never
installed) like the rest, run by the harness as root with their own data directory, socket and
loopback ports under the run's directory.

MariaDB's system tables are made by its own ``mariadb-install-db``; ``root`` reaches the server
through its socket only (unix_socket authentication, as Debian sets it up) and makes the one
user slurmdbd connects as over TCP on loopback. Both processes are in the run's ledger with its
marker, so the run's cleanup stops them.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.scale.cluster import CLUSTER, LIBEXEC, Layout, start, unpack
from elastic.errors import PtcError

PACKAGES = ("slurmdbd", "slurm-wlm-mysql-plugin", "mariadb-server-core", "mariadb-client-core")
MARKER_FILE = "usr/sbin/slurmdbd"
DATABASE = "slurm_acct_db"
USER = "slurm"
# Beyond the run without accounting: MariaDB's buffer pool (128 MiB) and slurmdbd.
MEMORY = 1024 * 1024 * 1024


def unpack_dbd(cache: Path) -> Path:
    return unpack(cache, PACKAGES, "dbd-root", MARKER_FILE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slurmdbd_conf(root: Path, directory: Path, munge_socket: Path, dbd_port: int,
                  db_port: int, password: str) -> str:  # fmt: skip
    """slurmdbd's configuration (read from beside slurm.conf): root, loopback, MariaDB on TCP."""
    return "\n".join([
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "DbdHost=localhost",
        "DbdAddr=127.0.0.1",
        f"DbdPort={dbd_port}",
        "SlurmUser=root",
        f"PluginDir={root / LIBEXEC}",
        f"PidFile={directory}/slurmdbd.pid",
        f"LogFile={directory}/slurmdbd.log",
        "DebugLevel=info",
        "LogTimeFormat=iso8601_ms",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={db_port}",
        f"StorageUser={USER}",
        f"StoragePass={password}",
        f"StorageLoc={DATABASE}",
    ]) + "\n"  # fmt: skip


def grants(password: str) -> str:
    """The SQL that gives slurmdbd its database (and only it), over TCP from loopback."""
    return (
        f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{password}'; "
        f"GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1';"
    )


@dataclass(frozen=True)
class Dbd:
    mariadbd: subprocess.Popen[bytes]
    slurmdbd: subprocess.Popen[bytes]
    port: int


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait(
    ready: object, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not (callable(ready) and ready()):
        if proc.poll() is not None:
            raise PtcError(f"{what} exited {proc.returncode}; see {log}")
        if time.monotonic() > deadline:
            raise PtcError(f"{what}: not ready within {timeout:.0f} s; see {log}")
        time.sleep(0.2)


@dataclass(frozen=True)
class DbdRun:
    """What each size of a run with ``--accounting slurmdbd`` starts: MariaDB, then slurmdbd
    on ``layout.dbd_port`` (before slurmctld, which registers with it as it starts)."""

    root: Path

    def env(self, layout: Layout, run_id: str) -> dict[str, str]:
        libs = sorted({str(p.parent) for p in self.root.rglob("*.so*")})
        return {**layout.env(run_id), "LD_LIBRARY_PATH": ":".join(libs),
                "PATH": f"{self.root}/usr/bin:/usr/sbin:/usr/bin:/sbin:/bin"}  # fmt: skip

    def start(self, layout: Layout, run_id: str) -> Dbd:
        if not layout.dbd_port:
            raise PtcError("the layout has no slurmdbd port")
        d = layout.run / "dbd"
        data = d / "mysql"
        data.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        env = self.env(layout, run_id)
        usr = self.root / "usr"
        install = subprocess.run(
            [str(usr / "bin/mariadb-install-db"), "--no-defaults", f"--basedir={usr}",
             f"--datadir={data}", "--user=root", "--auth-root-authentication-method=socket",
             "--skip-test-db"],
            env=env, capture_output=True, text=True, check=False, cwd=d,
        )  # fmt: skip
        if install.returncode:
            raise PtcError(f"mariadb-install-db: {install.stderr.strip()[-500:]}")
        sock, db_port = d / "mysqld.sock", free_port()
        mariadbd = start(
            [str(usr / "sbin/mariadbd"), "--no-defaults", f"--basedir={usr}", f"--datadir={data}",
             f"--socket={sock}", f"--port={db_port}", "--bind-address=127.0.0.1", "--user=root",
             f"--pid-file={d}/mariadbd.pid", f"--log-error={d}/mariadbd.err",
             f"--lc-messages-dir={usr}/share/mysql", f"--plugin-dir={usr}/lib/mysql/plugin"],
            layout, run_id, "mariadbd", d / "mariadbd.out", env,
        )  # fmt: skip
        wait(lambda: sock.exists() and listening(db_port), mariadbd, "mariadbd",
             d / "mariadbd.err", 120)  # fmt: skip
        password = secrets.token_hex(12)
        made = subprocess.run(
            [str(usr / "bin/mariadb"), "--no-defaults", f"--socket={sock}", "-u", "root",
             "-e", grants(password)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode:
            raise PtcError(f"mariadb: the slurm user: {made.stderr.strip()[-300:]}")
        conf = layout.conf.parent / "slurmdbd.conf"
        conf.write_text(
            slurmdbd_conf(self.root, d, layout.munge_socket, layout.dbd_port, db_port, password)
        )
        conf.chmod(0o600)  # slurmdbd refuses a configuration others can read (it has a password)
        slurmdbd = start([str(usr / "sbin/slurmdbd"), "-D"], layout, run_id, "slurmdbd",
                         d / "slurmdbd.out", env)  # fmt: skip
        wait(lambda: listening(layout.dbd_port), slurmdbd, "slurmdbd", d / "slurmdbd.log", 120)
        # the cluster, as the slurm_accounting role registers it
        added = subprocess.run(["sacctmgr", "--immediate", "add", "cluster", CLUSTER],
                               env=layout.env(run_id), capture_output=True, text=True,
                               check=False, timeout=60)  # fmt: skip
        if added.returncode:
            raise PtcError(f"sacctmgr add cluster: {(added.stderr or added.stdout).strip()[-300:]}")
        return Dbd(mariadbd, slurmdbd, layout.dbd_port)
