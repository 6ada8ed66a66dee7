"""Debian's Slurm 22.05 and munge, unpacked (never installed) and run from the run's directory.

The packages come through apt (``--download-only`` into a cache) and are unpacked with
``dpkg -x``: the host's /etc and /usr stay untouched and nothing is left registered with dpkg.
slurmctld runs on loopback; its nodes are power-save CLOUD nodes, each with its own slurmd
port on 127.0.0.1, so one host holds many (``slurmd -N NAME``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.scale.cleanup import MARKER, Ledger
from elastic.errors import PtcError

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
LIBEXEC = "usr/lib/x86_64-linux-gnu/slurm-wlm"
REPO = Path(__file__).resolve().parents[2]
PARTITION = "elastic"
CLUSTER = "scale"


def unpack(
    cache: Path,
    packages: Sequence[str] = PACKAGES,
    name: str = "root",
    marker: str = "usr/sbin/slurmctld-wlm",
) -> Path:
    """The unpacked tree ``cache/name`` of ``packages`` (made once per cache: apt's download,
    then dpkg -x of each .deb); ``marker``, a file of it, says it is complete."""
    root = cache / name
    if (root / marker).exists():
        return root
    debs = cache / ("debs" if name == "root" else f"{name}-debs")
    debs.mkdir(parents=True, exist_ok=True)
    # the dependencies this host lacks, then the packages themselves: --download-only skips a
    # package the host has installed (etcd-server, for the test suite), apt-get download not
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--download-only",
         "-o", f"Dir::Cache::archives={debs}", *packages],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["apt-get", "download", "-q", *packages], cwd=debs, check=True,
                   capture_output=True)  # fmt: skip
    tmp = cache / f"{name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(tmp)], check=True)
    tmp.rename(root)
    return root


def node_names(count: int) -> list[str]:
    return [f"emu{i:05d}" for i in range(1, count + 1)]


def hostlist(count: int) -> str:
    return f"emu[00001-{count:05d}]" if count > 1 else "emu00001"


@dataclass(frozen=True)
class Layout:
    """Where a run keeps everything; ``base_port`` + i is node i's slurmd port. With a
    ``dbd_port``, slurmctld sends its accounting to the slurmdbd on it (else none)."""

    run: Path
    root: Path
    nodes: int
    ctld_port: int = 19817
    base_port: int = 20001
    cpus: int = 16
    dbd_port: int = 0

    @property
    def conf(self) -> Path:
        return self.run / "etc/slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge/munge.socket"

    @property
    def events(self) -> Path:
        return self.run / "events.jsonl"

    @property
    def ledger(self) -> Ledger:
        """The whole run's (one per harness run, beside each size's directory)."""
        return Ledger(self.run.parent / "ledger.jsonl")

    def env(self, run_id: str) -> dict[str, str]:
        libs = sorted({str(p.parent) for p in self.root.rglob("*.so*")})
        return {
            "PATH": f"{self.root}/usr/bin:{REPO}/.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LD_LIBRARY_PATH": ":".join(libs),
            "SLURM_CONF": str(self.conf),
            "PYTHONPATH": str(REPO),
            "HOME": str(self.run),
            "LANG": "C.UTF-8",
            MARKER: run_id,
            "PTC_SCALE_DIR": str(self.run),
        }


def slurm_conf(layout: Layout) -> str:
    run, lib = layout.run, layout.root / LIBEXEC
    lines = [
        f"ClusterName={CLUSTER}",
        f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
        "MailProg=/bin/true",
        "MpiDefault=none",
        f"SlurmctldPort={layout.ctld_port}",
        f"SlurmdPort={layout.base_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"PluginDir={lib}",
        f"StateSaveLocation={run}/ctld",
        f"SlurmdSpoolDir={run}/slurmd/%n",
        f"SlurmctldPidFile={run}/ctld/slurmctld.pid",
        f"SlurmdPidFile={run}/slurmd/%n.pid",
        f"SlurmctldLogFile={run}/ctld/slurmctld.log",
        f"SlurmdLogFile={run}/slurmd/%n.log",
        "SlurmdDebug=error",
        "SlurmctldDebug=info",
        "LogTimeFormat=iso8601_ms",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        *(
            [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={layout.dbd_port}",
                # the munge socket slurmctld signs its messages to slurmdbd with
                f"AccountingStoragePass={layout.munge_socket}",
            ]
            if layout.dbd_port
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "SlurmdParameters=config_overrides",
        "MaxJobCount=200000",
        "MaxArraySize=100001",
        "ReturnToService=2",
        "MessageTimeout=30",
        "TreeWidth=65533",
        f"ResumeProgram={run}/bin/resume",
        f"SuspendProgram={run}/bin/suspend",
        f"ResumeFailProgram={run}/bin/resume-fail",
        "ResumeTimeout=600",
        "SuspendTime=3600",
        "SuspendTimeout=60",
        "ResumeRate=0",
        "SuspendRate=0",
        "BatchStartTimeout=60",
        "PrivateData=cloud",
        "SlurmctldParameters=idle_on_node_suspend",
    ]
    # One line per node: its own port. The names say they are emulated.
    for i, name in enumerate(node_names(layout.nodes)):
        lines.append(
            f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname=localhost "
            f"Port={layout.base_port + i} CPUs={layout.cpus} RealMemory=1000 State=CLOUD"
        )
    lines.append(
        f"PartitionName={PARTITION} Nodes={hostlist(layout.nodes)} Default=YES "
        "MaxTime=INFINITE State=UP OverSubscribe=NO"
    )
    return "\n".join(lines) + "\n"


HOOK = """#!/bin/sh
# slurmctld gives its programs a bare environment: the run's is set here
{exports}
cd {repo}
exec {python} -m benchmarks.scale.hook {verb} "$@" >>{run}/hook.log 2>&1
"""


def write_files(layout: Layout, run_id: str) -> None:
    for sub in ("etc", "ctld", "slurmd", "munge", "bin"):
        (layout.run / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(layout.run / "munge", 0o700)
    layout.conf.write_text(slurm_conf(layout))
    exports = "\n".join(f"export {k}='{v}'" for k, v in sorted(layout.env(run_id).items()))
    for verb in ("resume", "suspend", "resume-fail"):
        path = layout.run / "bin" / verb
        path.write_text(HOOK.format(exports=exports, repo=REPO, python=sys.executable,
                                    verb=verb, run=layout.run))  # fmt: skip
        path.chmod(0o755)


def start(
    argv: list[str],
    layout: Layout,
    run_id: str,
    what: str,
    log: Path,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``argv`` in a session of its own, in the run's ledger; ``env`` (default: the run's)
    keeps the run's marker."""
    env = {**(env or layout.env(run_id)), MARKER: run_id}
    with log.open("ab") as out:
        # in the run's directory: ``python -m`` puts the working directory first on the path
        # (the checkout comes from PYTHONPATH, not from wherever the harness was started), and
        # a crashing daemon's core file is removed with the run
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=layout.run,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    layout.ledger.process(proc.pid, what)
    return proc


def start_munge(layout: Layout, run_id: str) -> subprocess.Popen[bytes]:
    d = layout.run / "munge"
    key = d / "munge.key"
    subprocess.run([str(layout.root / "usr/sbin/mungekey"), "--create", "--keyfile", str(key)],
                   check=True, env=layout.env(run_id))  # fmt: skip
    proc = start(
        [str(layout.root / "usr/sbin/munged"), "-F", "--force", f"--socket={layout.munge_socket}",
         f"--key-file={key}", f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
         f"--seed-file={d}/munged.seed", "--num-threads=4"],
        layout, run_id, "munged", d / "munged.out",
    )  # fmt: skip
    wait_for(lambda: layout.munge_socket.exists(), 10, "munged's socket")
    return proc


def start_ctld(layout: Layout, run_id: str) -> subprocess.Popen[bytes]:
    # Debian names the binary slurmctld-wlm and links slurmctld to it when installed; Slurm
    # knows it runs as the controller by its process name, and the accounting plugin without
    # that knowledge crashes the controller at start (a segmentation fault in 22.05.8)
    link = layout.run / "bin" / "slurmctld"
    if not link.is_symlink():
        link.symlink_to(layout.root / "usr/sbin/slurmctld-wlm")
    proc = start(
        [str(link), "-D", "-i", "-f", str(layout.conf)],
        layout, run_id, "slurmctld", layout.run / "ctld/slurmctld.out",
    )  # fmt: skip
    env = layout.env(run_id)

    def answers() -> bool:
        if proc.poll() is not None:
            raise PtcError(f"slurmctld exited {proc.returncode}; see {layout.run}/ctld")
        done = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True,
                              check=False)  # fmt: skip
        return "UP" in done.stdout

    wait_for(answers, 120, "slurmctld")
    return proc


def slurmd_argv(layout: Layout, node: str) -> list[str]:
    return [str(layout.root / "usr/sbin/slurmd-wlm"), "-D", "-N", node, "-f", str(layout.conf),
            "-d", str(layout.root / "usr/sbin/slurmstepd-wlm")]  # fmt: skip


def wait_for(ready: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if callable(ready) and ready():
            return
        if time.monotonic() > deadline:
            raise PtcError(f"{what}: not ready within {timeout:.0f} s")
        time.sleep(0.2)
